/*
** A sandbox's egress log (egress_log.h). Appends are a few hundred bytes
** to a regular file (O_APPEND), on the loop, as the server's other small
** state writes are.
*/
#define _GNU_SOURCE
#include "net/egress_log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

int64_t mp_egress_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void iso(int64_t ms, char out[32]) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  size_t n;
  gmtime_r(&t, &tm);
  n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out + n, 32 - n, ".%03uZ", (unsigned)(ms % 1000) % 1000u);
}

static int64_t from_iso(const char *s) {
  struct tm tm;
  int ms = 0;
  memset(&tm, 0, sizeof tm);
  if (s == NULL || sscanf(s, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                          &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) < 6)
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return (int64_t)timegm(&tm) * 1000 + ms;
}

static cJSON *entry_json(const mp_egress_entry *e) {
  char ts[32], a[INET_ADDRSTRLEN];
  struct in_addr in;
  cJSON *o = cJSON_CreateObject();
  iso(e->start_ms, ts);
  cJSON_AddStringToObject(o, "time", ts);
  if (e->end_ms) {
    iso(e->end_ms, ts);
    cJSON_AddStringToObject(o, "end", ts);
  }
  cJSON_AddStringToObject(o, "protocol", e->proto);
  in.s_addr = htonl(e->addr);
  inet_ntop(AF_INET, &in, a, sizeof a);
  cJSON_AddStringToObject(o, "address", a);
  cJSON_AddNumberToObject(o, "port", e->port);
  if (e->name[0]) cJSON_AddStringToObject(o, "name", e->name);
  else cJSON_AddNullToObject(o, "name");
  cJSON_AddNumberToObject(o, "bytesOut", (double)e->bytes_out);
  cJSON_AddNumberToObject(o, "bytesIn", (double)e->bytes_in);
  cJSON_AddBoolToObject(o, "allowed", e->allowed);
  if (e->why[0]) cJSON_AddStringToObject(o, "reason", e->why);
  return o;
}

static void count(mp_egress_log *log, const mp_egress_entry *e) {
  log->total++;
  if (e->allowed) log->allowed++;
  else log->refused++;
  log->bytes_out += e->bytes_out;
  log->bytes_in += e->bytes_in;
  if (strcmp(e->proto, "dns") == 0) log->dns++;
}

static void keep(mp_egress_log *log, const mp_egress_entry *e) {
  if (log->n == log->cap && log->cap < MP_EGRESS_LOG_MEM) {
    /* grown while it is not full (head is 0 until then) */
    size_t cap = log->cap ? 2 * log->cap : 8;
    void *p = realloc(log->ring, cap * sizeof *log->ring);
    if (p == NULL) return;
    log->ring = p;
    log->cap = cap;
  }
  if (log->n < log->cap) {
    log->ring[log->n++] = *e;
  } else {
    log->ring[log->head] = *e;
    log->head = (log->head + 1) % MP_EGRESS_LOG_MEM;
  }
}

static void read_back(mp_egress_log *log, const char *path) {
  char *text = NULL, *line, *next;
  size_t n;
  if (mastra__read_file(path, &text, &n) < 0) return;
  for (line = text; line && *line; line = next) {
    cJSON *o;
    mp_egress_entry e;
    const cJSON *v;
    struct in_addr in;
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    o = cJSON_Parse(line);
    if (o == NULL) continue;
    memset(&e, 0, sizeof e);
    e.start_ms = from_iso(cJSON_GetStringValue(cJSON_GetObjectItem(o, "time")));
    e.end_ms = from_iso(cJSON_GetStringValue(cJSON_GetObjectItem(o, "end")));
    if ((v = cJSON_GetObjectItem(o, "protocol")) && cJSON_IsString(v))
      snprintf(e.proto, sizeof e.proto, "%s", v->valuestring);
    if ((v = cJSON_GetObjectItem(o, "address")) && cJSON_IsString(v)
        && inet_pton(AF_INET, v->valuestring, &in) == 1)
      e.addr = ntohl(in.s_addr);
    e.port = (uint16_t)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "port"));
    if ((v = cJSON_GetObjectItem(o, "name")) && cJSON_IsString(v))
      snprintf(e.name, sizeof e.name, "%s", v->valuestring);
    e.bytes_out = (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "bytesOut"));
    e.bytes_in = (uint64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(o, "bytesIn"));
    e.allowed = cJSON_IsTrue(cJSON_GetObjectItem(o, "allowed"));
    if ((v = cJSON_GetObjectItem(o, "reason")) && cJSON_IsString(v))
      snprintf(e.why, sizeof e.why, "%s", v->valuestring);
    cJSON_Delete(o);
    count(log, &e);
    keep(log, &e);
  }
  free(text);
}

void mp_egress_log_open(mp_egress_log *log, const char *path) {
  char old[4200];
  struct stat st;
  free(log->path);
  log->path = path ? strdup(path) : NULL;
  if (log->path == NULL) return;
  snprintf(old, sizeof old, "%s.1", path);
  read_back(log, old);
  read_back(log, path);
  log->size = stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

void mp_egress_log_add(mp_egress_log *log, const mp_egress_entry *e) {
  count(log, e);
  keep(log, e);
  if (log->path != NULL) {
    cJSON *o = entry_json(e);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (text != NULL) {
      size_t n = strlen(text);
      int fd;
      if (log->size + (long long)n + 1 > MP_EGRESS_LOG_FILE_MAX) {
        char old[4200];
        snprintf(old, sizeof old, "%s.1", log->path);
        rename(log->path, old);
        log->size = 0;
      }
      text[n] = '\n'; /* over the NUL: the buffer is n + 1 long */
      fd = open(log->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
      if (fd >= 0) {
        if (mastra__write_all(fd, text, n + 1) == 0) log->size += (long long)n + 1;
        close(fd);
      }
      free(text);
    }
  }
}

void mp_egress_log_json(const mp_egress_log *log, cJSON *o, int entries) {
  cJSON_AddNumberToObject(o, "connections", (double)log->total);
  cJSON_AddNumberToObject(o, "allowed", (double)log->allowed);
  cJSON_AddNumberToObject(o, "refused", (double)log->refused);
  cJSON_AddNumberToObject(o, "bytesOut", (double)log->bytes_out);
  cJSON_AddNumberToObject(o, "bytesIn", (double)log->bytes_in);
  cJSON_AddNumberToObject(o, "dnsQueries", (double)log->dns);
  if (entries > 0) {
    cJSON *list = cJSON_AddArrayToObject(o, "entries");
    size_t i, from = log->n > (size_t)entries ? log->n - (size_t)entries : 0;
    for (i = from; i < log->n; i++)
      cJSON_AddItemToArray(list, entry_json(&log->ring[(log->head + i) % log->cap]));
  }
}

void mp_egress_log_free(mp_egress_log *log) {
  free(log->ring);
  free(log->path);
  memset(log, 0, sizeof *log);
}
