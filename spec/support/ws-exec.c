/*
** ws-exec: a blocking test client for the exec WebSocket of
** mastra-platform (docs/platform.md: GET /ws/exec and its frames). It shares
** no code with the server but SHA-1: plain POSIX sockets, its own HTTP
** upgrade request and Sec-WebSocket-Accept check, a wslay client context.
**
**   ws-exec [--cwd DIR] [--env K=V]... [--close-after-ms N] [--protocol P]
**           WS_URL TOKEN COMMAND
**
** It offers `Sec-WebSocket-Protocol: railway-shell, TOKEN` (P instead of
** railway-shell with --protocol), requires the server to select
** railway-shell among the offered protocols, sends init_exec (keys
** command, cwd, env; cwd and env only when given) and stdin_close, and
** writes the bytes of stdout frames to stdout and of stderr frames to
** stderr as they arrive. After an exit frame it closes with 1000, as the
** Mastra client does. --close-after-ms N closes (1000) N ms after the
** handshake without waiting for the exit.
**
** For the exec-resume/1 extension (docs/platform.md "Resumable execs"):
** --init-json OBJ merges the members of the JSON object OBJ into
** init_exec's data (exec_id, durable_session_name, resume, ...); offset
** frames (tags 0x11, 0x13) write their bytes as tags 1 and 3 do;
** --frames FILE appends a line for every frame that came: "T <json>" for
** a text frame, "B <tag> <offset> <length>" for an offset frame;
** --cut-after-bytes N drops the connection (no close frame) once N bytes
** of output came; --ack answers each offset frame with an output_ack of
** what it holds; --no-stdin-close sends no stdin_close. --stdin-file F
** sends F's bytes from --stdin-from N (default 0) as stdin frames of
** 16 KiB, then stdin_close; with --cut-after-stdin N it sends N of them
** only, and drops the connection once they are out and a stdin_ack came.
** --hello sends Railway's {"type":"exec_hello"} before init_exec.
** --stdin-chunk N sends stdin frames of N bytes (1 to 1048575, default
** 16384; the tag makes the message N + 1).
**
** The last line on stderr is
**   ws-exec: exit=<code|none> close=<code|none> opened=<0|1>
** (close: the code of the server's close frame, 1005 if it had none).
** Exit status: the command's exit code; 100 when the handshake was
** answered with an HTTP status other than 101 (printed, with the body);
** 101 on a transport error (anything else without an exit frame); 2 on a
** usage error.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <wslay/wslay.h>

#include "hash.h"

#define EXIT_HTTP_STATUS 100
#define EXIT_TRANSPORT 101
#define EXIT_USAGE 2
#define HANDSHAKE_TIMEOUT_MS 30000
#define CLOSE_WAIT_MS 5000
#define HEAD_MAX 16384
#define BODY_MAX 16384

typedef struct client {
  int fd;
  wslay_event_context_ptr ctx;
  char *extra; /* bytes read past the response head */
  size_t extra_len, extra_off;
  int opened;
  int have_exit, exit_code;
  int have_close, close_code;
  char close_reason[128];
  int closing; /* we queued our close */
  FILE *frames;       /* --frames, or NULL */
  long long cut_after; /* --cut-after-bytes, or -1 */
  long long got;      /* output bytes that came */
  int cut;            /* the connection was dropped on purpose */
  int ack;            /* --ack */
  unsigned long long held[2]; /* the end of what came, each stream */
  long long cut_after_stdin;  /* --cut-after-stdin, or -1 */
  int stdin_acked;            /* a stdin_ack came */
  int hello;                  /* --hello */
  size_t stdin_chunk;         /* --stdin-chunk */
} client;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void usage(void) {
  fprintf(stderr,
          "usage: ws-exec [--cwd DIR] [--env K=V]... [--close-after-ms N]"
          " [--protocol P]\n               [--init-json OBJ] [--frames FILE]"
          " [--cut-after-bytes N] [--ack]\n               [--no-stdin-close]\n"
          "               [--stdin-file F [--stdin-from N]"
          " [--cut-after-stdin N]] [--hello]\n"
          "               [--stdin-chunk N]\n"
          "               WS_URL TOKEN COMMAND\n");
}

static void write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      struct pollfd pfd = {fd, POLLOUT, 0};
      poll(&pfd, 1, 1000);
      continue;
    }
    if (n <= 0) return; /* the reader went away: nothing to do */
    p += n;
    len -= (size_t)n;
  }
}

/* {====== URL and connection ====== */

typedef struct ws_url {
  char host[256];
  char port[8];
  char authority[300]; /* for the Host header */
  char path[2048];
} ws_url;

static int parse_url(const char *url, ws_url *u) {
  const char *a, *slash;
  size_t alen;
  if (strncasecmp(url, "wss://", 6) == 0) {
    fprintf(stderr, "ws-exec: wss:// is not supported\n");
    return -1;
  }
  if (strncasecmp(url, "ws://", 5) != 0) {
    fprintf(stderr, "ws-exec: the URL must start with ws://\n");
    return -1;
  }
  a = url + 5;
  slash = a + strcspn(a, "/?");
  alen = (size_t)(slash - a);
  if (alen == 0 || alen >= sizeof u->authority) goto bad;
  memcpy(u->authority, a, alen);
  u->authority[alen] = '\0';
  snprintf(u->path, sizeof u->path, "%s%s", *slash == '/' ? "" : "/", slash);
  snprintf(u->port, sizeof u->port, "80");
  if (u->authority[0] == '[') {
    char *close = strchr(u->authority, ']');
    size_t hlen;
    if (close == NULL) goto bad;
    hlen = (size_t)(close - u->authority - 1);
    if (hlen == 0 || hlen >= sizeof u->host) goto bad;
    memcpy(u->host, u->authority + 1, hlen);
    u->host[hlen] = '\0';
    if (close[1] == ':') {
      if (strlen(close + 2) == 0 || strlen(close + 2) >= sizeof u->port)
        goto bad;
      snprintf(u->port, sizeof u->port, "%s", close + 2);
    } else if (close[1] != '\0') {
      goto bad;
    }
  } else {
    char *colon = strrchr(u->authority, ':');
    size_t hlen = colon ? (size_t)(colon - u->authority) : alen;
    if (hlen == 0 || hlen >= sizeof u->host) goto bad;
    memcpy(u->host, u->authority, hlen);
    u->host[hlen] = '\0';
    if (colon != NULL) {
      if (strlen(colon + 1) == 0 || strlen(colon + 1) >= sizeof u->port)
        goto bad;
      snprintf(u->port, sizeof u->port, "%s", colon + 1);
    }
  }
  return 0;
bad:
  fprintf(stderr, "ws-exec: bad URL '%s'\n", url);
  return -1;
}

static int wait_fd(int fd, short events, int64_t deadline) {
  for (;;) {
    struct pollfd pfd = {fd, events, 0};
    int64_t left = deadline - now_ms();
    int n;
    if (left <= 0) return 0;
    n = poll(&pfd, 1, left > 60000 ? 60000 : (int)left);
    if (n > 0) return 1;
    if (n < 0 && errno != EINTR) return -1;
  }
}

/* A non-blocking socket connected to u, or -1. */
static int connect_to(const ws_url *u, int64_t deadline) {
  struct addrinfo hints, *res, *ai;
  int fd = -1, rc;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  rc = getaddrinfo(u->host, u->port, &hints, &res);
  if (rc != 0) {
    fprintf(stderr, "ws-exec: cannot resolve %s: %s\n", u->host,
            gai_strerror(rc));
    return -1;
  }
  for (ai = res; ai != NULL; ai = ai->ai_next) {
    int err = 0, one = 1;
    socklen_t elen = sizeof err;
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                ai->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
      if (errno != EINPROGRESS || wait_fd(fd, POLLOUT, deadline) <= 0
          || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0
          || err != 0) {
        if (err == 0) err = errno;
        fprintf(stderr, "ws-exec: cannot connect to %s: %s\n", u->authority,
                strerror(err ? err : ETIMEDOUT));
        close(fd);
        fd = -1;
        continue;
      }
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    break;
  }
  freeaddrinfo(res);
  return fd;
}

static int send_all(int fd, const char *data, size_t len, int64_t deadline) {
  while (len > 0) {
    ssize_t n = send(fd, data, len, MSG_NOSIGNAL);
    if (n > 0) {
      data += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)
        && wait_fd(fd, POLLOUT, deadline) > 0)
      continue;
    return -1;
  }
  return 0;
}

/* }====== */

/* {====== the HTTP upgrade ====== */

/* The value of header `name` in the head (lines after the status line), or
** NULL; copied into out. */
static const char *header(const char *head, const char *name, char *out,
                          size_t outlen) {
  size_t nlen = strlen(name);
  const char *line = strstr(head, "\r\n");
  while (line != NULL) {
    const char *v, *end;
    size_t vlen;
    line += 2;
    end = strstr(line, "\r\n");
    if (end == NULL || end == line) return NULL;
    if (strncasecmp(line, name, nlen) == 0 && line[nlen] == ':') {
      v = line + nlen + 1;
      while (v < end && (*v == ' ' || *v == '\t')) v++;
      vlen = (size_t)(end - v);
      while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) vlen--;
      if (vlen >= outlen) vlen = outlen - 1;
      memcpy(out, v, vlen);
      out[vlen] = '\0';
      return out;
    }
    line = end;
  }
  return NULL;
}

static int has_token(const char *list, const char *token) {
  size_t tlen = strlen(token);
  const char *p = list;
  while (*p != '\0') {
    const char *end;
    size_t n;
    while (*p == ' ' || *p == '\t' || *p == ',') p++;
    end = p + strcspn(p, ",");
    n = (size_t)(end - p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    if (n == tlen && strncasecmp(p, token, n) == 0) return 1;
    p = end;
  }
  return 0;
}

/* After a non-101 status: print it and what the body says. */
static void report_status(client *c, int status, const char *head,
                          int64_t deadline) {
  char cl[32], body[BODY_MAX + 1];
  size_t want = 0, have = c->extra_len;
  if (header(head, "Content-Length", cl, sizeof cl) != NULL)
    want = (size_t)strtoull(cl, NULL, 10);
  if (want > BODY_MAX) want = BODY_MAX;
  if (have > want) have = want;
  memcpy(body, c->extra, have);
  while (have < want && wait_fd(c->fd, POLLIN, deadline) > 0) {
    ssize_t n = recv(c->fd, body + have, want - have, 0);
    if (n <= 0) break;
    have += (size_t)n;
  }
  body[have] = '\0';
  fprintf(stderr, "ws-exec: handshake failed: HTTP %d\n", status);
  if (have > 0) fprintf(stderr, "ws-exec: %s\n", body);
}

/* 0: upgraded; EXIT_HTTP_STATUS or EXIT_TRANSPORT otherwise. */
static int handshake(client *c, const ws_url *u, const char *protocol,
                     const char *token, int64_t deadline) {
  unsigned char nonce[16];
  char key[25], want_accept[29], req[4096 + 2048], val[512];
  char head[HEAD_MAX + 1];
  size_t hlen = 0;
  char *end = NULL;
  int n, status = 0;
  if (getrandom(nonce, sizeof nonce, 0) != (ssize_t)sizeof nonce) {
    fprintf(stderr, "ws-exec: getrandom: %s\n", strerror(errno));
    return EXIT_TRANSPORT;
  }
  mastra__base64_encode(nonce, sizeof nonce, key);
  mastra__ws_accept_key(key, want_accept);
  n = snprintf(req, sizeof req,
               "GET %s HTTP/1.1\r\n"
               "Host: %s\r\n"
               "Upgrade: websocket\r\n"
               "Connection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\n"
               "Sec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Protocol: %s, %s\r\n"
               "\r\n",
               u->path, u->authority, key, protocol, token);
  if (n < 0 || (size_t)n >= sizeof req) {
    fprintf(stderr, "ws-exec: the request is too long\n");
    return EXIT_TRANSPORT;
  }
  if (send_all(c->fd, req, (size_t)n, deadline) < 0) {
    fprintf(stderr, "ws-exec: cannot send the upgrade request: %s\n",
            strerror(errno));
    return EXIT_TRANSPORT;
  }
  /* the response head */
  while (end == NULL) {
    ssize_t r;
    if (hlen == HEAD_MAX) {
      fprintf(stderr, "ws-exec: the response head is too large\n");
      return EXIT_TRANSPORT;
    }
    r = recv(c->fd, head + hlen, HEAD_MAX - hlen, 0);
    if (r > 0) {
      hlen += (size_t)r;
      head[hlen] = '\0';
      end = strstr(head, "\r\n\r\n");
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int w = wait_fd(c->fd, POLLIN, deadline);
      if (w > 0) continue;
      fprintf(stderr, "ws-exec: %s while waiting for the upgrade response\n",
              w == 0 ? "timed out" : strerror(errno));
      return EXIT_TRANSPORT;
    }
    fprintf(stderr, "ws-exec: the connection %s before the upgrade response\n",
            r == 0 ? "closed" : strerror(errno));
    return EXIT_TRANSPORT;
  }
  end += 4;
  c->extra_len = hlen - (size_t)(end - head);
  if (c->extra_len > 0) {
    c->extra = malloc(c->extra_len);
    if (c->extra == NULL) return EXIT_TRANSPORT;
    memcpy(c->extra, end, c->extra_len);
  }
  end[-2] = '\0'; /* keep the last header's CRLF for header() */
  if (sscanf(head, "HTTP/1.%*d %d", &status) != 1) {
    fprintf(stderr, "ws-exec: not an HTTP response\n");
    return EXIT_TRANSPORT;
  }
  if (status != 101) {
    report_status(c, status, head, deadline);
    return EXIT_HTTP_STATUS;
  }
  if (header(head, "Upgrade", val, sizeof val) == NULL
      || !has_token(val, "websocket")) {
    fprintf(stderr, "ws-exec: bad handshake: no 'Upgrade: websocket'\n");
    return EXIT_TRANSPORT;
  }
  if (header(head, "Connection", val, sizeof val) == NULL
      || !has_token(val, "upgrade")) {
    fprintf(stderr, "ws-exec: bad handshake: no 'Connection: Upgrade'\n");
    return EXIT_TRANSPORT;
  }
  if (header(head, "Sec-WebSocket-Accept", val, sizeof val) == NULL
      || strcmp(val, want_accept) != 0) {
    fprintf(stderr, "ws-exec: bad handshake: Sec-WebSocket-Accept is '%s',"
            " expected '%s'\n",
            header(head, "Sec-WebSocket-Accept", val, sizeof val) ? val : "",
            want_accept);
    return EXIT_TRANSPORT;
  }
  /* a WHATWG client refuses a protocol it did not offer */
  if (header(head, "Sec-WebSocket-Protocol", val, sizeof val) == NULL
      || (strcmp(val, protocol) != 0 && strcmp(val, token) != 0)) {
    fprintf(stderr, "ws-exec: bad handshake: the server selected the"
            " subprotocol '%s', which was not offered\n",
            header(head, "Sec-WebSocket-Protocol", val, sizeof val) ? val
                                                                    : "");
    return EXIT_TRANSPORT;
  }
  if (strcmp(val, "railway-shell") != 0) {
    fprintf(stderr, "ws-exec: bad handshake: the server selected '%s', not"
            " 'railway-shell'\n", val);
    return EXIT_TRANSPORT;
  }
  return 0;
}

/* }====== */

/* {====== WebSocket ====== */

static ssize_t c_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                      int flags, void *user) {
  client *c = user;
  ssize_t n;
  (void)flags;
  if (c->extra_off < c->extra_len) {
    size_t k = c->extra_len - c->extra_off;
    if (k > len) k = len;
    memcpy(buf, c->extra + c->extra_off, k);
    c->extra_off += k;
    return (ssize_t)k;
  }
  do
    n = recv(c->fd, buf, len, 0);
  while (n < 0 && errno == EINTR);
  if (n > 0) return n;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
  } else {
    if (n < 0) fprintf(stderr, "ws-exec: recv: %s\n", strerror(errno));
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
  }
  return -1;
}

static ssize_t c_send(wslay_event_context_ptr ctx, const uint8_t *data,
                      size_t len, int flags, void *user) {
  client *c = user;
  ssize_t n;
  (void)flags;
  do
    n = send(c->fd, data, len, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n >= 0) return n;
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
  } else {
    fprintf(stderr, "ws-exec: send: %s\n", strerror(errno));
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
  }
  return -1;
}

static int c_genmask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                     void *user) {
  (void)user;
  if (getrandom(buf, len, 0) != (ssize_t)len) {
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
    return -1;
  }
  return 0;
}

static void close_once(client *c) {
  if (c->closing) return;
  c->closing = 1;
  /* NO_MORE_MSG: a close is queued already (the echo of the server's) */
  wslay_event_queue_close(c->ctx, 1000, NULL, 0);
}

static void on_text(client *c, const uint8_t *msg, size_t len) {
  cJSON *j = len > 0 ? cJSON_ParseWithLength((const char *)msg, len) : NULL;
  const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
  if (cJSON_IsString(type) && strcmp(type->valuestring, "exit") == 0
      && !c->have_exit) {
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(data, "exit_code");
    c->have_exit = 1;
    c->exit_code = cJSON_IsNumber(code) ? code->valueint : 0;
    close_once(c); /* settle: the Mastra client closes with 1000 */
  }
  if (cJSON_IsString(type) && strcmp(type->valuestring, "stdin_ack") == 0)
    c->stdin_acked = 1;
  if (c->frames != NULL) {
    fprintf(c->frames, "T %.*s\n", (int)len, (const char *)msg);
    fflush(c->frames);
  }
  /* malformed JSON, durable_session and other types are ignored */
  cJSON_Delete(j);
}

static int queue_text(client *c, const char *text);

/* [0x11|0x13][u64 BE offset][bytes] */
static void on_offset_frame(client *c, const uint8_t *msg, size_t len) {
  unsigned long long off = 0;
  int i, stream = msg[0] == 0x11 ? 0 : 1;
  if (len < 9) return;
  for (i = 1; i < 9; i++) off = (off << 8) | msg[i];
  if (c->frames != NULL) {
    fprintf(c->frames, "B %d %llu %zu\n", msg[0], off, len - 9);
    fflush(c->frames);
  }
  write_all(stream == 0 ? 1 : 2, msg + 9, len - 9);
  if (off + (len - 9) > c->held[stream]) c->held[stream] = off + (len - 9);
  c->got += (long long)(len - 9);
  if (c->ack) {
    char text[160];
    snprintf(text, sizeof text, "{\"type\":\"output_ack\",\"data\":"
             "{\"stdout\":%llu,\"stderr\":%llu}}", c->held[0], c->held[1]);
    queue_text(c, text);
  }
}

static void c_on_msg(wslay_event_context_ptr ctx,
                     const struct wslay_event_on_msg_recv_arg *arg,
                     void *user) {
  client *c = user;
  (void)ctx;
  switch (arg->opcode) {
  case WSLAY_BINARY_FRAME:
    if (arg->msg_length <= 1) break; /* a bare tag is ignored */
    if (arg->msg[0] == 0x11 || arg->msg[0] == 0x13)
      on_offset_frame(c, arg->msg, arg->msg_length);
    else if (arg->msg[0] == 1)
      write_all(1, arg->msg + 1, arg->msg_length - 1);
    else if (arg->msg[0] == 3)
      write_all(2, arg->msg + 1, arg->msg_length - 1);
    break;
  case WSLAY_TEXT_FRAME:
    on_text(c, arg->msg, arg->msg_length);
    break;
  case WSLAY_CONNECTION_CLOSE:
    c->have_close = 1;
    c->close_code = arg->status_code != 0 ? arg->status_code : 1005;
    if (arg->msg_length > 2) {
      size_t n = arg->msg_length - 2;
      if (n >= sizeof c->close_reason) n = sizeof c->close_reason - 1;
      memcpy(c->close_reason, arg->msg + 2, n);
      c->close_reason[n] = '\0';
    }
    break;
  default:
    break;
  }
}

static int queue_text(client *c, const char *text) {
  struct wslay_event_msg m;
  m.opcode = WSLAY_TEXT_FRAME;
  m.msg = (const uint8_t *)text;
  m.msg_length = strlen(text);
  return wslay_event_queue_msg(c->ctx, &m);
}

/* Run the session until the closing handshake is over, the connection
** breaks, or a close went unanswered for CLOSE_WAIT_MS. */
static int queue_stdin(client *c, const char *data, size_t len) {
  uint8_t *frame = malloc(1 + c->stdin_chunk);
  if (frame == NULL) return -1;
  while (len > 0) {
    struct wslay_event_msg m;
    size_t n = len < c->stdin_chunk ? len : c->stdin_chunk;
    frame[0] = 2;
    memcpy(frame + 1, data, n);
    m.opcode = WSLAY_BINARY_FRAME;
    m.msg = frame;
    m.msg_length = n + 1;
    if (wslay_event_queue_msg(c->ctx, &m) != 0) {
      free(frame);
      return -1;
    }
    data += n;
    len -= n;
  }
  free(frame);
  return 0;
}

static void run(client *c, const char *init, long close_after_ms,
                int stdin_close, const char *in, size_t in_len) {
  static const struct wslay_event_callbacks cbs = {
      c_recv, c_send, c_genmask, NULL, NULL, NULL, c_on_msg};
  int64_t close_at = close_after_ms >= 0 ? now_ms() + close_after_ms : -1;
  int64_t close_deadline = -1;
  int first = 1;
  if (wslay_event_context_client_init(&c->ctx, &cbs, c) != 0) {
    fprintf(stderr, "ws-exec: out of memory\n");
    return;
  }
  wslay_event_config_set_max_recv_msg_length(c->ctx, 64u << 20);
  if (c->cut_after_stdin >= 0 && (size_t)c->cut_after_stdin < in_len)
    in_len = (size_t)c->cut_after_stdin;
  if ((c->hello && queue_text(c, "{\"type\":\"exec_hello\"}") != 0)
      || queue_text(c, init) != 0 || queue_stdin(c, in, in_len) != 0
      || (stdin_close && c->cut_after_stdin < 0
          && queue_text(c, "{\"type\":\"stdin_close\"}"))) {
    fprintf(stderr, "ws-exec: cannot queue init_exec\n");
    return;
  }
  for (;;) {
    struct pollfd pfd;
    int64_t now = now_ms(), wake = -1;
    int timeout, n;
    if (close_at >= 0 && now >= close_at) {
      close_at = -1;
      close_once(c);
    }
    if (close_deadline < 0
        && (c->closing || wslay_event_get_close_received(c->ctx)))
      close_deadline = now + CLOSE_WAIT_MS;
    if (close_deadline >= 0 && now >= close_deadline) {
      fprintf(stderr, "ws-exec: the closing handshake timed out\n");
      break;
    }
    if (!wslay_event_want_read(c->ctx) && !wslay_event_want_write(c->ctx))
      break;
    if (close_at >= 0) wake = close_at;
    if (close_deadline >= 0 && (wake < 0 || close_deadline < wake))
      wake = close_deadline;
    timeout = wake < 0 ? -1 : (int)(wake - now);
    pfd.fd = c->fd;
    pfd.events = (short)((wslay_event_want_read(c->ctx) ? POLLIN : 0)
                         | (wslay_event_want_write(c->ctx) ? POLLOUT : 0));
    pfd.revents = 0;
    if (first && c->extra_len > 0) { /* bytes that came with the head */
      pfd.revents = POLLIN;
      n = 1;
    } else {
      n = poll(&pfd, 1, timeout);
    }
    first = 0;
    if (n < 0 && errno != EINTR) {
      fprintf(stderr, "ws-exec: poll: %s\n", strerror(errno));
      break;
    }
    if (n <= 0) continue;
    if ((pfd.revents & (POLLIN | POLLHUP | POLLERR))
        && wslay_event_want_read(c->ctx) && wslay_event_recv(c->ctx) != 0) {
      if (!c->have_close)
        fprintf(stderr, "ws-exec: the connection broke\n");
      break;
    }
    if (c->cut_after_stdin >= 0 && c->stdin_acked
        && wslay_event_get_queued_msg_count(c->ctx) == 0) {
      c->cut = 1;
      fprintf(stderr, "ws-exec: cut after the stdin was sent\n");
      break;
    }
    if (c->cut_after >= 0 && c->got >= c->cut_after) {
      /* a cut: no close frame, the socket just goes */
      c->cut = 1;
      fprintf(stderr, "ws-exec: cut after %lld bytes\n", c->got);
      break;
    }
    if (wslay_event_want_write(c->ctx) && wslay_event_send(c->ctx) != 0) {
      if (!c->have_close) fprintf(stderr, "ws-exec: the connection broke\n");
      break;
    }
  }
}

/* }====== */

static char *init_message(const char *command, const char *cwd,
                          char **env, int nenv, const char *extra) {
  cJSON *root = cJSON_CreateObject(), *data = cJSON_CreateObject();
  char *text;
  int i;
  cJSON_AddStringToObject(root, "type", "init_exec");
  cJSON_AddStringToObject(data, "command", command);
  if (cwd != NULL && cwd[0] != '\0') cJSON_AddStringToObject(data, "cwd", cwd);
  if (nenv > 0) {
    cJSON *e = cJSON_CreateObject();
    for (i = 0; i < nenv; i++) {
      char *eq = strchr(env[i], '=');
      *eq = '\0';
      if (cJSON_GetObjectItemCaseSensitive(e, env[i]) != NULL)
        cJSON_ReplaceItemInObjectCaseSensitive(e, env[i],
                                               cJSON_CreateString(eq + 1));
      else
        cJSON_AddStringToObject(e, env[i], eq + 1);
      *eq = '=';
    }
    cJSON_AddItemToObject(data, "env", e);
  }
  if (extra != NULL) {
    cJSON *x = cJSON_Parse(extra), *it;
    if (!cJSON_IsObject(x)) {
      fprintf(stderr, "ws-exec: --init-json wants a JSON object\n");
      cJSON_Delete(x);
      cJSON_Delete(root);
      cJSON_Delete(data);
      return NULL;
    }
    while ((it = x->child) != NULL) {
      cJSON_DetachItemViaPointer(x, it);
      cJSON_DeleteItemFromObjectCaseSensitive(data, it->string);
      cJSON_AddItemToObject(data, it->string, it);
    }
    cJSON_Delete(x);
  }
  cJSON_AddItemToObject(root, "data", data);
  text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return text;
}

/* Everything but the env array, which main owns. */
static int run_main(int argc, char **argv, char **env) {
  const char *cwd = NULL, *protocol = "railway-shell";
  const char *url, *token, *command, *extra = NULL, *frames = NULL;
  const char *stdin_file = NULL;
  char *in = NULL;
  size_t in_len = 0;
  long long stdin_from = 0;
  int stdin_close = 1;
  int nenv = 0, i, rc = EXIT_TRANSPORT, hs;
  long close_after_ms = -1;
  char exit_s[16] = "none", close_s[16] = "none";
  char *init;
  ws_url u;
  client c;
  memset(&c, 0, sizeof c);
  c.fd = -1;
  c.cut_after = -1;
  c.cut_after_stdin = -1;
  c.stdin_chunk = 16384;
  for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
    const char *opt = argv[i];
    if (strcmp(opt, "--") == 0) {
      i++;
      break;
    }
    if (strcmp(opt, "--ack") == 0) {
      c.ack = 1;
      continue;
    }
    if (strcmp(opt, "--hello") == 0) {
      c.hello = 1;
      continue;
    }
    if (strcmp(opt, "--no-stdin-close") == 0) {
      stdin_close = 0;
      continue;
    }
    if (i + 1 >= argc) {
      usage();
      return EXIT_USAGE;
    }
    if (strcmp(opt, "--cwd") == 0) {
      cwd = argv[++i];
    } else if (strcmp(opt, "--env") == 0) {
      char *kv = argv[++i];
      if (strchr(kv, '=') == NULL || kv[0] == '=') {
        fprintf(stderr, "ws-exec: --env wants K=V (got '%s')\n", kv);
        return EXIT_USAGE;
      }
      env[nenv++] = kv;
    } else if (strcmp(opt, "--close-after-ms") == 0) {
      char *end;
      close_after_ms = strtol(argv[++i], &end, 10);
      if (*end != '\0' || close_after_ms < 0) {
        fprintf(stderr, "ws-exec: --close-after-ms wants a number\n");
        return EXIT_USAGE;
      }
    } else if (strcmp(opt, "--protocol") == 0) {
      protocol = argv[++i];
    } else if (strcmp(opt, "--init-json") == 0) {
      extra = argv[++i];
    } else if (strcmp(opt, "--stdin-file") == 0) {
      stdin_file = argv[++i];
    } else if (strcmp(opt, "--stdin-from") == 0
               || strcmp(opt, "--cut-after-stdin") == 0) {
      char *end;
      long long v = strtoll(argv[i + 1], &end, 10);
      if (*end != '\0' || v < 0) {
        fprintf(stderr, "ws-exec: %s wants a number\n", opt);
        return EXIT_USAGE;
      }
      if (strcmp(opt, "--stdin-from") == 0)
        stdin_from = v;
      else
        c.cut_after_stdin = v;
      i++;
    } else if (strcmp(opt, "--stdin-chunk") == 0) {
      char *end;
      long long v = strtoll(argv[++i], &end, 10);
      if (*end != '\0' || v < 1 || v > 1048575) {
        fprintf(stderr, "ws-exec: --stdin-chunk wants 1 to 1048575\n");
        return EXIT_USAGE;
      }
      c.stdin_chunk = (size_t)v;
    } else if (strcmp(opt, "--frames") == 0) {
      frames = argv[++i];
    } else if (strcmp(opt, "--cut-after-bytes") == 0) {
      char *end;
      c.cut_after = strtoll(argv[++i], &end, 10);
      if (*end != '\0' || c.cut_after < 0) {
        fprintf(stderr, "ws-exec: --cut-after-bytes wants a number\n");
        return EXIT_USAGE;
      }
    } else {
      usage();
      return EXIT_USAGE;
    }
  }
  if (argc - i != 3) {
    usage();
    return EXIT_USAGE;
  }
  url = argv[i];
  token = argv[i + 1];
  command = argv[i + 2];
  if (parse_url(url, &u) < 0) return EXIT_USAGE;
  init = init_message(command, cwd, env, nenv, extra);
  if (init == NULL) return EXIT_USAGE;
  if (stdin_file != NULL) {
    FILE *f = fopen(stdin_file, "rb");
    long size;
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0
        || fseek(f, 0, SEEK_SET) != 0
        || (in = malloc((size_t)size + 1)) == NULL
        || fread(in, 1, (size_t)size, f) != (size_t)size) {
      fprintf(stderr, "ws-exec: cannot read %s\n", stdin_file);
      if (f != NULL) fclose(f);
      free(in);
      free(init);
      return EXIT_USAGE;
    }
    fclose(f);
    in_len = (size_t)size;
    if (stdin_from > (long long)in_len) stdin_from = (long long)in_len;
  }
  if (frames != NULL && (c.frames = fopen(frames, "a")) == NULL) {
    fprintf(stderr, "ws-exec: cannot open %s: %s\n", frames, strerror(errno));
    free(init);
    return EXIT_USAGE;
  }

  c.fd = connect_to(&u, now_ms() + HANDSHAKE_TIMEOUT_MS);
  if (c.fd >= 0) {
    hs = handshake(&c, &u, protocol, token, now_ms() + HANDSHAKE_TIMEOUT_MS);
    if (hs == 0) {
      c.opened = 1;
      run(&c, init, close_after_ms, stdin_close,
          in != NULL ? in + stdin_from : NULL, in_len - (size_t)stdin_from);
    } else {
      rc = hs;
    }
  }

  if (c.have_exit) {
    snprintf(exit_s, sizeof exit_s, "%d", c.exit_code);
    rc = c.exit_code & 0xff;
  } else if (rc != EXIT_HTTP_STATUS) {
    rc = EXIT_TRANSPORT;
  }
  if (c.have_close) snprintf(close_s, sizeof close_s, "%d", c.close_code);
  if (c.close_reason[0] != '\0')
    fprintf(stderr, "ws-exec: close reason: %s\n", c.close_reason);
  fprintf(stderr, "ws-exec: exit=%s close=%s opened=%d\n", exit_s, close_s,
          c.opened);
  if (c.ctx != NULL) wslay_event_context_free(c.ctx);
  if (c.fd >= 0) close(c.fd);
  if (c.frames != NULL) fclose(c.frames);
  free(in);
  free(c.extra);
  free(init);
  return rc;
}

int main(int argc, char **argv) {
  char **env = calloc((size_t)argc + 1, sizeof *env);
  int rc;
  signal(SIGPIPE, SIG_IGN);
  if (env == NULL) return EXIT_USAGE;
  rc = run_main(argc, argv, env);
  free(env);
  return rc;
}
