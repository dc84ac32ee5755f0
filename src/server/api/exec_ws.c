/*
** The exec WebSocket of mastra-platform (docs/platform.md).
**
** The router admits a request to /ws/exec by its lease; then
** mp_ws_exec_upgrade() checks the handshake and queues the 101 answer that
** selects `railway-shell`. libmicrohttpd then hands us the socket, which
** a mastra__io watcher drives: our reader takes the client's frames
** (http/ws_reader.h), and a wslay server context sends ours:
**
**   client: {"type":"init_exec","data":{"command","cwd"?,"env"?}}
**           binary [2]+stdin bytes (any number, each <= 1 MiB)
**           {"type":"stdin_close"}            (end of file on stdin)
**   server: binary [1]+stdout bytes, [3]+stderr bytes (<= 64 KiB a frame)
**           {"type":"exit","data":{"exit_code":N}}, then close 1000
**
** stdin is a pipe when the server runs with --exec-stdin on (the default;
** the exec lease then lists "stdin" in its `capabilities`), /dev/null with
** --exec-stdin off (upstream's behaviour: stdin frames are dropped). The
** stdin frames are Railway's shape (tag 2, as the railway CLI's
** sandbox exec sends them). Backpressure: while WS_STDIN_HIGH bytes of
** stdin wait for the pipe, the socket is not read, so the client's send
** queue fills instead of our memory. Bytes for a command that stopped
** reading (EPIPE) or has finished are dropped.
**
**           {"type":"keep_running"}           (ours: see below; the
**           server answers {"type":"kept_running"})
**
** exec-resume/1 (sandbox/execs.h; docs/platform.md "Resumable execs"): an
** init_exec with exec_id or durable_session_name attaches the session to
** a resumable exec, which owns the command and spools its output; the
** session then sends durable_session (a start), attached, offset frames
** [0x11|0x13][u64 BE offset][bytes] (<= 32 KiB) read from the spools from
** s->sent, output_gap, and exit with reason and totals; it takes
** output_ack and signal; and its close only detaches the exec. A
** reattach without `resume` (Railway's SDK holds no offsets) gets the
** same output as plain tag 1 and 3 frames.
**
** A close (or a socket error) before the exit kills the command, unless
** keep_running came first (our extension, advertised as "keepRunning" in
** the lease, off with --exec-stdin off): the command then runs on in the
** sandbox, its output dropped, until it ends or the sandbox is destroyed
** (adopt()). Output
** is read from the command only while wslay's send queue holds less than
** WS_SEND_HIGH bytes; past that the pipes fill and proc.c pauses them.
**
** Lifetime: every entry point (the upgrade handler, socket events, process
** notifications, the timer, mp_ws_exec_shutdown_all) brackets its work with
** enter()/leave(). Work that ends the session only sets `ending`; the
** outermost leave() tears down (the command, the watcher, the MHD handle),
** and the memory goes through mastra__loop_defer_free, so nothing that a
** caller up the stack (wslay, proc.c, the loop's event batch) still holds
** is freed under it. The open sessions of a server are the list
** srv->ws_sessions.
**
** Over 800 lines: one session's life (upgrade, frames both ways, stdin,
** keep_running, the attach to a resumable exec) is one state machine,
** whose parts share the session's bits; split, they would call each
** other.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "api/exec_ws.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <microhttpd.h>
#include <wslay/wslay.h>

#include "hash.h"
#include "http_tokens.h"
#include "json.h"
#include "http/request.h"
#include "http/ws_reader.h"
#include "api/exec_request.h"
#include "http/respond.h"
#include "sandbox/execs.h"
#include "sandbox/sandbox.h"

#define WS_MAX_RECV_MSG (1u << 20)     /* the largest client message */
/* Railway v2 keeps coder/websocket's read limit: after exec_hello a
** client message past it is refused with close 1009, as Railway's is */
#define WS_V2_MAX_RECV_MSG 32768
/* stop taking output past this much queued for the socket: a client that
** does not read holds this plus what proc.c reads ahead of us
** (MASTRA__PROC_PENDING_MAX a stream), then the command's pipes fill */
#define WS_SEND_HIGH (1u << 20)
#define WS_FRAME_MAX 65536             /* an output frame, tag included */
#define WS_INIT_TIMEOUT_MS 30000       /* for init_exec to arrive */
#define WS_CLOSE_WAIT_MS 5000          /* to finish the closing handshake */
#define WS_STDIN_HIGH (1u << 20)       /* stop reading past this much stdin */
#define WS_READS_A_TURN 16             /* socket reads before others' turn */
/* Railway v2 stdin credits: chunks in flight, bytes a chunk (their
** product is WS_STDIN_HIGH: a credit goes back as a chunk is taken in) */
#define WS_STDIN_CHUNKS 64
#define WS_STDIN_CHUNK_BYTES 16384

#define TAG_STDOUT 1
#define TAG_STDIN 2
#define TAG_STDERR 3
/* exec-resume/1: [tag][u64 BE offset][bytes], at most 32 KiB a frame */
#define TAG_STDOUT_AT 0x11
#define TAG_STDERR_AT 0x13
#define WS_RESUME_FRAME_MAX 32768

typedef struct mp_ws_session ws_session;

struct mp_ws_session {
  mastra__handle handle;     /* first: freed by the loop, after dispatch */
  ws_session *prev, *next;   /* srv->ws_sessions */
  mp_server *srv;
  mp_sandbox *sb;
  mastra__loop *loop;
  struct MHD_UpgradeResponseHandle *urh; /* NULL once handed back */
  int fd;                    /* owned by libmicrohttpd: never closed here */
  mastra__io io;
  mastra__timer timer;       /* init_exec deadline, then the close wait */
  mastra__timer ping;        /* a resumable exec's keepalive (--exec-ping) */
  wslay_event_context_ptr ctx; /* what we send */
  mp_wsr rd;                 /* what the client sends */
  char *extra;               /* bytes MHD read past the request head */
  size_t extra_len, extra_off;
  mastra__proc *proc;        /* ours until mp_sandbox_exec_done */
  mp_exec *exec;             /* a resumable exec attached to (execs.h) */
  uint64_t sent[2];          /* its next offset to send, each stream */
  int depth;                 /* entry points on the stack */
  unsigned started : 1;      /* init_exec was handled */
  unsigned closing : 1;      /* a close frame is queued (ours or an answer) */
  unsigned failed : 1;       /* wslay or the socket failed: wslay no more */
  unsigned ending : 1;       /* tear down when the stack unwinds */
  unsigned ended : 1;
  unsigned linked : 1;       /* in srv->ws_sessions, counted in sb->sockets */
  unsigned close_wait : 1;   /* the timer now bounds the closing handshake */
  unsigned close_pending : 1; /* our close waits for the queue to drain */
  unsigned holds_sb : 1;     /* counted in sb->refs (its record stays) */
  unsigned in_eof : 1;       /* stdin_close came: close after the bytes */
  unsigned in_done : 1;      /* stdin is closed (or gone): drop bytes */
  unsigned keep : 1;         /* keep_running came: a close lets it run on */
  unsigned resumable : 1;    /* init_exec named an exec: typed errors */
  unsigned exit_sent : 1;    /* its exit is queued: acks still count */
  unsigned v2 : 1;           /* exec_hello came: Railway's version 2 */
  unsigned over_limit : 1;   /* a message past the limit came: 1009 */
  unsigned plain : 1;        /* Railway's reattach: tags 1 and 3, no offsets */
  unsigned reading : 1;      /* no close came, the protocol held */
  unsigned close_received : 1;
  uint64_t in_skip;          /* stdin bytes resent that the exec has */
  uint64_t in_acked;         /* the last stdin_ack's offset */
  char *in_buf;              /* stdin bytes waiting for the pipe */
  size_t in_len, in_off, in_cap;
  uint16_t close_code;
  char close_reason[124];
};

static void session_end(ws_session *s);

/* the command that stdin frames go to: ours, or the attached exec's */
static mastra__proc *in_proc(const ws_session *s) {
  return s->proc != NULL ? s->proc : s->exec != NULL ? s->exec->proc : NULL;
}

/* Enough stdin waits for the pipe: the socket is not read meanwhile. */
static int stdin_full(const ws_session *s) {
  return s->in_len - s->in_off >= WS_STDIN_HIGH;
}

/* {====== lifetime ====== */

static void enter(ws_session *s) { s->depth++; }

static void leave(ws_session *s) {
  if (--s->depth == 0 && s->ending && !s->ended) session_end(s);
}

static void link_session(ws_session *s) {
  s->linked = 1;
  s->sb->sockets++; /* a sandbox with an open socket is not idle */
  s->prev = NULL;
  s->next = s->srv->ws_sessions;
  if (s->next != NULL) s->next->prev = s;
  s->srv->ws_sessions = s;
  s->sb->refs++;
  s->holds_sb = 1;
}

static void unlink_session(ws_session *s) {
  if (s->linked && s->sb->sockets > 0) s->sb->sockets--;
  s->linked = 0;
  if (s->prev != NULL)
    s->prev->next = s->next;
  else if (s->srv->ws_sessions == s)
    s->srv->ws_sessions = s->next;
  if (s->next != NULL) s->next->prev = s->prev;
  s->prev = s->next = NULL;
  if (s->holds_sb) {
    s->holds_sb = 0;
    s->sb->refs--;
  }
}

/* A command whose socket closed after keep_running: the sandbox's now
** (it stays in sb->procs, so a destroy or the shutdown ends it); stdin
** is closed, its output goes nowhere, and its end is let go of as any
** command's (mp_sandbox_exec_done). */
static void on_adopted(mastra__proc *p, void *data) {
  mp_sandbox *sb = data;
  mastra__proc_consumed(p, &p->out);
  mastra__proc_consumed(p, &p->err);
  if (p->done) mp_sandbox_exec_done(sb->srv, sb, p);
}

static void adopt(mp_sandbox *sb, mastra__proc *p) {
  mastra__proc_close_stdin(p);
  p->notify = on_adopted;
  p->notify_data = sb;
  on_adopted(p, sb);
}

/* Let go of the command, killing it first if it still runs (unless the
** client asked to keep it running). */
static void release_proc(ws_session *s) {
  mastra__proc *p = s->proc;
  free(s->in_buf); /* nobody reads the stdin that waits */
  s->in_buf = NULL;
  s->in_len = s->in_off = s->in_cap = 0;
  s->in_done = 1;
  if (s->exec != NULL) { /* a resumable exec runs on, detached */
    mp_exec *e = s->exec;
    s->exec = NULL;
    mp_exec_detach(e, s);
  }
  if (p == NULL) return;
  s->proc = NULL;
  if (s->keep) { /* the client asked: it runs on, the sandbox's */
    adopt(s->sb, p);
    return;
  }
  mastra__proc_kill(p); /* SIGTERM now, SIGKILL after the grace */
  mp_sandbox_exec_done(s->srv, s->sb, p);
}

/* wslay or the socket failed: never call wslay again. */
static void fail(ws_session *s) {
  s->failed = 1;
  s->ending = 1;
  release_proc(s);
}

static void session_free(mastra__handle *h) {
  ws_session *s = (ws_session *)h;
  mastra__loop *loop = s->loop;
  if (s->ctx != NULL) wslay_event_context_free(s->ctx);
  mp_wsr_free(&s->rd);
  free(s->extra);
  free(s->in_buf);
  free(s);
  mastra__loop_unref(loop);
}

/* The outermost leave(): give everything back, free after the dispatch. */
static void session_end(ws_session *s) {
  s->ended = 1;
  release_proc(s);
  mastra__timer_stop(&s->timer);
  mastra__timer_stop(&s->ping);
  mastra__io_stop(&s->io); /* before MHD closes the fd */
  if (s->urh != NULL) {
    struct MHD_UpgradeResponseHandle *urh = s->urh;
    s->urh = NULL;
    MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
  }
  unlink_session(s);
  mastra__loop_defer_free(s->loop, &s->handle);
}

/* The loop closes under a live session (mp_ws_exec_shutdown_all was not
** called): let go of everything but the MHD handle, whose daemon may
** already be gone. */
static void session_shutdown(mastra__handle *h) {
  ws_session *s = (ws_session *)h;
  s->ended = 1;
  release_proc(s);
  mastra__timer_stop(&s->timer);
  mastra__timer_stop(&s->ping);
  mastra__io_stop(&s->io);
  unlink_session(s);
  session_free(h);
}

/* }====== */

/* {====== frames out ====== */

static int queue_msg(ws_session *s, uint8_t opcode, const void *data,
                     size_t len) {
  struct wslay_event_msg m;
  if (s->failed || s->closing) return -1;
  m.opcode = opcode;
  m.msg = data;
  m.msg_length = len;
  if (wslay_event_queue_msg(s->ctx, &m) != 0) {
    fail(s);
    return -1;
  }
  return 0;
}

/* Queue the close that s->close_code and close_reason describe once every
** message before it is out: wslay sends control frames ahead of queued
** data, and nothing after a close. */
static void flush_close(ws_session *s) {
  int r;
  if (!s->close_pending || s->failed
      || wslay_event_get_queued_msg_count(s->ctx) > 0)
    return;
  s->close_pending = 0;
  r = wslay_event_queue_close(s->ctx, s->close_code,
                              (const uint8_t *)s->close_reason,
                              strlen(s->close_reason));
  /* NO_MORE_MSG: a close is queued already (the client closed first:
  ** answer_close) */
  if (r != 0 && r != WSLAY_ERR_NO_MORE_MSG) fail(s);
}

/* Close after what is queued (reason: ASCII, at most 123 bytes). */
static void queue_close(ws_session *s, uint16_t code, const char *reason) {
  if (s->failed || s->closing) return;
  s->closing = 1;
  s->close_pending = 1;
  s->close_code = code;
  snprintf(s->close_reason, sizeof s->close_reason, "%s", reason);
  flush_close(s);
}

/* wslay copies a queued message: one frame of scratch on the stack */
static int send_output(ws_session *s, uint8_t tag, const char *data,
                       size_t len) {
  uint8_t frame[WS_FRAME_MAX];
  while (len > 0) {
    size_t n = len < WS_FRAME_MAX - 1 ? len : WS_FRAME_MAX - 1;
    frame[0] = tag;
    memcpy(frame + 1, data, n);
    if (queue_msg(s, WSLAY_BINARY_FRAME, frame, n + 1) < 0) return -1;
    data += n;
    len -= n;
  }
  return 0;
}

static int send_exit(ws_session *s, int code) {
  char text[120];
  const mastra__proc *p = s->proc;
  int n = s->v2 && p != NULL /* Railway v2 has a reason */
              ? snprintf(text, sizeof text, "{\"type\":\"exit\",\"data\":"
                         "{\"exit_code\":%d,\"reason\":\"%s\"}}", code,
                         p->timed_out ? "timeout"
                         : p->term_signal != 0 ? "signaled" : "exited")
              : snprintf(text, sizeof text, "{\"type\":\"exit\",\"data\":"
                         "{\"exit_code\":%d}}", code);
  return queue_msg(s, WSLAY_TEXT_FRAME, text, (size_t)n);
}

static void put_u64(uint8_t *b, uint64_t v) {
  int i;
  for (i = 7; i >= 0; i--) {
    b[i] = (uint8_t)(v & 0xff);
    v >>= 8;
  }
}

/* {"type":T,"data":data} (data is consumed) */
static int send_json(ws_session *s, const char *type, cJSON *data) {
  cJSON *o = cJSON_CreateObject();
  char *text;
  int rc = -1;
  cJSON_AddStringToObject(o, "type", type);
  cJSON_AddItemToObject(o, "data", data);
  text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (text != NULL) rc = queue_msg(s, WSLAY_TEXT_FRAME, text, strlen(text));
  cJSON_free(text);
  return rc;
}

/* Railway's typed error, just before a close (code, reason <= 123 bytes) */
static void fail_typed(ws_session *s, const char *code, const char *message,
                       uint16_t close_code) {
  cJSON *d = cJSON_CreateObject();
  char reason[123];
  cJSON_AddStringToObject(d, "code", code);
  cJSON_AddStringToObject(d, "message", message);
  send_json(s, "error", d);
  snprintf(reason, sizeof reason, "%s: %.100s", code, message);
  queue_close(s, close_code, reason);
}

static cJSON *range_json(const mp_exec *e, int i) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddNumberToObject(r, "start", (double)e->spool[i].start);
  cJSON_AddNumberToObject(r, "end", (double)e->spool[i].end);
  return r;
}

static int send_resumable_exit(ws_session *s, int code, const char *reason,
                               uint64_t out_total, uint64_t err_total) {
  cJSON *d = cJSON_CreateObject();
  cJSON_AddNumberToObject(d, "exit_code", code);
  cJSON_AddStringToObject(d, "reason", reason);
  cJSON_AddNumberToObject(d, "stdout_total", (double)out_total);
  cJSON_AddNumberToObject(d, "stderr_total", (double)err_total);
  return send_json(s, "exit", d);
}

/* The attached exec's spools into offset frames from s->sent while the
** send queue is short; a range that was trimmed below s->sent is
** announced (output_gap). Once it ended and everything is queued: the
** exit (with the totals) and close 1000, or exec_lost. */
static void forward_exec(ws_session *s) {
  static const char *const names[2] = {"stdout", "stderr"};
  mp_exec *e = s->exec;
  uint8_t frame[WS_RESUME_FRAME_MAX];
  size_t head = s->plain ? 1 : 9; /* the tag, and the offset */
  int i, moved = 1;
  if (s->failed || s->closing || s->exit_sent) return;
  while (moved && wslay_event_get_queued_msg_length(s->ctx) < WS_SEND_HIGH) {
    moved = 0;
    for (i = 0; i < 2; i++) {
      ssize_t n;
      if (s->sent[i] < e->spool[i].start) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "stream", names[i]);
        cJSON_AddNumberToObject(d, "from", (double)s->sent[i]);
        cJSON_AddNumberToObject(d, "to", (double)e->spool[i].start);
        if (send_json(s, "output_gap", d) < 0) return;
        s->sent[i] = e->spool[i].start;
      }
      if (s->sent[i] >= e->spool[i].end) continue;
      n = mp_exec_read(e, i, s->sent[i], frame + head, sizeof frame - head);
      if (n <= 0) {
        fail_typed(s, "output_failed", "cannot read the exec's output", 1011);
        release_proc(s);
        return;
      }
      if (s->plain) {
        frame[0] = i == 0 ? TAG_STDOUT : TAG_STDERR;
      } else {
        frame[0] = i == 0 ? TAG_STDOUT_AT : TAG_STDERR_AT;
        put_u64(frame + 1, s->sent[i]);
      }
      if (queue_msg(s, WSLAY_BINARY_FRAME, frame, (size_t)n + head) < 0) return;
      s->sent[i] += (uint64_t)n;
      if (s->sent[i] > e->read_to[i]) e->read_to[i] = s->sent[i];
      moved = 1;
    }
  }
  if (e->state == MP_EXEC_RUNNING || s->sent[0] < e->spool[0].end
      || s->sent[1] < e->spool[1].end)
    return;
  if (e->state == MP_EXEC_LOST) {
    fail_typed(s, "exec_lost", "the exec's command died with a previous"
               " server; it is not run again", 1008);
  } else if (strcmp(e->reason, "output_lost") == 0) {
    /* what it wrote past the spools' end is gone: not an exit to trust */
    int full = e->output_errno == ENOSPC || e->output_errno == EDQUOT;
    char msg[100];
    if (e->output_errno != 0)
      snprintf(msg, sizeof msg, "cannot keep its output: %s; it was killed",
               strerror(e->output_errno));
    else /* a record a previous server left */
      snprintf(msg, sizeof msg, "its output could not be kept; it was killed");
    fail_typed(s, full ? "insufficient_storage" : "output_lost", msg, 1011);
  } else {
    if (send_resumable_exit(s, e->exit_code, e->reason, e->spool[0].end,
                            e->spool[1].end) < 0)
      return;
    queue_close(s, 1000, "");
  }
  /* attached until the closing handshake ends: the acks of the last
  ** frames come after the exit */
  s->exit_sent = 1;
}

/* Move the command's output into frames while the send queue is short.
** Once it finished and everything is queued: the exit frame, close 1000,
** and the command is let go. */
static void forward(ws_session *s) {
  mastra__proc *p = s->proc;
  if (s->exec != NULL) {
    forward_exec(s);
    return;
  }
  if (p == NULL || s->failed || s->closing) return;
  if (wslay_event_get_queued_msg_length(s->ctx) >= WS_SEND_HIGH) return;
  if (p->out.len > 0) {
    if (send_output(s, TAG_STDOUT, p->out.data, p->out.len) < 0) return;
    mastra__proc_consumed(p, &p->out);
  }
  if (p->err.len > 0) {
    if (send_output(s, TAG_STDERR, p->err.data, p->err.len) < 0) return;
    mastra__proc_consumed(p, &p->err);
  }
  if (p->done && p->out.len == 0 && p->err.len == 0) {
    if (send_exit(s, p->exit_code) < 0) return;
    queue_close(s, 1000, "");
    release_proc(s);
  }
}

/* }====== */

/* {====== wslay callbacks ====== */

/* wslay only sends here: the reader of http/ws_reader.h takes the
** client's frames (read_client) */
static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                       int flags, void *user) {
  (void)buf;
  (void)len;
  (void)flags;
  (void)user;
  wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
  return -1;
}

/* wslay sends a frame's header and its payload in two calls, the header
** with WSLAY_MSG_MORE: MSG_MORE keeps it for the payload's segment
** (TCP_NODELAY would otherwise send it alone, and wake the client for
** a few bytes) */
static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data,
                       size_t len, int flags, void *user) {
  ws_session *s = user;
  int how = MSG_NOSIGNAL | ((flags & WSLAY_MSG_MORE) ? MSG_MORE : 0);
  ssize_t n;
  do
    n = send(s->fd, data, len, how);
  while (n < 0 && errno == EINTR);
  if (n >= 0) return n;
  wslay_event_set_error(ctx, errno == EAGAIN || errno == EWOULDBLOCK
                                 ? WSLAY_ERR_WOULDBLOCK
                                 : WSLAY_ERR_CALLBACK_FAILURE);
  return -1;
}

static void on_proc(mastra__proc *p, void *data);

/* {====== stdin ====== */

/* A resumable exec's stdin: what reached its pipe, by offset (a client
** that reattaches resends from there) */
static void stdin_ack(ws_session *s) {
  cJSON *d;
  if (s->exec == NULL || s->exec->stdin_off == s->in_acked || s->closing)
    return;
  s->in_acked = s->exec->stdin_off;
  d = cJSON_CreateObject();
  cJSON_AddNumberToObject(d, "offset", (double)s->in_acked);
  send_json(s, "stdin_ack", d);
}

/* Write what waits to the command's stdin; once it is all out and
** stdin_close came, close stdin. A pipe that is full asks to be told when
** it drains (on_proc then pumps again). */
static void stdin_flush(ws_session *s) {
  mastra__proc *p = in_proc(s);
  if (p == NULL || s->in_done) return;
  while (s->in_off < s->in_len) {
    ssize_t n = mastra__proc_write(p, s->in_buf + s->in_off,
                                   s->in_len - s->in_off);
    if (n == 0) {
      if (mastra__proc_want_write(p) < 0) break;
      return;
    }
    if (n < 0) break; /* EPIPE: the command stopped reading */
    s->in_off += (size_t)n;
    if (s->exec != NULL) s->exec->stdin_off += (uint64_t)n;
  }
  stdin_ack(s);
  if (s->in_off < s->in_len) { /* not writable: drop the rest */
    s->in_done = 1;
    mastra__proc_close_stdin(p);
    if (s->exec != NULL) s->exec->stdin_closed = 1;
  }
  /* all written: keep the buffer for the next frames */
  s->in_len = s->in_off = 0;
  if (s->in_eof && !s->in_done) {
    s->in_done = 1;
    mastra__proc_close_stdin(p);
    if (s->exec != NULL) s->exec->stdin_closed = 1;
  }
}

/* Append a stdin frame's bytes and write what the pipe takes. The bytes
** already written are dropped from the front only once they are at least
** as many as those left, so each byte is moved at most once on average. */
static void stdin_push(ws_session *s, const uint8_t *data, size_t len) {
  size_t have;
  if (in_proc(s) == NULL || s->in_done || s->in_eof || len == 0) return;
  if (s->in_skip > 0) { /* resent bytes that the exec already has */
    size_t k = s->in_skip < len ? (size_t)s->in_skip : len;
    s->in_skip -= k;
    data += k;
    len -= k;
    if (len == 0) return;
  }
  have = s->in_len - s->in_off;
  if (s->in_off > 0 && s->in_off >= have) {
    memmove(s->in_buf, s->in_buf + s->in_off, have);
    s->in_len = have;
    s->in_off = 0;
  }
  if (s->in_len + len > s->in_cap) {
    size_t cap = s->in_cap ? s->in_cap : 65536;
    char *b;
    while (cap < s->in_len + len) cap *= 2;
    b = realloc(s->in_buf, cap);
    if (b == NULL) {
      queue_close(s, 1011, "out of memory for stdin");
      release_proc(s);
      return;
    }
    s->in_buf = b;
    s->in_cap = cap;
  }
  memcpy(s->in_buf + s->in_len, data, len);
  s->in_len += len;
  stdin_flush(s);
}

/* }====== */

/* {====== resumable execs (exec-resume/1) ====== */

static void pump(ws_session *s, int readable);

static void on_exec_changed(void *data) {
  ws_session *s = data;
  int was_full;
  enter(s);
  was_full = stdin_full(s);
  stdin_flush(s);
  pump(s, was_full && !stdin_full(s));
  leave(s);
}

/* another socket attached (4001 "superseded"), or the exec went */
static void on_exec_taken(void *data, uint16_t code, const char *reason) {
  ws_session *s = data;
  enter(s);
  s->exec = NULL; /* the exec let go of us already */
  release_proc(s);
  queue_close(s, code, reason);
  pump(s, 0);
  leave(s);
}

/* a member of obj, with null as absent */
static const cJSON *member(const cJSON *obj, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
  return cJSON_IsNull(v) ? NULL : v;
}

/* an integer in [lo, hi] (absent: dflt) into *out; 0, or -1 */
static int int_member(const cJSON *obj, const char *name, double lo,
                      double hi, uint64_t dflt, uint64_t *out) {
  const cJSON *v = member(obj, name);
  *out = dflt;
  if (v == NULL) return 0;
  if (!cJSON_IsNumber(v) || v->valuedouble < lo || v->valuedouble > hi
      || v->valuedouble != (double)(uint64_t)v->valuedouble)
    return -1;
  *out = (uint64_t)v->valuedouble;
  return 0;
}

/* s becomes e's socket: `attached`, then the replay from off */
static void attach(ws_session *s, mp_exec *e, const uint64_t off[3]) {
  mp_exec_watcher w;
  cJSON *d;
  int i;
  char msg[200];
  if (e->state == MP_EXEC_LOST) {
    fail_typed(s, "exec_lost", "the exec's command died with a previous"
               " server; it is not run again", 1008);
    return;
  }
  for (i = 0; i < 2; i++)
    if (off[i] > e->spool[i].end) {
      snprintf(msg, sizeof msg, "resume.%s is %llu, past the %llu bytes"
               " the exec wrote", i == 0 ? "stdout" : "stderr",
               (unsigned long long)off[i], (unsigned long long)e->spool[i].end);
      fail_typed(s, "invalid_request", msg, 1008);
      return;
    }
  if (off[2] != UINT64_MAX && off[2] > e->stdin_off) {
    snprintf(msg, sizeof msg, "resume.stdin is %llu, past the %llu bytes"
             " of stdin the exec took", (unsigned long long)off[2],
             (unsigned long long)e->stdin_off);
    fail_typed(s, "invalid_request", msg, 1008);
    return;
  }
  w.changed = on_exec_changed;
  w.taken = on_exec_taken;
  w.data = s;
  mp_exec_attach(e, &w); /* the previous socket is superseded */
  s->exec = e;
  if (s->srv->exec_ping_ms > 0)
    mastra__timer_start(&s->ping, s->srv->exec_ping_ms);
  s->sent[0] = off[0];
  s->sent[1] = off[1];
  /* what a client resumes from it holds: an ack (without it, a client
  ** that held the whole bound would wait for bytes that wait for it) */
  mp_exec_ack(e, off[0], off[1]);
  s->in_done = !s->srv->exec_stdin || e->proc == NULL || e->stdin_closed;
  /* resent from off[2] (absent: from attached's stdin.offset): the exec
  ** has these already */
  s->in_skip = off[2] == UINT64_MAX ? 0 : e->stdin_off - off[2];
  s->in_acked = e->stdin_off;
  d = cJSON_CreateObject();
  cJSON_AddStringToObject(d, "exec_id", e->id);
  cJSON_AddStringToObject(d, "state", e->state == MP_EXEC_RUNNING
                                          ? "running" : "exited");
  cJSON_AddItemToObject(d, "stdout", range_json(e, 0));
  cJSON_AddItemToObject(d, "stderr", range_json(e, 1));
  {
    cJSON *in = cJSON_AddObjectToObject(d, "stdin");
    cJSON_AddNumberToObject(in, "offset", (double)e->stdin_off);
    cJSON_AddBoolToObject(in, "closed", e->stdin_closed || e->proc == NULL);
  }
  send_json(s, "attached", d);
}

/* init_exec with exec_id (a start, or its idempotent re-send) or
** durable_session_name (a reattach, which never spawns) */
static void start_resumable(ws_session *s, const cJSON *data) {
  const cJSON *id = member(data, "exec_id");
  const cJSON *dsn = member(data, "durable_session_name");
  const cJSON *resume = member(data, "resume"), *it, *last_read;
  const cJSON *name = id != NULL ? id : dsn;
  uint64_t off[3] = {0, 0, UINT64_MAX}, detach_ms, timeout_ms;
  int truncate = 0;
  mp_exec_spec spec;
  char fp[65], err[600];
  mp_exec *e;
  s->resumable = 1;
  if (id != NULL && dsn != NULL) {
    fail_typed(s, "invalid_request", "init_exec takes exec_id (a start) or"
               " durable_session_name (a reattach), not both", 1008);
    return;
  }
  if (!cJSON_IsString(name) || !mp_exec_id_valid(name->valuestring)) {
    snprintf(err, sizeof err, "field 'data.%s' must be 1-128 characters of"
             " [A-Za-z0-9._:-], such as a UUID", id != NULL ? "exec_id"
             : "durable_session_name");
    fail_typed(s, "invalid_request", err, 1008);
    return;
  }
  if (resume != NULL && !cJSON_IsObject(resume)) {
    fail_typed(s, "invalid_request", "field 'data.resume' must be an object"
               " {stdout, stderr} of byte offsets", 1008);
    return;
  }
  cJSON_ArrayForEach(it, resume) {
    if (strcmp(it->string, "stdout") != 0
        && strcmp(it->string, "stderr") != 0
        && strcmp(it->string, "stdin") != 0) {
      snprintf(err, sizeof err, "field 'data.resume' takes stdout, stderr"
               " and stdin only (got '%.60s')", it->string);
      fail_typed(s, "invalid_request", err, 1008);
      return;
    }
  }
  if (int_member(resume, "stdout", 0, 9007199254740991.0, 0, &off[0]) < 0
      || int_member(resume, "stderr", 0, 9007199254740991.0, 0, &off[1]) < 0
      || int_member(resume, "stdin", 0, 9007199254740991.0, UINT64_MAX,
                    &off[2]) < 0) {
    fail_typed(s, "invalid_request", "fields 'data.resume.stdout', 'stderr'"
               " and 'stdin' must be byte offsets (integers >= 0)", 1008);
    return;
  }
  last_read = member(data, "resume_from_last_read");
  if (last_read != NULL && !cJSON_IsBool(last_read)) {
    fail_typed(s, "invalid_request", "field 'data.resume_from_last_read'"
               " must be true or false", 1008);
    return;
  }
  if (dsn != NULL) { /* a reattach */
    if (cJSON_IsTrue(last_read) && resume != NULL) {
      fail_typed(s, "invalid_request", "a reattach takes resume (the offsets"
                 " it holds) or resume_from_last_read, not both", 1008);
      return;
    }
    if (member(data, "cwd") != NULL || member(data, "env") != NULL) {
      fail_typed(s, "invalid_request", "a reattach (durable_session_name)"
                 " takes no cwd or env: they belong to the exec's start",
                 1008);
      return;
    }
    e = mp_exec_find(s->sb, dsn->valuestring);
    if (e == NULL) {
      snprintf(err, sizeof err, "sandbox %s has no exec '%s' (it never"
               " started, or its retention ended)", s->sb->id,
               dsn->valuestring);
      fail_typed(s, "exec_not_found", err, 1008);
      return;
    }
    if (cJSON_IsTrue(last_read)) { /* from what a socket was last sent */
      off[0] = e->read_to[0];
      off[1] = e->read_to[1];
    }
    /* no offsets held: Railway's SDK, which knows tags 1 and 3 only */
    s->plain = resume == NULL;
    attach(s, e, off);
    return;
  }
  if (mp_exec_request_parse(data, "data", 0, &spec, err, sizeof err) < 0) {
    fail_typed(s, "invalid_request", err, 1008);
    return;
  }
  if (mp_exec_resume_parse(data, "data", &detach_ms, &truncate, err,
                           sizeof err) < 0) {
    fail_typed(s, "invalid_request", err, 1008);
    return;
  }
  if (int_member(data, "timeout_ms", 0, 9007199254740991.0, 0, &timeout_ms)
      < 0) {
    fail_typed(s, "invalid_request", "field 'data.timeout_ms' must be an"
               " integer >= 0 (ms; 0: no deadline)", 1008);
    return;
  }
  spec.stdin_pipe = 1;
  spec.timeout_ms = timeout_ms;
  mp_exec_fingerprint(&spec, fp);
  e = mp_exec_find(s->sb, id->valuestring);
  if (e != NULL && strcmp(e->fingerprint, fp) != 0) {
    snprintf(err, sizeof err, "exec '%s' was started with another request;"
             " use a new exec_id for a new command", id->valuestring);
    fail_typed(s, "exec_id_conflict", err, 1008);
    return;
  }
  if (e == NULL) {
    err[0] = '\0';
    if (mp_exec_start(s->sb, id->valuestring, fp, &spec, detach_ms, &e, err,
                      sizeof err - 1) < 0) {
      /* like a shell that cannot run the command: a message and 127;
      ** nothing was recorded, so a retry may start it */
      uint8_t frame[9 + sizeof err];
      size_t n = strlen(err);
      if (n == 0) n = (size_t)snprintf(err, sizeof err - 1, "cannot start");
      err[n++] = '\n';
      frame[0] = TAG_STDERR_AT;
      put_u64(frame + 1, 0);
      memcpy(frame + 9, err, n);
      if (queue_msg(s, WSLAY_BINARY_FRAME, frame, n + 9) == 0
          && send_resumable_exit(s, 127, "exited", 0, n) == 0)
        queue_close(s, 1000, "");
      return;
    }
    e->truncate_head = (unsigned)truncate; /* before any output: on the loop */
  }
  {
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "durable_session_name", e->id);
    send_json(s, "durable_session", d);
  }
  attach(s, e, off);
}

/* }====== */

static void start_exec(ws_session *s, const cJSON *data) {
  mp_exec_spec spec;
  mastra__proc *p = NULL;
  char err[600];
  s->started = 1;
  mastra__timer_stop(&s->timer);
  if (s->srv->stopping) {
    queue_close(s, 1001, "the server is shutting down");
    return;
  }
  if (s->sb->destroyed_ms) {
    queue_close(s, 1011, "the sandbox was destroyed");
    return;
  }
  if (s->srv->exec_stdin
      && (member(data, "exec_id") != NULL
          || member(data, "durable_session_name") != NULL)) {
    start_resumable(s, data);
    return;
  }
  if (mp_exec_request_parse(data, "data", 0, &spec, err, sizeof err) < 0) {
    char reason[123]; /* a close reason is at most 123 bytes */
    snprintf(reason, sizeof reason, "init_exec: %.110s", err);
    queue_close(s, 1008, reason);
    return;
  }
  spec.stdin_pipe = s->srv->exec_stdin;
  s->in_done = !s->srv->exec_stdin;
  spec.timeout_ms = 0;
  err[0] = '\0';
  if (mp_sandbox_exec(s->srv, s->sb, &spec, on_proc, s, &p, err,
                      sizeof err - 1) != 0
      || p == NULL) {
    /* like a shell that cannot run the command: a message and 127 */
    size_t n = strlen(err);
    if (n == 0) n = (size_t)snprintf(err, sizeof err - 1, "cannot start");
    err[n++] = '\n';
    if (send_output(s, TAG_STDERR, err, n) == 0 && send_exit(s, 127) == 0)
      queue_close(s, 1000, "");
    return;
  }
  s->proc = p;
}

static void on_text(ws_session *s, const char *msg, size_t len) {
  cJSON *j;
  const cJSON *type;
  if (s->failed) return;
  if (s->closing) { /* only what the client holds still counts */
    if (s->exec == NULL || memmem(msg, len, "output_ack", 10) == NULL) return;
  }
  if (mp_json_has_nul(msg, len)) { /* as the HTTP routes answer 400 */
    queue_close(s, 1008, "strings in a message may not contain NUL"
                         " (\\u0000)");
    return;
  }
  j = mastra__json_parse(msg, len, NULL, NULL);
  type = cJSON_GetObjectItemCaseSensitive(j, "type");
  if (s->closing && (!cJSON_IsString(type)
                     || strcmp(type->valuestring, "output_ack") != 0)) {
    /* closing: nothing but acks */
  } else if (!cJSON_IsString(type)) {
    if (!s->started)
      queue_close(s, 1008, "expected a JSON message"
                           " {\"type\":\"init_exec\",\"data\":{...}}");
  } else if (strcmp(type->valuestring, "init_exec") == 0) {
    if (!s->started)
      start_exec(s, cJSON_GetObjectItemCaseSensitive(j, "data"));
  } else if (strcmp(type->valuestring, "stdin_close") == 0) {
    s->in_eof = 1;
    stdin_flush(s); /* closes stdin once what waits is written */
  } else if (strcmp(type->valuestring, "exec_hello") == 0 && !s->started) {
    /* Railway's version 2 handshake: what we take, and our extensions */
    cJSON *d = cJSON_CreateObject();
    cJSON_AddNumberToObject(d, "version", 2);
    cJSON_AddNumberToObject(d, "stdin_chunks", WS_STDIN_CHUNKS);
    cJSON_AddNumberToObject(d, "stdin_chunk_bytes", WS_STDIN_CHUNK_BYTES);
    if (s->srv->exec_stdin) {
      cJSON *x = cJSON_AddArrayToObject(d, "extensions");
      cJSON_AddItemToArray(x, cJSON_CreateString(MP_EXEC_EXTENSION));
    }
    s->v2 = 1;
    mp_wsr_set_limit(&s->rd, WS_V2_MAX_RECV_MSG);
    send_json(s, "exec_capabilities", d);
  } else if (strcmp(type->valuestring, "output_ack") == 0
             && s->exec != NULL) {
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "data");
    uint64_t a[2];
    if (int_member(d, "stdout", 0, 9007199254740991.0, 0, &a[0]) == 0
        && int_member(d, "stderr", 0, 9007199254740991.0, 0, &a[1]) == 0)
      /* only what was sent can be held */
      mp_exec_ack(s->exec, a[0] < s->sent[0] ? a[0] : s->sent[0],
                  a[1] < s->sent[1] ? a[1] : s->sent[1]);
  } else if (strcmp(type->valuestring, "signal") == 0) {
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "data");
    const cJSON *sig = cJSON_GetObjectItemCaseSensitive(d, "signal");
    int n = !cJSON_IsString(sig) ? 0
            : strcmp(sig->valuestring, "TERM") == 0 ? SIGTERM
            : strcmp(sig->valuestring, "KILL") == 0 ? SIGKILL : 0;
    if (n == 0 && s->resumable) {
      fail_typed(s, "invalid_request", "field 'data.signal' must be \"TERM\""
                 " or \"KILL\"", 1008);
      release_proc(s);
    } else if (n != 0 && s->exec != NULL) {
      mp_exec_signal(s->exec, n);
    } else if (n != 0 && s->proc != NULL && !s->proc->done) {
      kill(-s->proc->pid, n);
    }
  } else if (strcmp(type->valuestring, "keep_running") == 0
             && s->srv->exec_stdin) {
    static const char ack[] = "{\"type\":\"kept_running\"}";
    s->keep = 1; /* our extension, advertised as "keepRunning" */
    queue_msg(s, WSLAY_TEXT_FRAME, ack, sizeof ack - 1);
  }
  /* other types are ignored */
  cJSON_Delete(j);
}

/* Answer the client's close (code 0: it gave none) with the same code and
** reason, ahead of queued output (wslay sends control frames first),
** unless our own close was handed to wslay already */
static void answer_close(ws_session *s, uint16_t code, const void *reason,
                         size_t len) {
  int r;
  if (s->failed) return;
  r = wslay_event_queue_close(s->ctx, code, reason, len);
  if (r != 0 && r != WSLAY_ERR_NO_MORE_MSG) fail(s);
}

static void on_message(ws_session *s, int kind, const unsigned char *msg,
                       size_t len) {
  if (s->over_limit) return;
  if (kind == MP_WSR_TEXT)
    on_text(s, (const char *)msg, len);
  else if (len > 0 && msg[0] == TAG_STDIN && !s->closing && !s->failed) {
    stdin_push(s, msg + 1, len - 1);
    if (s->v2 && !s->closing && !s->failed) {
      /* taken in (the socket is not read while WS_STDIN_HIGH waits) */
      static const char credit[] =
          "{\"type\":\"stdin_credit\",\"data\":{\"chunks\":1}}";
      queue_msg(s, WSLAY_TEXT_FRAME, credit, sizeof credit - 1);
    }
  }
  /* other binary frames are ignored */
}

/* One frame event of the reader. A message over the limit (1 MiB, or
** Railway v2's 32 KiB after exec_hello) ends the session with 1009 after
** what is queued; reading goes on (its messages dropped) until the client
** answers the close: a socket closed with unread bytes sends a reset,
** which can overtake the close frame. A broken protocol (1002, 1007) is
** answered at once, as wslay did, and nothing more is read. */
static void on_frame_event(ws_session *s, int kind, const mp_wsr_event *ev) {
  switch (kind) {
  case MP_WSR_TEXT:
  case MP_WSR_BINARY:
    on_message(s, kind, ev->data, ev->len);
    break;
  case MP_WSR_PING: {
    struct wslay_event_msg m;
    int r;
    m.opcode = WSLAY_PONG;
    m.msg = ev->data;
    m.msg_length = ev->len;
    r = wslay_event_queue_msg(s->ctx, &m);
    if (r != 0 && r != WSLAY_ERR_NO_MORE_MSG) fail(s); /* no more: closing */
    break;
  }
  case MP_WSR_CLOSE:
    s->reading = 0;
    s->close_received = 1;
    answer_close(s, ev->code, ev->data, ev->len);
    break;
  case MP_WSR_ERROR:
    if (ev->code == 1009) {
      if (s->over_limit) break;
      s->over_limit = 1;
      queue_close(s, 1009, s->v2 ? "read limited at 32768 bytes"
                                 : "a message over 1048576 bytes");
      release_proc(s);
      break;
    }
    s->reading = 0;
    answer_close(s, ev->code, NULL, 0);
    break;
  default: /* PONG */
    break;
  }
}

/* Take what the client sent: the bytes MHD read ahead first, then the
** socket's, until it would block, stdin must drain first, reading ended,
** or WS_READS_A_TURN reads were done (the watcher is level-triggered: the
** rest comes at its next turn). -1: the client went away or the socket
** failed. */
static int read_client(ws_session *s) {
  int reads = 0;
  for (;;) {
    mp_wsr_event ev;
    unsigned char *space;
    size_t room;
    ssize_t n;
    int kind;
    while (s->reading && !s->failed && !stdin_full(s)
           && (kind = mp_wsr_next(&s->rd, &ev)) != MP_WSR_NEED) {
      if (kind < 0) return -1; /* no memory for the message */
      on_frame_event(s, kind, &ev);
    }
    if (!s->reading || s->failed || stdin_full(s)) return 0;
    space = mp_wsr_space(&s->rd, &room);
    if (s->extra_off < s->extra_len) {
      size_t k = s->extra_len - s->extra_off;
      if (k > room) k = room;
      memcpy(space, s->extra + s->extra_off, k);
      s->extra_off += k;
      mp_wsr_filled(&s->rd, k);
      continue;
    }
    if (reads++ == WS_READS_A_TURN) return 0;
    do
      n = recv(s->fd, space, room, 0);
    while (n < 0 && errno == EINTR);
    if (n > 0) {
      mp_wsr_filled(&s->rd, (size_t)n);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    return -1; /* EOF or an error */
  }
}

/* }====== */

/* {====== driving ====== */

static void rearm(ws_session *s) {
  uint32_t ev = 0;
  int want_read = s->reading;
  if (want_read && !stdin_full(s)) ev |= EPOLLIN;
  if (wslay_event_want_write(s->ctx)) ev |= EPOLLOUT;
  if (ev == 0 && !want_read) { /* the closing handshake is over */
    s->ending = 1;
    return;
  }
  if (ev == 0) {
    /* only stdin can move (on_proc pumps when the pipe drains); a client
    ** that goes away meanwhile is seen by its hang-up */
    if (mastra__io_start(&s->io, EPOLLRDHUP) < 0) fail(s);
    return;
  }
  if (mastra__io_start(&s->io, ev) < 0) {
    fail(s);
    return;
  }
  /* a close went out, or came in: bound what is left */
  if (!s->close_wait && (wslay_event_get_close_sent(s->ctx)
                         || s->close_received)) {
    s->close_wait = 1;
    mastra__timer_stop(&s->timer);
    mastra__timer_start(&s->timer, WS_CLOSE_WAIT_MS);
  }
}

/* Whether forward() or flush_close() would do something now: output
** waits (the command's, or its exit) and the queue is below WS_SEND_HIGH,
** or our close waits and the queue is empty. Each time it holds, the next
** forward() or flush_close() moves it all (or fails the session), so the
** loop in pump() ends. While it does not hold and output waits, the queue
** holds WS_SEND_HIGH bytes or more: wslay wants to write, rearm() asks for
** EPOLLOUT, and the socket's drain brings us back here. */
static int can_move(ws_session *s) {
  mastra__proc *p = s->proc;
  if (s->failed || s->ended) return 0;
  if (s->close_pending) return wslay_event_get_queued_msg_count(s->ctx) == 0;
  if (s->exec != NULL) {
    const mp_exec *e = s->exec;
    return !s->closing
           && (s->sent[0] < e->spool[0].end || s->sent[1] < e->spool[1].end
               || e->state != MP_EXEC_RUNNING)
           && wslay_event_get_queued_msg_length(s->ctx) < WS_SEND_HIGH;
  }
  if (p == NULL || s->closing) return 0;
  return (p->out.len > 0 || p->err.len > 0 || p->done)
         && wslay_event_get_queued_msg_length(s->ctx) < WS_SEND_HIGH;
}

/* Read what the client sent (if readable), move output into frames, send
** what the socket takes, and set the watcher's interest. */
static void pump(ws_session *s, int readable) {
  if (s->failed || s->ended) return;
  if (readable && s->reading) {
    if (read_client(s) < 0) {
      fail(s);
      return;
    }
    if (s->failed) return;
    if (!s->reading && !s->closing) {
      /* the client closed or broke the protocol: the answer is queued;
      ** the command must go */
      s->closing = 1;
      release_proc(s);
    }
  }
  /* until nothing can move: a send that drains the queue below
  ** WS_SEND_HIGH (or empties it) frees the output forward() held back (or
  ** the close that waited), and no EPOLLOUT would ever come for an empty
  ** queue to move it later */
  do {
    forward(s);
    flush_close(s);
    if (s->failed) return;
    if (wslay_event_want_write(s->ctx) && wslay_event_send(s->ctx) != 0) {
      fail(s);
      return;
    }
  } while (can_move(s));
  rearm(s);
}

static void on_sock(mastra__io *io, uint32_t revents) {
  ws_session *s = io->data;
  enter(s);
  if (!s->failed && !s->ended && stdin_full(s)
      && (revents & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
    release_proc(s); /* the client left while its stdin waited: the command
                     ** goes, and reading resumes to finish the close */
  if (!s->failed && !s->ended) {
    if ((revents & (EPOLLHUP | EPOLLERR)) && !s->reading)
      fail(s); /* nothing more can reach the client */
    else
      pump(s, (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0);
  }
  leave(s);
}

static void on_proc(mastra__proc *p, void *data) {
  ws_session *s = data;
  int was_full;
  if (s->proc != p) return;
  enter(s);
  was_full = stdin_full(s);
  stdin_flush(s);
  /* reading resumes: bytes MHD read ahead are not seen by epoll */
  pump(s, was_full && !stdin_full(s));
  leave(s);
}

/* every --exec-ping while a resumable exec is attached: a client whose
** output has paused still hears from us, so its keepalive (docs/net.md)
** tells a dead connection from a quiet command; wslay sends the ping
** ahead of queued output, at the next frame's boundary */
static void on_ping(mastra__timer *t) {
  ws_session *s = t->data;
  enter(s);
  if (s->exec != NULL && !s->closing && !s->failed
      && queue_msg(s, WSLAY_PING, NULL, 0) == 0) {
    mastra__timer_start(&s->ping, s->srv->exec_ping_ms);
    pump(s, 0);
  }
  leave(s);
}

static void on_timer(mastra__timer *t) {
  ws_session *s = t->data;
  enter(s);
  if (s->close_wait || s->closing || s->failed) {
    s->ending = 1; /* the client did not finish the closing handshake */
  } else if (!s->started) {
    queue_close(s, 1008, "no init_exec within 30 s");
    pump(s, 0);
  }
  leave(s);
}

/* }====== */

/* {====== the upgrade ====== */

static void on_upgrade(void *cls, struct MHD_Connection *conn, void *req_cls,
                       const char *extra_in, size_t extra_in_size,
                       MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
  static const struct wslay_event_callbacks cbs = {
      ws_recv, ws_send, NULL, NULL, NULL, NULL, NULL};
  mp_sandbox *sb = cls;
  mp_server *srv = sb->srv;
  ws_session *s;
  int fl, one = 1;
  (void)conn;
  (void)req_cls;
  s = calloc(1, sizeof *s);
  if (s == NULL || mastra__loop_closed(srv->loop)) goto refuse;
  if (extra_in_size > 0) {
    s->extra = malloc(extra_in_size);
    if (s->extra == NULL) goto refuse;
    memcpy(s->extra, extra_in, extra_in_size);
    s->extra_len = extra_in_size;
  }
  if (wslay_event_context_server_init(&s->ctx, &cbs, s) != 0) {
    s->ctx = NULL;
    goto refuse;
  }
  if (mp_wsr_init(&s->rd, WS_MAX_RECV_MSG) < 0) goto refuse;
  s->reading = 1;
  fl = fcntl(sock, F_GETFL);
  if (fl < 0 || fcntl(sock, F_SETFL, fl | O_NONBLOCK) < 0) goto refuse;
  setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  s->srv = srv;
  s->sb = sb;
  s->urh = urh;
  s->fd = sock;
  s->loop = srv->loop;
  mastra__loop_ref(s->loop);
  s->handle.shutdown = session_shutdown;
  s->handle.free = session_free;
  mastra__loop_add_handle(s->loop, &s->handle);
  link_session(s);
  mastra__io_init(s->loop, &s->io, sock, on_sock, s);
  mastra__timer_init(s->loop, &s->timer, on_timer, s);
  mastra__timer_init(s->loop, &s->ping, on_ping, s);
  mastra__timer_start(&s->timer, WS_INIT_TIMEOUT_MS);

  enter(s);
  if (srv->stopping) queue_close(s, 1001, "the server is shutting down");
  pump(s, 1); /* extra_in first, then what the socket has */
  leave(s);
  return;

refuse:
  if (s != NULL) {
    if (s->ctx != NULL) wslay_event_context_free(s->ctx);
    mp_wsr_free(&s->rd);
    free(s->extra);
    free(s);
  }
  /* libmicrohttpd may keep the socket open when it is handed back from
  ** inside this callback: end the connection for the client right away */
  shutdown(sock, SHUT_RDWR);
  MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}

/* 16 bytes in base64: 22 characters of the alphabet, then "==" */
static int valid_key(const char *key) {
  size_t i;
  if (key == NULL || strlen(key) != 24 || strcmp(key + 22, "==") != 0)
    return 0;
  for (i = 0; i < 22; i++) {
    char c = key[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
          || (c >= '0' && c <= '9') || c == '+' || c == '/'))
      return 0;
  }
  return 1;
}

enum MHD_Result mp_ws_exec_upgrade(mp_server *srv,
                                   struct MHD_Connection *conn,
                                   mp_sandbox *sb) {
  const char *upgrade, *connection, *version, *key;
  struct MHD_Response *resp;
  char accept[29];
  enum MHD_Result ret;
  upgrade = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Upgrade");
  connection =
      MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Connection");
  version = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                        "Sec-WebSocket-Version");
  key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                    "Sec-WebSocket-Key");
  if (upgrade == NULL
      || !mastra__list_has(upgrade, strlen(upgrade), "websocket"))
    return mp_send_error(conn, 400, "invalid_request",
                         "not a WebSocket handshake: 'Upgrade: websocket'"
                         " is missing");
  if (connection == NULL
      || !mastra__list_has(connection, strlen(connection), "upgrade"))
    return mp_send_error(conn, 400, "invalid_request",
                         "not a WebSocket handshake: 'Connection: Upgrade'"
                         " is missing");
  if (version == NULL || strcmp(version, "13") != 0)
    return mp_send_error(conn, 400, "invalid_request",
                         "Sec-WebSocket-Version must be 13");
  if (!valid_key(key))
    return mp_send_error(conn, 400, "invalid_request",
                         "Sec-WebSocket-Key must be 16 bytes in base64");
  if (srv->stopping || sb->srv == NULL)
    return mp_send_error(conn, 503, "api_error",
                         "the server is shutting down");
  mastra__ws_accept_key(key, accept);
  /* libmicrohttpd adds "Connection: Upgrade" itself */
  resp = MHD_create_response_for_upgrade(on_upgrade, sb);
  if (resp == NULL) return MHD_NO;
  if (MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket")
          != MHD_YES
      || MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept)
             != MHD_YES
      || MHD_add_response_header(resp, "Sec-WebSocket-Protocol",
                                 MP_WS_EXEC_SUBPROTOCOL) != MHD_YES) {
    MHD_destroy_response(resp);
    return MHD_NO;
  }
  ret = MHD_queue_response(conn, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
  MHD_destroy_response(resp);
  return ret;
}

/* }====== */

/* {====== the server's view ====== */

size_t mp_ws_exec_count(mp_server *srv) {
  size_t n = 0;
  ws_session *s;
  for (s = srv->ws_sessions; s != NULL; s = s->next) n++;
  return n;
}

void mp_ws_exec_shutdown_all(mp_server *srv) {
  ws_session *s, *next;
  for (s = srv->ws_sessions; s != NULL; s = next) {
    next = s->next;
    if (s->ended) continue;
    enter(s);
    release_proc(s);
    if (!s->failed && (!s->closing || s->close_pending)) {
      /* now, ahead of any queued output */
      static const char reason[] = "the server is shutting down";
      int r = wslay_event_queue_close(s->ctx, 1001, (const uint8_t *)reason,
                                      sizeof reason - 1);
      s->closing = 1;
      s->close_pending = 0;
      if (r != 0 && r != WSLAY_ERR_NO_MORE_MSG) s->failed = 1;
    }
    if (!s->failed) {
      /* one try: the socket is usually writable */
      if (!s->failed && wslay_event_want_write(s->ctx)
          && wslay_event_send(s->ctx) != 0)
        s->failed = 1;
    }
    s->ending = 1;
    leave(s);
  }
}

/* }====== */
