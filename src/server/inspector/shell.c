/*
** The platform from the shell (see inspector.h): the commands that talk to
** the running platform of a data directory through its inspector's JSON
** API (docs/inspector.md), with the platform's bearer token:
**
**   mastra-platform inspect [--data-dir DIR]   a one-time login link
**   mastra-platform ps [--data-dir DIR]        the live sandboxes
**   mastra-platform destroy [--data-dir DIR] ID...
**   mastra-platform logs [--data-dir DIR] [--sandbox ID] [-n N]
**                                              the exec sessions, oldest first
**
** The platform is found by DATA_DIR/state/inspector.json ({url, pid,
** tokenFile}, written by its inspector). Without --data-dir: the default
** data directory of `serve`, then the per-user daemon's
** (STATE_DIR/platform-data, docs/platform.md). Command-line clients: they
** block, one request at a time.
*/
#define _GNU_SOURCE
#include "inspector/inspector.h"

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "http/request.h" /* mp_pct_encode */
#include "util/log.h"
#include "util.h"

#define USAGE                                                               \
  "usage: mastra-platform inspect [--data-dir DIR]\n"                       \
  "       mastra-platform ps [--data-dir DIR]\n"                            \
  "       mastra-platform destroy [--data-dir DIR] ID...\n"                 \
  "       mastra-platform logs [--data-dir DIR] [--sandbox ID] [-n N]\n"

/* the running platform that a command talks to */
typedef struct platform {
  char url[256];   /* the inspector's, http://HOST:PORT/ */
  char *token;
  const char *dir; /* its data directory */
} platform;

/* the per-user daemon's data directory, as lua/mastra/local_platform.lua
** finds it */
static void daemon_data_dir(char *out, size_t n) {
  const char *sd = getenv("MASTRA_PLATFORM_STATE_DIR");
  const char *xdg = getenv("XDG_STATE_HOME");
  const char *home = getenv("HOME");
  if (sd != NULL && sd[0] != '\0')
    snprintf(out, n, "%s/platform-data", sd);
  else if (xdg != NULL && xdg[0] == '/')
    snprintf(out, n, "%s/mastra/platform-data", xdg);
  else
    snprintf(out, n, "%s/.local/state/mastra/platform-data",
             home && home[0] ? home : "/tmp");
}

/* DATA_DIR/state/inspector.json ({url, pid, tokenFile}); NULL if none */
static cJSON *inspector_state(const char *dir) {
  char path[4200], *text;
  cJSON *o;
  snprintf(path, sizeof path, "%s/state/inspector.json", dir);
  if (mastra__read_file(path, &text, NULL) < 0) return NULL;
  o = cJSON_Parse(text);
  free(text);
  if (!cJSON_IsString(cJSON_GetObjectItem(o, "url"))
      || !cJSON_IsString(cJSON_GetObjectItem(o, "tokenFile"))) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

/* Find the platform (dir, or the defaults) and read its token: 0, or 1
** after saying why on stderr. */
static int find_platform(platform *p, const char *dir,
                         const char *default_data_dir) {
  static char daemon_dir[4200];
  const char *token_file;
  size_t tlen;
  cJSON *state = NULL;
  daemon_data_dir(daemon_dir, sizeof daemon_dir);
  if (dir == NULL)
    dir = (state = inspector_state(default_data_dir)) != NULL ? default_data_dir
                                                              : daemon_dir;
  if (state == NULL && (state = inspector_state(dir)) == NULL) {
    fprintf(stderr, "mastra-platform: no platform with an inspector runs on"
            " %s (no %s/state/inspector.json); start one with"
            " `mastra-platform serve`, or name its --data-dir\n", dir, dir);
    return 1;
  }
  p->dir = dir;
  snprintf(p->url, sizeof p->url, "%s",
           cJSON_GetObjectItem(state, "url")->valuestring);
  token_file = cJSON_GetObjectItem(state, "tokenFile")->valuestring;
  if (mastra__read_file(token_file, &p->token, &tlen) < 0) {
    fprintf(stderr, "mastra-platform: cannot read the token %s\n", token_file);
    cJSON_Delete(state);
    return 1;
  }
  cJSON_Delete(state);
  while (tlen > 0 && (p->token[tlen - 1] == '\n' || p->token[tlen - 1] == ' '))
    p->token[--tlen] = '\0';
  return 0;
}

/* METHOD path (with its query) over one connection: the status, and the
** body as JSON in *out (NULL when it is not JSON); -1 with err when the
** inspector cannot be reached. */
static int call(const platform *p, const char *method, const char *path,
                cJSON **out, char *err, size_t n) {
  char host[256], port[16], req[4096], *resp = NULL, *body;
  struct addrinfo hints, *ai = NULL;
  size_t len = 0;
  int fd = -1, status = -1;
  ssize_t got;
  *out = NULL;
  if (sscanf(p->url, "http://%255[^/]/", host) != 1
      || strrchr(host, ':') == NULL) {
    snprintf(err, n, "cannot read the address '%s'", p->url);
    return -1;
  }
  snprintf(port, sizeof port, "%s", strrchr(host, ':') + 1);
  *strrchr(host, ':') = '\0';
  snprintf(req, sizeof req,
           "%s %s HTTP/1.0\r\nHost: %s:%s\r\nAuthorization: Bearer %s\r\n"
           "Content-Length: 0\r\n\r\n", method, path, host, port, p->token);
  if (host[0] == '[') { /* [::1] */
    memmove(host, host + 1, strlen(host));
    host[strlen(host) - 1] = '\0';
  }
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &ai) != 0 || ai == NULL
      || (fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0
      || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0
      || mastra__write_all(fd, req, strlen(req)) < 0) {
    snprintf(err, n, "cannot reach the inspector at %s (is the platform"
             " running?)", p->url);
    if (fd >= 0) close(fd);
    if (ai) freeaddrinfo(ai);
    return -1;
  }
  freeaddrinfo(ai);
  for (;;) {
    char *more = realloc(resp, len + 65537);
    if (more == NULL) break;
    resp = more;
    got = read(fd, resp + len, 65536);
    if (got <= 0) break;
    len += (size_t)got;
  }
  close(fd);
  if (resp == NULL) {
    snprintf(err, n, "out of memory");
    return -1;
  }
  resp[len] = '\0';
  if (strncmp(resp, "HTTP/1.", 7) == 0 && len > 12) status = atoi(resp + 9);
  body = strstr(resp, "\r\n\r\n");
  if (body != NULL) *out = cJSON_Parse(body + 4);
  if (status < 200 || status > 299) {
    const cJSON *e = cJSON_GetObjectItem(*out, "error");
    const cJSON *m = cJSON_GetObjectItem(e, "message");
    snprintf(err, n, "the inspector answered %d: %.300s", status,
             cJSON_IsString(m) ? m->valuestring : body ? body + 4 : resp);
  }
  free(resp);
  return status;
}

/* GET path of every environment (path has "%s" for its query): the answers'
** arrays named key, each item with its projectId and environmentId added,
** in one array; NULL after saying why on stderr */
static cJSON *per_environment(const platform *p, const char *what,
                              const char *key) {
  char err[600], path[2048], proj[3 * 256], env[3 * 256];
  cJSON *session, *all = cJSON_CreateArray(), *e;
  if (call(p, "GET", "/api/session", &session, err, sizeof err) != 200) {
    fprintf(stderr, "mastra-platform: %s\n", err);
    cJSON_Delete(session);
    cJSON_Delete(all);
    return NULL;
  }
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(session, "environments")) {
    const cJSON *pj = cJSON_GetObjectItem(e, "projectId");
    const cJSON *ej = cJSON_GetObjectItem(e, "environmentId");
    cJSON *answer, *item;
    if (!cJSON_IsString(pj) || !cJSON_IsString(ej)) continue;
    mp_pct_encode(pj->valuestring, proj, sizeof proj);
    mp_pct_encode(ej->valuestring, env, sizeof env);
    snprintf(path, sizeof path, "/api/%s?project=%s&environment=%s", what,
             proj, env);
    if (call(p, "GET", path, &answer, err, sizeof err) != 200) {
      fprintf(stderr, "mastra-platform: %s\n", err);
      cJSON_Delete(answer);
      cJSON_Delete(session);
      cJSON_Delete(all);
      return NULL;
    }
    while ((item = cJSON_DetachItemFromArray(cJSON_GetObjectItem(answer, key),
                                             0)) != NULL) {
      cJSON_AddStringToObject(item, "projectId", pj->valuestring);
      cJSON_AddStringToObject(item, "environmentId", ej->valuestring);
      cJSON_AddItemToArray(all, item);
    }
    cJSON_Delete(answer);
  }
  cJSON_Delete(session);
  return all;
}

static const char *str(const cJSON *o, const char *name, const char *none) {
  const cJSON *v = cJSON_GetObjectItem(o, name);
  return cJSON_IsString(v) && v->valuestring[0] != '\0' ? v->valuestring
                                                        : none;
}

/* an item's time field (ms since the epoch) as ISO 8601, or "-" */
static const char *when(const cJSON *o, const char *name, char out[32]) {
  const cJSON *v = cJSON_GetObjectItem(o, name);
  if (!cJSON_IsNumber(v) || v->valuedouble <= 0) return "-";
  mp_iso8601((int64_t)v->valuedouble, out);
  return out;
}

static int ps(const platform *p) {
  cJSON *all = per_environment(p, "sandboxes", "sandboxes"), *s;
  char created[32], last[32];
  if (all == NULL) return 1;
  printf("%-28s %-16s %-16s %-20s %-8s %-10s %-24s %s\n", "ID", "PROJECT",
         "ENVIRONMENT", "KEY", "NETWORK", "STATUS", "CREATED", "LAST EXEC");
  cJSON_ArrayForEach(s, all) {
    printf("%-28s %-16s %-16s %-20s %-8s %-10s %-24s %s\n",
           str(s, "id", "-"), str(s, "projectId", "-"),
           str(s, "environmentId", "-"), str(s, "recoveryKey", "-"),
           str(s, "networkIsolation", "-"), str(s, "status", "-"),
           when(s, "createdAt", created), when(s, "lastExecAt", last));
  }
  cJSON_Delete(all);
  return 0;
}

static int destroy(const platform *p, int n, char **ids) {
  int i, rc = 0;
  for (i = 0; i < n; i++) {
    char err[600], path[1024], id[3 * 256];
    cJSON *answer;
    int status;
    mp_pct_encode(ids[i], id, sizeof id);
    snprintf(path, sizeof path, "/api/sandbox?id=%s", id);
    status = call(p, "DELETE", path, &answer, err, sizeof err);
    cJSON_Delete(answer);
    if (status == 202) {
      printf("%s: destroying (its checkpoint is captured first)\n", ids[i]);
    } else if (status == 404) {
      fprintf(stderr, "mastra-platform: %s: no live sandbox has that id"
              " (`mastra-platform ps` lists them)\n", ids[i]);
      rc = 1;
    } else {
      fprintf(stderr, "mastra-platform: %s: %s\n", ids[i], err);
      if (status < 0) return 1;
      rc = 1;
    }
  }
  return rc;
}

static int by_start(const void *a, const void *b) {
  const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
  double tx = cJSON_GetNumberValue(cJSON_GetObjectItem(x, "startedAt"));
  double ty = cJSON_GetNumberValue(cJSON_GetObjectItem(y, "startedAt"));
  double ix = cJSON_GetNumberValue(cJSON_GetObjectItem(x, "id"));
  double iy = cJSON_GetNumberValue(cJSON_GetObjectItem(y, "id"));
  if (tx != ty) return tx < ty ? -1 : 1;
  return ix < iy ? -1 : ix > iy;
}

static int logs(const platform *p, const char *sandbox, long last) {
  cJSON *all = per_environment(p, "sessions", "sessions"), *s, **items;
  size_t n = 0, i, from;
  if (all == NULL) return 1;
  items = malloc(sizeof *items * ((size_t)cJSON_GetArraySize(all) + 1));
  if (items == NULL) {
    cJSON_Delete(all);
    return 1;
  }
  cJSON_ArrayForEach(s, all) {
    if (sandbox == NULL || strcmp(str(s, "sandboxId", ""), sandbox) == 0)
      items[n++] = s;
  }
  qsort(items, n, sizeof *items, by_start);
  from = last > 0 && (size_t)last < n ? n - (size_t)last : 0;
  for (i = from; i < n; i++) {
    char started[32], code[24] = "-";
    const cJSON *e = cJSON_GetObjectItem(items[i], "exitCode");
    const cJSON *ms = cJSON_GetObjectItem(items[i], "durationMs");
    if (cJSON_IsNumber(e)) snprintf(code, sizeof code, "%d", e->valueint);
    printf("%s %s %s/%s %s exit %s", when(items[i], "startedAt", started),
           str(items[i], "sandboxId", "-"), str(items[i], "projectId", "-"),
           str(items[i], "environmentId", "-"), str(items[i], "status", "-"),
           code);
    if (cJSON_IsNumber(ms)) printf(" %.0f ms", ms->valuedouble);
    printf(": %s", str(items[i], "command", ""));
    if (str(items[i], "message", NULL) != NULL)
      printf(" (%s)", str(items[i], "message", ""));
    printf("\n");
  }
  free(items);
  cJSON_Delete(all);
  return 0;
}

static int login_link(const platform *p) {
  char err[600];
  cJSON *o;
  const cJSON *url;
  if (call(p, "POST", "/api/login-links", &o, err, sizeof err) != 201) {
    fprintf(stderr, "mastra-platform: %s\n", err);
    cJSON_Delete(o);
    return 1;
  }
  url = cJSON_GetObjectItem(o, "url");
  if (!cJSON_IsString(url)) {
    cJSON_Delete(o);
    fprintf(stderr, "mastra-platform: the inspector's answer has no link\n");
    return 1;
  }
  printf("%s\n", url->valuestring);
  cJSON_Delete(o);
  return 0;
}

int mp_shell_main(int argc, char **argv, const char *default_data_dir) {
  const char *cmd = argv[1], *dir = NULL, *sandbox = NULL;
  char **ids = NULL;
  long last = 0;
  int i, nids = 0, rc;
  platform p;
  memset(&p, 0, sizeof p);
  ids = calloc((size_t)argc, sizeof *ids);
  if (ids == NULL) return 1;
  for (i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    char *end;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(USAGE, stdout);
      free(ids);
      return 0;
    }
    if (strcmp(a, "--data-dir") == 0 && v != NULL) {
      dir = v;
      i++;
    } else if (strcmp(cmd, "logs") == 0 && strcmp(a, "--sandbox") == 0
               && v != NULL) {
      sandbox = v;
      i++;
    } else if (strcmp(cmd, "logs") == 0 && strcmp(a, "-n") == 0 && v != NULL
               && (last = strtol(v, &end, 10)) > 0 && *end == '\0') {
      i++;
    } else if (strcmp(cmd, "destroy") == 0 && a[0] != '-') {
      ids[nids++] = argv[i];
    } else {
      fprintf(stderr, "mastra-platform %s: unexpected '%s'\n" USAGE, cmd, a);
      free(ids);
      return 2;
    }
  }
  if (strcmp(cmd, "destroy") == 0 && nids == 0) {
    fprintf(stderr, "mastra-platform destroy: name the sandboxes to destroy"
            " (their ids, as `mastra-platform ps` lists them)\n");
    free(ids);
    return 2;
  }
  rc = find_platform(&p, dir, default_data_dir);
  if (rc == 0) {
    if (strcmp(cmd, "ps") == 0) rc = ps(&p);
    else if (strcmp(cmd, "destroy") == 0) rc = destroy(&p, nids, ids);
    else if (strcmp(cmd, "logs") == 0) rc = logs(&p, sandbox, last);
    else rc = login_link(&p);
  }
  free(p.token);
  free(ids);
  return rc;
}
