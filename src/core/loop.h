/*
** The event loop: epoll for file descriptors, a binary heap of timers, an
** eventfd for wake-ups, and a queue of signalled ids for the Lua scheduler.
**
** Invariants:
**   - Library callbacks (epoll, timers) touch C state only. What Lua must
**     learn is queued as an id with mastra__loop_signal() and handed to Lua
**     by mastra__loop_take_signals() after mastra__loop_run_once() returns.
**   - Nothing is freed while run_once dispatches: handles that must go away
**     from inside a callback are deferred with mastra__loop_defer_free().
**   - The loop is reference counted: every live handle holds a reference, so
**     finalizer order at lua_close() does not matter.
*/
#ifndef MASTRA_LOOP_H
#define MASTRA_LOOP_H

#include <stddef.h>
#include <stdint.h>

typedef struct mastra__loop mastra__loop;
typedef struct mastra__io mastra__io;
typedef struct mastra__timer mastra__timer;
typedef struct mastra__handle mastra__handle;

typedef void (*mastra__io_cb)(mastra__io *io, uint32_t revents);
typedef void (*mastra__timer_cb)(mastra__timer *t);

/* An fd watcher. Level-triggered; `events` is the epoll interest. */
struct mastra__io {
  mastra__loop *loop;
  int fd;
  uint32_t events;
  int active;          /* registered with epoll */
  mastra__io_cb cb;
  void *data;
};

/* A one-shot timer. `slot` is its heap index + 1, 0 when not armed.
** due_ns is on CLOCK_MONOTONIC in nanoseconds, the clock core.now() reads:
** a timer fires when its delay has passed as core.now() measures it, never
** before (whole milliseconds from a truncated clock came up to 1 ms early). */
struct mastra__timer {
  mastra__loop *loop;
  uint64_t due_ns;
  uint64_t seq;
  size_t slot;
  mastra__timer_cb cb;
  void *data;
};

/* A long-lived object the loop must shut down when it is destroyed:
** child processes, HTTP transfers and their shared context, WebSockets. */
struct mastra__handle {
  void (*shutdown)(mastra__handle *h);  /* stop everything, synchronously */
  void (*free)(mastra__handle *h);      /* release a deferred handle */
  mastra__handle *prev, *next;
};

mastra__loop *mastra__loop_new(void);
void mastra__loop_ref(mastra__loop *loop);
void mastra__loop_unref(mastra__loop *loop);
/* Shut down every handle and stop accepting work; memory goes with the
** last reference. */
void mastra__loop_close(mastra__loop *loop);
int mastra__loop_closed(const mastra__loop *loop);

int mastra__loop_fd(const mastra__loop *loop);
uint64_t mastra__now_ms(void);
uint64_t mastra__loop_newid(mastra__loop *loop);

/* Wait at most timeout_ms (-1: no limit, 0: never block) for I/O, dispatch
** it, then run due timers. Returns 0, or a negative errno. */
int mastra__loop_run_once(mastra__loop *loop, int timeout_ms);
/* Milliseconds until the next timer, 0 if signals are pending, -1 if
** there is nothing to wait for. */
int mastra__loop_next_timeout(const mastra__loop *loop);
/* Number of armed timers and active watchers (what can still wake us). */
size_t mastra__loop_alive(const mastra__loop *loop);

int mastra__loop_signal(mastra__loop *loop, uint64_t id);
size_t mastra__loop_pending(const mastra__loop *loop);
/* Hand over the queued ids: *ids stays owned by the loop and is valid
** until the next call that touches the loop. */
size_t mastra__loop_take_signals(mastra__loop *loop, const uint64_t **ids);

/* Async-signal-safe: make run_once return and flag an interrupt. */
void mastra__loop_interrupt(mastra__loop *loop);
/* Return and clear the interrupt flag. */
int mastra__loop_take_interrupt(mastra__loop *loop);

void mastra__io_init(mastra__loop *loop, mastra__io *io, int fd,
                     mastra__io_cb cb, void *data);
int mastra__io_start(mastra__io *io, uint32_t events);
void mastra__io_stop(mastra__io *io);

void mastra__timer_init(mastra__loop *loop, mastra__timer *t,
                        mastra__timer_cb cb, void *data);
/* Due when ms have passed on CLOCK_MONOTONIC, never earlier: a caller that
** compares core.now() with its deadline after the timer fired finds the
** deadline passed. */
int mastra__timer_start(mastra__timer *t, uint64_t ms);
void mastra__timer_stop(mastra__timer *t);

/* The HTTP client of the loop (http_client.c): created on first use, shut
** down with the other handles. NULL until then. */
void *mastra__loop_http(const mastra__loop *loop);
void mastra__loop_set_http(mastra__loop *loop, void *http);

void mastra__loop_add_handle(mastra__loop *loop, mastra__handle *h);
void mastra__loop_remove_handle(mastra__loop *loop, mastra__handle *h);
/* Free h after the current dispatch (or now, outside one). */
void mastra__loop_defer_free(mastra__loop *loop, mastra__handle *h);

#endif
