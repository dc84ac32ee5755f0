/*
** attack: many hostile connections to a local HTTP server, for the specs
** and bench/ (spec/server_attack_spec.lua, bench/slowloris.lua).
**
**   attack slow PORT N HOLD_S INTERVAL_S
**       N connections that each send a request line and one header line,
**       then one byte every INTERVAL_S seconds, never ending the head
**       (slowloris). Prints "open K" once all are connected (K of N
**       connected), then after HOLD_S seconds "alive A closed C": how many
**       the server still held, and how many it had closed.
**   attack body PORT N BYTES HOLD_S PATH
**       N connections that each send "POST PATH" with Content-Length:
**       BYTES and then as much of the body as the socket takes, without
**       an Authorization header. Prints "open K", then after HOLD_S
**       seconds "answered A closed C alive L" (A: an HTTP status line came
**       back) and the first status line seen.
**
** Both raise their descriptor limit to the hard limit first. Exit status
** 0, or 2 on a usage error.
*/
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int connect_to(int port) {
  struct sockaddr_in a;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

static void raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

/* Read what fd has: 1 still open, 0 closed by the peer; *status gets
** set when an HTTP status line arrives. */
static int drain(int fd, int *status, char *first, size_t firstlen) {
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
    if (n > 0) {
      buf[n] = '\0';
      if (!*status && strncmp(buf, "HTTP/1.", 7) == 0) {
        *status = 1;
        if (first[0] == '\0') {
          size_t k = strcspn(buf, "\r\n");
          if (k >= firstlen) k = firstlen - 1;
          memcpy(first, buf, k);
          first[k] = '\0';
        }
      }
      continue;
    }
    if (n == 0) return 0;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : 0;
  }
}

/* Watch the fds for HOLD_S seconds; every `tick` seconds (0: never) send
** one byte to each open one. */
static void hold(int *fds, int *status, int n, double hold_s, double tick,
                 char *first, size_t firstlen) {
  struct pollfd *p = calloc((size_t)n, sizeof *p);
  double end = now_s() + hold_s, next = tick > 0 ? now_s() + tick : end;
  int i;
  if (p == NULL) exit(1);
  for (;;) {
    double t = now_s();
    int wait_ms, live = 0;
    if (t >= end) break;
    if (tick > 0 && t >= next) {
      for (i = 0; i < n; i++)
        if (fds[i] >= 0 && send(fds[i], "X", 1, MSG_NOSIGNAL) < 0
            && errno != EAGAIN) {
          close(fds[i]);
          fds[i] = -1;
        }
      next = t + tick;
    }
    for (i = 0; i < n; i++) {
      p[i].fd = fds[i];
      p[i].events = POLLIN;
      p[i].revents = 0;
      if (fds[i] >= 0) live++;
    }
    if (live == 0) break;
    wait_ms = (int)(((next < end ? next : end) - t) * 1000) + 1;
    if (poll(p, (nfds_t)n, wait_ms) <= 0) continue;
    for (i = 0; i < n; i++) {
      if (fds[i] < 0 || p[i].revents == 0) continue;
      if (!drain(fds[i], &status[i], first, firstlen)) {
        close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  free(p);
}

int main(int argc, char **argv) {
  int port, n, i, open = 0, alive = 0, answered = 0;
  int *fds, *status;
  char first[128] = "";
  if (argc < 6 || (strcmp(argv[1], "slow") != 0 && strcmp(argv[1], "body") != 0)
      || (strcmp(argv[1], "body") == 0 && argc < 7)) {
    fprintf(stderr, "usage: attack slow PORT N HOLD_S INTERVAL_S\n"
                    "       attack body PORT N BYTES HOLD_S PATH\n");
    return 2;
  }
  raise_nofile();
  port = atoi(argv[2]);
  n = atoi(argv[3]);
  fds = calloc((size_t)n, sizeof *fds);
  status = calloc((size_t)n, sizeof *status);
  if (fds == NULL || status == NULL) return 1;
  if (strcmp(argv[1], "slow") == 0) {
    double hold_s = atof(argv[4]), tick = atof(argv[5]);
    static const char head[] =
        "GET /v1/projects/p/sandbox/x HTTP/1.1\r\nHost: a\r\n";
    for (i = 0; i < n; i++) {
      fds[i] = connect_to(port);
      if (fds[i] < 0) continue;
      if (send(fds[i], head, sizeof head - 1, MSG_NOSIGNAL) < 0) {
        close(fds[i]);
        fds[i] = -1;
        continue;
      }
      open++;
    }
    printf("open %d\n", open);
    fflush(stdout);
    hold(fds, status, n, hold_s, tick, first, sizeof first);
    for (i = 0; i < n; i++)
      if (fds[i] >= 0) alive++;
    printf("alive %d closed %d\n", alive, open - alive);
  } else {
    long bytes = atol(argv[4]);
    double hold_s = atof(argv[5]);
    char head[512], chunk[65536];
    int hl = snprintf(head, sizeof head,
                      "POST %s HTTP/1.1\r\nHost: a\r\nContent-Length: %ld\r\n"
                      "\r\n", argv[6], bytes);
    memset(chunk, 'a', sizeof chunk);
    for (i = 0; i < n; i++) {
      long left = bytes;
      fds[i] = connect_to(port);
      if (fds[i] < 0) continue;
      if (send(fds[i], head, (size_t)hl, MSG_NOSIGNAL) < 0) {
        close(fds[i]);
        fds[i] = -1;
        continue;
      }
      open++;
      while (left > 0) { /* as much as the socket takes now */
        ssize_t k = send(fds[i], chunk,
                         (size_t)(left < (long)sizeof chunk ? left
                                                             : (long)sizeof chunk),
                         MSG_NOSIGNAL);
        if (k <= 0) break;
        left -= k;
      }
    }
    printf("open %d\n", open);
    fflush(stdout);
    hold(fds, status, n, hold_s, 0, first, sizeof first);
    for (i = 0; i < n; i++) {
      if (status[i]) answered++;
      if (fds[i] >= 0) alive++;
    }
    printf("answered %d closed %d alive %d\nfirst %s\n", answered,
           open - alive, alive, first);
  }
  fflush(stdout);
  for (i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
  free(fds);
  free(status);
  return 0;
}
