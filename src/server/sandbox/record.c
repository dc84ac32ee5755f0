/*
** The record of a sandbox: DATA/state/sandboxes/<id>.json (record.h).
*/
#define _GNU_SOURCE
#include "sandbox/record.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bucket/bucket.h"
#include "json.h"
#include "util/log.h"
#include "util.h"

static cJSON *record_json(const mp_sandbox *sb) {
  char ts[32];
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", sb->id);
  cJSON_AddStringToObject(o, "projectId", sb->project);
  cJSON_AddStringToObject(o, MP_CREATE_ENVIRONMENT, sb->environment);
  cJSON_AddStringToObject(o, "recoveryKey", sb->recovery_key);
  cJSON_AddStringToObject(o, MP_CREATE_NETWORK, sb->network);
  cJSON_AddNumberToObject(o, MP_CREATE_IDLE, sb->idle_timeout_min);
  cJSON_AddItemToObject(o, MP_CREATE_ENV, cJSON_Duplicate(sb->env, 1));
  mp_iso8601(sb->created_ms, ts);
  cJSON_AddStringToObject(o, "createdAt", ts);
  cJSON_AddNumberToObject(o, "createdMs", (double)sb->created_ms);
  cJSON_AddNumberToObject(o, "destroyedMs", (double)sb->destroyed_ms);
  cJSON_AddNumberToObject(o, "lastExecMs", (double)sb->last_exec_ms);
  cJSON_AddStringToObject(o, "restoredFrom", sb->restored_from);
  cJSON_AddBoolToObject(o, "checkpointDeleted", sb->checkpoint_deleted);
  if (sb->key_explicit) cJSON_AddTrueToObject(o, MP_CREATE_KEY_EXPLICIT);
  cJSON_AddStringToObject(o, "checkpointBase", sb->checkpoint_base);
  if (sb->restoring) cJSON_AddTrueToObject(o, "restoring");
  if (sb->uid_base != 0) /* its driver's (ns_uids.h) */
    cJSON_AddNumberToObject(o, "hostUidBase", (double)sb->uid_base);
  if (sb->template_key[0] != '\0') /* template.c */
    cJSON_AddStringToObject(o, "template", sb->template_key);
  if (sb->egress_rules) { /* PUT /sandbox/{id}/egress; allow absent: none */
    if (sb->egress_allow_given)
      cJSON_AddStringToObject(o, "egressAllow", sb->egress_allow);
    cJSON_AddStringToObject(o, "egressDeny", sb->egress_deny);
  }
  if (sb->cpu_count > 0) cJSON_AddNumberToObject(o, "cpuCount", sb->cpu_count);
  if (sb->memory_mb > 0) cJSON_AddNumberToObject(o, "memoryMB", sb->memory_mb);
  if (sb->workdir[0] != '\0') cJSON_AddStringToObject(o, "workdir", sb->workdir);
  return o;
}

/* One file per record, <data>/state/sandboxes/<id>.json, written
** atomically: a change costs one small write, whatever the number of
** records the platform keeps. Not fsync'd, like the working trees and the
** checkpoints the records describe: a record survives kill -9 of the
** server (the page cache has it); a machine crash can lose the newest
** changes (a torn record is skipped at load). On ext4, a fleet of 100
** sandboxes (concurrency 16) took 177-232 ms with an fsync per change and
** 112-157 ms without, in interleaved runs. */
int mp_record_save(mp_server *srv, const mp_sandbox *sb) {
  char path[4200];
  cJSON *o = record_json(sb);
  char *text = cJSON_Print(o);
  int rc;
  cJSON_Delete(o);
  if (text == NULL) return -1;
  snprintf(path, sizeof path, "%s/state/sandboxes/%s.json", srv->data_dir,
           sb->id);
  rc = mastra__write_file_atomic(path, text, strlen(text), 0600, 0);
  free(text);
  if (rc < 0) mp_log("cannot write %s: %s", path, strerror(errno));
  return rc;
}

/* A string field that is absent counts as "". -1: it is there and not a
** string, or it does not fit, or it holds a control character. */
static int copy_field(char *dst, size_t n, const cJSON *o, const char *key,
                      char *err, size_t errlen) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  const unsigned char *p;
  dst[0] = '\0';
  if (v == NULL) return 0;
  if (!cJSON_IsString(v) || strlen(v->valuestring) >= n) {
    snprintf(err, errlen, "'%s' is not a string of less than %zu bytes", key,
             n);
    return -1;
  }
  for (p = (const unsigned char *)v->valuestring; *p; p++) {
    if (*p < 0x20 || *p == 0x7f) {
      snprintf(err, errlen, "'%s' holds a control character", key);
      return -1;
    }
  }
  memcpy(dst, v->valuestring, strlen(v->valuestring) + 1);
  return 0;
}

/* A number field that is absent counts as 0; else it must be in
** [0, max]. */
static int num_field(const cJSON *o, const char *key, double max, double *out,
                     char *err, size_t errlen) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  *out = 0;
  if (v == NULL) return 0;
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= max)) {
    snprintf(err, errlen, "'%s' is not a number between 0 and %g", key, max);
    return -1;
  }
  *out = v->valuedouble;
  return 0;
}

/* sbx_ and lowercase hex digits, as mp_sandbox_create makes them: an id is
** a file and a directory name under the data directory */
static int id_ok(const char *id) {
  size_t i, n = strlen(id);
  if (n < 5 || strncmp(id, "sbx_", 4) != 0) return 0;
  for (i = 4; i < n; i++)
    if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
      return 0;
  return 1;
}

/* a boolean field: absent is false */
static int bool_field(const cJSON *o, const char *key, int *out, char *err,
                      size_t errlen) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  *out = cJSON_IsTrue(v);
  if (v == NULL || cJSON_IsBool(v)) return 0;
  snprintf(err, errlen, "'%s' is not a boolean", key);
  return -1;
}

int mp_record_read(mp_sandbox *sb, const cJSON *o, char *err, size_t errlen) {
  const cJSON *env = cJSON_GetObjectItemCaseSensitive(o, MP_CREATE_ENV);
  double idle, created, destroyed, last;
  /* the milliseconds of the year 3000 */
  const double ms_max = 32503680000000.0;
  err[0] = '\0';
  if (copy_field(sb->id, sizeof sb->id, o, "id", err, errlen) < 0
      || copy_field(sb->project, sizeof sb->project, o, "projectId", err,
                    errlen) < 0
      || copy_field(sb->environment, sizeof sb->environment, o,
                    MP_CREATE_ENVIRONMENT, err, errlen) < 0
      || copy_field(sb->recovery_key, sizeof sb->recovery_key, o,
                    "recoveryKey", err, errlen) < 0
      || copy_field(sb->network, sizeof sb->network, o, MP_CREATE_NETWORK,
                    err, errlen) < 0
      || copy_field(sb->restored_from, sizeof sb->restored_from, o,
                    "restoredFrom", err, errlen) < 0
      || copy_field(sb->checkpoint_base, sizeof sb->checkpoint_base, o,
                    "checkpointBase", err, errlen) < 0
      || copy_field(sb->egress_allow, sizeof sb->egress_allow, o,
                    "egressAllow", err, errlen) < 0
      || copy_field(sb->egress_deny, sizeof sb->egress_deny, o, "egressDeny",
                    err, errlen) < 0
      || num_field(o, MP_CREATE_IDLE, 525600, &idle, err, errlen) < 0
      || num_field(o, "createdMs", ms_max, &created, err, errlen) < 0
      || num_field(o, "destroyedMs", ms_max, &destroyed, err, errlen) < 0
      || num_field(o, "lastExecMs", ms_max, &last, err, errlen) < 0
      || bool_field(o, "checkpointDeleted", &sb->checkpoint_deleted, err,
                    errlen) < 0
      || bool_field(o, "restoring", &sb->restoring, err, errlen) < 0
      || bool_field(o, MP_CREATE_KEY_EXPLICIT, &sb->key_explicit, err,
                    errlen) < 0)
    return -1;
  if (!id_ok(sb->id)) {
    snprintf(err, errlen, "'id' is not sbx_ followed by hex digits");
    return -1;
  }
  if (mp_bucket_name_check(sb->project) != NULL) {
    snprintf(err, errlen, "'projectId' is not a valid project id");
    return -1;
  }
  if (sb->environment[0] == '\0') {
    snprintf(err, errlen, "'environmentId' is missing");
    return -1;
  }
  if (sb->network[0] == '\0') {
    snprintf(sb->network, sizeof sb->network, "ISOLATED");
  } else if (strcmp(sb->network, "ISOLATED") != 0
             && strcmp(sb->network, "PRIVATE") != 0) {
    snprintf(err, errlen, "'networkIsolation' is not ISOLATED or PRIVATE");
    return -1;
  }
  if (env != NULL && !cJSON_IsObject(env) && !cJSON_IsNull(env)) {
    snprintf(err, errlen, "'env' is not an object");
    return -1;
  }
  sb->idle_timeout_min = idle;
  sb->created_ms = (int64_t)created;
  sb->destroyed_ms = (int64_t)destroyed;
  sb->last_exec_ms = (int64_t)last;
  sb->restored = sb->restored_from[0] != '\0';
  sb->egress_allow_given = cJSON_HasObjectItem(o, "egressAllow");
  sb->egress_rules = sb->egress_allow_given || cJSON_HasObjectItem(o, "egressDeny");
  {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "template");
    if (cJSON_IsString(t) && strlen(t->valuestring) < sizeof sb->template_key
        && strspn(t->valuestring, "0123456789abcdef") == strlen(t->valuestring))
      snprintf(sb->template_key, sizeof sb->template_key, "%s", t->valuestring);
    t = cJSON_GetObjectItemCaseSensitive(o, "cpuCount");
    if (cJSON_IsNumber(t) && t->valuedouble >= 1 && t->valuedouble <= 64)
      sb->cpu_count = (int)t->valuedouble;
    t = cJSON_GetObjectItemCaseSensitive(o, "memoryMB");
    if (cJSON_IsNumber(t) && t->valuedouble >= 1 && t->valuedouble <= 1048576)
      sb->memory_mb = (int)t->valuedouble;
    t = cJSON_GetObjectItemCaseSensitive(o, "workdir");
    if (cJSON_IsString(t) && t->valuestring[0] == '/'
        && strlen(t->valuestring) < sizeof sb->workdir)
      snprintf(sb->workdir, sizeof sb->workdir, "%s", t->valuestring);
  }
  {
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(o, "hostUidBase");
    if (cJSON_IsNumber(u) && u->valuedouble >= 1 && u->valuedouble < 4294967295.0)
      sb->uid_base = (unsigned)u->valuedouble;
  }
  sb->env = cJSON_IsObject(env) ? cJSON_Duplicate(env, 1)
                                : cJSON_CreateObject();
  return 0;
}

int mp_record_expired(const mp_server *srv, const mp_sandbox *sb,
                      int64_t now) {
  return sb->destroyed_ms && now - sb->destroyed_ms >= srv->destroyed_ttl_ms;
}

void mp_record_remove(const mp_server *srv, const char *id) {
  char path[4200];
  snprintf(path, sizeof path, "%s/state/sandboxes/%s.json", srv->data_dir, id);
  unlink(path);
}

/* The text of a record file: a regular file (a FIFO put there would block
** the start in open()), at most MP_RECORD_MAX bytes; NULL otherwise. */
static char *read_record(int dfd, const char *name, size_t *len) {
  struct stat st;
  char *text = NULL;
  int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return NULL;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= MP_RECORD_MAX
      && (text = malloc((size_t)st.st_size + 1)) != NULL) {
    ssize_t n = read(fd, text, (size_t)st.st_size);
    if (n < 0) {
      free(text);
      text = NULL;
    } else {
      text[n] = '\0';
      *len = (size_t)n;
    }
  }
  close(fd);
  return text;
}

int mp_record_load_all(mp_server *srv,
                       void (*load)(mp_server *srv, const cJSON *o,
                                    const char *file)) {
  char dir[4200];
  DIR *d;
  struct dirent *e;
  snprintf(dir, sizeof dir, "%s/state/sandboxes", srv->data_dir);
  if (mastra__mkdirs(dir, 0700, NULL) < 0 || (d = opendir(dir)) == NULL) {
    mp_log("cannot open %s: %s", dir, strerror(errno));
    return -1;
  }
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name), len = 0;
    char *text;
    cJSON *o;
    /* records only: leftovers of an interrupted write are not *.json */
    if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
    text = read_record(dirfd(d), e->d_name, &len);
    o = text != NULL ? mastra__json_parse(text, len, NULL, NULL) : NULL;
    free(text);
    if (cJSON_IsObject(o))
      load(srv, o, e->d_name);
    else
      mp_log("%s/%s is not a sandbox record; skipped", dir, e->d_name);
    cJSON_Delete(o);
  }
  closedir(d);
  return 0;
}

uint64_t mp_record_sweep_ms(const mp_server *srv) {
  int64_t ms = srv->destroyed_ttl_ms / 2;
  if (ms > MP_RECORD_SWEEP_MAX_MS) ms = MP_RECORD_SWEEP_MAX_MS;
  return ms < 100 ? 100 : (uint64_t)ms;
}
