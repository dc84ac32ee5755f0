/*
** WebSocket client: libcurl CONNECT_ONLY + our Upgrade + wslay (ws_client.h).
**
** One file of about 900 lines on purpose: the connect, the Upgrade, the
** reading of its answer and the frame pump are phases of one state machine
** over one socket and one deadline (see PH_* below); split into files, that
** state would have to be shared through a header that only they use.
*/
#define _GNU_SOURCE
#include "ws_client.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "hash.h"
#include "http_tokens.h"
#include "util.h"

enum {
  PH_CONNECT,  /* libcurl connects */
  PH_SEND,     /* the Upgrade request */
  PH_HEAD,     /* the response head */
  PH_BODY,     /* the body of a refusal */
  PH_WS,       /* wslay runs */
  PH_DONE
};

static void pump(mastra__ws *ws);

/* {====== small helpers ====== */

static char *dupstr(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (p != NULL) memcpy(p, s, n);
  return p;
}

static char *dupmem(const char *s, size_t n) {
  char *p = malloc(n + 1);
  if (p == NULL) return NULL;
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

static void notify(mastra__ws *ws) {
  ws->changed = 0;
  if (!ws->orphan) mastra__loop_signal(ws->loop, ws->id);
}

const char *mastra__ws_state_name(mastra__ws_state s) {
  switch (s) {
  case MASTRA__WS_CONNECTING: return "connecting";
  case MASTRA__WS_OPEN: return "open";
  case MASTRA__WS_CLOSING: return "closing";
  default: return "closed";
  }
}

static void free_queue(mastra__ws *ws) {
  free(ws->in);
  ws->in = NULL;
  ws->in_frame = 0;
  while (ws->qhead != NULL) {
    mastra__ws_msg *m = ws->qhead;
    ws->qhead = m->next;
    free(m);
  }
  ws->qtail = NULL;
  ws->qbytes = ws->qcount = 0;
}

/* }====== */

/* {====== ending ====== */

/* Let go of the transport: the watcher, wslay, the easy handle (removing
** it closes the socket, curl#9342) and the private multi (its close waits
** if we are inside its drain). Memory stays until the free. */
static void teardown(mastra__ws *ws) {
  mastra__io_stop(&ws->io);
  mastra__timer_stop(&ws->timer);
  if (ws->ctx != NULL) {
    wslay_event_context_free(ws->ctx);
    ws->ctx = NULL;
  }
  if (ws->xfer.easy != NULL) {
    mastra__multi_remove(&ws->xfer);
    curl_easy_cleanup(ws->xfer.easy);
    ws->xfer.easy = NULL;
  }
  mastra__multi_close(&ws->m);
  free(ws->request);
  ws->request = NULL;
  free(ws->head);
  ws->head = NULL;
  ws->head_len = ws->head_end = ws->feed_off = 0;
  free(ws->ahead);
  ws->ahead = NULL;
  ws->ahead_len = ws->ahead_off = 0;
  free(ws->out);
  ws->out = NULL;
  ws->out_len = ws->out_off = 0;
  ws->phase = PH_DONE;
  ws->state = MASTRA__WS_CLOSED;
}

static void finish(mastra__ws *ws) {
  teardown(ws);
  notify(ws);
  if (ws->orphan) mastra__loop_defer_free(ws->loop, &ws->handle);
}

/* Record the first failure. */
static void set_error(mastra__ws *ws, const char *name, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  if (ws->errname != NULL) return;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  ws->errname = name;
  ws->error = dupstr(buf);
}

static void fail(mastra__ws *ws, const char *name, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  set_error(ws, name, "%s", buf);
  finish(ws);
}

static void fail_curl(mastra__ws *ws, CURLcode rc, const char *what) {
  fail(ws, mastra__curl_code_name(rc), "%s %s: %s", what, ws->target,
       curl_easy_strerror(rc));
}

static void ws_free(mastra__handle *h) {
  mastra__ws *ws = (mastra__ws *)h;
  mastra__loop *loop = ws->loop;
  size_t i;
  mastra__loop_remove_handle(loop, h);
  teardown(ws);
  free_queue(ws);
  for (i = 0; i < ws->nprotocols; i++) free(ws->protocols[i]);
  free(ws->protocols);
  free(ws->protocol);
  free(ws->target);
  free(ws->close_reason);
  free(ws->http_body);
  free(ws->error);
  free(ws);
  mastra__loop_unref(loop);
}

static void ws_shutdown(mastra__handle *h) {
  mastra__ws *ws = (mastra__ws *)h;
  if (ws->state != MASTRA__WS_CLOSED) {
    set_error(ws, "closed", "the event loop was closed");
    teardown(ws);
  }
  if (ws->orphan) ws_free(h);
}

/* }====== */

/* {====== wslay callbacks: C state only ====== */

static ssize_t on_wslay_recv(wslay_event_context_ptr ctx, uint8_t *buf,
                             size_t len, int flags, void *ud) {
  mastra__ws *ws = ud;
  size_t n = 0;
  CURLcode rc;
  (void)flags;
  if (ws->feed_off < ws->head_len) {
    /* bytes that came with the response head */
    n = ws->head_len - ws->feed_off;
    if (n > len) n = len;
    memcpy(buf, ws->head + ws->feed_off, n);
    ws->feed_off += n;
    return (ssize_t)n;
  }
  if (ws->qbytes >= MASTRA__WS_PENDING_MAX && !ws->orphan) {
    ws->paused = 1; /* resumed by mastra__ws_pop */
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  if (ws->ahead_off < ws->ahead_len) { /* read ahead, not taken yet */
    n = ws->ahead_len - ws->ahead_off;
    if (n > len) n = len;
    memcpy(buf, ws->ahead + ws->ahead_off, n);
    ws->ahead_off += n;
    return (ssize_t)n;
  }
  if (len < MASTRA__WS_READ_AHEAD && ws->ahead == NULL)
    ws->ahead = malloc(MASTRA__WS_READ_AHEAD); /* NULL: read as asked */
  if (len < MASTRA__WS_READ_AHEAD && ws->ahead != NULL) {
    ws->ahead_off = ws->ahead_len = 0;
    rc = curl_easy_recv(ws->xfer.easy, ws->ahead, MASTRA__WS_READ_AHEAD, &n);
    if (rc == CURLE_OK && n > 0) ws->rx = 1;
    if (rc == CURLE_OK && n > len) {
      ws->ahead_len = n;
      ws->ahead_off = len;
      memcpy(buf, ws->ahead, len);
      return (ssize_t)len;
    }
    if (rc == CURLE_OK && n > 0) memcpy(buf, ws->ahead, n);
    if (rc != CURLE_OK || n < MASTRA__WS_READ_AHEAD) {
      free(ws->ahead); /* drained (or failed): an idle socket holds none */
      ws->ahead = NULL;
    }
  } else {
    rc = curl_easy_recv(ws->xfer.easy, buf, len, &n);
  }
  if (rc == CURLE_AGAIN) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  if (rc != CURLE_OK) {
    set_error(ws, mastra__curl_code_name(rc), "cannot read from %s: %s",
              ws->target, curl_easy_strerror(rc));
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  if (n > 0) ws->rx = 1;
  if (n == 0) {
    set_error(ws, "connection_closed",
              "%s closed the connection without a close frame", ws->target);
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  return (ssize_t)n;
}

/* Send buf[*off, len) until it is all out or the socket refuses more:
** CURLE_OK, CURLE_AGAIN (*off is how far it got: the rest goes again
** unchanged, as TLS wants) or the failure. */
static CURLcode send_from(mastra__ws *ws, const void *buf, size_t len,
                          size_t *off) {
  while (*off < len) {
    size_t n = 0;
    CURLcode rc = curl_easy_send(ws->xfer.easy, (const char *)buf + *off,
                                 len - *off, &n);
    if (rc != CURLE_OK) return rc;
    *off += n;
  }
  return CURLE_OK;
}

/* Write what ws->out holds: 0 (all of it went, or the socket is full:
** out_blocked, and the same bytes go at its next EPOLLOUT), -1 on a
** failure (set_error). */
static int flush_out(mastra__ws *ws) {
  size_t from = ws->out_off;
  CURLcode rc = send_from(ws, ws->out, ws->out_len, &ws->out_off);
  if (ws->out_off > from) ws->changed = 1;
  if (rc == CURLE_AGAIN) {
    ws->out_blocked = 1;
    return 0;
  }
  if (rc != CURLE_OK) {
    set_error(ws, mastra__curl_code_name(rc), "cannot send to %s: %s",
              ws->target, curl_easy_strerror(rc));
    return -1;
  }
  ws->out_off = ws->out_len = 0;
  ws->out_blocked = 0;
  return 0;
}

/* wslay's frames (a header, then the payload masked in 4 KiB pieces) are
** gathered in ws->out and written MASTRA__WS_OUT_BUF at a time: one
** send(2) where there were sixteen and a header alone. Nothing is added
** while bytes that the socket refused wait: they go again unchanged. */
static ssize_t on_wslay_send(wslay_event_context_ptr ctx, const uint8_t *data,
                             size_t len, int flags, void *ud) {
  mastra__ws *ws = ud;
  size_t room;
  (void)flags;
  if (ws->out == NULL) {
    ws->out = malloc(MASTRA__WS_OUT_BUF);
    if (ws->out == NULL) {
      ws->oom = 1;
      wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
      return -1;
    }
  }
  if (!ws->out_blocked && ws->out_len == MASTRA__WS_OUT_BUF
      && flush_out(ws) < 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  if (ws->out_blocked) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  room = MASTRA__WS_OUT_BUF - ws->out_len;
  if (len > room) len = room;
  memcpy(ws->out + ws->out_len, data, len);
  ws->out_len += len;
  return (ssize_t)len;
}

static int out_pending(const mastra__ws *ws) {
  return ws->out_off < ws->out_len;
}

static int on_wslay_genmask(wslay_event_context_ptr ctx, uint8_t *buf,
                            size_t len, void *ud) {
  (void)ud;
  if (mastra__random_bytes(buf, len) < 0) {
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  return 0;
}

static void on_wslay_msg(wslay_event_context_ptr ctx,
                         const struct wslay_event_on_msg_recv_arg *arg,
                         void *ud) {
  mastra__ws *ws = ud;
  (void)ctx;
  if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
    ws->close_received = 1;
    ws->close_code = arg->status_code ? arg->status_code : 1005;
    free(ws->close_reason);
    ws->close_reason = NULL;
    if (arg->msg_length > 2)
      ws->close_reason = dupmem((const char *)arg->msg + 2,
                                arg->msg_length - 2);
    ws->changed = 1;
    return;
  }
  /* ping and pong: wslay answers pings itself; a data message was built
  ** from its frames' chunks (on_wslay_frame_*), wslay keeps none of it */
}

/* Data frames are not buffered by wslay (WSLAY_CONFIG_NO_BUFFERING): each
** chunk goes straight into the message it belongs to, which is queued
** when its last frame ends. That saves two copies of every byte (wslay's
** chunk and its flattened message). Control frames wslay buffers and
** hands to on_wslay_msg. */
static void on_wslay_frame_start(wslay_event_context_ptr ctx,
                                 const struct wslay_event_on_frame_recv_start_arg *arg,
                                 void *ud) {
  mastra__ws *ws = ud;
  mastra__ws_msg *m;
  size_t have;
  if (arg->opcode & 0x8) { /* close, ping, pong */
    ws->in_frame = 2;
    return;
  }
  ws->in_frame = 1;
  ws->in_fin = arg->fin;
  if (ws->orphan || ws->oom) { /* nobody will read it */
    ws->in_frame = 2;
    return;
  }
  have = ws->in != NULL ? ws->in->len : 0;
  if (arg->opcode != WSLAY_CONTINUATION_FRAME && ws->in != NULL) {
    free(ws->in); /* wslay refuses that (a protocol error) before us */
    ws->in = NULL;
    have = 0;
  }
  if (arg->payload_length > ws->max_message - have) {
    /* a fragmented message past max_message (wslay checks each frame) */
    wslay_event_shutdown_read(ctx);
    wslay_event_queue_close(ctx, 1009, NULL, 0);
    ws->in_frame = 2; /* its bytes are dropped */
    return;
  }
  m = realloc(ws->in, sizeof *m + have + (size_t)arg->payload_length);
  if (m == NULL) {
    ws->oom = 1;
    return;
  }
  if (ws->in == NULL) {
    m->next = NULL;
    m->binary = arg->opcode == WSLAY_BINARY_FRAME;
    m->len = 0;
  }
  ws->in = m;
}

static void on_wslay_frame_chunk(wslay_event_context_ptr ctx,
                                 const struct wslay_event_on_frame_recv_chunk_arg *arg,
                                 void *ud) {
  mastra__ws *ws = ud;
  (void)ctx;
  if (ws->in_frame != 1 || ws->in == NULL || arg->data_length == 0) return;
  memcpy(ws->in->data + ws->in->len, arg->data, arg->data_length);
  ws->in->len += arg->data_length;
}

static void on_wslay_frame_end(wslay_event_context_ptr ctx, void *ud) {
  mastra__ws *ws = ud;
  mastra__ws_msg *m = ws->in;
  (void)ctx;
  if (ws->in_frame != 1 || !ws->in_fin || m == NULL) {
    ws->in_frame = 0;
    return;
  }
  ws->in_frame = 0;
  ws->in = NULL;
  if (ws->orphan) {
    free(m);
    return;
  }
  if (ws->qtail) ws->qtail->next = m; else ws->qhead = m;
  ws->qtail = m;
  ws->qbytes += m->len;
  ws->qcount++;
  ws->changed = 1;
}

/* }====== */

/* {====== the open socket ====== */

/* the next keepalive tick, keepalive_ms / 2 from now */
static void keepalive_arm(mastra__ws *ws) {
  mastra__timer_start(&ws->timer, ws->keepalive_ms > 1 ? ws->keepalive_ms / 2
                                                       : 1);
}

/* A keepalive tick of an open socket (ws_client.h): 0, or -1 when it
** failed the socket. */
static int keepalive_tick(mastra__ws *ws) {
  struct wslay_event_msg ping;
  if (ws->rx || ws->paused) {
    ws->rx = 0;
    ws->silent_ticks = 0;
  } else if (++ws->silent_ticks >= 2) {
    fail(ws, "keepalive_timeout",
         "%s sent nothing for %llu ms, not even a pong: the connection is"
         " taken as dead", ws->target,
         (unsigned long long)ws->keepalive_ms);
    return -1;
  } else {
    ping.opcode = WSLAY_PING;
    ping.msg = NULL;
    ping.msg_length = 0;
    if (wslay_event_queue_msg(ws->ctx, &ping) != 0) {
      fail(ws, "CURLE_OUT_OF_MEMORY", "out of memory");
      return -1;
    }
  }
  keepalive_arm(ws);
  return 0;
}

static void on_timer(mastra__timer *t) {
  mastra__ws *ws = t->data;
  if (ws->state == MASTRA__WS_OPEN && ws->keepalive_ms > 0) {
    if (keepalive_tick(ws) == 0) pump(ws);
    return;
  }
  if (ws->phase < PH_WS) {
    fail(ws, "CURLE_OPERATION_TIMEDOUT",
         "the WebSocket handshake with %s did not complete within %llu ms",
         ws->target, (unsigned long long)ws->handshake_ms);
    return;
  }
  /* the peer did not answer our close frame in time: hang up with a reset.
  ** A plain close would queue the FIN behind what the peer has not read
  ** (a server that stopped reading holds our stdin back), and the peer
  ** would never learn that we left; a reset reaches it at once. */
  if (ws->io.fd >= 0) {
    struct linger lg = {1, 0};
    setsockopt(ws->io.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  }
  finish(ws);
}

static void wslay_failed(mastra__ws *ws, int rc) {
  if (ws->oom || rc == WSLAY_ERR_NOMEM)
    fail(ws, "CURLE_OUT_OF_MEMORY", "out of memory");
  else
    fail(ws, "protocol_error", "WebSocket failure on %s (wslay error %d)",
         ws->target, rc);
}

/* Returns -1 when it failed the socket (which may be freed then). */
static int set_interest(mastra__ws *ws) {
  uint32_t ev = 0;
  int rc;
  if (wslay_event_want_read(ws->ctx) && !ws->paused) ev |= EPOLLIN;
  if (wslay_event_want_write(ws->ctx) || out_pending(ws)) ev |= EPOLLOUT;
  if (ev == 0) {
    /* an empty interest still reports hang-ups: do not spin on them */
    mastra__io_stop(&ws->io);
    return 0;
  }
  rc = mastra__io_start(&ws->io, ev);
  if (rc < 0) {
    fail(ws, "CURLE_RECV_ERROR", "cannot watch the socket of %s: %s",
         ws->target, strerror(-rc));
    return -1;
  }
  return 0;
}

/* Read until wslay would block (TLS may hold decrypted bytes that epoll
** cannot see), send what is queued, then watch what wslay wants. */
static void pump(mastra__ws *ws) {
  int rc;
  if (ws->phase != PH_WS) return;
  if (wslay_event_want_read(ws->ctx)) {
    rc = wslay_event_recv(ws->ctx);
    if (rc != 0 || ws->oom) {
      wslay_failed(ws, rc);
      return;
    }
    if (ws->head != NULL && ws->feed_off >= ws->head_len) {
      free(ws->head); /* the bytes after the response head are in */
      ws->head = NULL;
      ws->head_len = ws->head_end = ws->feed_off = 0;
    }
  }
  if (out_pending(ws) && flush_out(ws) < 0) { /* the bytes refused before */
    finish(ws); /* flush_out said why */
    return;
  }
  if (wslay_event_want_write(ws->ctx) && !ws->out_blocked) {
    size_t before = wslay_event_get_queued_msg_count(ws->ctx);
    size_t before_len = wslay_event_get_queued_msg_length(ws->ctx);
    rc = wslay_event_send(ws->ctx);
    if (rc != 0) {
      wslay_failed(ws, rc);
      return;
    }
    if (out_pending(ws) && !ws->out_blocked && flush_out(ws) < 0) {
      finish(ws); /* flush_out said why */
      return;
    }
    if ((before > 0 && wslay_event_get_queued_msg_count(ws->ctx) == 0)
        || (before_len >= MASTRA__WS_SEND_LOW
            && wslay_event_get_queued_msg_length(ws->ctx)
                   < MASTRA__WS_SEND_LOW))
      ws->changed = 1;
  }
  if (ws->close_received && ws->state == MASTRA__WS_OPEN) {
    /* the peer closes: wslay queued our answer */
    ws->state = MASTRA__WS_CLOSING;
    ws->changed = 1;
    mastra__timer_start(&ws->timer, ws->close_ms);
  }
  if (!wslay_event_want_read(ws->ctx) && !wslay_event_want_write(ws->ctx)
      && !out_pending(ws)) {
    finish(ws); /* both close frames went: done */
    return;
  }
  if (set_interest(ws) < 0) return;
  if (ws->changed) notify(ws);
}

/* }====== */

/* {====== the handshake ====== */

/* The value of header `name` in the response head, or NULL. */
static const char *find_header(const mastra__ws *ws, const char *name,
                               size_t *vlen) {
  size_t nlen = strlen(name);
  const char *p = ws->head, *end = ws->head + ws->head_end;
  p = memchr(p, '\n', (size_t)(end - p));
  while (p != NULL && ++p < end) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *v, *ve;
    if (eol == NULL) break;
    if ((size_t)(eol - p) > nlen && strncasecmp(p, name, nlen) == 0
        && p[nlen] == ':') {
      v = p + nlen + 1;
      ve = eol;
      while (v < ve && (*v == ' ' || *v == '\t')) v++;
      while (ve > v && (ve[-1] == '\r' || ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
      *vlen = (size_t)(ve - v);
      return v;
    }
    p = eol;
  }
  return NULL;
}

static void open_ws(mastra__ws *ws) {
  struct wslay_event_callbacks cb;
  memset(&cb, 0, sizeof cb);
  cb.recv_callback = on_wslay_recv;
  cb.send_callback = on_wslay_send;
  cb.genmask_callback = on_wslay_genmask;
  cb.on_msg_recv_callback = on_wslay_msg;
  cb.on_frame_recv_start_callback = on_wslay_frame_start;
  cb.on_frame_recv_chunk_callback = on_wslay_frame_chunk;
  cb.on_frame_recv_end_callback = on_wslay_frame_end;
  if (wslay_event_context_client_init(&ws->ctx, &cb, ws) != 0) {
    ws->ctx = NULL;
    fail(ws, "CURLE_OUT_OF_MEMORY", "out of memory");
    return;
  }
  wslay_event_config_set_max_recv_msg_length(ws->ctx, ws->max_message);
  wslay_event_config_set_no_buffering(ws->ctx, 1);
  mastra__timer_stop(&ws->timer);
  if (ws->keepalive_ms > 0) keepalive_arm(ws);
  ws->feed_off = ws->head_end; /* wslay reads what followed the head first */
  ws->phase = PH_WS;
  ws->state = MASTRA__WS_OPEN;
  ws->opened = 1;
  ws->changed = 1;
  pump(ws);
}

/* The head of a 101 answer: check it, then hand over to wslay. */
static void check_upgrade(mastra__ws *ws) {
  const char *v;
  size_t vlen, i;
  v = find_header(ws, "Upgrade", &vlen);
  if (v == NULL || !mastra__list_has(v, vlen, "websocket")) {
    fail(ws, "bad_handshake", "%s answered 101 without 'Upgrade: websocket'",
         ws->target);
    return;
  }
  v = find_header(ws, "Connection", &vlen);
  if (v == NULL || !mastra__list_has(v, vlen, "upgrade")) {
    fail(ws, "bad_handshake", "%s answered 101 without 'Connection: Upgrade'",
         ws->target);
    return;
  }
  v = find_header(ws, "Sec-WebSocket-Accept", &vlen);
  if (v == NULL || vlen != 28 || memcmp(v, ws->accept, 28) != 0) {
    fail(ws, "bad_handshake", "%s answered with a wrong Sec-WebSocket-Accept",
         ws->target);
    return;
  }
  v = find_header(ws, "Sec-WebSocket-Extensions", &vlen);
  if (v != NULL && vlen > 0) {
    fail(ws, "bad_handshake",
         "%s selected WebSocket extensions that were not offered",
         ws->target);
    return;
  }
  v = find_header(ws, "Sec-WebSocket-Protocol", &vlen);
  if (v != NULL && vlen > 0) {
    for (i = 0; i < ws->nprotocols; i++)
      if (strlen(ws->protocols[i]) == vlen
          && memcmp(ws->protocols[i], v, vlen) == 0)
        break;
    if (i == ws->nprotocols) {
      fail(ws, "bad_handshake",
           "%s selected the subprotocol '%.*s', which was not offered",
           ws->target, (int)(vlen > 200 ? 200 : vlen), v);
      return;
    }
    ws->protocol = dupmem(v, vlen);
    if (ws->protocol == NULL) {
      fail(ws, "CURLE_OUT_OF_MEMORY", "out of memory");
      return;
    }
  }
  open_ws(ws);
}

static void refused(mastra__ws *ws) {
  size_t have = ws->head_len - ws->head_end;
  if (have > ws->body_want) have = ws->body_want;
  ws->http_body = dupmem(ws->head + ws->head_end, have);
  ws->http_body_len = ws->http_body ? have : 0;
  fail(ws, "http_status",
       "%s refused the WebSocket upgrade: HTTP %d", ws->target,
       ws->http_status);
}

/* Read the rest of a refusal's body (up to Content-Length, the end of the
** stream, or MASTRA__WS_BODY_MAX). */
static void read_body(mastra__ws *ws) {
  while (ws->head_len - ws->head_end < ws->body_want) {
    size_t n = 0;
    CURLcode rc = curl_easy_recv(ws->xfer.easy, ws->head + ws->head_len,
                                 ws->head_end + ws->body_want - ws->head_len,
                                 &n);
    if (rc == CURLE_AGAIN) {
      if (mastra__io_start(&ws->io, EPOLLIN) < 0) break;
      return;
    }
    if (rc != CURLE_OK || n == 0) break;
    ws->head_len += n;
  }
  refused(ws);
}

static void parse_head(mastra__ws *ws) {
  const char *h = ws->head;
  const char *v;
  size_t vlen;
  int status = 0, i;
  if (ws->head_end < 12 || strncmp(h, "HTTP/1.", 7) != 0 || h[8] != ' ') {
    fail(ws, "bad_handshake", "%s did not answer with HTTP/1.1", ws->target);
    return;
  }
  for (i = 9; i < 12; i++) {
    if (h[i] < '0' || h[i] > '9') {
      fail(ws, "bad_handshake", "%s answered with a bad status line",
           ws->target);
      return;
    }
    status = status * 10 + (h[i] - '0');
  }
  if (status == 101) {
    check_upgrade(ws);
    return;
  }
  ws->http_status = status;
  ws->body_want = 0;
  v = find_header(ws, "Content-Length", &vlen);
  if (v != NULL) {
    size_t k;
    for (k = 0; k < vlen && v[k] >= '0' && v[k] <= '9'; k++) {
      if (ws->body_want > MASTRA__WS_BODY_MAX) break;
      ws->body_want = ws->body_want * 10 + (size_t)(v[k] - '0');
    }
  } else if (find_header(ws, "Transfer-Encoding", &vlen) == NULL) {
    ws->body_want = MASTRA__WS_BODY_MAX; /* until the end of the stream */
  }
  if (ws->body_want > MASTRA__WS_BODY_MAX) ws->body_want = MASTRA__WS_BODY_MAX;
  if (ws->head_len - ws->head_end >= ws->body_want) {
    refused(ws);
    return;
  }
  ws->phase = PH_BODY;
  read_body(ws);
}

static void read_head(mastra__ws *ws) {
  for (;;) {
    size_t n = 0, from;
    char *end;
    CURLcode rc;
    if (ws->head_len == MASTRA__WS_HEAD_MAX) {
      fail(ws, "bad_handshake", "the answer of %s to the upgrade has a head"
           " larger than %d bytes", ws->target, MASTRA__WS_HEAD_MAX);
      return;
    }
    rc = curl_easy_recv(ws->xfer.easy, ws->head + ws->head_len,
                        MASTRA__WS_HEAD_MAX - ws->head_len, &n);
    if (rc == CURLE_AGAIN) {
      int r = mastra__io_start(&ws->io, EPOLLIN);
      if (r < 0)
        fail(ws, "CURLE_RECV_ERROR", "cannot watch the socket of %s: %s",
             ws->target, strerror(-r));
      return;
    }
    if (rc != CURLE_OK) {
      fail_curl(ws, rc, "no answer to the WebSocket upgrade from");
      return;
    }
    if (n == 0) {
      fail(ws, "connection_closed", "%s closed the connection before"
           " answering the WebSocket upgrade", ws->target);
      return;
    }
    from = ws->head_len > 3 ? ws->head_len - 3 : 0;
    ws->head_len += n;
    end = memmem(ws->head + from, ws->head_len - from, "\r\n\r\n", 4);
    if (end != NULL) {
      ws->head_end = (size_t)(end - ws->head) + 4;
      parse_head(ws);
      return;
    }
  }
}

static void send_request(mastra__ws *ws) {
  CURLcode rc = send_from(ws, ws->request, ws->req_len, &ws->req_off);
  if (rc == CURLE_AGAIN) {
    int r = mastra__io_start(&ws->io, EPOLLOUT);
    if (r < 0)
      fail(ws, "CURLE_SEND_ERROR", "cannot watch the socket of %s: %s",
           ws->target, strerror(-r));
    return;
  }
  if (rc != CURLE_OK) {
    fail_curl(ws, rc, "cannot send the WebSocket upgrade to");
    return;
  }
  free(ws->request);
  ws->request = NULL;
  /* room for the head plus a refusal's body */
  ws->head = malloc(MASTRA__WS_HEAD_MAX + MASTRA__WS_BODY_MAX);
  if (ws->head == NULL) {
    fail(ws, "CURLE_OUT_OF_MEMORY", "out of memory");
    return;
  }
  ws->phase = PH_HEAD;
  read_head(ws);
}

static void on_io(mastra__io *io, uint32_t revents) {
  mastra__ws *ws = io->data;
  (void)revents;
  switch (ws->phase) {
  case PH_SEND: send_request(ws); break;
  case PH_HEAD: read_head(ws); break;
  case PH_BODY: read_body(ws); break;
  case PH_WS: pump(ws); break;
  default: mastra__io_stop(io); break;
  }
}

/* libcurl has connected (or failed to): runs in the drain of our multi. */
static void on_connected(mastra__xfer *x, CURLcode rc) {
  mastra__ws *ws = (mastra__ws *)((char *)x - offsetof(mastra__ws, xfer));
  curl_socket_t fd = CURL_SOCKET_BAD;
  if (ws->phase != PH_CONNECT) return;
  if (rc != CURLE_OK) {
    fail_curl(ws, rc, "cannot connect to");
    return;
  }
  if (curl_easy_getinfo(x->easy, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK
      || fd == CURL_SOCKET_BAD) {
    fail(ws, "CURLE_COULDNT_CONNECT", "no socket for %s", ws->target);
    return;
  }
  mastra__io_init(ws->loop, &ws->io, fd, on_io, ws);
  ws->phase = PH_SEND;
  send_request(ws);
}

/* }====== */

/* {====== starting ====== */

/* Append printf output to a growing string; -1 when out of memory. */
static int appendf(char **buf, size_t *len, size_t *cap, const char *fmt,
                   ...) {
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return -1;
  if (*len + (size_t)n + 1 > *cap) {
    size_t c = *cap ? *cap : 512;
    char *p;
    while (c < *len + (size_t)n + 1) c *= 2;
    p = realloc(*buf, c);
    if (p == NULL) return -1;
    *buf = p;
    *cap = c;
  }
  va_start(ap, fmt);
  vsnprintf(*buf + *len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  *len += (size_t)n;
  return 0;
}

typedef struct url_parts {
  char *scheme, *host, *port, *path, *query;
} url_parts;

static void free_parts(url_parts *u) {
  curl_free(u->scheme);
  curl_free(u->host);
  curl_free(u->port);
  curl_free(u->path);
  curl_free(u->query);
}

/* Parse url; fills *secure. Returns NULL or an error name. */
static const char *parse_url(const char *url, url_parts *u, int *secure,
                             char *err, size_t errlen) {
  CURLU *h = curl_url();
  CURLUcode uc;
  memset(u, 0, sizeof *u);
  if (h == NULL) {
    snprintf(err, errlen, "out of memory");
    return "CURLE_OUT_OF_MEMORY";
  }
  uc = curl_url_set(h, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
  if (uc == CURLUE_OK) uc = curl_url_get(h, CURLUPART_SCHEME, &u->scheme, 0);
  if (uc == CURLUE_OK) uc = curl_url_get(h, CURLUPART_HOST, &u->host, 0);
  if (uc == CURLUE_OK) uc = curl_url_get(h, CURLUPART_PATH, &u->path, 0);
  if (uc == CURLUE_OK) {
    curl_url_get(h, CURLUPART_PORT, &u->port, 0);   /* absent: default */
    curl_url_get(h, CURLUPART_QUERY, &u->query, 0); /* absent: none */
  }
  curl_url_cleanup(h);
  if (uc != CURLUE_OK) {
    snprintf(err, errlen, "bad WebSocket URL '%.300s': %s", url,
             curl_url_strerror(uc));
    free_parts(u);
    return "CURLE_URL_MALFORMAT";
  }
  if (strcasecmp(u->scheme, "ws") == 0 || strcasecmp(u->scheme, "http") == 0) {
    *secure = 0;
  } else if (strcasecmp(u->scheme, "wss") == 0
             || strcasecmp(u->scheme, "https") == 0) {
    *secure = 1;
  } else {
    snprintf(err, errlen, "bad WebSocket URL '%.300s': the scheme must be"
             " ws or wss", url);
    free_parts(u);
    return "CURLE_UNSUPPORTED_PROTOCOL";
  }
  return NULL;
}

static int build_request(mastra__ws *ws, const mastra__ws_opts *o,
                         const url_parts *u, int secure) {
  unsigned char nonce[16];
  char key[MASTRA__BASE64_LEN(16) + 1];
  size_t len = 0, cap = 0, i;
  char *buf = NULL;
  int rc;
  const char *dflt = secure ? "443" : "80";
  if (mastra__random_bytes(nonce, sizeof nonce) < 0) return -1;
  mastra__base64_encode(nonce, sizeof nonce, key);
  mastra__ws_accept_key(key, ws->accept);
  rc = appendf(&buf, &len, &cap, "GET %s%s%s HTTP/1.1\r\nHost: %s%s%s\r\n"
               "Upgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n",
               u->path, u->query ? "?" : "", u->query ? u->query : "",
               u->host, u->port && strcmp(u->port, dflt) != 0 ? ":" : "",
               u->port && strcmp(u->port, dflt) != 0 ? u->port : "", key);
  for (i = 0; rc == 0 && i < o->nprotocols; i++)
    rc = appendf(&buf, &len, &cap, "%s%s%s",
                 i == 0 ? "Sec-WebSocket-Protocol: " : ", ", o->protocols[i],
                 i + 1 == o->nprotocols ? "\r\n" : "");
  for (i = 0; rc == 0 && i < o->nheaders; i++)
    rc = appendf(&buf, &len, &cap, "%s\r\n", o->headers[i]);
  if (rc == 0) rc = appendf(&buf, &len, &cap, "\r\n");
  if (rc < 0) {
    free(buf);
    return -1;
  }
  ws->request = buf;
  ws->req_len = len;
  return 0;
}

int mastra__ws_connect(mastra__loop *loop, const mastra__ws_opts *o,
                       mastra__ws **out, const char **errname, char *err,
                       size_t errlen) {
  mastra__ws *ws;
  url_parts u;
  int secure = 0;
  size_t i;
  char *curl_url_s = NULL;
  size_t cl = 0, cc = 0;
  CURL *e;
  *out = NULL;
  *errname = "CURLE_OUT_OF_MEMORY";
  if (mastra__loop_closed(loop)) {
    *errname = "closed";
    snprintf(err, errlen, "the event loop is closed");
    return -1;
  }
  *errname = parse_url(o->url, &u, &secure, err, errlen);
  if (*errname != NULL) return -1;
  *errname = "CURLE_OUT_OF_MEMORY";
  ws = calloc(1, sizeof *ws);
  if (ws == NULL) goto oom;
  ws->loop = loop;
  ws->handshake_ms = o->handshake_timeout_ms;
  ws->close_ms = o->close_timeout_ms ? o->close_timeout_ms
                                     : MASTRA__WS_DEFAULT_CLOSE_MS;
  ws->max_message = o->max_message ? o->max_message
                                   : MASTRA__WS_DEFAULT_MAX_MESSAGE;
  ws->keepalive_ms = o->keepalive_ms;
  mastra__timer_init(loop, &ws->timer, on_timer, ws);
  mastra__io_init(loop, &ws->io, -1, on_io, ws);
  ws->target = dupstr(o->url);
  if (ws->target == NULL) goto oom;
  if (o->nprotocols > 0) {
    ws->protocols = calloc(o->nprotocols, sizeof *ws->protocols);
    if (ws->protocols == NULL) goto oom;
    for (i = 0; i < o->nprotocols; i++) {
      ws->protocols[i] = dupstr(o->protocols[i]);
      if (ws->protocols[i] == NULL) goto oom_list;
      ws->nprotocols++;
    }
  }
  if (build_request(ws, o, &u, secure) < 0) goto oom_list;
  if (mastra__multi_init(&ws->m, loop) < 0) goto oom_list;
  /* libcurl connects to the same host and port over http(s) */
  if (appendf(&curl_url_s, &cl, &cc, "%s://%s%s%s/", secure ? "https" : "http",
              u.host, u.port ? ":" : "", u.port ? u.port : "") < 0)
    goto oom_multi;
  e = ws->xfer.easy = curl_easy_init();
  if (e == NULL) goto oom_multi;
  ws->xfer.done = on_connected;
  curl_easy_setopt(e, CURLOPT_URL, curl_url_s);
  curl_easy_setopt(e, CURLOPT_CONNECT_ONLY, 1L);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  /* through a proxy, tunnel; over TLS, ask ALPN for HTTP/1.1 only */
  curl_easy_setopt(e, CURLOPT_HTTPPROXYTUNNEL, 1L);
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  if (o->ca_file != NULL) curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file);
  if (o->handshake_timeout_ms > 0)
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)o->handshake_timeout_ms);
  if (mastra__multi_add(&ws->m, &ws->xfer) != CURLM_OK) goto oom_easy;
  free(curl_url_s);
  free_parts(&u);
  if (o->handshake_timeout_ms > 0)
    mastra__timer_start(&ws->timer, o->handshake_timeout_ms);
  mastra__loop_ref(loop);
  ws->id = mastra__loop_newid(loop);
  ws->state = MASTRA__WS_CONNECTING;
  ws->phase = PH_CONNECT;
  ws->handle.shutdown = ws_shutdown;
  ws->handle.free = ws_free;
  mastra__loop_add_handle(loop, &ws->handle);
  *errname = NULL;
  *out = ws;
  return 0;
oom_easy:
  curl_easy_cleanup(ws->xfer.easy);
  ws->xfer.easy = NULL;
oom_multi:
  mastra__multi_close(&ws->m);
oom_list:
  for (i = 0; i < ws->nprotocols; i++) free(ws->protocols[i]);
  free(ws->protocols);
  free(ws->request);
oom:
  if (ws != NULL) free(ws->target);
  free(ws);
  free(curl_url_s);
  free_parts(&u);
  snprintf(err, errlen, "out of memory");
  return -1;
}

/* }====== */

/* {====== the owner's calls ====== */

int mastra__ws_send(mastra__ws *ws, const void *data, size_t len, int binary,
                    char *err, size_t errlen) {
  struct wslay_event_msg msg;
  int rc;
  if (ws->state != MASTRA__WS_OPEN) {
    snprintf(err, errlen, "the WebSocket is %s",
             mastra__ws_state_name(ws->state));
    return -1;
  }
  msg.opcode = binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME;
  msg.msg = data;
  msg.msg_length = len;
  rc = wslay_event_queue_msg(ws->ctx, &msg);
  if (rc != 0) {
    snprintf(err, errlen, "%s", rc == WSLAY_ERR_NOMEM ? "out of memory"
                                : "the WebSocket is closing");
    return -1;
  }
  pump(ws);
  return 0;
}

const mastra__ws_msg *mastra__ws_peek(const mastra__ws *ws) {
  return ws->qhead;
}

void mastra__ws_pop(mastra__ws *ws) {
  mastra__ws_msg *m = ws->qhead;
  if (m == NULL) return;
  ws->qhead = m->next;
  if (ws->qhead == NULL) ws->qtail = NULL;
  ws->qbytes -= m->len;
  ws->qcount--;
  free(m);
  if (ws->paused && ws->qbytes < MASTRA__WS_PENDING_MAX) {
    ws->paused = 0;
    pump(ws); /* TLS may hold bytes that epoll will not report */
  }
}

size_t mastra__ws_buffered(const mastra__ws *ws) {
  return ws->ctx ? wslay_event_get_queued_msg_length(ws->ctx)
                       + (ws->out_len - ws->out_off)
                 : 0;
}

void mastra__ws_close(mastra__ws *ws, int code, const char *reason,
                      size_t reason_len) {
  switch (ws->state) {
  case MASTRA__WS_CONNECTING:
    finish(ws);
    break;
  case MASTRA__WS_OPEN:
    if (wslay_event_queue_close(ws->ctx, (uint16_t)code,
                                (const uint8_t *)reason, reason_len) != 0) {
      finish(ws);
      break;
    }
    ws->state = MASTRA__WS_CLOSING;
    ws->changed = 1;
    mastra__timer_start(&ws->timer, ws->close_ms);
    pump(ws);
    break;
  default:
    break;
  }
}

void mastra__ws_release(mastra__ws *ws) {
  ws->orphan = 1;
  free_queue(ws);
  switch (ws->state) {
  case MASTRA__WS_CLOSED:
    mastra__loop_defer_free(ws->loop, &ws->handle);
    break;
  case MASTRA__WS_OPEN:
    mastra__ws_close(ws, 1000, "", 0); /* finishes (and frees) later */
    break;
  case MASTRA__WS_CLOSING:
    if (ws->paused) {
      ws->paused = 0;
      pump(ws);
    }
    break;
  default:
    finish(ws);
    break;
  }
}

/* }====== */
