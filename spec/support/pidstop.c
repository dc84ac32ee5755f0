/*
** pidstop: a sandbox program that stops every process it can as it is
** born, for spec/namespaces_freeze_spec.lua (issue 30 item 1). Run inside
** a sandbox, as its root.
**
**   pidstop new SECONDS
**       busy-watches /proc/sys/kernel/ns_last_pid and sends SIGSTOP to
**       every pid allocated since its last look.
**   pidstop ahead N SECONDS
**       the same, and SIGSTOP to the N pids after the last one, again and
**       again: a process is hit the moment it becomes signalable, however
**       short its window.
**
** Nothing is continued: what it stopped stays stopped. It spares itself
** and pid 1. After SECONDS it prints "stopped K" (K: the distinct pids a
** SIGSTOP reached) and exits 0; 2 on a usage error, 1 when
** ns_last_pid cannot be read.
*/
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SEEN_MAX 65536

static unsigned char seen[SEEN_MAX];
static long stopped;
static pid_t self;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void stop(long pid) {
  if (pid <= 1 || pid == (long)self || pid >= SEEN_MAX) return;
  if (kill((pid_t)pid, SIGSTOP) == 0 && !seen[pid]) {
    seen[pid] = 1;
    stopped++;
  }
}

static long last_pid(int fd) {
  char buf[32];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  return atol(buf);
}

int main(int argc, char **argv) {
  long ahead = 0, prev, last, p;
  double secs, end;
  int fd;
  if (argc == 3 && strcmp(argv[1], "new") == 0) {
    secs = atof(argv[2]);
  } else if (argc == 4 && strcmp(argv[1], "ahead") == 0) {
    ahead = atol(argv[2]);
    secs = atof(argv[3]);
  } else {
    fprintf(stderr, "usage: pidstop new SECONDS | pidstop ahead N SECONDS\n");
    return 2;
  }
  self = getpid();
  fd = open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || (prev = last_pid(fd)) < 0) {
    perror("pidstop: /proc/sys/kernel/ns_last_pid");
    return 1;
  }
  end = now_s() + secs;
  while (now_s() < end) {
    last = last_pid(fd);
    if (last < 0) continue;
    /* every pid born since the last look (the counter wraps: start over) */
    if (last < prev) prev = 1;
    for (p = prev + 1; p <= last; p++) stop(p);
    /* and the newest, again: it may have become signalable since */
    stop(last);
    for (p = last + 1; p <= last + ahead; p++) stop(p);
    prev = last;
  }
  printf("stopped %ld\n", stopped);
  return 0;
}
