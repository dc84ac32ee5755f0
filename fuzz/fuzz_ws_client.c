/*
** libFuzzer harness: the WebSocket client (src/core/ws_client.c) reading a
** hostile server, over a real loopback socket.
**
** The first input byte picks what the fuzz bytes are:
**   even: the whole answer to the upgrade request (status line, headers,
**         a refusal's body, anything);
**   odd:  what follows a correct 101 answer (the Sec-WebSocket-Accept is
**         computed from the request, so the bytes reach wslay and the
**         client's frame handling: messages, close frames, garbage).
** A thread of this process accepts the connection, answers, and closes.
** The client must end every input in a defined state (closed, with or
** without an error), never crash, leak or hang past its deadlines.
*/
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "hash.h"
#include "loop.h"
#include "util.h"
#include "ws_client.h"

static int g_listen = -1;
static int g_port;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static const uint8_t *g_data; /* the answer for the next connection */
static size_t g_len;
static int g_ready, g_served;

static void answer(int fd, const uint8_t *data, size_t len) {
  char req[8192];
  size_t have = 0;
  int mode = len > 0 ? data[0] & 1 : 0;
  if (len > 0) {
    data++;
    len--;
  }
  /* read the request head */
  while (have < sizeof req - 1) {
    ssize_t n = read(fd, req + have, sizeof req - 1 - have);
    if (n <= 0) return;
    have += (size_t)n;
    req[have] = '\0';
    if (strstr(req, "\r\n\r\n") != NULL) break;
  }
  if (mode == 1) {
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    const char *k = strcasestr(req, "\r\nSec-WebSocket-Key:");
    char key[64], cat[128], head[256];
    unsigned char sha[MASTRA__SHA1_LEN];
    char accept[MASTRA__BASE64_LEN(MASTRA__SHA1_LEN) + 1];
    size_t klen = 0;
    if (k == NULL) return;
    k += strlen("\r\nSec-WebSocket-Key:");
    while (*k == ' ') k++;
    while (k[klen] && k[klen] != '\r' && klen < sizeof key - 1) klen++;
    memcpy(key, k, klen);
    key[klen] = '\0';
    snprintf(cat, sizeof cat, "%s%s", key, guid);
    mastra__sha1(cat, strlen(cat), sha);
    mastra__base64_encode(sha, sizeof sha, accept);
    snprintf(head, sizeof head,
             "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
             "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
             accept);
    if (mastra__write_all(fd, head, strlen(head)) < 0) return;
  }
  (void)mastra__write_all(fd, data, len);
}

static void *server(void *unused) {
  (void)unused;
  for (;;) {
    int fd = accept(g_listen, NULL, NULL);
    if (fd < 0) continue;
    pthread_mutex_lock(&g_mu);
    while (!g_ready) pthread_cond_wait(&g_cv, &g_mu);
    answer(fd, g_data, g_len);
    g_ready = 0;
    g_served = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    shutdown(fd, SHUT_WR);
    close(fd);
  }
  return NULL;
}

static void start_server(void) {
  struct sockaddr_in a;
  socklen_t alen = sizeof a;
  pthread_t t;
  int one = 1;
  g_listen = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  setsockopt(g_listen, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(g_listen, (struct sockaddr *)&a, sizeof a) < 0
      || listen(g_listen, 16) < 0
      || getsockname(g_listen, (struct sockaddr *)&a, &alen) < 0) {
    perror("fuzz_ws_client: listen");
    abort();
  }
  g_port = ntohs(a.sin_port);
  pthread_create(&t, NULL, server, NULL);
  pthread_detach(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mastra__loop *loop;
  static const char *const protocols[] = {"railway-shell"};
  char url[64], err[256];
  const char *errname = NULL;
  mastra__ws_opts o;
  mastra__ws *ws = NULL;
  uint64_t deadline;
  if (loop == NULL) {
    signal(SIGPIPE, SIG_IGN); /* the client may hang up mid-answer */
    start_server();
    loop = mastra__loop_new();
    if (loop == NULL) abort();
  }
  pthread_mutex_lock(&g_mu);
  g_data = data;
  g_len = size;
  g_ready = 1;
  g_served = 0;
  pthread_cond_broadcast(&g_cv);
  pthread_mutex_unlock(&g_mu);

  snprintf(url, sizeof url, "ws://127.0.0.1:%d/ws/exec", g_port);
  memset(&o, 0, sizeof o);
  o.url = url;
  o.protocols = protocols;
  o.nprotocols = 1;
  o.handshake_timeout_ms = 2000;
  o.close_timeout_ms = 200;
  o.max_message = 1 << 20;
  if (mastra__ws_connect(loop, &o, &ws, &errname, err, sizeof err) < 0)
    abort(); /* a fixed, valid URL */
  deadline = mastra__now_ms() + 5000;
  while (ws->state != MASTRA__WS_CLOSED) {
    const uint64_t *ids;
    mastra__loop_run_once(loop, 10);
    (void)mastra__loop_take_signals(loop, &ids);
    while (mastra__ws_peek(ws) != NULL) mastra__ws_pop(ws);
    if (ws->state == MASTRA__WS_OPEN && g_served)
      mastra__ws_close(ws, 1000, "done", 4);
    if (mastra__now_ms() > deadline) {
      fprintf(stderr, "fuzz_ws_client: the client did not end in 5 s\n");
      abort();
    }
  }
  mastra__ws_release(ws);
  /* let the server thread finish with this input before it is freed */
  pthread_mutex_lock(&g_mu);
  while (g_ready) pthread_cond_wait(&g_cv, &g_mu);
  pthread_mutex_unlock(&g_mu);
  return 0;
}
