/*
** The inspector's JSON endpoints (see inspector_api.h; the list is in
** docs/inspector.md). Every argument is a query argument (project,
** environment, bucket, key, prefix, id, name), percent-decoded here.
** inspector.c has checked who asks before any of these runs.
**
** Buckets belong to a project (the bucket routes carry no environment):
** the Bucket view lists the buckets of the selected environment's
** project, the directories of DATA_DIR/buckets/<project>/.
*/
#define _GNU_SOURCE
#include "inspector/inspector_api.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/activity.h"
#include "bucket/bucket.h"
#include "sandbox/checkpoint.h"
#include "sandbox/template.h"
#include "inspector/diskuse.h"
#include "util/log.h"
#include "http/respond.h"
#include "sandbox/sandbox.h"

#define DISKUSE_MAX_AGE_MS 10000

/* the query arguments of a request: NULL when absent */
typedef struct {
  char *project, *environment, *bucket, *key, *prefix, *id, *name;
  int bad;
} args;

static void args_read(struct MHD_Connection *conn, args *a) {
  memset(a, 0, sizeof *a);
  a->project = mp_query_arg(conn, "project", &a->bad);
  a->environment = mp_query_arg(conn, "environment", &a->bad);
  a->bucket = mp_query_arg(conn, "bucket", &a->bad);
  a->key = mp_query_arg(conn, "key", &a->bad);
  a->prefix = mp_query_arg(conn, "prefix", &a->bad);
  a->id = mp_query_arg(conn, "id", &a->bad);
  a->name = mp_query_arg(conn, "name", &a->bad);
}

static void args_free(args *a) {
  free(a->project);
  free(a->environment);
  free(a->bucket);
  free(a->key);
  free(a->prefix);
  free(a->id);
  free(a->name);
}

static enum MHD_Result missing(struct MHD_Connection *conn,
                               const char *what) {
  return mp_send_error(conn, 400, "invalid_request",
                       "missing query argument(s): %s", what);
}

size_t mp_inspector_api_limit(mp_server *srv, const char *url,
                              const char *method) {
  if (strcmp(method, "POST") == 0 && strcmp(url, "/api/object") == 0)
    return srv->max_object;
  return srv->max_body;
}

/* {====== environments and health ====== */

/* a directory entry that may be a bucket or a project's directory */
static int is_dir_entry(const struct dirent *e) {
  return e->d_name[0] != '.'
         && (e->d_type == DT_DIR || e->d_type == DT_UNKNOWN);
}

static void add_env(cJSON *envs, const char *project,
                    const char *environment) {
  cJSON *o;
  if (mp_env_listed(envs, project, environment)) return;
  o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "projectId", project);
  cJSON_AddStringToObject(o, "environmentId", environment);
  cJSON_AddItemToArray(envs, o);
}

/* the projects with a bucket directory: DATA_DIR/buckets/<project> */
static void bucket_projects(mp_server *srv, cJSON *out) {
  char path[4200];
  DIR *d;
  struct dirent *e;
  snprintf(path, sizeof path, "%s/buckets", srv->data_dir);
  if ((d = opendir(path)) == NULL) return;
  while ((e = readdir(d)) != NULL)
    if (is_dir_entry(e))
      cJSON_AddItemToArray(out, cJSON_CreateString(e->d_name));
  closedir(d);
}

cJSON *mp_inspector_environments(mp_server *srv) {
  cJSON *envs = cJSON_CreateArray(), *cps, *projects, *it;
  const mp_sandbox *sb;
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next)
    add_env(envs, sb->project, sb->environment);
  mp_activity_environments(srv, envs);
  cps = mp_checkpoint_list(srv, NULL, NULL);
  cJSON_ArrayForEach(it, cps)
    add_env(envs, cJSON_GetStringValue(cJSON_GetObjectItem(it, "projectId")),
            cJSON_GetStringValue(cJSON_GetObjectItem(it, "environmentId")));
  cJSON_Delete(cps);
  /* a project with buckets and nothing else: its environment is unknown,
  ** and the local platform's defaults name it `local` */
  projects = cJSON_CreateArray();
  bucket_projects(srv, projects);
  cJSON_ArrayForEach(it, projects) {
    const cJSON *e;
    int seen = 0;
    cJSON_ArrayForEach(e, envs)
      if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(e, "projectId")),
                 it->valuestring) == 0)
        seen = 1;
    if (!seen) add_env(envs, it->valuestring, "local");
  }
  cJSON_Delete(projects);
  if (cJSON_GetArraySize(envs) == 0) add_env(envs, "local", "local");
  return envs;
}

static enum MHD_Result health(mp_server *srv, struct MHD_Connection *conn) {
  cJSON *o = cJSON_CreateObject();
  uint64_t bytes = 0;
  int64_t at = 0;
  int walking = 0;
  if (srv->diskuse == NULL) srv->diskuse = mp_diskuse_new(srv->data_dir);
  if (srv->diskuse != NULL)
    mp_diskuse_get(srv->diskuse, DISKUSE_MAX_AGE_MS, &bytes, &at, &walking);
  cJSON_AddStringToObject(o, "driver", srv->driver->name);
  cJSON_AddNumberToObject(o, "liveSandboxes",
                          (double)mp_sandbox_live_count(srv));
  cJSON_AddNumberToObject(o, "runningCommands",
                          (double)mp_sandbox_running_count(srv));
  cJSON_AddStringToObject(o, "dataDir", srv->data_dir);
  if (at > 0) {
    cJSON_AddNumberToObject(o, "diskUseBytes", (double)bytes);
    cJSON_AddNumberToObject(o, "diskUseAt", (double)at);
  } else {
    cJSON_AddNullToObject(o, "diskUseBytes");
    cJSON_AddNullToObject(o, "diskUseAt");
  }
  cJSON_AddBoolToObject(o, "diskUseMeasuring", walking);
  cJSON_AddNumberToObject(o, "checkpointRetentionDays",
                          srv->checkpoint_retention_days);
  cJSON_AddNumberToObject(o, "checkpointRetentionUnusedDays",
                          mp_checkpoint_unused_days(srv));
  cJSON_AddNumberToObject(o, "templateRetentionDays",
                          srv->template_retention_days);
  cJSON_AddNumberToObject(o, "defaultIdleMinutes", srv->default_idle_min);
  if (srv->driver->health != NULL) srv->driver->health(srv, o);
  return mp_send_json(conn, 200, o);
}

/* }====== */

/* {====== the bucket ====== */

static enum MHD_Result bucket_error(struct MHD_Connection *conn, int rc,
                                    const char *key, const char *err) {
  if (rc == MP_BUCKET_NOT_FOUND)
    return mp_send_error(conn, 404, "not_found", "no object '%.200s'", key);
  if (rc == MP_BUCKET_BAD_KEY)
    return mp_send_error(conn, 400, "invalid_request", "bad key '%.200s'",
                         key);
  if (rc == MP_BUCKET_NOSPACE)
    return mp_send_error(conn, 507, "insufficient_storage",
                         "the platform's disk is full: %s", err ? err : "");
  return mp_send_error(conn, 500, "internal_error", "storage error: %s",
                       err && err[0] ? err : "unknown");
}

static enum MHD_Result buckets(mp_server *srv, struct MHD_Connection *conn,
                               const args *a) {
  char path[4200];
  cJSON *o, *list;
  DIR *d;
  struct dirent *e;
  if (a->project == NULL) return missing(conn, "project");
  if (mp_bucket_name_check(a->project) != NULL)
    return mp_send_error(conn, 400, "invalid_request", "bad project name");
  o = cJSON_CreateObject();
  list = cJSON_AddArrayToObject(o, "buckets");
  snprintf(path, sizeof path, "%s/buckets/%s", srv->data_dir, a->project);
  if ((d = opendir(path)) != NULL) {
    while ((e = readdir(d)) != NULL)
      if (is_dir_entry(e))
        cJSON_AddItemToArray(list, cJSON_CreateString(e->d_name));
    closedir(d);
  }
  return mp_send_json(conn, 200, o);
}

static enum MHD_Result bucket_list(mp_server *srv,
                                   struct MHD_Connection *conn,
                                   const args *a) {
  const char *prefix = a->prefix ? a->prefix : "";
  mp_listing l;
  cJSON *o, *folders, *objects;
  size_t i, plen = strlen(prefix);
  int rc;
  if (a->project == NULL || a->bucket == NULL)
    return missing(conn, "project, bucket");
  memset(&l, 0, sizeof l);
  rc = mp_bucket_list(srv->buckets, a->project, a->bucket, prefix, "/", &l);
  if (rc < 0) return bucket_error(conn, rc, prefix, NULL);
  o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "prefix", prefix);
  folders = cJSON_AddArrayToObject(o, "folders");
  objects = cJSON_AddArrayToObject(o, "objects");
  for (i = 0; i < l.nprefixes; i++) {
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "prefix", l.prefixes[i]);
    cJSON_AddStringToObject(f, "name", l.prefixes[i] + plen);
    cJSON_AddItemToArray(folders, f);
  }
  for (i = 0; i < l.ncontents; i++) {
    const mp_object_info *it = &l.contents[i];
    cJSON *f;
    if (strcmp(it->key, prefix) == 0) continue; /* the folder's own marker */
    f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "key", it->key);
    cJSON_AddStringToObject(f, "name", it->key + plen);
    cJSON_AddNumberToObject(f, "size", (double)it->size);
    cJSON_AddNumberToObject(f, "lastModified", (double)it->mtime_ms);
    cJSON_AddStringToObject(f, "contentType", it->content_type);
    cJSON_AddItemToArray(objects, f);
  }
  mp_listing_free(&l);
  return mp_send_json(conn, 200, o);
}

/* filename*=UTF-8''... of the last segment of key */
static void disposition(const char *key, char *out, size_t n) {
  const char *base = strrchr(key, '/');
  size_t o = (size_t)snprintf(out, n, "attachment; filename*=UTF-8''");
  mp_pct_encode(base ? base + 1 : key, out + o, n - o);
}

static enum MHD_Result object_get(mp_server *srv, struct MHD_Connection *conn,
                                  const args *a) {
  mp_object_info info;
  struct MHD_Response *resp;
  uint64_t offset;
  int fd, rc;
  char disp[1200];
  enum MHD_Result out;
  if (a->project == NULL || a->bucket == NULL || a->key == NULL)
    return missing(conn, "project, bucket, key");
  memset(&info, 0, sizeof info);
  rc = mp_bucket_open_read(srv->buckets, a->project, a->bucket, a->key, &fd,
                           &offset, &info);
  if (rc < 0) return bucket_error(conn, rc, a->key, NULL);
  resp = MHD_create_response_from_fd_at_offset64(info.size, fd, offset);
  if (resp == NULL) {
    close(fd);
    mp_object_info_free(&info);
    return MHD_NO;
  }
  disposition(a->key, disp, sizeof disp);
  MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
  MHD_add_response_header(resp, "Content-Disposition", disp);
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(resp, "Cache-Control", "no-store");
  out = MHD_queue_response(conn, 200, resp);
  MHD_destroy_response(resp);
  mp_object_info_free(&info);
  return out;
}

static enum MHD_Result object_put(mp_server *srv, struct MHD_Connection *conn,
                                  const args *a, mp_request *r) {
  char err[512] = "";
  const char *ct =
      MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
  cJSON *o;
  int rc;
  if (a->project == NULL || a->bucket == NULL || a->key == NULL)
    return missing(conn, "project, bucket, key");
  if (mp_bucket_name_check(a->project) || mp_bucket_name_check(a->bucket))
    return mp_send_error(conn, 400, "invalid_request",
                         "bad project or bucket name");
  rc = mp_bucket_put(srv->buckets, a->project, a->bucket, a->key,
                     r->body ? r->body : "", r->len, ct ? ct : "", 0, err,
                     sizeof err);
  if (rc < 0) return bucket_error(conn, rc, a->key, err);
  mp_log("inspector: uploaded %s/%s/%s (%zu bytes)", a->project, a->bucket,
         a->key, r->len);
  o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "key", a->key);
  cJSON_AddNumberToObject(o, "size", (double)r->len);
  return mp_send_json(conn, 201, o);
}

static enum MHD_Result object_delete(mp_server *srv,
                                     struct MHD_Connection *conn,
                                     const args *a) {
  size_t n;
  int rc;
  if (a->project == NULL || a->bucket == NULL || a->key == NULL)
    return missing(conn, "project, bucket, key");
  n = strlen(a->key);
  /* a folder (a key ending in '/') goes with everything under it */
  rc = mp_bucket_delete(srv->buckets, a->project, a->bucket, a->key,
                        n > 0 && a->key[n - 1] == '/');
  if (rc < 0) return bucket_error(conn, rc, a->key, NULL);
  mp_log("inspector: deleted %s/%s/%s", a->project, a->bucket, a->key);
  return mp_send_empty(conn, 204);
}

/* }====== */

/* {====== sandboxes, sessions, checkpoints, templates, failures ====== */

static cJSON *time_or_null(int64_t ms) {
  return ms > 0 ? cJSON_CreateNumber((double)ms) : cJSON_CreateNull();
}

static enum MHD_Result sandboxes(mp_server *srv, struct MHD_Connection *conn,
                                 const args *a) {
  cJSON *o = cJSON_CreateObject();
  cJSON *list = cJSON_AddArrayToObject(o, "sandboxes");
  const mp_sandbox *sb;
  if (a->project == NULL || a->environment == NULL) {
    cJSON_Delete(o);
    return missing(conn, "project, environment");
  }
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next) {
    cJSON *s;
    double minutes = mp_sandbox_idle_minutes(srv, sb);
    int64_t since = sb->last_exec_ms ? sb->last_exec_ms : sb->created_ms;
    if (sb->destroyed_ms || strcmp(sb->project, a->project) != 0
        || strcmp(sb->environment, a->environment) != 0)
      continue;
    s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "id", sb->id);
    cJSON_AddStringToObject(s, "recoveryKey", sb->recovery_key);
    cJSON_AddStringToObject(s, "networkIsolation", sb->network);
    cJSON_AddItemToObject(s, "createdAt", time_or_null(sb->created_ms));
    cJSON_AddItemToObject(s, "lastExecAt", time_or_null(sb->last_exec_ms));
    cJSON_AddNumberToObject(s, "running", sb->running);
    cJSON_AddNumberToObject(s, "idleTimeoutMinutes", minutes);
    cJSON_AddStringToObject(s, "status", sb->restoring     ? "restoring"
                                         : sb->destroying  ? "destroying"
                                         : sb->running > 0 ? "running"
                                                           : "idle");
    /* when idle reaping takes it: never while a command runs */
    cJSON_AddItemToObject(s, "reapAt",
                          minutes > 0 && sb->running == 0
                              ? cJSON_CreateNumber((double)since
                                                   + minutes * 60000.0)
                              : cJSON_CreateNull());
    cJSON_AddItemToArray(list, s);
  }
  return mp_send_json(conn, 200, o);
}

/* {====== egress ====== */

#define EGRESS_PER_SANDBOX 64 /* the newest entries of each sandbox */
#define EGRESS_SHOWN 200      /* of them, the newest of all */

/* newest first; ties by sandbox, then by the order in its log (kept by
** the index that egress() set: the sort does not depend on qsort's) */
static int entry_newer(const void *pa, const void *pb) {
  const cJSON *a = *(const cJSON *const *)pa, *b = *(const cJSON *const *)pb;
  const char *ta = cJSON_GetStringValue(cJSON_GetObjectItem(a, "time"));
  const char *tb = cJSON_GetStringValue(cJSON_GetObjectItem(b, "time"));
  int c = strcmp(tb ? tb : "", ta ? ta : "");
  if (c == 0)
    c = strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(a, "sandboxId")),
               cJSON_GetStringValue(cJSON_GetObjectItem(b, "sandboxId")));
  if (c == 0)
    c = (int)(cJSON_GetNumberValue(cJSON_GetObjectItem(b, "seq"))
              - cJSON_GetNumberValue(cJSON_GetObjectItem(a, "seq")));
  return c;
}

/* GET /api/egress: the newest outbound connections of the environment's
** live sandboxes, and each one's counts */
static enum MHD_Result egress(mp_server *srv, struct MHD_Connection *conn,
                              const args *a) {
  cJSON *o, *list, *counts, **all = NULL;
  size_t n = 0, cap = 0, i;
  mp_sandbox *sb;
  if (a->project == NULL || a->environment == NULL)
    return missing(conn, "project, environment");
  o = cJSON_CreateObject();
  cJSON_AddBoolToObject(o, "available", srv->driver->egress != NULL);
  counts = cJSON_AddArrayToObject(o, "sandboxes");
  for (sb = srv->sandboxes; srv->driver->egress != NULL && sb != NULL; sb = sb->next) {
    cJSON *e, *entries, *item;
    int seq = 0;
    if (sb->destroyed_ms || strcmp(sb->project, a->project) != 0
        || strcmp(sb->environment, a->environment) != 0)
      continue;
    e = cJSON_CreateObject();
    if (srv->driver->egress(sb, e, EGRESS_PER_SANDBOX) < 0) {
      cJSON_Delete(e);
      continue;
    }
    entries = cJSON_DetachItemFromObject(e, "entries");
    while (entries != NULL && (item = cJSON_DetachItemFromArray(entries, 0)) != NULL) {
      if (n == cap) {
        cJSON **grown = realloc(all, (cap = cap ? cap * 2 : 64) * sizeof *all);
        if (grown == NULL) {
          cJSON_Delete(item);
          break;
        }
        all = grown;
      }
      cJSON_AddStringToObject(item, "sandboxId", sb->id);
      cJSON_AddStringToObject(item, "recoveryKey", sb->recovery_key);
      cJSON_AddNumberToObject(item, "seq", seq++);
      all[n++] = item;
    }
    cJSON_Delete(entries);
    cJSON_AddStringToObject(e, "id", sb->id);
    cJSON_AddStringToObject(e, "recoveryKey", sb->recovery_key);
    cJSON_AddItemToArray(counts, e);
  }
  if (n > 0) qsort(all, n, sizeof *all, entry_newer);
  list = cJSON_AddArrayToObject(o, "connections");
  for (i = 0; i < n; i++) {
    cJSON_DeleteItemFromObject(all[i], "seq");
    if (i < EGRESS_SHOWN && list != NULL) cJSON_AddItemToArray(list, all[i]);
    else cJSON_Delete(all[i]);
  }
  free(all);
  return mp_send_json(conn, 200, o);
}

/* }====== */

static enum MHD_Result sandbox_destroy(mp_server *srv,
                                       struct MHD_Connection *conn,
                                       const args *a) {
  mp_sandbox *sb;
  if (a->id == NULL) return missing(conn, "id");
  sb = mp_sandbox_find(srv, a->id);
  if (sb == NULL)
    return mp_send_error(conn, 404, "not_found",
                         "no live sandbox '%.100s'", a->id);
  mp_log("inspector: destroying %s", sb->id);
  /* it is gone once its checkpoint is captured: the page sees it go */
  mp_sandbox_destroy(srv, sb, NULL);
  return mp_send_empty(conn, 202);
}

static enum MHD_Result listing(struct MHD_Connection *conn, const args *a,
                               const char *field,
                               cJSON *(*list)(mp_server *, const char *,
                                              const char *),
                               mp_server *srv) {
  cJSON *o;
  if (a->project == NULL || a->environment == NULL)
    return missing(conn, "project, environment");
  o = cJSON_CreateObject();
  cJSON_AddItemToObject(o, field, list(srv, a->project, a->environment));
  return mp_send_json(conn, 200, o);
}

static enum MHD_Result checkpoint_delete(mp_server *srv,
                                         struct MHD_Connection *conn,
                                         const args *a) {
  if (a->project == NULL || a->environment == NULL || a->name == NULL)
    return missing(conn, "project, environment, name");
  if (mp_checkpoint_remove(srv, a->project, a->environment, a->name) != 0)
    return mp_send_error(conn, 404, "not_found", "no checkpoint '%.100s'",
                         a->name);
  mp_log("inspector: deleted checkpoint %s", a->name);
  return mp_send_empty(conn, 204);
}

static enum MHD_Result template_delete(mp_server *srv,
                                       struct MHD_Connection *conn,
                                       const args *a) {
  char err[256];
  mp_template *t;
  if (a->project == NULL || a->environment == NULL || a->id == NULL)
    return missing(conn, "project, environment, id");
  t = mp_template_find(srv, a->project, a->environment, a->id);
  if (t == NULL)
    return mp_send_error(conn, 404, "not_found", "no template '%.100s'", a->id);
  if (mp_template_remove(srv, t, err, sizeof err) < 0)
    return mp_send_error(conn, 409, "conflict", "%s", err);
  mp_log("inspector: removed template %s", a->id);
  return mp_send_empty(conn, 204);
}

static enum MHD_Result failure_retry(mp_server *srv,
                                     struct MHD_Connection *conn,
                                     const args *a) {
  char err[1024] = "";
  char *end;
  unsigned long long id;
  int rc;
  if (a->id == NULL) return missing(conn, "id");
  id = strtoull(a->id, &end, 10);
  if (*end != '\0' || a->id[0] == '\0')
    return mp_send_error(conn, 400, "invalid_request", "bad failure id");
  rc = mp_failure_retry(srv, id, err, sizeof err);
  if (rc == -2) return mp_send_error(conn, 404, "not_found", "%s", err);
  if (rc == -3) return mp_send_error(conn, 409, "conflict", "%s", err);
  if (rc < 0)
    return mp_send_error(conn, 500, "internal_error", "the retry failed: %s",
                         err);
  mp_log("inspector: retried failure %llu", id);
  return mp_send_empty(conn, 204);
}

/* }====== */

enum MHD_Result mp_inspector_api(mp_server *srv, struct MHD_Connection *conn,
                                 const char *url, const char *method,
                                 mp_request *r) {
  int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
  int post = strcmp(method, "POST") == 0, del = strcmp(method, "DELETE") == 0;
  enum MHD_Result out;
  args a;
  args_read(conn, &a);
  if (a.bad) {
    args_free(&a);
    return mp_send_error(conn, 400, "invalid_request",
                         "bad escape or NUL in a query argument");
  }
  if (get && strcmp(url, "/api/health") == 0)
    out = health(srv, conn);
  else if (get && strcmp(url, "/api/buckets") == 0)
    out = buckets(srv, conn, &a);
  else if (get && strcmp(url, "/api/bucket") == 0)
    out = bucket_list(srv, conn, &a);
  else if (get && strcmp(url, "/api/object") == 0)
    out = object_get(srv, conn, &a);
  else if (post && strcmp(url, "/api/object") == 0)
    out = object_put(srv, conn, &a, r);
  else if (del && strcmp(url, "/api/object") == 0)
    out = object_delete(srv, conn, &a);
  else if (get && strcmp(url, "/api/sandboxes") == 0)
    out = sandboxes(srv, conn, &a);
  else if (get && strcmp(url, "/api/egress") == 0)
    out = egress(srv, conn, &a);
  else if (del && strcmp(url, "/api/sandbox") == 0)
    out = sandbox_destroy(srv, conn, &a);
  else if (get && strcmp(url, "/api/sessions") == 0)
    out = listing(conn, &a, "sessions", mp_session_list, srv);
  else if (get && strcmp(url, "/api/checkpoints") == 0)
    out = listing(conn, &a, "checkpoints", mp_checkpoint_list, srv);
  else if (del && strcmp(url, "/api/checkpoint") == 0)
    out = checkpoint_delete(srv, conn, &a);
  else if (get && strcmp(url, "/api/templates") == 0)
    out = listing(conn, &a, "templates", mp_template_inspect, srv);
  else if (del && strcmp(url, "/api/template") == 0)
    out = template_delete(srv, conn, &a);
  else if (get && strcmp(url, "/api/failures") == 0)
    out = listing(conn, &a, "failures", mp_failure_list, srv);
  else if (post && strcmp(url, "/api/failures/retry") == 0)
    out = failure_retry(srv, conn, &a);
  else
    out = mp_send_error(conn, 404, "not_found", "no endpoint %s %.200s",
                        method, url);
  args_free(&a);
  return out;
}
