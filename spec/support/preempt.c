/*
** preempt.so: LD_PRELOAD for mastra-platform in spec/stream_stress_spec.lua.
**
** It gives the server, every time, the timing that load gives it rarely:
** preempted between two sends of one turn while its client drains the
** socket. After a send() on a socket would block for real, the next
** send() on it that comes later (more than 200 us on: another turn of the
** event loop, woken by EPOLLOUT) answers EAGAIN without writing, and the
** send() after that one sleeps 20 ms before it writes. A server that
** decides, between those two sends, that its queue is full, and does not
** look again once the second send has drained it, loses the wake-up of
** the output it held back (issue 28).
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define FDS 65536

static double blocked_at[FDS]; /* the last real EAGAIN, 0: none since */
static unsigned char faked[FDS]; /* an EAGAIN was faked: sleep on the next */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

__attribute__((visibility("default")))
ssize_t send(int fd, const void *buf, size_t len, int flags) {
  static ssize_t (*real)(int, const void *, size_t, int);
  ssize_t n;
  if (real == NULL)
    *(void **)&real = dlsym(RTLD_NEXT, "send");
  if (fd < 0 || fd >= FDS) return real(fd, buf, len, flags);
  if (faked[fd]) {
    faked[fd] = 0;
    usleep(20000);
  } else if (blocked_at[fd] > 0 && now() - blocked_at[fd] > 200e-6) {
    blocked_at[fd] = 0;
    faked[fd] = 1;
    errno = EAGAIN;
    return -1;
  }
  n = real(fd, buf, len, flags);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) blocked_at[fd] = now();
  return n;
}
