/*
** Event loop: epoll + timer heap + eventfd wake-ups + a signal queue.
*/
#define _GNU_SOURCE
#include "loop.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_EVENTS 64

struct mastra__loop {
  int epfd;
  int wakefd;
  int refs;
  int closed;
  int dispatching;
  volatile sig_atomic_t interrupted;
  uint64_t next_id;
  uint64_t timer_seq;
  size_t active_io;
  /* timer min-heap */
  mastra__timer **heap;
  size_t nheap, capheap;
  /* signalled ids, waiting for Lua */
  uint64_t *sig, *sig_out;
  size_t nsig, capsig, capsig_out;
  mastra__handle handles;   /* sentinel of a circular list */
  mastra__handle deferred;  /* sentinel: handles to free after dispatch */
  void *http;               /* http_client.c: the shared libcurl multi */
};

uint64_t mastra__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The timers' clock: CLOCK_MONOTONIC in nanoseconds, untruncated. */
static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void list_init(mastra__handle *s) { s->prev = s->next = s; }

static void list_push(mastra__handle *s, mastra__handle *h) {
  h->prev = s->prev;
  h->next = s;
  s->prev->next = h;
  s->prev = h;
}

static void list_unlink(mastra__handle *h) {
  if (h->next == NULL) return;
  h->prev->next = h->next;
  h->next->prev = h->prev;
  h->prev = h->next = NULL;
}

mastra__loop *mastra__loop_new(void) {
  mastra__loop *loop = calloc(1, sizeof *loop);
  struct epoll_event ev;
  if (loop == NULL) return NULL;
  loop->epfd = epoll_create1(EPOLL_CLOEXEC);
  loop->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (loop->epfd < 0 || loop->wakefd < 0) goto fail;
  memset(&ev, 0, sizeof ev);
  ev.events = EPOLLIN;
  ev.data.ptr = NULL; /* NULL marks the wake-up fd */
  if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wakefd, &ev) < 0) goto fail;
  loop->refs = 1;
  loop->next_id = 1;
  list_init(&loop->handles);
  list_init(&loop->deferred);
  return loop;
fail:
  if (loop->epfd >= 0) close(loop->epfd);
  if (loop->wakefd >= 0) close(loop->wakefd);
  free(loop);
  return NULL;
}

void mastra__loop_ref(mastra__loop *loop) { loop->refs++; }

static void free_deferred(mastra__loop *loop) {
  while (loop->deferred.next != &loop->deferred) {
    mastra__handle *h = loop->deferred.next;
    list_unlink(h);
    h->free(h);
  }
}

void mastra__loop_close(mastra__loop *loop) {
  if (loop->closed) return;
  loop->closed = 1;
  while (loop->handles.next != &loop->handles) {
    mastra__handle *h = loop->handles.next;
    list_unlink(h);
    h->shutdown(h);
  }
  free_deferred(loop);
}

void mastra__loop_unref(mastra__loop *loop) {
  if (--loop->refs > 0) return;
  mastra__loop_close(loop);
  close(loop->epfd);
  close(loop->wakefd);
  free(loop->heap);
  free(loop->sig);
  free(loop->sig_out);
  free(loop);
}

int mastra__loop_closed(const mastra__loop *loop) { return loop->closed; }
int mastra__loop_fd(const mastra__loop *loop) { return loop->epfd; }
uint64_t mastra__loop_newid(mastra__loop *loop) { return loop->next_id++; }

void *mastra__loop_http(const mastra__loop *loop) { return loop->http; }
void mastra__loop_set_http(mastra__loop *loop, void *http) {
  loop->http = http;
}

void mastra__loop_add_handle(mastra__loop *loop, mastra__handle *h) {
  list_push(&loop->handles, h);
}

void mastra__loop_remove_handle(mastra__loop *loop, mastra__handle *h) {
  (void)loop;
  list_unlink(h);
}

void mastra__loop_defer_free(mastra__loop *loop, mastra__handle *h) {
  list_unlink(h);
  if (loop->dispatching)
    list_push(&loop->deferred, h);
  else
    h->free(h);
}

/* {====== signals ====== */

int mastra__loop_signal(mastra__loop *loop, uint64_t id) {
  if (loop->nsig == loop->capsig) {
    size_t cap = loop->capsig ? loop->capsig * 2 : 64;
    uint64_t *p = realloc(loop->sig, cap * sizeof *p);
    if (p == NULL) return -1;
    loop->sig = p;
    loop->capsig = cap;
  }
  loop->sig[loop->nsig++] = id;
  return 0;
}

size_t mastra__loop_pending(const mastra__loop *loop) { return loop->nsig; }

size_t mastra__loop_take_signals(mastra__loop *loop, const uint64_t **ids) {
  /* swap buffers so that the caller may read while new ids queue up */
  uint64_t *tmp = loop->sig_out;
  size_t cap = loop->capsig_out, n = loop->nsig;
  loop->sig_out = loop->sig;
  loop->capsig_out = loop->capsig;
  loop->sig = tmp;
  loop->capsig = cap;
  loop->nsig = 0;
  *ids = loop->sig_out;
  return n;
}

void mastra__loop_interrupt(mastra__loop *loop) {
  uint64_t one = 1;
  ssize_t r;
  loop->interrupted = 1;
  r = write(loop->wakefd, &one, sizeof one);
  (void)r;
}

int mastra__loop_take_interrupt(mastra__loop *loop) {
  int v = loop->interrupted != 0;
  loop->interrupted = 0;
  return v;
}

/* }====== */

/* {====== timers (binary min-heap on (due, seq)) ====== */

static int timer_less(const mastra__timer *a, const mastra__timer *b) {
  if (a->due_ns != b->due_ns) return a->due_ns < b->due_ns;
  return a->seq < b->seq;
}

static void heap_set(mastra__loop *loop, size_t i, mastra__timer *t) {
  loop->heap[i] = t;
  t->slot = i + 1;
}

static void heap_up(mastra__loop *loop, size_t i) {
  mastra__timer *t = loop->heap[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!timer_less(t, loop->heap[parent])) break;
    heap_set(loop, i, loop->heap[parent]);
    i = parent;
  }
  heap_set(loop, i, t);
}

static void heap_down(mastra__loop *loop, size_t i) {
  mastra__timer *t = loop->heap[i];
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    const mastra__timer *best = t;
    if (l < loop->nheap && timer_less(loop->heap[l], best))
      m = l, best = loop->heap[l];
    if (r < loop->nheap && timer_less(loop->heap[r], best)) m = r;
    if (m == i) break;
    heap_set(loop, i, loop->heap[m]);
    i = m;
  }
  heap_set(loop, i, t);
}

void mastra__timer_init(mastra__loop *loop, mastra__timer *t,
                        mastra__timer_cb cb, void *data) {
  memset(t, 0, sizeof *t);
  t->loop = loop;
  t->cb = cb;
  t->data = data;
}

void mastra__timer_stop(mastra__timer *t) {
  mastra__loop *loop = t->loop;
  size_t i;
  if (t->slot == 0) return;
  i = t->slot - 1;
  t->slot = 0;
  loop->nheap--;
  if (i == loop->nheap) return;
  heap_set(loop, i, loop->heap[loop->nheap]);
  heap_up(loop, i);
  heap_down(loop, loop->heap[i]->slot - 1);
}

int mastra__timer_start(mastra__timer *t, uint64_t ms) {
  mastra__loop *loop = t->loop;
  mastra__timer_stop(t);
  if (loop->nheap == loop->capheap) {
    size_t cap = loop->capheap ? loop->capheap * 2 : 16;
    mastra__timer **p = realloc(loop->heap, cap * sizeof *p);
    if (p == NULL) return -ENOMEM;
    loop->heap = p;
    loop->capheap = cap;
  }
  /* from the untruncated clock: a due time counted in whole milliseconds
  ** from a truncated clock came up to 1 ms before the delay had passed as
  ** core.now() measures it, and direct_exec.lua, woken by its one-shot
  ** deadline timer before its deadline, waited again on that timer */
  t->due_ns = now_ns() + (ms > UINT64_MAX / 2000000u ? UINT64_MAX / 2 : ms * 1000000u);
  t->seq = loop->timer_seq++;
  heap_set(loop, loop->nheap++, t);
  heap_up(loop, loop->nheap - 1);
  return 0;
}

static void run_timers(mastra__loop *loop) {
  uint64_t now = now_ns();
  while (loop->nheap > 0 && loop->heap[0]->due_ns <= now) {
    mastra__timer *t = loop->heap[0];
    mastra__timer_stop(t);
    t->cb(t);
  }
}

/* }====== */

/* {====== fd watchers ====== */

void mastra__io_init(mastra__loop *loop, mastra__io *io, int fd,
                     mastra__io_cb cb, void *data) {
  memset(io, 0, sizeof *io);
  io->loop = loop;
  io->fd = fd;
  io->cb = cb;
  io->data = data;
}

int mastra__io_start(mastra__io *io, uint32_t events) {
  struct epoll_event ev;
  int op = io->active ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
  if (io->active && io->events == events) return 0;
  memset(&ev, 0, sizeof ev);
  ev.events = events;
  ev.data.ptr = io;
  if (epoll_ctl(io->loop->epfd, op, io->fd, &ev) < 0) return -errno;
  if (!io->active) io->loop->active_io++;
  io->active = 1;
  io->events = events;
  return 0;
}

void mastra__io_stop(mastra__io *io) {
  if (!io->active) return;
  epoll_ctl(io->loop->epfd, EPOLL_CTL_DEL, io->fd, NULL);
  io->active = 0;
  io->events = 0;
  io->loop->active_io--;
}

/* }====== */

int mastra__loop_next_timeout(const mastra__loop *loop) {
  uint64_t now, due;
  if (loop->nsig > 0 || loop->interrupted) return 0;
  if (loop->nheap == 0) return -1;
  now = now_ns();
  due = loop->heap[0]->due_ns;
  if (due <= now) return 0;
  /* rounded up: epoll_wait sleeps past the due time, not short of it */
  due = (due - now + 999999u) / 1000000u;
  return due > INT32_MAX ? INT32_MAX : (int)due;
}

size_t mastra__loop_alive(const mastra__loop *loop) {
  return loop->nheap + loop->active_io;
}

int mastra__loop_run_once(mastra__loop *loop, int timeout_ms) {
  struct epoll_event events[MAX_EVENTS];
  int n, i, t = mastra__loop_next_timeout(loop);
  if (t >= 0 && (timeout_ms < 0 || t < timeout_ms)) timeout_ms = t;
  n = epoll_wait(loop->epfd, events, MAX_EVENTS, timeout_ms);
  if (n < 0) {
    if (errno != EINTR) return -errno;
    n = 0;
  }
  loop->dispatching = 1;
  for (i = 0; i < n; i++) {
    mastra__io *io = events[i].data.ptr;
    if (io == NULL) {
      uint64_t v;
      ssize_t r = read(loop->wakefd, &v, sizeof v);
      (void)r;
      continue;
    }
    /* an earlier callback of this batch may have stopped it */
    if (io->active) io->cb(io, events[i].events);
  }
  run_timers(loop);
  loop->dispatching = 0;
  free_deferred(loop);
  return 0;
}
