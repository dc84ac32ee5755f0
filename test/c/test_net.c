/*
** Tests of src/core/http_client.h and src/core/ws_client.h against a loopback HTTP + WebSocket
** server that lives in this test, on the same loop (plain sockets, wslay
** in server mode). Single-threaded: the client and the server take turns
** in mastra__loop_run_once.
**
** Routes of the server:
**   /hello          200 "hello", X-Multi: a and X-Multi: b
**   /echo           200, the request body; X-Method, X-Content-Type and
**                   X-Expect tell what arrived ("none" when absent)
**   /redirect       302 to /hello
**   /slow           never answers
**   /big            200, BIG_LEN bytes of a pattern
**   /ws             WebSocket echo; selects the first offered protocol;
**                   "close-me" -> close 4001 "bye"; "drop" -> hang up
**   /ws-early       /ws, plus a text frame "early" in the same write as 101
**   /ws-401         401 "go away"
**   /ws-badaccept   101 with a wrong Sec-WebSocket-Accept
**   /ws-proto       101 selecting a protocol that was not offered
**   /ws-hold        never answers
** The same routes are served over TLS on a second port, with a
** self-signed certificate made at start (when built with OpenSSL).
*/
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <wslay/wslay.h>
#ifdef MASTRA_TEST_TLS
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#endif

#include "check.h"
#include "http_client.h"
#include "loop.h"
#include "hash.h"
#include "ws_client.h"

#define BIG_LEN ((size_t)4 << 20)

static mastra__loop *g_loop;
static int g_port;
static char g_base[64];

/* {====== the server ====== */

typedef struct sconn {
  mastra__io io;
#ifdef MASTRA_TEST_TLS
  SSL *ssl;                    /* NULL: plain */
#endif
  char *in;
  size_t inlen, incap;
  char *out;
  size_t outlen, outoff;
  int ws;                      /* upgraded */
  int hold;                    /* a route that never answers */
  wslay_event_context_ptr ctx;
  int close_after_flush;
  struct sconn *next;
} sconn;

static mastra__io g_listen, g_tls_listen;
static sconn *g_conns;
static int g_srv_closes_seen;   /* close frames the server received */
static int g_srv_last_close;    /* their last status code */
static int g_srv_eofs;          /* connections that ended */

static void sconn_close(sconn *c) {
  sconn **p;
  mastra__io_stop(&c->io);
#ifdef MASTRA_TEST_TLS
  if (c->ssl) SSL_free(c->ssl);
#endif
  close(c->io.fd);
  if (c->ctx) wslay_event_context_free(c->ctx);
  for (p = &g_conns; *p != NULL; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  free(c->in);
  free(c->out);
  free(c);
  g_srv_eofs++;
}

/* {====== plain or TLS ====== */

#ifdef MASTRA_TEST_TLS
static SSL_CTX *g_tls;
static char g_ca_file[64];
static char g_tls_base[64];

/* -1 with errno EAGAIN when TLS wants more I/O, EIO on a failure */
static ssize_t tls_result(sconn *c, int n) {
  int err = SSL_get_error(c->ssl, n);
  if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
    errno = EAGAIN;
    return -1;
  }
  if (err == SSL_ERROR_ZERO_RETURN) return 0;
  ERR_clear_error();
  errno = EIO;
  return -1;
}
#endif

/* n > 0 bytes, 0 at the end, -1 with errno */
static ssize_t c_read(sconn *c, void *buf, size_t len) {
#ifdef MASTRA_TEST_TLS
  if (c->ssl != NULL) {
    int n;
    if (!SSL_is_init_finished(c->ssl) && (n = SSL_accept(c->ssl)) <= 0)
      return tls_result(c, n);
    n = SSL_read(c->ssl, buf, (int)len);
    return n > 0 ? n : tls_result(c, n);
  }
#endif
  return recv(c->io.fd, buf, len, 0);
}

static ssize_t c_write(sconn *c, const void *buf, size_t len) {
#ifdef MASTRA_TEST_TLS
  if (c->ssl != NULL) {
    int n;
    if (!SSL_is_init_finished(c->ssl) && (n = SSL_accept(c->ssl)) <= 0)
      return tls_result(c, n);
    n = SSL_write(c->ssl, buf, (int)len);
    if (n == 0) {
      errno = EIO;
      return -1;
    }
    return n > 0 ? n : tls_result(c, n);
  }
#endif
  return send(c->io.fd, buf, len, MSG_NOSIGNAL);
}

/* }====== */

static void out_append(sconn *c, const void *data, size_t len) {
  c->out = realloc(c->out, c->outlen + len);
  if (c->out == NULL) abort();
  memcpy(c->out + c->outlen, data, len);
  c->outlen += len;
}

static void out_printf(sconn *c, const char *fmt, ...) {
  char buf[4096];
  va_list ap;
  int n;
  va_start(ap, fmt);
  n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  out_append(c, buf, (size_t)n);
}

static void update(sconn *c);

/* Write what is buffered; 0 when it all went. */
static int flush_out(sconn *c) {
  while (c->outoff < c->outlen) {
    ssize_t n = c_write(c, c->out + c->outoff, c->outlen - c->outoff);
    if (n > 0) {
      c->outoff += (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 1;
    return -1;
  }
  c->outoff = c->outlen = 0;
  return 0;
}

static ssize_t s_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                      int flags, void *ud) {
  sconn *c = ud;
  ssize_t n;
  (void)flags;
  if (c->inlen > 0) { /* bytes that followed the upgrade request */
    n = (ssize_t)(c->inlen < len ? c->inlen : len);
    memcpy(buf, c->in, (size_t)n);
    memmove(c->in, c->in + n, c->inlen - (size_t)n);
    c->inlen -= (size_t)n;
    return n;
  }
  n = c_read(c, buf, len);
  if (n > 0) return n;
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
  return -1;
}

static ssize_t s_send(wslay_event_context_ptr ctx, const uint8_t *data,
                      size_t len, int flags, void *ud) {
  sconn *c = ud;
  ssize_t n;
  (void)flags;
  n = c_write(c, data, len);
  if (n >= 0) return n;
  if (errno == EAGAIN || errno == EINTR) {
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
    return -1;
  }
  wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
  return -1;
}

static int g_drop;

static void s_msg(wslay_event_context_ptr ctx,
                  const struct wslay_event_on_msg_recv_arg *arg, void *ud) {
  struct wslay_event_msg m;
  (void)ud;
  if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
    g_srv_closes_seen++;
    g_srv_last_close = arg->status_code;
    return;
  }
  if (arg->msg_length == 8 && memcmp(arg->msg, "close-me", 8) == 0) {
    wslay_event_queue_close(ctx, 4001, (const uint8_t *)"bye", 3);
    return;
  }
  if (arg->msg_length == 4 && memcmp(arg->msg, "drop", 4) == 0) {
    g_drop = 1;
    return;
  }
  m.opcode = arg->opcode;
  m.msg = arg->msg;
  m.msg_length = arg->msg_length;
  wslay_event_queue_msg(ctx, &m);
}

static void ws_pump(sconn *c) {
  uint32_t ev = 0;
  if (wslay_event_want_read(c->ctx) && wslay_event_recv(c->ctx) != 0) {
    sconn_close(c);
    return;
  }
  if (g_drop) {
    g_drop = 0;
    sconn_close(c);
    return;
  }
  if (wslay_event_want_write(c->ctx) && wslay_event_send(c->ctx) != 0) {
    sconn_close(c);
    return;
  }
  if (!wslay_event_want_read(c->ctx) && !wslay_event_want_write(c->ctx)) {
    sconn_close(c);
    return;
  }
  if (wslay_event_want_read(c->ctx)) ev |= EPOLLIN;
  if (wslay_event_want_write(c->ctx)) ev |= EPOLLOUT;
  mastra__io_start(&c->io, ev);
}

static const char *req_header(const char *head, const char *name, char *out,
                              size_t outlen) {
  size_t nlen = strlen(name);
  const char *p = strstr(head, "\r\n");
  while (p != NULL && p[2] != '\r') {
    const char *eol;
    p += 2;
    eol = strstr(p, "\r\n");
    if (eol == NULL) return NULL;
    if (strncasecmp(p, name, nlen) == 0 && p[nlen] == ':') {
      const char *v = p + nlen + 1;
      size_t len;
      while (*v == ' ') v++;
      len = (size_t)(eol - v);
      if (len >= outlen) len = outlen - 1;
      memcpy(out, v, len);
      out[len] = '\0';
      return out;
    }
    p = eol;
  }
  return NULL;
}

static void upgrade(sconn *c, const char *head, const char *path) {
  char key[128], proto[512], accept[29];
  const char *sel = NULL;
  struct wslay_event_callbacks cb;
  if (req_header(head, "Sec-WebSocket-Key", key, sizeof key) == NULL) {
    out_printf(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    return;
  }
  mastra__ws_accept_key(key, accept);
  if (strcmp(path, "/ws-badaccept") == 0) accept[3] ^= 1;
  if (req_header(head, "Sec-WebSocket-Protocol", proto, sizeof proto)) {
    proto[strcspn(proto, ", ")] = '\0';
    sel = proto;
  }
  if (strcmp(path, "/ws-proto") == 0) sel = "other";
  out_printf(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s%s%s\r\n",
             accept, sel ? "Sec-WebSocket-Protocol: " : "", sel ? sel : "",
             sel ? "\r\n" : "");
  if (strcmp(path, "/ws-early") == 0)
    out_append(c, "\x81\x05" "early", 7); /* unmasked text frame */
  memset(&cb, 0, sizeof cb);
  cb.recv_callback = s_recv;
  cb.send_callback = s_send;
  cb.on_msg_recv_callback = s_msg;
  wslay_event_context_server_init(&c->ctx, &cb, c);
  c->ws = 1;
}

/* Answer every complete request in the input buffer. */
static void serve(sconn *c) {
  for (;;) {
    char *end, method[16], path[256], val[256];
    size_t head_len, body_len = 0;
    const char *body;
    if (c->inlen == 0) return;
    c->in[c->inlen] = '\0';
    end = strstr(c->in, "\r\n\r\n");
    if (end == NULL) return;
    head_len = (size_t)(end - c->in) + 4;
    if (req_header(c->in, "Content-Length", val, sizeof val))
      body_len = strtoul(val, NULL, 10);
    if (c->inlen < head_len + body_len) return;
    if (sscanf(c->in, "%15s %255s", method, path) != 2) {
      c->close_after_flush = 1;
      return;
    }
    body = c->in + head_len;
    if (strcmp(path, "/hello") == 0) {
      out_printf(c, "HTTP/1.1 200 OK\r\nX-Multi: a\r\nX-Multi: b\r\n"
                 "Content-Length: 5\r\n\r\n%s",
                 strcmp(method, "HEAD") == 0 ? "" : "hello");
    } else if (strcmp(path, "/echo") == 0) {
      char ct[256], ex[256];
      out_printf(c, "HTTP/1.1 200 OK\r\nX-Method: %s\r\nX-Content-Type: %s\r\n"
                 "X-Expect: %s\r\nContent-Length: %zu\r\n\r\n", method,
                 req_header(c->in, "Content-Type", ct, sizeof ct) ? ct : "none",
                 req_header(c->in, "Expect", ex, sizeof ex) ? ex : "none",
                 body_len);
      out_append(c, body, body_len);
    } else if (strcmp(path, "/redirect") == 0) {
      out_printf(c, "HTTP/1.1 302 Found\r\nLocation: /hello\r\n"
                 "Content-Length: 0\r\n\r\n");
    } else if (strcmp(path, "/slow") == 0 || strcmp(path, "/ws-hold") == 0) {
      c->hold = 1;
    } else if (strcmp(path, "/big") == 0) {
      size_t i, off = c->outlen;
      out_printf(c, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", BIG_LEN);
      off = c->outlen;
      c->out = realloc(c->out, c->outlen + BIG_LEN);
      if (c->out == NULL) abort();
      for (i = 0; i < BIG_LEN; i++) c->out[off + i] = (char)('a' + i % 26);
      c->outlen += BIG_LEN;
    } else if (strcmp(path, "/ws-401") == 0) {
      out_printf(c, "HTTP/1.1 401 Unauthorized\r\nContent-Length: 7\r\n\r\n"
                 "go away");
    } else if (strncmp(path, "/ws", 3) == 0) {
      upgrade(c, c->in, path);
    } else {
      out_printf(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
    }
    memmove(c->in, c->in + head_len + body_len,
            c->inlen - head_len - body_len);
    c->inlen -= head_len + body_len;
    if (c->ws || c->hold) return;
  }
}

static void update(sconn *c) {
  int rc = flush_out(c);
  if (rc < 0 || (rc == 0 && c->close_after_flush)) {
    sconn_close(c);
    return;
  }
  if (c->ws && rc == 0) {
    ws_pump(c);
    return;
  }
  mastra__io_start(&c->io, rc ? EPOLLIN | EPOLLOUT : EPOLLIN);
}

static void on_conn(mastra__io *io, uint32_t revents) {
  sconn *c = io->data;
  (void)revents;
  if (c->ws && c->outlen == 0) {
    ws_pump(c);
    return;
  }
  for (;;) {
    ssize_t n;
    if (c->incap - c->inlen < 65536) {
      c->incap = c->incap ? c->incap * 2 : 131072;
      c->in = realloc(c->in, c->incap + 1);
      if (c->in == NULL) abort();
    }
    n = c_read(c, c->in + c->inlen, c->incap - c->inlen);
    if (n > 0) {
      c->inlen += (size_t)n;
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
    sconn_close(c); /* EOF or error */
    return;
  }
  if (!c->ws && !c->hold) serve(c);
  update(c);
}

static void on_accept(mastra__io *io, uint32_t revents) {
  int tls = io == &g_tls_listen;
  (void)revents;
  (void)tls;
  for (;;) {
    int fd = accept4(io->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
    sconn *c;
    if (fd < 0) return;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c = calloc(1, sizeof *c);
    if (c == NULL) abort();
    mastra__io_init(g_loop, &c->io, fd, on_conn, c);
#ifdef MASTRA_TEST_TLS
    if (tls) {
      c->ssl = SSL_new(g_tls);
      if (c->ssl == NULL || SSL_set_fd(c->ssl, fd) != 1) abort();
    }
#endif
    mastra__io_start(&c->io, EPOLLIN);
    c->next = g_conns;
    g_conns = c;
  }
}

/* Listen on a free loopback port; returns it, or -1. */
static int listen_on(mastra__io *io) {
  struct sockaddr_in a;
  socklen_t alen = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0
      || listen(fd, 512) < 0
      || getsockname(fd, (struct sockaddr *)&a, &alen) < 0)
    return -1;
  mastra__io_init(g_loop, io, fd, on_accept, NULL);
  if (mastra__io_start(io, EPOLLIN) < 0) return -1;
  return ntohs(a.sin_port);
}

#ifdef MASTRA_TEST_TLS
/* A self-signed certificate for IP 127.0.0.1, also written to g_ca_file
** for the clients to trust. */
static int tls_start(void) {
  EVP_PKEY *key = EVP_EC_gen("P-256");
  X509 *x = X509_new();
  X509_NAME *name;
  X509V3_CTX v3;
  X509_EXTENSION *ext;
  FILE *f;
  int fd, port;
  if (key == NULL || x == NULL) return -1;
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -60);
  X509_gmtime_adj(X509_getm_notAfter(x), 3600);
  X509_set_pubkey(x, key);
  name = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             (const unsigned char *)"mastra test", -1, -1, 0);
  X509_set_issuer_name(x, name);
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
  ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "IP:127.0.0.1");
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
  ext = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints,
                            "critical,CA:TRUE");
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
  if (X509_sign(x, key, EVP_sha256()) <= 0) return -1;
  snprintf(g_ca_file, sizeof g_ca_file, "/tmp/mastra-test-net-XXXXXX");
  fd = mkstemp(g_ca_file);
  f = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (f == NULL || PEM_write_X509(f, x) != 1) return -1;
  fclose(f);
  g_tls = SSL_CTX_new(TLS_server_method());
  if (g_tls == NULL || SSL_CTX_use_certificate(g_tls, x) != 1
      || SSL_CTX_use_PrivateKey(g_tls, key) != 1)
    return -1;
  SSL_CTX_set_mode(g_tls, SSL_MODE_ENABLE_PARTIAL_WRITE
                              | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  X509_free(x);
  EVP_PKEY_free(key);
  port = listen_on(&g_tls_listen);
  if (port < 0) return -1;
  snprintf(g_tls_base, sizeof g_tls_base, "127.0.0.1:%d", port);
  return 0;
}
#endif

static int server_start(void) {
  g_port = listen_on(&g_listen);
  if (g_port < 0) return -1;
  snprintf(g_base, sizeof g_base, "127.0.0.1:%d", g_port);
#ifdef MASTRA_TEST_TLS
  if (tls_start() < 0) return -1;
#endif
  return 0;
}

static void server_stop(void) {
  while (g_conns != NULL) sconn_close(g_conns);
  mastra__io_stop(&g_listen);
  close(g_listen.fd);
#ifdef MASTRA_TEST_TLS
  mastra__io_stop(&g_tls_listen);
  close(g_tls_listen.fd);
  SSL_CTX_free(g_tls);
  unlink(g_ca_file);
#endif
}

/* }====== */

/* {====== helpers ====== */

/* A port that refuses connections: bound, never listening. */
static int closed_port(int *fd_out) {
  struct sockaddr_in a;
  socklen_t alen = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, (struct sockaddr *)&a, sizeof a);
  getsockname(fd, (struct sockaddr *)&a, &alen);
  *fd_out = fd;
  return ntohs(a.sin_port);
}

typedef int (*pred_fn)(void *);

/* Run the loop until pred holds or ms pass; returns pred. g_last_signal
** is the last id signalled. */
static uint64_t g_last_signal;

static int run_until(pred_fn pred, void *arg, int ms) {
  uint64_t deadline = mastra__now_ms() + (uint64_t)ms;
  while (!pred(arg) && mastra__now_ms() < deadline) {
    const uint64_t *ids;
    size_t n, i;
    mastra__loop_run_once(g_loop, 10);
    n = mastra__loop_take_signals(g_loop, &ids);
    for (i = 0; i < n; i++) g_last_signal = ids[i];
  }
  return pred(arg);
}

static int req_done_p(void *r) { return ((mastra__http_req *)r)->done; }

static int ws_state_p(void *w) {
  return ((mastra__ws *)w)->state != MASTRA__WS_CONNECTING;
}
static int ws_closed_p(void *w) {
  return ((mastra__ws *)w)->state == MASTRA__WS_CLOSED;
}
static int ws_has_msg_p(void *w) { return mastra__ws_peek(w) != NULL; }
static int never_p(void *unused) {
  (void)unused;
  return 0;
}

static mastra__http_req *start(const char *method, const char *path,
                               const char *const *headers, size_t nheaders,
                               const char *body, uint64_t timeout_ms) {
  mastra__http_opts o;
  mastra__http_req *r = NULL;
  char url[256], err[256];
  memset(&o, 0, sizeof o);
  snprintf(url, sizeof url, "http://%s%s", g_base, path);
  o.method = method;
  o.url = url;
  o.headers = headers;
  o.nheaders = nheaders;
  o.body = body;
  o.body_len = body ? strlen(body) : 0;
  o.timeout_ms = timeout_ms;
  if (mastra__http_start(g_loop, &o, &r, err, sizeof err) < 0)
    fprintf(stderr, "start: %s\n", err);
  return r;
}

static const char *header(const mastra__http_req *r, const char *name) {
  size_t i;
  for (i = 0; i < r->nheaders; i++)
    if (strcmp(r->headers[i].name, name) == 0) return r->headers[i].value;
  return NULL;
}

static mastra__ws *ws_open(const char *path, const char *const *protocols,
                           size_t nprotocols, uint64_t timeout_ms) {
  mastra__ws_opts o;
  mastra__ws *ws = NULL;
  const char *errname;
  char url[256], err[256];
  memset(&o, 0, sizeof o);
  snprintf(url, sizeof url, "ws://%s%s", g_base, path);
  o.url = url;
  o.protocols = protocols;
  o.nprotocols = nprotocols;
  o.handshake_timeout_ms = timeout_ms;
  if (mastra__ws_connect(g_loop, &o, &ws, &errname, err, sizeof err) < 0)
    fprintf(stderr, "ws_connect: %s: %s\n", errname, err);
  return ws;
}

/* }====== */

/* {====== HTTP ====== */

static void test_get(void) {
  mastra__http_req *r = start(NULL, "/hello", NULL, 0, NULL, 5000);
  CHECK(r != NULL);
  CHECK(run_until(req_done_p, r, 5000));
  CHECK(r->result == CURLE_OK);
  CHECK(r->status == 200);
  CHECK(r->body_len == 5 && memcmp(r->body, "hello", 5) == 0);
  CHECK(header(r, "x-multi") != NULL);
  CHECK(header(r, "content-length") != NULL
        && strcmp(header(r, "content-length"), "5") == 0);
  CHECK(g_last_signal == r->id);
  mastra__http_release(r);
}

static void test_post(void) {
  static const char *const json[] = {"Content-Type: application/json"};
  mastra__http_req *r = start("POST", "/echo", NULL, 0, "a=1&b=2", 5000);
  CHECK(run_until(req_done_p, r, 5000) && r->result == CURLE_OK);
  CHECK(r->body_len == 7 && memcmp(r->body, "a=1&b=2", 7) == 0);
  CHECK(strcmp(header(r, "x-method"), "POST") == 0);
  /* no form content type unless asked for, no Expect */
  CHECK(strcmp(header(r, "x-content-type"), "none") == 0);
  CHECK(strcmp(header(r, "x-expect"), "none") == 0);
  mastra__http_release(r);

  r = start("PUT", "/echo", json, 1, "{\"x\":1}", 5000);
  CHECK(run_until(req_done_p, r, 5000) && r->result == CURLE_OK);
  CHECK(strcmp(header(r, "x-method"), "PUT") == 0);
  CHECK(strcmp(header(r, "x-content-type"), "application/json") == 0);
  CHECK(r->body_len == 7);
  mastra__http_release(r);

  /* POST without a body: Content-Length: 0 */
  r = start("POST", "/echo", NULL, 0, NULL, 5000);
  CHECK(run_until(req_done_p, r, 5000) && r->result == CURLE_OK);
  CHECK(r->status == 200 && r->body_len == 0);
  mastra__http_release(r);

  r = start("DELETE", "/echo", NULL, 0, NULL, 5000);
  CHECK(run_until(req_done_p, r, 5000) && r->result == CURLE_OK);
  CHECK(strcmp(header(r, "x-method"), "DELETE") == 0);
  mastra__http_release(r);

  r = start("HEAD", "/hello", NULL, 0, NULL, 5000);
  CHECK(run_until(req_done_p, r, 5000) && r->result == CURLE_OK);
  CHECK(r->status == 200 && r->body_len == 0);
  mastra__http_release(r);
}

static void test_redirect(void) {
  mastra__http_opts o;
  mastra__http_req *r = start(NULL, "/redirect", NULL, 0, NULL, 5000), *r2;
  char url[256], err[256];
  CHECK(run_until(req_done_p, r, 5000) && r->result == CURLE_OK);
  CHECK(r->status == 200 && r->body_len == 5);
  CHECK(header(r, "location") == NULL); /* the last response's headers */
  mastra__http_release(r);
  memset(&o, 0, sizeof o);
  snprintf(url, sizeof url, "http://%s/redirect", g_base);
  o.url = url;
  o.no_follow = 1;
  o.timeout_ms = 5000;
  CHECK(mastra__http_start(g_loop, &o, &r2, err, sizeof err) == 0);
  CHECK(run_until(req_done_p, r2, 5000) && r2->result == CURLE_OK);
  CHECK(r2->status == 302 && strcmp(header(r2, "location"), "/hello") == 0);
  mastra__http_release(r2);
}

static void test_big(void) {
  mastra__http_req *r = start(NULL, "/big", NULL, 0, NULL, 20000);
  size_t i, bad = 0;
  CHECK(run_until(req_done_p, r, 20000) && r->result == CURLE_OK);
  CHECK(r->body_len == BIG_LEN);
  for (i = 0; i < r->body_len; i++)
    if (r->body[i] != (char)('a' + i % 26)) bad++;
  CHECK(bad == 0);
  mastra__http_release(r);
}

static void test_failures(void) {
  char msg[512], url[64], err[256];
  mastra__http_opts o;
  mastra__http_req *r;
  int fd, port = closed_port(&fd);
  uint64_t t0;
  memset(&o, 0, sizeof o);
  snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
  o.url = url;
  o.timeout_ms = 5000;
  CHECK(mastra__http_start(g_loop, &o, &r, err, sizeof err) == 0);
  CHECK(run_until(req_done_p, r, 5000));
  CHECK(r->result == CURLE_COULDNT_CONNECT);
  CHECK(strcmp(mastra__http_error_name(r), "CURLE_COULDNT_CONNECT") == 0);
  mastra__http_error_message(r, msg, sizeof msg);
  CHECK(strstr(msg, "Couldn't connect") != NULL);
  mastra__http_release(r);
  close(fd);

  t0 = mastra__now_ms();
  r = start(NULL, "/slow", NULL, 0, NULL, 300);
  CHECK(run_until(req_done_p, r, 5000));
  CHECK(r->result == CURLE_OPERATION_TIMEDOUT);
  CHECK(mastra__now_ms() - t0 >= 290 && mastra__now_ms() - t0 < 3000);
  CHECK(strcmp(mastra__http_error_name(r), "CURLE_OPERATION_TIMEDOUT") == 0);
  mastra__http_release(r);

  o.url = "nope://x";
  CHECK(mastra__http_start(g_loop, &o, &r, err, sizeof err) == 0);
  CHECK(run_until(req_done_p, r, 5000));
  CHECK(r->result == CURLE_UNSUPPORTED_PROTOCOL);
  mastra__http_release(r);
}

/* Cancelling a running request closes its connection at once. */
static int eofs_p(void *want) { return g_srv_eofs >= *(int *)want; }

static void test_cancel(void) {
  mastra__http_req *r = start(NULL, "/slow", NULL, 0, NULL, 0);
  int want;
  run_until(never_p, NULL, 100); /* the server holds it */
  CHECK(!r->done);
  want = g_srv_eofs + 1;
  mastra__http_release(r);
  CHECK(run_until(eofs_p, &want, 3000));
}

static int all_done_p(void *arg) {
  mastra__http_req **rs = arg;
  int i;
  for (i = 0; i < 50; i++)
    if (!rs[i]->done) return 0;
  return 1;
}

static void test_concurrent(void) {
  mastra__http_req *rs[50];
  uint64_t t0 = mastra__now_ms();
  int i, ok = 0, n;
  for (i = 0; i < 50; i++) rs[i] = start(NULL, "/hello", NULL, 0, NULL, 10000);
  CHECK(run_until(all_done_p, rs, 10000));
  for (i = 0; i < 50; i++) {
    ok += rs[i]->result == CURLE_OK && rs[i]->status == 200;
    mastra__http_release(rs[i]);
  }
  CHECK(ok == 50);
  printf("# 50 concurrent requests: %llu ms\n",
         (unsigned long long)(mastra__now_ms() - t0));
  /* sequential, one connection kept alive */
  t0 = mastra__now_ms();
  for (n = 0; n < 1000; n++) {
    mastra__http_req *r = start(NULL, "/hello", NULL, 0, NULL, 10000);
    if (!run_until(req_done_p, r, 10000) || r->result != CURLE_OK) break;
    mastra__http_release(r);
  }
  CHECK(n == 1000);
  printf("# 1000 sequential requests: %llu ms (%.0f requests/s)\n",
         (unsigned long long)(mastra__now_ms() - t0),
         1000.0 * 1000.0 / (double)(mastra__now_ms() - t0 + 1));
}

/* Closing the loop ends running requests; the owner still frees. */
static void test_loop_close(void) {
  mastra__loop *loop = mastra__loop_new();
  mastra__http_opts o;
  mastra__http_req *r, *r2;
  char url[128], err[256];
  int i;
  memset(&o, 0, sizeof o);
  snprintf(url, sizeof url, "http://%s/slow", g_base);
  o.url = url;
  CHECK(mastra__http_start(loop, &o, &r, err, sizeof err) == 0);
  for (i = 0; i < 10; i++) { /* both loops turn: connect, accept, send */
    mastra__loop_run_once(loop, 5);
    run_until(never_p, NULL, 5);
  }
  CHECK(!r->done);
  mastra__loop_close(loop);
  CHECK(r->done && strcmp(mastra__http_error_name(r), "closed") == 0);
  CHECK(mastra__http_start(loop, &o, &r2, err, sizeof err) < 0);
  mastra__http_release(r);
  mastra__loop_unref(loop);
}

/* }====== */

/* {====== WebSocket ====== */

static void test_ws_echo(void) {
  static const char *const protos[] = {"railway-shell", "jwt.token.here"};
  int fds0;
  mastra__ws *ws;
  run_until(never_p, NULL, 50);
  fds0 = count_fds();
  ws = ws_open("/ws", protos, 2, 5000);
  char err[128];
  const mastra__ws_msg *m;
  char big[100000];
  CHECK(ws != NULL && ws->state == MASTRA__WS_CONNECTING);
  CHECK(run_until(ws_state_p, ws, 5000));
  CHECK(ws->state == MASTRA__WS_OPEN && ws->opened);
  CHECK(g_last_signal == ws->id);
  CHECK(ws->protocol != NULL && strcmp(ws->protocol, "railway-shell") == 0);
  CHECK(mastra__ws_send(ws, "hi", 2, 0, err, sizeof err) == 0);
  CHECK(run_until(ws_has_msg_p, ws, 5000));
  m = mastra__ws_peek(ws);
  CHECK(m != NULL && !m->binary && m->len == 2
        && memcmp(m->data, "hi", 2) == 0);
  mastra__ws_pop(ws);
  memset(big, 7, sizeof big);
  CHECK(mastra__ws_send(ws, big, sizeof big, 1, err, sizeof err) == 0);
  CHECK(run_until(ws_has_msg_p, ws, 5000));
  m = mastra__ws_peek(ws);
  CHECK(m != NULL && m->binary && m->len == sizeof big
        && memcmp(m->data, big, sizeof big) == 0);
  mastra__ws_pop(ws);
  CHECK(mastra__ws_peek(ws) == NULL);
  /* our close: the peer answers, then closed */
  mastra__ws_close(ws, 1000, "done", 4);
  CHECK(ws->state == MASTRA__WS_CLOSING);
  CHECK(mastra__ws_send(ws, "x", 1, 0, err, sizeof err) < 0);
  CHECK(run_until(ws_closed_p, ws, 5000));
  CHECK(ws->close_received && ws->close_code == 1000);
  CHECK(ws->errname == NULL);
  CHECK(g_srv_last_close == 1000);
  mastra__ws_release(ws);
  run_until(never_p, NULL, 50);
  /* the socket, both ends, and the private multi's wake-up pair are gone */
  CHECK(count_fds() <= fds0);
}

static void test_ws_early_and_server_close(void) {
  mastra__ws *ws = ws_open("/ws-early", NULL, 0, 5000);
  const mastra__ws_msg *m;
  char err[128];
  CHECK(run_until(ws_has_msg_p, ws, 5000));
  m = mastra__ws_peek(ws);
  CHECK(m != NULL && m->len == 5 && memcmp(m->data, "early", 5) == 0);
  mastra__ws_pop(ws);
  CHECK(ws->protocol == NULL);
  /* the server closes with 4001 "bye" */
  CHECK(mastra__ws_send(ws, "close-me", 8, 0, err, sizeof err) == 0);
  CHECK(run_until(ws_closed_p, ws, 5000));
  CHECK(ws->close_received && ws->close_code == 4001);
  CHECK(ws->close_reason != NULL && strcmp(ws->close_reason, "bye") == 0);
  CHECK(ws->errname == NULL);
  mastra__ws_release(ws);
}

static void test_ws_failures(void) {
  static const char *const protos[] = {"railway-shell", "tok"};
  mastra__ws *ws;
  char err[128];
  uint64_t t0;
  int fd, port;
  const char *errname;
  mastra__ws_opts o;
  char url[64];

  ws = ws_open("/ws-401", protos, 2, 5000);
  CHECK(run_until(ws_closed_p, ws, 5000));
  CHECK(!ws->opened && ws->http_status == 401);
  CHECK(ws->errname && strcmp(ws->errname, "http_status") == 0);
  CHECK(ws->http_body && strcmp(ws->http_body, "go away") == 0);
  mastra__ws_release(ws);

  ws = ws_open("/ws-badaccept", NULL, 0, 5000);
  CHECK(run_until(ws_closed_p, ws, 5000));
  CHECK(!ws->opened && strcmp(ws->errname, "bad_handshake") == 0);
  mastra__ws_release(ws);

  ws = ws_open("/ws-proto", protos, 2, 5000);
  CHECK(run_until(ws_closed_p, ws, 5000));
  CHECK(!ws->opened && strcmp(ws->errname, "bad_handshake") == 0);
  CHECK(strstr(ws->error, "'other'") != NULL);
  mastra__ws_release(ws);

  t0 = mastra__now_ms();
  ws = ws_open("/ws-hold", NULL, 0, 300);
  CHECK(run_until(ws_closed_p, ws, 5000));
  CHECK(!ws->opened && strcmp(ws->errname, "CURLE_OPERATION_TIMEDOUT") == 0);
  CHECK(mastra__now_ms() - t0 >= 290 && mastra__now_ms() - t0 < 3000);
  mastra__ws_release(ws);

  port = closed_port(&fd);
  memset(&o, 0, sizeof o);
  snprintf(url, sizeof url, "ws://127.0.0.1:%d/", port);
  o.url = url;
  CHECK(mastra__ws_connect(g_loop, &o, &ws, &errname, err, sizeof err) == 0);
  CHECK(run_until(ws_closed_p, ws, 5000));
  CHECK(!ws->opened && strcmp(ws->errname, "CURLE_COULDNT_CONNECT") == 0);
  mastra__ws_release(ws);
  close(fd);

  o.url = "ftp://x/";
  CHECK(mastra__ws_connect(g_loop, &o, &ws, &errname, err, sizeof err) < 0);
  CHECK(strcmp(errname, "CURLE_UNSUPPORTED_PROTOCOL") == 0);
  o.url = "ws://[bad";
  CHECK(mastra__ws_connect(g_loop, &o, &ws, &errname, err, sizeof err) < 0);
  CHECK(strcmp(errname, "CURLE_URL_MALFORMAT") == 0);

  /* the server hangs up without a close frame */
  ws = ws_open("/ws", NULL, 0, 5000);
  CHECK(run_until(ws_state_p, ws, 5000) && ws->opened);
  CHECK(mastra__ws_send(ws, "drop", 4, 0, err, sizeof err) == 0);
  CHECK(run_until(ws_closed_p, ws, 5000));
  CHECK(!ws->close_received && strcmp(ws->errname, "connection_closed") == 0);
  mastra__ws_release(ws);
}

static int closes_p(void *want) { return g_srv_closes_seen >= *(int *)want; }

/* Letting go of an open socket sends a close frame; of a connecting one,
** just aborts. */
static void test_ws_release(void) {
  mastra__ws *ws = ws_open("/ws", NULL, 0, 5000);
  int want;
  CHECK(run_until(ws_state_p, ws, 5000) && ws->opened);
  want = g_srv_closes_seen + 1;
  mastra__ws_release(ws);
  CHECK(run_until(closes_p, &want, 5000));
  CHECK(g_srv_last_close == 1000);
  run_until(never_p, NULL, 50);

  ws = ws_open("/ws-hold", NULL, 0, 5000);
  run_until(never_p, NULL, 50);
  mastra__ws_release(ws);
  run_until(never_p, NULL, 50);

  /* closed while connecting: no error, never opened */
  ws = ws_open("/ws-hold", NULL, 0, 5000);
  run_until(never_p, NULL, 50);
  mastra__ws_close(ws, 1000, "", 0);
  CHECK(ws->state == MASTRA__WS_CLOSED && !ws->opened && ws->errname == NULL);
  mastra__ws_release(ws);
}

/* A socket stays usable while HTTP requests open new connections (its
** multi is its own; see ws_client.h). */
static void test_ws_with_http(void) {
  mastra__ws *ws = ws_open("/ws", NULL, 0, 5000);
  mastra__http_req *rs[20];
  char err[128];
  int i;
  CHECK(run_until(ws_state_p, ws, 5000) && ws->opened);
  for (i = 0; i < 20; i++) rs[i] = start(NULL, "/hello", NULL, 0, NULL, 5000);
  for (i = 0; i < 20; i++) {
    CHECK(run_until(req_done_p, rs[i], 5000) && rs[i]->result == CURLE_OK);
    mastra__http_release(rs[i]);
  }
  CHECK(mastra__ws_send(ws, "still", 5, 0, err, sizeof err) == 0);
  CHECK(run_until(ws_has_msg_p, ws, 5000));
  mastra__ws_pop(ws);
  mastra__ws_release(ws);
  run_until(never_p, NULL, 50);
}

/* Why a WebSocket has a multi of its own: in a shared multi, libcurl
** prunes the idle CONNECT_ONLY connection when another transfer opens a
** connection and the first is older than that transfer's
** CURLOPT_MAXAGE_CONN (118 s by default; 1 s here). Informational: it
** reports what this libcurl does. */
static int easy_done_p(void *arg) {
  CURLM *m = ((void **)arg)[0];
  int running, left;
  CURLMsg *msg;
  curl_multi_perform(m, &running);
  while ((msg = curl_multi_info_read(m, &left)) != NULL)
    if (msg->msg == CURLMSG_DONE && msg->easy_handle == ((void **)arg)[1])
      return 1;
  return 0;
}

static size_t discard(char *p, size_t size, size_t n, void *ud) {
  (void)p;
  (void)ud;
  return size * n;
}

static void test_pruning_note(void) {
  CURLM *m = curl_multi_init();
  CURL *co = curl_easy_init(), *h = curl_easy_init();
  void *arg[2];
  char url[128];
  curl_socket_t s = CURL_SOCKET_BAD;
  snprintf(url, sizeof url, "http://%s/", g_base);
  curl_easy_setopt(co, CURLOPT_URL, url);
  curl_easy_setopt(co, CURLOPT_CONNECT_ONLY, 1L);
  curl_multi_add_handle(m, co);
  arg[0] = m;
  arg[1] = co;
  run_until(easy_done_p, arg, 5000);
  run_until(never_p, NULL, 2100);
  snprintf(url, sizeof url, "http://%s/hello", g_base);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_MAXAGE_CONN, 1L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
  curl_multi_add_handle(m, h);
  arg[1] = h;
  run_until(easy_done_p, arg, 5000);
  curl_easy_getinfo(co, CURLINFO_ACTIVESOCKET, &s);
  printf("\n# libcurl %s %s an idle CONNECT_ONLY connection of a shared"
         " multi\n", curl_version_info(CURLVERSION_NOW)->version,
         s == CURL_SOCKET_BAD ? "prunes" : "keeps");
  curl_multi_remove_handle(m, h);
  curl_multi_remove_handle(m, co);
  curl_easy_cleanup(h);
  curl_easy_cleanup(co);
  curl_multi_cleanup(m);
  run_until(never_p, NULL, 50);
}

/* {====== TLS ====== */

#ifdef MASTRA_TEST_TLS
static mastra__http_req *start_tls(const char *path, int trust) {
  mastra__http_opts o;
  mastra__http_req *r = NULL;
  char url[256], err[256];
  memset(&o, 0, sizeof o);
  snprintf(url, sizeof url, "https://%s%s", g_tls_base, path);
  o.url = url;
  o.timeout_ms = 20000;
  o.ca_file = trust ? g_ca_file : NULL;
  if (mastra__http_start(g_loop, &o, &r, err, sizeof err) < 0)
    fprintf(stderr, "start: %s\n", err);
  return r;
}

static mastra__ws *wss_open(const char *path, int trust) {
  mastra__ws_opts o;
  mastra__ws *ws = NULL;
  const char *errname;
  char url[256], err[256];
  memset(&o, 0, sizeof o);
  snprintf(url, sizeof url, "wss://%s%s", g_tls_base, path);
  o.url = url;
  o.handshake_timeout_ms = 5000;
  o.ca_file = trust ? g_ca_file : NULL;
  if (mastra__ws_connect(g_loop, &o, &ws, &errname, err, sizeof err) < 0)
    fprintf(stderr, "ws_connect: %s: %s\n", errname, err);
  return ws;
}

static void test_tls(void) {
  mastra__http_req *r;
  mastra__ws *ws;
  const mastra__ws_msg *m;
  static char big[300000];
  char err[128];
  size_t i;

  r = start_tls("/hello", 1);
  CHECK(run_until(req_done_p, r, 5000) && r->result == CURLE_OK);
  CHECK(r->status == 200 && r->body_len == 5);
  mastra__http_release(r);
  r = start_tls("/big", 1);
  CHECK(run_until(req_done_p, r, 20000) && r->result == CURLE_OK);
  CHECK(r->body_len == BIG_LEN);
  mastra__http_release(r);
  /* the system's CAs do not know our certificate */
  r = start_tls("/hello", 0);
  CHECK(run_until(req_done_p, r, 5000));
  CHECK(r->result == CURLE_PEER_FAILED_VERIFICATION);
  mastra__http_release(r);

  ws = wss_open("/ws-early", 1);
  CHECK(run_until(ws_has_msg_p, ws, 5000) && ws->opened);
  m = mastra__ws_peek(ws);
  CHECK(m != NULL && m->len == 5 && memcmp(m->data, "early", 5) == 0);
  mastra__ws_pop(ws);
  /* many TLS records each way: the reads drain what TLS buffered */
  for (i = 0; i < sizeof big; i++) big[i] = (char)(i * 7);
  CHECK(mastra__ws_send(ws, big, sizeof big, 1, err, sizeof err) == 0);
  CHECK(mastra__ws_send(ws, "after", 5, 0, err, sizeof err) == 0);
  CHECK(run_until(ws_has_msg_p, ws, 10000));
  m = mastra__ws_peek(ws);
  CHECK(m != NULL && m->binary && m->len == sizeof big
        && memcmp(m->data, big, sizeof big) == 0);
  mastra__ws_pop(ws);
  CHECK(run_until(ws_has_msg_p, ws, 5000));
  m = mastra__ws_peek(ws);
  CHECK(m != NULL && m->len == 5 && memcmp(m->data, "after", 5) == 0);
  mastra__ws_pop(ws);
  mastra__ws_close(ws, 1000, "", 0);
  CHECK(run_until(ws_closed_p, ws, 5000));
  CHECK(ws->close_received && ws->close_code == 1000 && ws->errname == NULL);
  mastra__ws_release(ws);

  ws = wss_open("/ws", 0);
  CHECK(run_until(ws_closed_p, ws, 5000));
  CHECK(!ws->opened && ws->errname != NULL
        && strcmp(ws->errname, "CURLE_PEER_FAILED_VERIFICATION") == 0);
  mastra__ws_release(ws);
  run_until(never_p, NULL, 50);
}
#endif

/* }====== */

int main(void) {
  int fds0, fds1;
  curl_global_init(CURL_GLOBAL_DEFAULT);
  fds0 = count_fds();
  g_loop = mastra__loop_new();
  if (g_loop == NULL || server_start() < 0) {
    fprintf(stderr, "cannot start the test server\n");
    return 1;
  }
  test_get();
  test_post();
  test_redirect();
  test_big();
  test_failures();
  test_cancel();
  test_concurrent();
  test_loop_close();
  test_ws_echo();
  test_ws_early_and_server_close();
  test_ws_failures();
  test_ws_release();
  test_ws_with_http();
#ifdef MASTRA_TEST_TLS
  test_tls();
#endif
  test_pruning_note();
  /* the server's ends of kept-alive connections close with the server;
  ** ours stay in the shared multi's cache until the loop closes */
  server_stop();
  run_until(never_p, NULL, 100);
  mastra__loop_close(g_loop);
  mastra__loop_unref(g_loop);
  fds1 = count_fds();
  printf("# descriptors: %d before, %d after\n", fds0, fds1);
  CHECK(fds1 == fds0);
  curl_global_cleanup();
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
