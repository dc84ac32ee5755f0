/*
** The HTTP side of mastra-platform: libmicrohttpd in external-epoll mode
** on the mastra__loop, authentication, bodies, and the routes of
** platform-protocol.md sections 1 and 4 under /v1/{railway|e2b}/projects/
** {projectId} and /v1/projects/{projectId}, plus the exec WebSocket at
** /ws/exec.
**
** Paths reach us undecoded (an identity unescape callback), so that a
** percent-encoded NUL or slash in a key is seen for what it is.
*/
#define _GNU_SOURCE
#include "httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/epoll.h>
#include <time.h>

#include <microhttpd.h>

#include "bucket.h"
#include "sandbox.h"

#define MAX_SEGMENTS 8

typedef struct request {
  char *body;
  size_t len, cap, limit;
  int too_large;
  int responded;        /* a response was queued early (401, 413) */
  /* legacy POST /sandbox/:id/exec, while the connection is suspended */
  struct MHD_Connection *conn;
  mp_sandbox *sb;
  mastra__proc *proc;
  char *out, *err;
  size_t out_len, err_len;
  int truncated;
  int finished;
  int exit_code, timed_out;
} request;

/* {====== responses ====== */

static enum MHD_Result send_buffer(struct MHD_Connection *conn, int status,
                                   const char *type, void *data, size_t len) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
  enum MHD_Result rc;
  if (resp == NULL) {
    free(data);
    return MHD_NO;
  }
  if (type != NULL) MHD_add_response_header(resp, "Content-Type", type);
  rc = MHD_queue_response(conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return rc;
}

static enum MHD_Result send_json(struct MHD_Connection *conn, int status,
                                 cJSON *json) {
  char *text = cJSON_PrintUnformatted(json);
  cJSON_Delete(json);
  if (text == NULL) return MHD_NO;
  return send_buffer(conn, status, "application/json", text, strlen(text));
}

static enum MHD_Result send_empty(struct MHD_Connection *conn, int status) {
  return send_buffer(conn, status, NULL, NULL, 0);
}

/* {"error":{"message":...,"type":...}} */
int mp_send_error(struct MHD_Connection *conn, int status, const char *type,
                  const char *fmt, ...) {
  char msg[1024];
  cJSON *root = cJSON_CreateObject(), *e = cJSON_CreateObject();
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  cJSON_AddStringToObject(e, "message", msg);
  cJSON_AddStringToObject(e, "type", type);
  cJSON_AddItemToObject(root, "error", e);
  return (int)send_json(conn, status, root);
}

static void http_date(int64_t ms, char out[64]) {
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  strftime(out, 64, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

/* }====== */

/* {====== URL pieces ====== */

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decode s[0..n) into a new string; plus_space for query values.
** NULL on a bad escape; *out_len gets the length (NUL bytes included). */
static char *pct_decode(const char *s, size_t n, int plus_space,
                        size_t *out_len) {
  char *out = malloc(n + 1);
  size_t i, j = 0;
  if (out == NULL) return NULL;
  for (i = 0; i < n; i++) {
    if (s[i] == '%') {
      int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
      int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        free(out);
        return NULL;
      }
      out[j++] = (char)(hi * 16 + lo);
      i += 2;
    } else if (plus_space && s[i] == '+') {
      out[j++] = ' ';
    } else {
      out[j++] = s[i];
    }
  }
  out[j] = '\0';
  *out_len = j;
  return out;
}

static size_t identity_unescape(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls;
  (void)c;
  return strlen(s);
}

/* A query argument, decoded (malloc'd), or NULL when absent. */
static char *query_arg(struct MHD_Connection *conn, const char *name,
                       int *bad) {
  const char *raw =
      MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
  size_t len;
  char *v;
  if (raw == NULL) return NULL;
  v = pct_decode(raw, strlen(raw), 1, &len);
  if (v == NULL || strlen(v) != len) {
    free(v);
    *bad = 1;
    return NULL;
  }
  return v;
}

static int query_true(struct MHD_Connection *conn, const char *name) {
  const char *raw =
      MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
  return raw != NULL && strcmp(raw, "true") == 0;
}

/* }====== */

/* {====== control plane ====== */

static cJSON *sandbox_json(const mp_sandbox *sb) {
  char ts[32], prid[MP_ID_MAX + 8];
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", sb->id);
  snprintf(prid, sizeof prid, "proc_%s", sb->id + 4);
  cJSON_AddStringToObject(o, "providerResourceId", prid);
  cJSON_AddStringToObject(o, "status", sb->destroyed_ms ? "destroyed" : "ready");
  mp_iso8601(sb->created_ms, ts);
  cJSON_AddStringToObject(o, "createdAt", ts);
  if (sb->destroyed_ms) {
    mp_iso8601(sb->destroyed_ms, ts);
    cJSON_AddStringToObject(o, "destroyedAt", ts);
  } else {
    cJSON_AddNullToObject(o, "destroyedAt");
  }
  cJSON_AddNullToObject(o, "instanceUrl");
  cJSON_AddStringToObject(o, "environmentId", sb->environment);
  cJSON_AddStringToObject(o, "networkIsolation", sb->network);
  cJSON_AddBoolToObject(o, "restoredFromCheckpoint", sb->restored);
  return o;
}

/* The JSON object body of a request; NULL after answering 400. */
/* Whether the JSON text has a \u0000 escape inside a string: cJSON would
** silently cut the string there, so such bodies are refused. */
static int has_nul_escape(const char *s, size_t n) {
  size_t i;
  int in_string = 0;
  for (i = 0; i < n; i++) {
    if (!in_string) {
      if (s[i] == '"') in_string = 1;
    } else if (s[i] == '"') {
      in_string = 0;
    } else if (s[i] == '\\' && i + 1 < n) {
      if (s[i + 1] == 'u' && i + 5 < n && memcmp(s + i + 2, "0000", 4) == 0)
        return 1;
      i++; /* skip the escaped character */
    }
  }
  return 0;
}

static cJSON *parse_body(struct MHD_Connection *conn, request *r,
                         int required) {
  cJSON *json;
  if (r->len == 0 && !required) return cJSON_CreateObject();
  if (r->body != NULL && has_nul_escape(r->body, r->len)) {
    mp_send_error(conn, 400, "invalid_request",
                  "strings in the body may not contain NUL (\\u0000)");
    return NULL;
  }
  json = cJSON_ParseWithLength(r->body ? r->body : "", r->len);
  if (!cJSON_IsObject(json)) {
    cJSON_Delete(json);
    mp_send_error(conn, 400, "invalid_request",
                  "the request body must be a JSON object (malformed JSON?)");
    return NULL;
  }
  return json;
}

/* An object of strings, or NULL; *why says what is wrong. */
static int check_env(const cJSON *env, const char *field, char *why,
                     size_t n) {
  const cJSON *it;
  if (env == NULL || cJSON_IsNull(env)) return 0;
  if (!cJSON_IsObject(env)) {
    snprintf(why, n, "field '%s' must be an object of strings", field);
    return -1;
  }
  cJSON_ArrayForEach(it, env) {
    if (!cJSON_IsString(it) || it->string[0] == '\0'
        || strchr(it->string, '=') != NULL) {
      snprintf(why, n, "field '%s.%s' must be a string (and the name must"
               " be non-empty without '=')", field, it->string);
      return -1;
    }
  }
  return 0;
}

static const char *opt_string(const cJSON *body, const char *field,
                              char *why, size_t n, int *bad) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, field);
  if (v == NULL || cJSON_IsNull(v)) return NULL;
  if (!cJSON_IsString(v)) {
    snprintf(why, n, "field '%s' must be a string", field);
    *bad = 1;
    return NULL;
  }
  return v->valuestring;
}

static enum MHD_Result create_sandbox(mp_server *srv,
                                      struct MHD_Connection *conn,
                                      const char *project, request *r) {
  cJSON *body = parse_body(conn, r, 0);
  const cJSON *v, *env;
  mp_create_spec spec;
  mp_sandbox *sb;
  char why[512] = "", err[512];
  int bad = 0;
  if (body == NULL) return MHD_YES;
  memset(&spec, 0, sizeof spec);
  spec.project = project;
  spec.recovery_key = opt_string(body, "id", why, sizeof why, &bad);
  if (!bad) spec.environment = opt_string(body, "environmentId", why, sizeof why, &bad);
  if (!bad) spec.network = opt_string(body, "networkIsolation", why, sizeof why, &bad);
  if (!bad && (spec.environment == NULL || spec.environment[0] == '\0')) {
    snprintf(why, sizeof why, "field 'environmentId' is required");
    bad = 1;
  }
  if (!bad && spec.network != NULL && strcmp(spec.network, "ISOLATED") != 0
      && strcmp(spec.network, "PRIVATE") != 0) {
    snprintf(why, sizeof why, "field 'networkIsolation' must be \"ISOLATED\""
             " or \"PRIVATE\" (got \"%.64s\")", spec.network);
    bad = 1;
  }
  v = cJSON_GetObjectItemCaseSensitive(body, "idleTimeoutMinutes");
  if (!bad && v != NULL && !cJSON_IsNull(v)) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 525600) {
      snprintf(why, sizeof why, "field 'idleTimeoutMinutes' must be a number"
               " of minutes between 0 and 525600");
      bad = 1;
    } else {
      spec.idle_timeout_min = v->valuedouble;
    }
  }
  env = cJSON_GetObjectItemCaseSensitive(body, "env");
  if (!bad && check_env(env, "env", why, sizeof why) < 0) bad = 1;
  if (!bad && spec.recovery_key && strlen(spec.recovery_key) >= MP_NAME_MAX) {
    snprintf(why, sizeof why, "field 'id' is longer than %d bytes",
             MP_NAME_MAX - 1);
    bad = 1;
  }
  if (!bad && strlen(spec.environment) >= MP_NAME_MAX) {
    snprintf(why, sizeof why, "field 'environmentId' is too long");
    bad = 1;
  }
  if (bad) {
    cJSON_Delete(body);
    return (enum MHD_Result)mp_send_error(conn, 400, "invalid_request", "%s", why);
  }
  spec.env = cJSON_IsObject(env) ? env : NULL;
  if (mp_sandbox_create(srv, &spec, &sb, err, sizeof err) < 0) {
    cJSON_Delete(body);
    return (enum MHD_Result)mp_send_error(conn, 500, "internal_error",
                         "cannot create the sandbox: %s", err);
  }
  cJSON_Delete(body);
  mp_log("created %s (project %s, environment %s%s%s)", sb->id, sb->project,
         sb->environment, sb->restored ? ", restored from checkpoint" : "",
         sb->recovery_key[0] ? "" : ", no recovery key");
  return send_json(conn, 201, sandbox_json(sb));
}

static enum MHD_Result lease(mp_server *srv, struct MHD_Connection *conn,
                             mp_sandbox *sb) {
  char token[65], ts[32], prid[MP_ID_MAX + 8];
  int64_t expires;
  cJSON *o;
  if (mp_lease_mint(srv, sb, token, &expires) < 0)
    return (enum MHD_Result)mp_send_error(conn, 500, "internal_error", "cannot mint a lease");
  o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "provider", "railway");
  cJSON_AddStringToObject(o, "sandboxId", sb->id);
  snprintf(prid, sizeof prid, "proc_%s", sb->id + 4);
  cJSON_AddStringToObject(o, "providerResourceId", prid);
  cJSON_AddStringToObject(o, "jwt", token);
  cJSON_AddStringToObject(o, "wsEndpoint", srv->ws_url);
  cJSON_AddStringToObject(o, "subprotocol", "railway-shell");
  mp_iso8601(expires, ts);
  cJSON_AddStringToObject(o, "expiresAt", ts);
  return send_json(conn, 200, o);
}

static enum MHD_Result checkpoint(mp_server *srv, struct MHD_Connection *conn,
                                  mp_sandbox *sb, request *r, int del) {
  cJSON *body = parse_body(conn, r, 0);
  const cJSON *id;
  char name[64];
  int rc;
  if (body == NULL) return MHD_YES;
  id = cJSON_GetObjectItemCaseSensitive(body, "id");
  if (id != NULL && !cJSON_IsNull(id) && !cJSON_IsString(id)) {
    cJSON_Delete(body);
    return (enum MHD_Result)mp_send_error(conn, 400, "invalid_request",
                         "field 'id' must be a string");
  }
  if (cJSON_IsString(id) && sb->recovery_key[0] == '\0'
      && strlen(id->valuestring) < MP_NAME_MAX)
    snprintf(sb->recovery_key, sizeof sb->recovery_key, "%s", id->valuestring);
  cJSON_Delete(body);
  if (del) {
    if (sb->recovery_key[0] == '\0' || mp_checkpoint_delete(srv, sb) < 0)
      return (enum MHD_Result)mp_send_error(conn, 404, "not_found",
                           "sandbox %s has no checkpoint", sb->id);
    return send_empty(conn, 204);
  }
  if (sb->destroyed_ms)
    return (enum MHD_Result)mp_send_error(conn, 410, "gone", "sandbox %s was destroyed", sb->id);
  rc = mp_checkpoint_capture(srv, sb, name, 1);
  if (rc < 0)
    return (enum MHD_Result)mp_send_error(conn, 500, "internal_error",
                         "capturing the checkpoint of %s failed", sb->id);
  body = cJSON_CreateObject();
  cJSON_AddStringToObject(body, "checkpointName", name);
  cJSON_AddStringToObject(body, "status", rc == 0 ? "captured" : "skipped");
  return send_json(conn, 200, body);
}

/* {------ legacy POST /sandbox/:id/exec ------ */

#define LEGACY_OUTPUT_MAX (64u << 20)

static void legacy_append(request *r, char **buf, size_t *len,
                          const char *data, size_t n) {
  char *p;
  if (*len + n > LEGACY_OUTPUT_MAX) {
    r->truncated = 1;
    n = LEGACY_OUTPUT_MAX - *len;
  }
  if (n == 0) return;
  p = realloc(*buf, *len + n);
  if (p == NULL) {
    r->truncated = 1;
    return;
  }
  memcpy(p + *len, data, n);
  *buf = p;
  *len += n;
}

/* A JSON string of bytes that may hold NULs (cJSON strings cannot). */
static cJSON *json_bytes(const char *data, size_t len) {
  static const char hex[] = "0123456789abcdef";
  char *out = malloc(len * 6 + 3), *o = out;
  size_t i;
  cJSON *item;
  if (out == NULL) return cJSON_CreateString("");
  *o++ = '"';
  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)data[i];
    if (c == '"' || c == '\\') {
      *o++ = '\\';
      *o++ = (char)c;
    } else if (c < 0x20) {
      memcpy(o, "\\u00", 4);
      o[4] = hex[c >> 4];
      o[5] = hex[c & 15];
      o += 6;
    } else {
      *o++ = (char)c;
    }
  }
  *o++ = '"';
  *o = '\0';
  item = cJSON_CreateRaw(out);
  free(out);
  return item;
}

static void legacy_notify(mastra__proc *p, void *data) {
  request *r = data;
  legacy_append(r, &r->out, &r->out_len, p->out.data, p->out.len);
  mastra__proc_consumed(p, &p->out);
  legacy_append(r, &r->err, &r->err_len, p->err.data, p->err.len);
  mastra__proc_consumed(p, &p->err);
  if (!p->done || r->finished) return;
  r->finished = 1;
  r->exit_code = p->exit_code;
  r->timed_out = p->timed_out;
  mp_sandbox_exec_done(r->sb->srv, r->sb, p);
  r->proc = NULL;
  MHD_resume_connection(r->conn);
}

static enum MHD_Result legacy_exec(mp_server *srv, struct MHD_Connection *conn,
                                   mp_sandbox *sb, request *r) {
  cJSON *body, *res;
  const cJSON *cmd, *cwd, *tsec, *env;
  mp_exec_spec spec;
  char why[512] = "", err[512];
  if (r->finished) { /* resumed: answer */
    res = cJSON_CreateObject();
    if (r->timed_out) cJSON_AddNullToObject(res, "exitCode");
    else cJSON_AddNumberToObject(res, "exitCode", r->exit_code);
    cJSON_AddItemToObject(res, "stdout", json_bytes(r->out, r->out_len));
    cJSON_AddItemToObject(res, "stderr", json_bytes(r->err, r->err_len));
    cJSON_AddBoolToObject(res, "truncated", r->truncated);
    cJSON_AddBoolToObject(res, "timedOut", r->timed_out);
    cJSON_AddNullToObject(res, "sessionName");
    return send_json(conn, 200, res);
  }
  body = parse_body(conn, r, 1);
  if (body == NULL) return MHD_YES;
  cmd = cJSON_GetObjectItemCaseSensitive(body, "command");
  cwd = cJSON_GetObjectItemCaseSensitive(body, "cwd");
  tsec = cJSON_GetObjectItemCaseSensitive(body, "timeoutSec");
  env = cJSON_GetObjectItemCaseSensitive(body, "env");
  if (!cJSON_IsString(cmd) || cmd->valuestring[0] == '\0')
    snprintf(why, sizeof why, "field 'command' must be a non-empty string");
  else if (cwd != NULL && !cJSON_IsNull(cwd) && !cJSON_IsString(cwd))
    snprintf(why, sizeof why, "field 'cwd' must be a string");
  else if (tsec != NULL && !cJSON_IsNull(tsec)
           && (!cJSON_IsNumber(tsec) || tsec->valuedouble < 0))
    snprintf(why, sizeof why, "field 'timeoutSec' must be a number >= 0");
  else
    check_env(env, "env", why, sizeof why);
  if (why[0] != '\0') {
    cJSON_Delete(body);
    return (enum MHD_Result)mp_send_error(conn, 400, "invalid_request", "%s", why);
  }
  memset(&spec, 0, sizeof spec);
  spec.command = cmd->valuestring;
  spec.cwd = cJSON_IsString(cwd) ? cwd->valuestring : NULL;
  spec.env = cJSON_IsObject(env) ? env : NULL;
  spec.timeout_ms = cJSON_IsNumber(tsec) ? (uint64_t)(tsec->valuedouble * 1000) : 0;
  r->conn = conn;
  r->sb = sb;
  if (mp_sandbox_exec(srv, sb, &spec, legacy_notify, r, &r->proc, err,
                      sizeof err) < 0) {
    cJSON_Delete(body);
    return (enum MHD_Result)mp_send_error(conn, 400, "invalid_request",
                         "cannot run the command: %s", err);
  }
  cJSON_Delete(body);
  MHD_suspend_connection(conn);
  return MHD_YES;
}

/* }------ */

static enum MHD_Result sandbox_routes(mp_server *srv,
                                      struct MHD_Connection *conn,
                                      const char *method, const char *project,
                                      char **seg, int nseg, request *r) {
  mp_sandbox *sb;
  if (nseg == 1) {
    if (strcmp(method, "POST") == 0)
      return create_sandbox(srv, conn, project, r);
    return (enum MHD_Result)mp_send_error(conn, 405, "invalid_request",
                         "use POST to create a sandbox");
  }
  sb = mp_sandbox_lookup(srv, project, seg[1]);
  if (sb == NULL)
    return (enum MHD_Result)mp_send_error(conn, 404, "not_found", "sandbox %.64s not found",
                         seg[1]);
  if (nseg == 2) {
    if (strcmp(method, "GET") == 0) return send_json(conn, 200, sandbox_json(sb));
    if (strcmp(method, "DELETE") == 0) {
      if (!sb->destroyed_ms) mp_log("destroying %s", sb->id);
      mp_sandbox_destroy(srv, sb);
      return send_empty(conn, 204);
    }
  } else if (nseg == 3 && strcmp(seg[2], "exec-lease") == 0
             && strcmp(method, "POST") == 0) {
    if (sb->destroyed_ms)
      return (enum MHD_Result)mp_send_error(conn, 410, "gone", "sandbox %s was destroyed",
                           sb->id);
    return lease(srv, conn, sb);
  } else if (nseg == 3 && strcmp(seg[2], "checkpoint") == 0
             && (strcmp(method, "POST") == 0 || strcmp(method, "DELETE") == 0)) {
    return checkpoint(srv, conn, sb, r, method[0] == 'D');
  } else if (nseg == 3 && strcmp(seg[2], "exec") == 0
             && strcmp(method, "POST") == 0) {
    if (sb->destroyed_ms && !r->finished)
      return (enum MHD_Result)mp_send_error(conn, 410, "gone", "sandbox %s was destroyed",
                           sb->id);
    return legacy_exec(srv, conn, sb, r);
  }
  return (enum MHD_Result)mp_send_error(conn, 404, "not_found",
                       "no route for %s /sandbox/%.64s%s%.32s", method, seg[1],
                       nseg > 2 ? "/" : "", nseg > 2 ? seg[2] : "");
}

/* }====== */

/* {====== bucket routes ====== */

static enum MHD_Result bucket_error(struct MHD_Connection *conn, int rc,
                                    const char *key, const char *err) {
  switch (rc) {
  case MP_BUCKET_NOT_FOUND:
    return (enum MHD_Result)mp_send_error(conn, 404, "not_found", "object '%.200s' not found",
                         key);
  case MP_BUCKET_EXISTS:
    return (enum MHD_Result)mp_send_error(conn, 412, "invalid_request",
                         "object '%.200s' already exists (If-None-Match: *)",
                         key);
  case MP_BUCKET_BAD_KEY:
    return (enum MHD_Result)mp_send_error(conn, 400, "invalid_request", "bad key '%.200s'", key);
  default:
    return (enum MHD_Result)mp_send_error(conn, 500, "internal_error", "storage error: %s",
                         err && err[0] ? err : "unknown");
  }
}

static enum MHD_Result list_objects(mp_server *srv,
                                    struct MHD_Connection *conn,
                                    const char *project, const char *bucket,
                                    const char *key) {
  int bad = 0, rc;
  char *prefix = query_arg(conn, "prefix", &bad);
  char *delim = query_arg(conn, "delimiter", &bad);
  mp_listing l;
  cJSON *root, *contents, *prefixes;
  size_t i;
  if (bad) {
    free(prefix);
    free(delim);
    return (enum MHD_Result)mp_send_error(conn, 400, "invalid_request",
                         "bad 'prefix' or 'delimiter' (escapes or NUL)");
  }
  if (prefix == NULL && key[0] != '\0') prefix = strdup(key);
  memset(&l, 0, sizeof l);
  rc = mp_bucket_list(srv->buckets, project, bucket, prefix ? prefix : "",
                      delim, &l);
  free(prefix);
  free(delim);
  if (rc < 0) return bucket_error(conn, rc, key, NULL);
  root = cJSON_CreateObject();
  contents = cJSON_AddArrayToObject(root, "contents");
  prefixes = cJSON_AddArrayToObject(root, "commonPrefixes");
  for (i = 0; i < l.ncontents; i++) {
    char ts[32];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", l.contents[i].key);
    cJSON_AddNumberToObject(o, "size", (double)l.contents[i].size);
    mp_iso8601(l.contents[i].mtime_ms, ts);
    cJSON_AddStringToObject(o, "lastModified", ts);
    cJSON_AddItemToArray(contents, o);
  }
  for (i = 0; i < l.nprefixes; i++)
    cJSON_AddItemToArray(prefixes, cJSON_CreateString(l.prefixes[i]));
  mp_listing_free(&l);
  return send_json(conn, 200, root);
}

static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)cls;
  (void)pos;
  (void)buf;
  (void)max;
  return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* Queue resp (the object's bytes, or only its size for HEAD) with the
** object's Last-Modified and Content-Type. Frees info. */
static enum MHD_Result queue_object(struct MHD_Connection *conn,
                                    struct MHD_Response *resp,
                                    mp_object_info *info) {
  char date[64];
  enum MHD_Result rc;
  if (resp == NULL) {
    mp_object_info_free(info);
    return MHD_NO;
  }
  http_date(info->mtime_ms, date);
  MHD_add_response_header(resp, "Last-Modified", date);
  MHD_add_response_header(resp, "Content-Type", info->content_type[0]
                          ? info->content_type : "application/octet-stream");
  mp_object_info_free(info);
  rc = MHD_queue_response(conn, 200, resp);
  MHD_destroy_response(resp);
  return rc;
}

static enum MHD_Result head_object(mp_server *srv, struct MHD_Connection *conn,
                                   const char *project, const char *bucket,
                                   const char *key) {
  mp_object_info info;
  int st;
  memset(&info, 0, sizeof info);
  st = mp_bucket_head(srv->buckets, project, bucket, key, &info);
  if (st < 0) return bucket_error(conn, st, key, NULL);
  /* HEAD: the size is announced, the reader is never called */
  return queue_object(conn, MHD_create_response_from_callback(
                                info.size, 4096, no_body, NULL, NULL),
                      &info);
}

/* a GET's object, mapped: the page cache's pages go to the socket without a
** copy in between. Safe because the store never changes an object file in
** place (a PUT renames a new file over it, a DELETE unlinks it): the
** mapping keeps the bytes that were current when the GET began. */
typedef struct {
  void *base;
  size_t len;
} mapping;

static void unmap(void *cls) {
  mapping *m = cls;
  munmap(m->base, m->len);
  free(m);
}

static enum MHD_Result get_object(mp_server *srv, struct MHD_Connection *conn,
                                  const char *project, const char *bucket,
                                  const char *key) {
  mp_object_info info;
  struct MHD_Response *resp;
  mapping *m;
  uint64_t off;
  int fd, st;
  st = mp_bucket_open_read(srv->buckets, project, bucket, key, &fd, &off, &info);
  if (st < 0) return bucket_error(conn, st, key, NULL);
  m = malloc(sizeof *m);
  if (m == NULL || info.size > SIZE_MAX - off) goto fail;
  m->len = (size_t)(off + info.size);
  m->base = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m->base == MAP_FAILED) goto fail;
  close(fd);
  resp = MHD_create_response_from_buffer_with_free_callback_cls(
      (size_t)info.size, (char *)m->base + off, unmap, m);
  if (resp == NULL) unmap(m);
  return queue_object(conn, resp, &info);
fail:
  free(m);
  close(fd);
  mp_object_info_free(&info);
  return (enum MHD_Result)mp_send_error(conn, 500, "internal_error",
                                        "cannot read object %s", key);
}

static enum MHD_Result post_object(mp_server *srv, struct MHD_Connection *conn,
                                   const char *project, const char *bucket,
                                   const char *key, request *r) {
  const char *op = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "op");
  char err[512] = "";
  int rc;
  if (op != NULL && strcmp(op, "mkdir") == 0) {
    rc = mp_bucket_mkdir(srv->buckets, project, bucket, key, err, sizeof err);
    if (rc < 0) return bucket_error(conn, rc, key, err);
    return send_empty(conn, 201);
  }
  if (op != NULL && (strcmp(op, "copy") == 0 || strcmp(op, "rename") == 0)) {
    cJSON *body = parse_body(conn, r, 1);
    const cJSON *dest;
    const char *why;
    if (body == NULL) return MHD_YES;
    dest = cJSON_GetObjectItemCaseSensitive(body, "destination");
    if (!cJSON_IsString(dest) || dest->valuestring[0] == '\0') {
      cJSON_Delete(body);
      return (enum MHD_Result)mp_send_error(conn, 400, "invalid_request",
                           "field 'destination' must be a non-empty key");
    }
    why = mp_bucket_key_check(dest->valuestring, strlen(dest->valuestring));
    if (why != NULL) {
      rc = mp_send_error(conn, 400, "invalid_request",
                         "field 'destination': %s", why);
      cJSON_Delete(body);
      return rc;
    }
    rc = mp_bucket_copy(srv->buckets, project, bucket, key,
                        dest->valuestring, op[0] == 'r', err, sizeof err);
    cJSON_Delete(body);
    if (rc < 0) return bucket_error(conn, rc, key, err);
    return send_empty(conn, 204);
  }
  return (enum MHD_Result)mp_send_error(conn, 400, "invalid_request",
                       "POST on an object needs ?op=copy, ?op=rename or"
                       " ?op=mkdir");
}

static enum MHD_Result fs_routes(mp_server *srv, struct MHD_Connection *conn,
                                 const char *method, const char *project,
                                 const char *raw_bucket, const char *raw_key,
                                 request *r) {
  size_t blen, klen;
  char *bucket = pct_decode(raw_bucket, strlen(raw_bucket), 0, &blen);
  char *key = pct_decode(raw_key, strlen(raw_key), 0, &klen);
  const char *why = NULL;
  char err[512] = "";
  enum MHD_Result out;
  int rc;
  if (bucket == NULL || key == NULL) {
    why = "bad percent-escape in the path";
  } else if (strlen(bucket) != blen || (why = mp_bucket_name_check(bucket))) {
    if (why == NULL) why = "NUL byte in the bucket name";
  } else if (klen > 0 && (why = mp_bucket_key_check(key, klen)) != NULL) {
  }
  if (why != NULL) {
    out = (enum MHD_Result)mp_send_error(conn, 400, "invalid_request", "%s", why);
    goto done;
  }
  if (strcmp(method, "GET") == 0) {
    if (klen == 0 || key[klen - 1] == '/')
      out = list_objects(srv, conn, project, bucket, key);
    else
      out = get_object(srv, conn, project, bucket, key);
  } else if (strcmp(method, "HEAD") == 0) {
    out = head_object(srv, conn, project, bucket, key);
  } else if (klen == 0) {
    out = (enum MHD_Result)mp_send_error(conn, 400, "invalid_request",
                        "%s needs an object key", method);
  } else if (strcmp(method, "PUT") == 0) {
    const char *inm =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "If-None-Match");
    const char *type =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
    rc = mp_bucket_put(srv->buckets, project, bucket, key, r->body, r->len,
                       type ? type : "", inm != NULL && strcmp(inm, "*") == 0,
                       err, sizeof err);
    out = rc < 0 ? bucket_error(conn, rc, key, err) : send_empty(conn, 200);
  } else if (strcmp(method, "DELETE") == 0) {
    rc = mp_bucket_delete(srv->buckets, project, bucket, key,
                          query_true(conn, "recursive"));
    out = rc < 0 ? bucket_error(conn, rc, key, NULL) : send_empty(conn, 204);
  } else if (strcmp(method, "POST") == 0) {
    out = post_object(srv, conn, project, bucket, key, r);
  } else {
    out = (enum MHD_Result)mp_send_error(conn, 405, "invalid_request",
                        "method %s is not allowed on objects", method);
  }
done:
  free(bucket);
  free(key);
  return out;
}

/* }====== */

/* {====== dispatch ====== */

static int authorized(mp_server *srv, struct MHD_Connection *conn) {
  const char *h =
      MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
  if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0) return 0;
  h += 7;
  while (*h == ' ') h++;
  return mastra__secure_equal(h, strlen(h), srv->token, srv->token_len);
}

/* The second offered subprotocol is the lease token. */
static enum MHD_Result ws_exec(mp_server *srv, struct MHD_Connection *conn) {
  const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                              "Sec-WebSocket-Protocol");
  const char *comma, *tok;
  size_t len;
  mp_sandbox *sb;
  if (h == NULL)
    return (enum MHD_Result)mp_send_error(conn, 401, "authentication_error",
                         "offer the subprotocols 'railway-shell, <lease jwt>'");
  while (*h == ' ') h++;
  comma = strchr(h, ',');
  if (comma == NULL || (size_t)(comma - h) != 13
      || strncmp(h, "railway-shell", 13) != 0)
    return (enum MHD_Result)mp_send_error(conn, 401, "authentication_error",
                         "the first subprotocol must be 'railway-shell',"
                         " followed by the lease jwt");
  tok = comma + 1;
  while (*tok == ' ') tok++;
  len = strcspn(tok, ", ");
  sb = mp_lease_check(srv, tok, len);
  if (sb == NULL)
    return (enum MHD_Result)mp_send_error(conn, 401, "authentication_error",
                         "the lease is unknown or expired, or its sandbox was"
                         " destroyed: mint a new one with POST"
                         " /sandbox/{id}/exec-lease");
  return (enum MHD_Result)mp_ws_exec_upgrade(srv, conn, sb);
}

static enum MHD_Result route(mp_server *srv, struct MHD_Connection *conn,
                             const char *url, const char *method,
                             request *r) {
  char path[8192];
  char *seg[MAX_SEGMENTS + 1];
  const char *project, *rest;
  int nseg = 0, i;
  size_t plen;
  char *p, *pdec;
  if (strcmp(url, "/ws/exec") == 0) return ws_exec(srv, conn);
  /* /v1/{railway|e2b}/projects/{pid}/... or /v1/projects/{pid}/... */
  if (strncmp(url, "/v1/railway/projects/", 21) == 0) rest = url + 21;
  else if (strncmp(url, "/v1/e2b/projects/", 17) == 0) rest = url + 17;
  else if (strncmp(url, "/v1/projects/", 13) == 0) rest = url + 13;
  else
    return (enum MHD_Result)mp_send_error(conn, 404, "not_found", "no route for %s %.200s",
                         method, url);
  plen = strcspn(rest, "/");
  if (plen == 0 || plen >= MP_NAME_MAX)
    return (enum MHD_Result)mp_send_error(conn, 404, "not_found", "missing project id");
  pdec = pct_decode(rest, plen, 0, &plen);
  if (pdec == NULL || strlen(pdec) != plen || mp_bucket_name_check(pdec)) {
    free(pdec);
    return (enum MHD_Result)mp_send_error(conn, 400, "invalid_request", "bad project id");
  }
  project = pdec;
  rest += strcspn(rest, "/");
  if (strncmp(rest, "/fs/", 4) == 0) {
    const char *b = rest + 4;
    size_t blen = strcspn(b, "/");
    char bucket[MP_NAME_MAX * 3];
    enum MHD_Result out;
    if (blen == 0 || blen >= sizeof bucket) {
      free(pdec);
      return (enum MHD_Result)mp_send_error(conn, 400, "invalid_request",
                           "missing or too long bucket name");
    }
    memcpy(bucket, b, blen);
    bucket[blen] = '\0';
    b += blen;
    if (*b == '/') b++;
    out = fs_routes(srv, conn, method, project, bucket, b, r);
    free(pdec);
    return out;
  }
  if (strlen(rest) >= sizeof path) {
    free(pdec);
    return (enum MHD_Result)mp_send_error(conn, 414, "invalid_request", "path too long");
  }
  strcpy(path, rest);
  for (p = strtok(path, "/"); p != NULL && nseg < MAX_SEGMENTS;
       p = strtok(NULL, "/"))
    seg[nseg++] = p;
  for (i = 0; i < nseg; i++) {
    size_t n;
    char *d = pct_decode(seg[i], strlen(seg[i]), 0, &n);
    if (d == NULL || strlen(d) != n) {
      free(d);
      free(pdec);
      return (enum MHD_Result)mp_send_error(conn, 400, "invalid_request",
                           "bad escape in the path");
    }
    strcpy(seg[i], d); /* decoding never lengthens */
    free(d);
  }
  if (nseg >= 1 && strcmp(seg[0], "sandbox") == 0) {
    enum MHD_Result out =
        sandbox_routes(srv, conn, method, project, seg, nseg, r);
    free(pdec);
    return out;
  }
  free(pdec);
  return (enum MHD_Result)mp_send_error(conn, 404, "not_found", "no route for %s %.200s",
                       method, url);
}

static size_t body_limit(mp_server *srv, const char *url, const char *method) {
  if (strcmp(method, "PUT") == 0 && strstr(url, "/fs/") != NULL)
    return srv->max_object;
  return srv->max_body;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls) {
  mp_server *srv = cls;
  request *r = *req_cls;
  (void)version;
  if (r == NULL) {
    const char *cl;
    r = calloc(1, sizeof *r);
    if (r == NULL) return MHD_NO;
    *req_cls = r;
    srv->last_request_ms = mastra__wall_ms();
    r->limit = body_limit(srv, url, method);
    if (strcmp(url, "/ws/exec") != 0 && !authorized(srv, conn)) {
      r->responded = 1;
      return (enum MHD_Result)mp_send_error(conn, 401, "authentication_error",
                           "missing or wrong 'Authorization: Bearer <token>'");
    }
    cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    if (cl != NULL && strtoull(cl, NULL, 10) > r->limit) {
      r->responded = 1;
      return (enum MHD_Result)mp_send_error(conn, 413, "invalid_request",
                           "the body is larger than %zu bytes", r->limit);
    }
    return MHD_YES;
  }
  if (r->responded) {
    *upload_size = 0;
    return MHD_YES;
  }
  if (*upload_size > 0) {
    size_t n = *upload_size;
    *upload_size = 0;
    if (r->too_large || r->len + n > r->limit) {
      r->too_large = 1;
      return MHD_YES;
    }
    if (r->len + n > r->cap) {
      size_t cap = r->cap ? r->cap : 4096;
      char *b;
      while (cap < r->len + n) cap *= 2;
      b = realloc(r->body, cap);
      if (b == NULL) return MHD_NO;
      r->body = b;
      r->cap = cap;
    }
    memcpy(r->body + r->len, upload, n);
    r->len += n;
    return MHD_YES;
  }
  if (r->too_large)
    return (enum MHD_Result)mp_send_error(conn, 413, "invalid_request",
                         "the body is larger than %zu bytes", r->limit);
  return route(srv, conn, url, method, r);
}

static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **req_cls, enum MHD_RequestTerminationCode why) {
  request *r = *req_cls;
  (void)cls;
  (void)conn;
  (void)why;
  if (r == NULL) return;
  if (r->proc != NULL) { /* the client went away during a legacy exec */
    mastra__proc *p = r->proc;
    r->proc = NULL;
    r->finished = 1;
    mp_sandbox_exec_done(r->sb->srv, r->sb, p);
  }
  free(r->body);
  free(r->out);
  free(r->err);
  free(r);
  *req_cls = NULL;
}

/* }====== */

/* {====== the daemon on the loop ====== */

static void on_httpd(mastra__io *io, uint32_t revents) {
  mp_server *srv = io->data;
  (void)revents;
  MHD_run(srv->httpd);
}

int mp_http_start(mp_server *srv, const char *listen, char *err,
                  size_t errlen) {
  struct sockaddr_storage ss;
  struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
  char host[64]; /* an IPv4 or IPv6 address */
  const char *colon = strrchr(listen, ':');
  const union MHD_DaemonInfo *info;
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE
                   | MHD_USE_ITC;
  long port;
  size_t hlen;
  memset(&ss, 0, sizeof ss);
  if (colon == NULL) {
    snprintf(err, errlen, "--listen wants HOST:PORT (got '%s')", listen);
    return -1;
  }
  port = strtol(colon + 1, NULL, 10);
  hlen = (size_t)(colon - listen);
  if (port < 0 || port > 65535 || hlen == 0 || hlen >= sizeof host) {
    snprintf(err, errlen, "--listen wants HOST:PORT (got '%s')", listen);
    return -1;
  }
  memcpy(host, listen, hlen);
  host[hlen] = '\0';
  if (host[0] == '[' && host[hlen - 1] == ']') {
    memmove(host, host + 1, hlen - 2);
    host[hlen - 2] = '\0';
  }
  if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons((uint16_t)port);
  } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
    flags |= MHD_USE_IPv6;
  } else {
    snprintf(err, errlen, "--listen: '%s' is not an IP address", host);
    return -1;
  }
  srv->httpd = MHD_start_daemon(
      flags, (uint16_t)port, NULL, NULL, on_request, srv,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)4000,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
      MHD_OPTION_UNESCAPE_CALLBACK, identity_unescape, NULL,
      MHD_OPTION_END);
  if (srv->httpd == NULL) {
    snprintf(err, errlen, "cannot listen on %s: %s", listen, strerror(errno));
    return -1;
  }
  info = MHD_get_daemon_info(srv->httpd, MHD_DAEMON_INFO_BIND_PORT);
  port = info ? info->port : port;
  if (ss.ss_family == AF_INET6) {
    snprintf(srv->base_url, sizeof srv->base_url, "http://[%s]:%ld", host, port);
    snprintf(srv->ws_url, sizeof srv->ws_url, "ws://[%s]:%ld/ws/exec", host, port);
  } else {
    snprintf(srv->base_url, sizeof srv->base_url, "http://%s:%ld", host, port);
    snprintf(srv->ws_url, sizeof srv->ws_url, "ws://%s:%ld/ws/exec", host, port);
  }
  info = MHD_get_daemon_info(srv->httpd, MHD_DAEMON_INFO_EPOLL_FD);
  mastra__io_init(srv->loop, &srv->httpd_io, info->epoll_fd, on_httpd, srv);
  if (mastra__io_start(&srv->httpd_io, EPOLLIN) < 0) {
    snprintf(err, errlen, "cannot watch the HTTP daemon");
    return -1;
  }
  return 0;
}

/* Milliseconds until MHD needs a call, -1: none. */
int mp_http_timeout(mp_server *srv) {
  MHD_UNSIGNED_LONG_LONG t;
  if (MHD_get_timeout(srv->httpd, &t) != MHD_YES) return -1;
  return t > 60000 ? 60000 : (int)t;
}

void mp_http_run(mp_server *srv) { MHD_run(srv->httpd); }

void mp_http_stop(mp_server *srv) {
  if (srv->httpd == NULL) return;
  mastra__io_stop(&srv->httpd_io);
  MHD_stop_daemon(srv->httpd);
  srv->httpd = NULL;
}

/* }====== */
