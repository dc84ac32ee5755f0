/*
** The legacy exec of mastra-platform: POST .../sandbox/{id}/exec with
** {"command","cwd"?,"env"?,"timeoutSec"?} runs the command, with the
** connection suspended meanwhile, and answers {"exitCode","stdout",
** "stderr","truncated","timedOut","sessionName"} once it finished. Output
** past 8 MiB a stream is dropped (truncated: true); the exec WebSocket
** streams output of any length. The state of a run
** hangs on the request (mp_request.state), so that a request that ends
** however it ends lets go of the command.
**
** A suspended connection is not read by libmicrohttpd, so it would not see
** its client leave: the run watches the socket on the loop (EPOLLRDHUP, a
** hang-up or an error) and, when the client has closed or reset it, kills
** the command and resumes the connection, which libmicrohttpd then closes.
** A client that half-closes its side while it waits counts as gone.
** At shutdown, mp_exec_legacy_shutdown_all resumes every connection still
** suspended (libmicrohttpd refuses to stop with one), answering 503.
*/
#define _GNU_SOURCE
#include "api/exec_legacy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "util/log.h"
#include "api/exec_request.h"
#include "http/respond.h"
#include "sandbox/sandbox.h"

/* output kept a stream: the answer holds it escaped as JSON, up to six
** bytes a byte (docs/platform.md, Limits) */
#define LEGACY_OUTPUT_MAX (8u << 20)

typedef struct mp_legacy_run legacy_run;

struct mp_legacy_run {
  legacy_run *next, *prev;  /* srv->legacy_runs */
  struct MHD_Connection *conn;
  mp_sandbox *sb;
  mastra__proc *proc;  /* ours until mp_sandbox_exec_done */
  mastra__io sock_io;  /* the client's socket while suspended */
  char *out, *err;
  size_t out_len, err_len;
  int truncated;
  int finished;
  int suspended;
  int exit_code, timed_out;
  const char *aborted; /* why the run ended before its command: 503 */
};

static void legacy_append(legacy_run *run, char **buf, size_t *len,
                          const char *data, size_t n) {
  char *p;
  if (*len + n > LEGACY_OUTPUT_MAX) {
    run->truncated = 1;
    n = LEGACY_OUTPUT_MAX - *len;
  }
  if (n == 0) return;
  p = realloc(*buf, *len + n);
  if (p == NULL) {
    run->truncated = 1;
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

/* Let go of the command (it is killed if it still runs). */
static void let_go(legacy_run *run) {
  mastra__proc *p = run->proc;
  run->finished = 1;
  if (p == NULL) return;
  run->proc = NULL;
  mp_sandbox_exec_done(run->sb->srv, run->sb, p);
}

/* Give the connection back to libmicrohttpd (it answers, or closes). */
static void resume(legacy_run *run) {
  mastra__io_stop(&run->sock_io);
  if (!run->suspended) return;
  run->suspended = 0;
  MHD_resume_connection(run->conn);
}

static void legacy_notify(mastra__proc *p, void *data) {
  legacy_run *run = data;
  legacy_append(run, &run->out, &run->out_len, p->out.data, p->out.len);
  mastra__proc_consumed(p, &p->out);
  legacy_append(run, &run->err, &run->err_len, p->err.data, p->err.len);
  mastra__proc_consumed(p, &p->err);
  if (!p->done || run->finished) return;
  run->exit_code = p->exit_code;
  run->timed_out = p->timed_out;
  let_go(run);
  resume(run);
}

/* The client's socket hung up (or failed) while the command ran. */
static void on_client_gone(mastra__io *io, uint32_t revents) {
  legacy_run *run = io->data;
  (void)revents;
  mp_log("legacy exec in %s: the client went away; killing its command",
         run->sb->id);
  run->aborted = "the client went away";
  let_go(run);
  resume(run);
}

/* The request ended, however it ended: the command is let go of. */
static void legacy_free(void *state) {
  legacy_run *run = state;
  mp_server *srv = run->sb->srv;
  mastra__io_stop(&run->sock_io);
  let_go(run);
  run->sb->refs--;
  if (run->prev != NULL) run->prev->next = run->next;
  else srv->legacy_runs = run->next;
  if (run->next != NULL) run->next->prev = run->prev;
  free(run->out);
  free(run->err);
  free(run);
}

void mp_exec_legacy_shutdown_all(mp_server *srv) {
  legacy_run *run;
  for (run = srv->legacy_runs; run != NULL; run = run->next) {
    if (!run->suspended) continue;
    run->aborted = "the server is shutting down";
    let_go(run);
    resume(run);
  }
}

static enum MHD_Result answer(struct MHD_Connection *conn,
                              const legacy_run *run) {
  cJSON *res = cJSON_CreateObject();
  if (run->timed_out) cJSON_AddNullToObject(res, "exitCode");
  else cJSON_AddNumberToObject(res, "exitCode", run->exit_code);
  cJSON_AddItemToObject(res, "stdout", json_bytes(run->out, run->out_len));
  cJSON_AddItemToObject(res, "stderr", json_bytes(run->err, run->err_len));
  cJSON_AddBoolToObject(res, "truncated", run->truncated);
  cJSON_AddBoolToObject(res, "timedOut", run->timed_out);
  cJSON_AddNullToObject(res, "sessionName");
  return mp_send_json(conn, 200, res);
}

enum MHD_Result mp_exec_legacy(mp_server *srv, struct MHD_Connection *conn,
                               mp_sandbox *sb, mp_request *r) {
  cJSON *body;
  mp_exec_spec spec;
  legacy_run *run;
  const union MHD_ConnectionInfo *info;
  char why[512] = "", err[512];
  if (r->state != NULL) { /* resumed */
    legacy_run *done = r->state;
    if (done->aborted != NULL)
      return mp_send_error(conn, 503, "internal_error",
                           "the command was killed: %s", done->aborted);
    return answer(conn, done);
  }
  if (sb->destroyed_ms)
    return mp_send_error(conn, 410, "sandbox_destroyed", "sandbox %s was destroyed",
                         sb->id);
  body = mp_request_json(conn, r, 1);
  if (body == NULL) return MHD_YES;
  if (mp_exec_request_parse(body, NULL, 1, &spec, why, sizeof why) < 0) {
    cJSON_Delete(body);
    return mp_send_error(conn, 400, "invalid_request", "%s", why);
  }
  run = calloc(1, sizeof *run);
  if (run == NULL) {
    cJSON_Delete(body);
    return mp_send_error(conn, 500, "internal_error", "out of memory");
  }
  run->conn = conn;
  run->sb = sb;
  if (mp_sandbox_exec(srv, sb, &spec, legacy_notify, run, &run->proc, err,
                      sizeof err) < 0) {
    cJSON_Delete(body);
    free(run);
    return mp_send_error(conn, 400, "invalid_request",
                         "cannot run the command: %s", err);
  }
  cJSON_Delete(body);
  r->state = run;
  r->state_free = legacy_free;
  sb->refs++; /* its record stays while the run does */
  run->next = srv->legacy_runs;
  if (run->next != NULL) run->next->prev = run;
  srv->legacy_runs = run;
  run->suspended = 1;
  MHD_suspend_connection(conn);
  info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info != NULL) {
    mastra__io_init(srv->loop, &run->sock_io, info->connect_fd,
                    on_client_gone, run);
    if (mastra__io_start(&run->sock_io, EPOLLRDHUP) < 0)
      mp_log("legacy exec in %s: cannot watch the client's socket", sb->id);
  }
  return MHD_YES;
}
