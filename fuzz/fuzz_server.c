/*
** libFuzzer harness: mastra-platform's parsers of untrusted bytes, through
** the real server in this process over a real loopback socket. An input is
** what one client sends on one connection: HTTP requests (JSON bodies,
** query strings, percent-encoded bucket keys), or an upgrade to /ws/exec
** followed by WebSocket frames (init_exec, stdin, close). Before sending,
** the harness replaces three placeholders so the mutations get past
** authentication and reach the parsers behind it:
**   @TOKEN@  the bearer token      @SBX@  a live sandbox's id
**   @LEASE@  a live exec lease of that sandbox
** Commands never run: the harness's driver starts `true` whatever the
** command says (the parsers are under test, not the host).
*/
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "api/exec_legacy.h"
#include "api/exec_ws.h"
#include "api/router.h"
#include "http/httpd.h"
#include "sandbox/lease.h"
#include "sandbox/sandbox.h"
#include "sandbox/startup.h"
#include "util.h"

static mp_server g_srv;
static char g_dir[] = "/tmp/mastra-fuzz-server-XXXXXX";
static int g_port;
static char g_sbx[MP_ID_MAX];
static char g_lease[2 * MP_LEASE_TOKEN_BYTES + 1];

/* {====== a driver that runs nothing the input asks for ====== */

static int safe_prepare(mp_server *srv, mp_sandbox *sb, char *err,
                        size_t errlen) {
  (void)srv;
  if (mastra__mkdirs(sb->dir, 0755, NULL) < 0) {
    snprintf(err, errlen, "cannot create %s", sb->dir);
    return -1;
  }
  return 0;
}

static int safe_spawn(mp_server *srv, mp_sandbox *sb, const mp_exec_spec *spec,
                      char *const *envp, mastra__proc **out, char *err,
                      size_t errlen) {
  mastra__proc_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.command = "echo out; echo err >&2";
  opts.cwd = sb->dir;
  opts.envp = envp;
  opts.stdin_pipe = spec->stdin_pipe;
  opts.timeout_ms = 1000;
  return mastra__proc_spawn(srv->loop, &opts, out, err, errlen);
}

static void safe_teardown(mp_server *srv, mp_sandbox *sb) {
  (void)srv;
  mastra__remove_tree(sb->root);
}

static const mp_driver safe_driver = {
    .name = "fuzz",
    .prepare = safe_prepare,
    .spawn = safe_spawn,
    .teardown = safe_teardown,
};

/* }====== */

/* {====== one client connection, with the server driven meanwhile ====== */

static void pump(int ms) {
  const uint64_t *ids;
  int t = mp_httpd_timeout(g_srv.api);
  if (t < 0 || t > ms) t = ms;
  mastra__loop_run_once(g_srv.loop, t);
  mp_httpd_run(g_srv.api);
  (void)mastra__loop_take_signals(g_srv.loop, &ids);
}

/* Send data on a fresh connection and read until the server closes, falls
** quiet (a fuzz input) or 3 s pass. The answer (NUL-terminated, malloc'd)
** if wanted. */
static char *exchange(const char *data, size_t len, int want) {
  struct sockaddr_in a;
  size_t off = 0, have = 0, cap = want ? 65536 : 0;
  char *answer = want ? malloc(cap + 1) : NULL;
  char buf[16384];
  uint64_t deadline = mastra__now_ms() + 3000, quiet_since = 0;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) abort();
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((uint16_t)g_port);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS)
    abort();
  for (;;) {
    ssize_t n;
    pump(off < len ? 0 : 5);
    if (off < len) {
      n = send(fd, data + off, len - off, MSG_NOSIGNAL);
      if (n > 0) off += (size_t)n;
      else if (n < 0 && errno != EAGAIN && errno != EINPROGRESS
               && errno != ENOTCONN)
        off = len; /* the server hung up: just read what it said */
      /* a half-close ends a fuzz input at once (the server parses what
      ** came before it); the harness's own requests wait for the answer */
      if (off == len && !want) shutdown(fd, SHUT_WR);
    }
    n = recv(fd, buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN)) break;
    /* a kept-alive connection (or a session) that is quiet for 20 ms once
    ** everything is sent: the server has said what it had to say */
    if (n > 0 || off < len) quiet_since = mastra__now_ms();
    else if (!want && mastra__now_ms() - quiet_since > 20) break;
    if (n > 0 && want && have + (size_t)n <= cap) {
      memcpy(answer + have, buf, (size_t)n);
      have += (size_t)n;
    }
    if (mastra__now_ms() > deadline) break; /* e.g. a session kept open */
  }
  close(fd);
  if (answer) answer[have] = '\0';
  return answer;
}

/* }====== */

static void cleanup(void) {
  mp_ws_exec_shutdown_all(&g_srv);
  mp_exec_legacy_shutdown_all(&g_srv);
  mp_sandbox_shutdown_all(&g_srv);
  mp_httpd_stop(g_srv.api);
  g_srv.api = NULL;
  mp_server_close(&g_srv);
  mastra__remove_tree(g_dir);
}

/* A live sandbox (created as a client does) and a lease for it. */
static void new_sandbox(void) {
  static const char req[] =
      "POST /v1/railway/projects/p/sandbox HTTP/1.1\r\nHost: x\r\n"
      "Authorization: Bearer fuzz-token\r\nContent-Type: application/json\r\n"
      "Content-Length: 21\r\nConnection: close\r\n\r\n{\"environmentId\":\"e\"}";
  char *ans = exchange(req, sizeof req - 1, 1);
  const char *body = strstr(ans, "\r\n\r\n");
  cJSON *j = body ? cJSON_Parse(body + 4) : NULL;
  const cJSON *id = cJSON_GetObjectItem(j, "id");
  mp_sandbox *sb;
  int64_t expires;
  if (!cJSON_IsString(id)) {
    fprintf(stderr, "fuzz_server: the create answered: %s\n", ans);
    abort();
  }
  snprintf(g_sbx, sizeof g_sbx, "%s", id->valuestring);
  cJSON_Delete(j);
  free(ans);
  sb = mp_sandbox_find(&g_srv, g_sbx);
  if (sb == NULL || mp_lease_mint(&g_srv, sb, g_lease, &expires) < 0) abort();
}

static void start(void) {
  char err[512];
  signal(SIGPIPE, SIG_IGN);
  if (mkdtemp(g_dir) == NULL) abort();
  memset(&g_srv, 0, sizeof g_srv);
  g_srv.driver = &safe_driver;
  g_srv.max_body = 1 << 20;
  g_srv.max_object = 1 << 20;
  g_srv.lease_ttl_ms = (uint64_t)24 * 3600 * 1000;
  g_srv.data_dir = g_dir;
  strcpy(g_srv.token, "fuzz-token");
  g_srv.token_len = strlen(g_srv.token);
  g_srv.destroyed_ttl_ms = (int64_t)600 * 1000;
  g_srv.header_timeout_s = 30;
  if (mp_server_open(&g_srv, err, sizeof err) < 0
      || mp_api_start(&g_srv, "127.0.0.1:0", err, sizeof err) < 0) {
    fprintf(stderr, "fuzz_server: cannot start: %s\n", err);
    abort();
  }
  g_port = atoi(strrchr(g_srv.base_url, ':') + 1);
  atexit(cleanup);

  new_sandbox();
}

/* The input with @TOKEN@, @SBX@ and @LEASE@ replaced (malloc'd). */
static char *expand(const uint8_t *data, size_t size, size_t *out_len) {
  static const char *const names[] = {"@TOKEN@", "@SBX@", "@LEASE@"};
  const char *values[3];
  size_t cap = size * 10 + 1, n = 0, i = 0;
  char *out = malloc(cap);
  values[0] = g_srv.token;
  values[1] = g_sbx;
  values[2] = g_lease;
  while (i < size) {
    int k, hit = 0;
    for (k = 0; k < 3; k++) {
      size_t nl = strlen(names[k]), vl = strlen(values[k]);
      if (size - i >= nl && memcmp(data + i, names[k], nl) == 0) {
        memcpy(out + n, values[k], vl);
        n += vl;
        i += nl;
        hit = 1;
        break;
      }
    }
    if (!hit) out[n++] = (char)data[i++];
  }
  *out_len = n;
  return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t len;
  char *text;
  if (g_srv.loop == NULL) start();
  text = expand(data, size, &len);
  free(exchange(text, len, 0));
  free(text);
  /* the input may have destroyed the sandbox: keep one alive */
  if (mp_sandbox_find(&g_srv, g_sbx) == NULL) new_sandbox();
  return 0;
}
