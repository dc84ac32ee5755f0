/*
** The HTTP routes of resumable execs (routes_exec.h; docs/platform.md
** "Resumable execs"), for clients that poll and for people:
**
**   POST   /sandbox/{id}/execs                 Idempotency-Key: <exec_id>
**   GET    /sandbox/{id}/execs/{exec_id}
**   GET    /sandbox/{id}/execs/{exec_id}/output?stream=&offset=&limit=
**   POST   /sandbox/{id}/execs/{exec_id}/signal  {"signal":"TERM"|"KILL"}
**   DELETE /sandbox/{id}/execs/{exec_id}
*/
#include "api/routes_exec.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/exec_request.h"
#include "http/respond.h"
#include "sandbox/execs.h"
#include "util/log.h"

#define OUTPUT_LIMIT_MAX (1u << 20) /* bytes of one GET .../output */
#define WAIT_MS_MAX 60000           /* the longest ?wait_ms= */

/* a GET .../output?wait_ms= parked until output passes its offset */
typedef struct output_wait {
  mp_exec_poll poll; /* first */
  struct MHD_Connection *conn;
  mastra__timer timer;
  int suspended;
} output_wait;

static void wake(output_wait *w) {
  mastra__timer_stop(&w->timer);
  if (w->suspended) {
    w->suspended = 0;
    MHD_resume_connection(w->conn); /* the route answers again, at once */
  }
}

static void on_poll_ready(mp_exec_poll *p) {
  wake((output_wait *)p);
}

static void on_wait_timer(mastra__timer *t) {
  output_wait *w = t->data;
  mp_exec_poll_cancel(&w->poll);
  wake(w);
}

static void output_wait_free(void *state) {
  output_wait *w = state;
  mastra__timer_stop(&w->timer);
  mp_exec_poll_cancel(&w->poll);
  free(w);
}

static cJSON *exec_json(const mp_exec *e) {
  static const char *const names[2] = {"stdout", "stderr"};
  cJSON *o = cJSON_CreateObject();
  char ts[32];
  int i;
  cJSON_AddStringToObject(o, "exec_id", e->id);
  cJSON_AddStringToObject(o, "state", mp_exec_state_name(e));
  if (e->state == MP_EXEC_EXITED) {
    cJSON_AddNumberToObject(o, "exit_code", e->exit_code);
    cJSON_AddStringToObject(o, "reason", e->reason);
  }
  mp_iso8601(e->started_ms, ts);
  cJSON_AddStringToObject(o, "startedAt", ts);
  if (e->state != MP_EXEC_RUNNING) {
    mp_iso8601(e->ended_ms, ts);
    cJSON_AddStringToObject(o, "endedAt", ts);
  }
  cJSON_AddStringToObject(o, "fingerprint", e->fingerprint);
  for (i = 0; i < 2; i++) {
    cJSON *r = cJSON_AddObjectToObject(o, names[i]);
    cJSON_AddNumberToObject(r, "start", (double)e->spool[i].start);
    cJSON_AddNumberToObject(r, "end", (double)e->spool[i].end);
  }
  return o;
}

/* a query argument that is an integer >= 0 (absent: dflt); -1 if bad */
static long long query_uint(struct MHD_Connection *conn, const char *name,
                            long long dflt) {
  const char *v = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND,
                                              name);
  char *end;
  long long n;
  if (v == NULL) return dflt;
  n = strtoll(v, &end, 10);
  if (*v == '\0' || *end != '\0' || n < 0) return -1;
  return n;
}

static void range_headers(struct MHD_Response *resp, const mp_exec *e,
                          int stream) {
  char n[32];
  snprintf(n, sizeof n, "%llu", (unsigned long long)e->spool[stream].start);
  MHD_add_response_header(resp, "x-mastra-output-start", n);
  snprintf(n, sizeof n, "%llu", (unsigned long long)e->spool[stream].end);
  MHD_add_response_header(resp, "x-mastra-output-end", n);
  MHD_add_response_header(resp, "x-mastra-exec-state", mp_exec_state_name(e));
}

static enum MHD_Result output(mp_server *srv, struct MHD_Connection *conn,
                               mp_exec *e, mp_request *r) {
  const char *name = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND,
                                                 "stream");
  long long off = query_uint(conn, "offset", 0);
  long long limit = query_uint(conn, "limit", OUTPUT_LIMIT_MAX);
  struct MHD_Response *resp;
  enum MHD_Result ret;
  int stream, status = 200;
  char *buf = NULL;
  size_t len = 0;
  if (name == NULL || (strcmp(name, "stdout") != 0
                       && strcmp(name, "stderr") != 0))
    return mp_send_error(conn, 400, "invalid_request",
                         "query 'stream' must be stdout or stderr");
  if (off < 0 || limit <= 0)
    return mp_send_error(conn, 400, "invalid_request",
                         "query 'offset' must be an integer >= 0 and"
                         " 'limit' one > 0");
  stream = strcmp(name, "stdout") == 0 ? MP_EXEC_STDOUT : MP_EXEC_STDERR;
  if (limit > OUTPUT_LIMIT_MAX) limit = OUTPUT_LIMIT_MAX;
  if ((uint64_t)off < e->spool[stream].start
      || (uint64_t)off > e->spool[stream].end) {
    char msg[200];
    int n = snprintf(msg, sizeof msg, "{\"error\":{\"message\":\"offset %lld"
                     " is outside the retained %s [%llu, %llu)\",\"type\":"
                     "\"range_not_satisfiable\"}}", off, name,
                     (unsigned long long)e->spool[stream].start,
                     (unsigned long long)e->spool[stream].end);
    resp = MHD_create_response_from_buffer((size_t)n, msg,
                                           MHD_RESPMEM_MUST_COPY);
    if (resp == NULL) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    range_headers(resp, e, stream);
    ret = MHD_queue_response(conn, 416, resp);
    MHD_destroy_response(resp);
    return ret;
  }
  if ((uint64_t)off == e->spool[stream].end && e->state == MP_EXEC_RUNNING) {
    long long wait = query_uint(conn, "wait_ms", 0);
    if (wait < 0)
      return mp_send_error(conn, 400, "invalid_request", "query 'wait_ms'"
                           " must be an integer >= 0 (at most 60000)");
    if (wait > 0 && r->state == NULL && !srv->stopping) {
      /* a long poll: answered when the stream passes off, the exec ends,
      ** or wait_ms pass (then 204) */
      output_wait *w = calloc(1, sizeof *w);
      if (w == NULL)
        return mp_send_error(conn, 500, "internal_error", "out of memory");
      w->conn = conn;
      w->poll.stream = stream;
      w->poll.off = (uint64_t)off;
      w->poll.ready = on_poll_ready;
      mastra__timer_init(srv->loop, &w->timer, on_wait_timer, w);
      mastra__timer_start(&w->timer, (uint64_t)(wait < WAIT_MS_MAX
                                                ? wait : WAIT_MS_MAX));
      mp_exec_poll_add(e, &w->poll);
      r->state = w;
      r->state_free = output_wait_free;
      w->suspended = 1;
      MHD_suspend_connection(conn);
      return MHD_YES;
    }
  }
  if ((uint64_t)off == e->spool[stream].end) {
    if (e->state == MP_EXEC_RUNNING) status = 204; /* nothing new yet */
  } else {
    ssize_t n;
    len = (size_t)limit;
    if (len > e->spool[stream].end - (uint64_t)off)
      len = (size_t)(e->spool[stream].end - (uint64_t)off);
    buf = malloc(len);
    if (buf == NULL)
      return mp_send_error(conn, 500, "internal_error", "out of memory");
    n = mp_exec_read(e, stream, (uint64_t)off, buf, len);
    if (n < 0) {
      free(buf);
      return mp_send_error(conn, 500, "internal_error",
                           "cannot read the output of exec %s", e->id);
    }
    len = (size_t)n;
  }
  resp = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
  if (resp == NULL) {
    free(buf);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
  range_headers(resp, e, stream);
  ret = MHD_queue_response(conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result signal_exec(struct MHD_Connection *conn, mp_exec *e,
                                   mp_request *r) {
  cJSON *body = mp_request_json(conn, r, 1), *o;
  const cJSON *sig, *it;
  int n;
  if (body == NULL) return MHD_YES;
  cJSON_ArrayForEach(it, body) {
    if (strcmp(it->string, "signal") != 0) {
      mp_send_error(conn, 400, "invalid_request", "unknown field '%.60s':"
                    " the body is {\"signal\":\"TERM\"|\"KILL\"}", it->string);
      cJSON_Delete(body);
      return MHD_YES;
    }
  }
  sig = cJSON_GetObjectItemCaseSensitive(body, "signal");
  n = !cJSON_IsString(sig) ? 0
      : strcmp(sig->valuestring, "TERM") == 0 ? SIGTERM
      : strcmp(sig->valuestring, "KILL") == 0 ? SIGKILL : 0;
  cJSON_Delete(body);
  if (n == 0)
    return mp_send_error(conn, 400, "invalid_request",
                         "field 'signal' must be \"TERM\" or \"KILL\"");
  o = exec_json(e);
  cJSON_AddBoolToObject(o, "signaled", mp_exec_signal(e, n));
  return mp_send_json(conn, 200, o);
}

static enum MHD_Result start(struct MHD_Connection *conn, mp_sandbox *sb,
                             mp_request *r) {
  static const char *const known[] = {
      MP_EXEC_FIELD_COMMAND, MP_EXEC_FIELD_CWD, MP_EXEC_FIELD_ENV,
      MP_EXEC_FIELD_DETACH, MP_EXEC_FIELD_OVERFLOW};
  const char *key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                "Idempotency-Key");
  cJSON *body;
  const cJSON *it;
  mp_exec_spec spec;
  mp_exec *e;
  uint64_t detach_ms;
  char fp[65], err[600];
  size_t k;
  int truncate;
  if (key == NULL || !mp_exec_id_valid(key))
    return mp_send_error(conn, 400, "invalid_request",
                         "header Idempotency-Key must name the exec: 1-128"
                         " characters of [A-Za-z0-9._:-], such as a UUID");
  body = mp_request_json(conn, r, 1);
  if (body == NULL) return MHD_YES;
  cJSON_ArrayForEach(it, body) {
    for (k = 0; k < sizeof known / sizeof *known; k++)
      if (strcmp(it->string, known[k]) == 0) break;
    if (k == sizeof known / sizeof *known) {
      mp_send_error(conn, 400, "invalid_request", "unknown field '%.60s':"
                    " the body takes command, cwd, env,"
                    " detach_timeout_ms and overflow", it->string);
      cJSON_Delete(body);
      return MHD_YES;
    }
  }
  if (mp_exec_resume_parse(body, NULL, &detach_ms, &truncate, err,
                           sizeof err) < 0) {
    cJSON_Delete(body);
    return mp_send_error(conn, 400, "invalid_request", "%s", err);
  }
  if (mp_exec_request_parse(body, NULL, 0, &spec, err, sizeof err) < 0) {
    cJSON_Delete(body);
    return mp_send_error(conn, 400, "invalid_request", "%s", err);
  }
  spec.stdin_pipe = 1; /* as a WebSocket start: the same fingerprint */
  mp_exec_fingerprint(&spec, fp);
  e = mp_exec_find(sb, key);
  if (e != NULL) {
    cJSON_Delete(body);
    if (strcmp(e->fingerprint, fp) != 0)
      return mp_send_error(conn, 422, "exec_id_conflict",
                           "exec '%s' was started with another request; use"
                           " a new Idempotency-Key for a new command", key);
    return mp_send_json(conn, 200, exec_json(e));
  }
  err[0] = '\0';
  if (mp_exec_start(sb, key, fp, &spec, detach_ms, &e, err, sizeof err)
      < 0) {
    cJSON_Delete(body);
    return mp_send_error(conn, 400, "invalid_request", "cannot start: %s",
                         err[0] ? err : "unknown error");
  }
  cJSON_Delete(body);
  e->truncate_head = (unsigned)truncate;
  mp_exec_unattended(e); /* nobody is attached: the detach timeout runs */
  return mp_send_json(conn, 201, exec_json(e));
}

enum MHD_Result mp_routes_exec(mp_server *srv, struct MHD_Connection *conn,
                               const char *method, mp_sandbox *sb,
                               char **seg, int nseg, mp_request *r) {
  mp_exec *e;
  if (!srv->exec_stdin)
    return mp_send_error(conn, 404, "not_found", "resumable execs are off"
                         " (serve --exec-stdin off)");
  if (sb->destroyed_ms)
    return mp_send_error(conn, 410, "sandbox_destroyed",
                         "sandbox %s was destroyed", sb->id);
  if (nseg == 3) {
    if (strcmp(method, "POST") != 0)
      return mp_send_error(conn, 405, "invalid_request",
                           "use POST to start an exec");
    if (srv->stopping || sb->destroying || sb->restoring)
      return mp_send_error(conn, 409, "conflict", "sandbox %s is %s", sb->id,
                           srv->stopping ? "stopping with the server"
                           : sb->destroying ? "being destroyed"
                           : "being restored");
    return start(conn, sb, r);
  }
  if (!mp_exec_id_valid(seg[3]))
    return mp_send_error(conn, 400, "invalid_request",
                         "an exec id is 1-128 characters of [A-Za-z0-9._:-]");
  e = mp_exec_find(sb, seg[3]);
  if (e == NULL && r->state != NULL && nseg == 5) /* it went while we waited */
    return mp_send_error(conn, 404, "exec_not_found",
                         "exec '%s' of sandbox %s went while the request"
                         " waited", seg[3], sb->id);
  if (e == NULL)
    return mp_send_error(conn, 404, "exec_not_found",
                         "sandbox %s has no exec '%s'", sb->id, seg[3]);
  if (nseg == 4 && strcmp(method, "GET") == 0)
    return mp_send_json(conn, 200, exec_json(e));
  if (nseg == 4 && strcmp(method, "DELETE") == 0) {
    mp_exec_delete(e); /* a running command is killed first */
    return mp_send_empty(conn, 204);
  }
  if (nseg == 5 && strcmp(seg[4], "output") == 0
      && strcmp(method, "GET") == 0)
    return output(srv, conn, e, r);
  if (nseg == 5 && strcmp(seg[4], "signal") == 0
      && strcmp(method, "POST") == 0)
    return signal_exec(conn, e, r);
  return mp_send_error(conn, 404, "not_found", "no route for %s"
                       " /sandbox/%.64s/execs/%s%s%.32s", method, sb->id,
                       seg[3], nseg > 4 ? "/" : "", nseg > 4 ? seg[4] : "");
}
