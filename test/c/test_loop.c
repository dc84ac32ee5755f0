/*
** Tests of the internal C API: the event loop (src/core/loop.h) and child
** processes (src/core/proc.h). No framework: CHECK counts, the last line of
** stdout is "N passed, N failed", and the exit status is 1 on a failure.
*/
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loop.h"
#include "proc.h"

#include "check.h"

/* {====== helpers ====== */

static char *test_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};

static void sleep_ms(int ms) {
  struct timespec ts;
  ts.tv_sec = ms / 1000;
  ts.tv_nsec = (long)(ms % 1000) * 1000000L;
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* xorshift64*: reproducible pseudo-random numbers */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint32_t rnd(uint32_t n) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545f4914f6cdd1du) >> 32) % n;
}

static void shuffle(int *a, int n) {
  int i;
  for (i = n - 1; i > 0; i--) {
    int j = (int)rnd((uint32_t)i + 1), t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}


/* Read /proc/<pid>/stat: state, parent and process group. */
static int proc_stat(pid_t pid, char *state, pid_t *ppid, pid_t *pgrp) {
  char path[64], buf[1024], *rp;
  FILE *f;
  size_t n;
  int pp, pg;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  f = fopen(path, "r");
  if (f == NULL) return -1;
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  rp = strrchr(buf, ')'); /* the command name may hold anything */
  if (rp == NULL || sscanf(rp + 1, " %c %d %d", state, &pp, &pg) != 3)
    return -1;
  *ppid = (pid_t)pp;
  *pgrp = (pid_t)pg;
  return 0;
}

/* Walk /proc: the children of this process (zombies included) and the
** live (non-zombie) members of process group pgrp (0: none). With
** kill_them, SIGKILL and reap every child found (the safety net). */
static void scan_procs(pid_t pgrp, int *children, int *group_live,
                       int kill_them) {
  DIR *d = opendir("/proc");
  struct dirent *e;
  pid_t self = getpid();
  *children = 0;
  *group_live = 0;
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL) {
    char st;
    pid_t pid, pp, pg;
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    pid = (pid_t)atoi(e->d_name);
    if (proc_stat(pid, &st, &pp, &pg) < 0) continue;
    if (pp == self) {
      (*children)++;
      if (kill_them) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
      }
    }
    if (pgrp > 0 && pg == pgrp && st != 'Z') (*group_live)++;
  }
  closedir(d);
}

static int count_children(void) {
  int c, g;
  scan_procs(0, &c, &g, 0);
  return c;
}

/* Live members of the group, after giving a killed group up to 1 s to
** finish dying. */
static int group_alive(pid_t pgrp) {
  int c, g, i;
  for (i = 0; i < 100; i++) {
    scan_procs(pgrp, &c, &g, 0);
    if (g == 0) return 0;
    sleep_ms(10);
  }
  return g;
}

typedef struct sink {
  char *data;
  size_t len, cap;
} sink;

static void sink_add(sink *s, const char *d, size_t n) {
  if (n == 0) return;
  if (s->cap - s->len < n + 1) {
    size_t cap = s->cap ? s->cap : 256;
    while (cap - s->len < n + 1) cap *= 2;
    s->data = realloc(s->data, cap);
    if (s->data == NULL) abort();
    s->cap = cap;
  }
  memcpy(s->data + s->len, d, n);
  s->len += n;
  s->data[s->len] = '\0';
}

static const char *sink_str(const sink *s) { return s->data ? s->data : ""; }

static void sink_free(sink *s) {
  free(s->data);
  memset(s, 0, sizeof *s);
}

/* Take the queued ids; count those equal to id. */
static int take_ids(mastra__loop *loop, uint64_t id) {
  const uint64_t *ids;
  size_t n = mastra__loop_take_signals(loop, &ids), i;
  int hits = 0;
  for (i = 0; i < n; i++)
    if (ids[i] == id) hits++;
  return hits;
}

/* Move what the process printed into the sinks. */
static void drain(mastra__proc *p, sink *out, sink *err) {
  if (out != NULL && p->out.len > 0) sink_add(out, p->out.data, p->out.len);
  if (err != NULL && p->err.len > 0) sink_add(err, p->err.data, p->err.len);
  mastra__proc_consumed(p, &p->out);
  mastra__proc_consumed(p, &p->err);
}

/* Run the loop until p is done (or ms have passed), draining its output.
** Returns how many times its id was signalled. */
static int run_until_done(mastra__loop *loop, mastra__proc *p, sink *out,
                          sink *err, int ms) {
  uint64_t deadline = mastra__now_ms() + (uint64_t)ms;
  int hits = 0;
  while (!p->done && mastra__now_ms() < deadline) {
    mastra__loop_run_once(loop, 50);
    hits += take_ids(loop, p->id);
    drain(p, out, err);
  }
  hits += take_ids(loop, p->id);
  drain(p, out, err);
  return hits;
}

/* Run the loop until out holds `text` (or ms have passed). */
static int run_until_output(mastra__loop *loop, mastra__proc *p, sink *out,
                            const char *text, int ms) {
  uint64_t deadline = mastra__now_ms() + (uint64_t)ms;
  while (strstr(sink_str(out), text) == NULL && !p->done
         && mastra__now_ms() < deadline) {
    mastra__loop_run_once(loop, 50);
    take_ids(loop, p->id);
    drain(p, out, NULL);
  }
  return strstr(sink_str(out), text) != NULL;
}

static void run_for(mastra__loop *loop, int ms) {
  uint64_t deadline = mastra__now_ms() + (uint64_t)ms;
  const uint64_t *ids;
  while (mastra__now_ms() < deadline) {
    mastra__loop_run_once(loop, 10);
    mastra__loop_take_signals(loop, &ids);
  }
}

/* What an owner does (lcore's loop __gc): shut everything down, then drop
** its reference. */
static void loop_free(mastra__loop *loop) {
  mastra__loop_close(loop);
  mastra__loop_unref(loop);
}

static mastra__proc *spawn(mastra__loop *loop, const char *command,
                           int stdin_pipe, uint64_t timeout_ms) {
  mastra__proc_opts o;
  mastra__proc *p = NULL;
  char err[256] = "";
  int rc;
  memset(&o, 0, sizeof o);
  o.command = command;
  o.envp = test_env;
  o.stdin_pipe = stdin_pipe;
  o.timeout_ms = timeout_ms;
  rc = mastra__proc_spawn(loop, &o, &p, err, sizeof err);
  if (!CHECK(rc == 0 && p != NULL))
    fprintf(stderr, "  spawn '%s': %d %s\n", command, rc, err);
  return rc == 0 ? p : NULL;
}

/* }====== */

/* {====== timers ====== */

#define NTIMERS 600

typedef struct tslot {
  mastra__timer t;
  int idx;
  int armed;  /* what the test expects */
  int fired;
  uint64_t fired_at; /* ns on CLOCK_MONOTONIC, the timers' clock */
} tslot;

static tslot slots[NTIMERS];
static int fired_order[NTIMERS * 2];
static int nfired;

static void on_slot(mastra__timer *t) {
  tslot *s = t->data;
  s->fired++;
  {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s->fired_at = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  }
  if (nfired < NTIMERS * 2) fired_order[nfired++] = s->idx;
}

static int timer_before(const mastra__timer *a, const mastra__timer *b) {
  if (a->due_ns != b->due_ns) return a->due_ns < b->due_ns;
  return a->seq < b->seq;
}

static void test_timer_heap(void) {
  mastra__loop *loop = mastra__loop_new();
  int order[NTIMERS], i, armed = 0, bad_order = 0, early = 0, wrong = 0;
  int run_errors = 0;
  uint64_t deadline;
  if (!CHECK(loop != NULL)) return;
  CHECK(mastra__loop_next_timeout(loop) == -1);
  CHECK(mastra__loop_alive(loop) == 0);
  for (i = 0; i < NTIMERS; i++) {
    order[i] = i;
    mastra__timer_init(loop, &slots[i].t, on_slot, &slots[i]);
    slots[i].idx = i;
  }
  /* start in random order, with few distinct delays so that equal due
  ** times (ordered by start sequence) are common */
  shuffle(order, NTIMERS);
  for (i = 0; i < NTIMERS; i++) {
    tslot *s = &slots[order[i]];
    CHECK(mastra__timer_start(&s->t, rnd(40)) == 0);
    s->armed = 1;
  }
  CHECK(mastra__loop_alive(loop) == NTIMERS);
  /* stop a third, restart some of those and some armed ones, in random
  ** order; stopping twice is harmless */
  shuffle(order, NTIMERS);
  for (i = 0; i < NTIMERS / 3; i++) {
    tslot *s = &slots[order[i]];
    mastra__timer_stop(&s->t);
    mastra__timer_stop(&s->t);
    s->armed = 0;
  }
  shuffle(order, NTIMERS);
  for (i = 0; i < NTIMERS / 4; i++) {
    tslot *s = &slots[order[i]];
    CHECK(mastra__timer_start(&s->t, rnd(60)) == 0);
    s->armed = 1;
  }
  for (i = 0; i < NTIMERS; i++) armed += slots[i].armed;
  CHECK(mastra__loop_alive(loop) == (size_t)armed);
  /* the heap slots of the armed timers are exactly 1..armed */
  {
    static char seen[NTIMERS + 1];
    int bad_slot = 0;
    memset(seen, 0, sizeof seen);
    for (i = 0; i < NTIMERS; i++) {
      size_t slot = slots[i].t.slot;
      if (!slots[i].armed) {
        if (slot != 0) bad_slot++;
      } else if (slot == 0 || slot > (size_t)armed || seen[slot]) {
        bad_slot++;
      } else {
        seen[slot] = 1;
      }
    }
    CHECK(bad_slot == 0);
  }
  CHECK(mastra__loop_next_timeout(loop) >= 0);
  CHECK(mastra__loop_next_timeout(loop) <= 60);

  deadline = mastra__now_ms() + 5000;
  while (mastra__loop_alive(loop) > 0 && mastra__now_ms() < deadline)
    if (mastra__loop_run_once(loop, -1) != 0) run_errors++;
  CHECK(run_errors == 0);
  CHECK(mastra__loop_alive(loop) == 0);
  CHECK(mastra__loop_next_timeout(loop) == -1);
  CHECK(nfired == armed);
  for (i = 0; i < NTIMERS; i++) {
    const tslot *s = &slots[i];
    if (s->fired != s->armed) wrong++;
    if (s->fired && s->fired_at < s->t.due_ns) early++;
  }
  for (i = 1; i < nfired; i++)
    if (!timer_before(&slots[fired_order[i - 1]].t, &slots[fired_order[i]].t))
      bad_order++;
  if (!CHECK(wrong == 0))
    fprintf(stderr, "  %d timers fired a wrong number of times\n", wrong);
  CHECK(early == 0);
  if (!CHECK(bad_order == 0))
    fprintf(stderr, "  %d timers fired out of due order\n", bad_order);
  mastra__loop_unref(loop);
}

/* Stop the timers at the root, in the middle and in the last slot. */
static int fired_at_pos[10];

static void on_pos(mastra__timer *t) { fired_at_pos[*(int *)t->data]++; }

static void test_timer_stop_positions(void) {
  mastra__loop *loop = mastra__loop_new();
  mastra__timer ts[10];
  int idx[10], i, ok = 1;
  uint64_t deadline;
  if (!CHECK(loop != NULL)) return;
  for (i = 0; i < 10; i++) {
    idx[i] = i;
    mastra__timer_init(loop, &ts[i], on_pos, &idx[i]);
    CHECK(mastra__timer_start(&ts[i], 20 + (uint64_t)i) == 0);
  }
  CHECK(ts[0].slot == 1);  /* the earliest is the root */
  CHECK(ts[9].slot == 10); /* the latest, started last, stays last */
  mastra__timer_stop(&ts[9]);
  CHECK(ts[9].slot == 0);
  CHECK(mastra__loop_alive(loop) == 9);
  mastra__timer_stop(&ts[0]);
  CHECK(ts[0].slot == 0);
  CHECK(mastra__loop_alive(loop) == 8);
  mastra__timer_stop(&ts[4]);
  CHECK(mastra__loop_alive(loop) == 7);
  mastra__timer_stop(&ts[4]);
  CHECK(mastra__loop_alive(loop) == 7);
  /* restarting an armed timer moves it, it does not add it twice */
  CHECK(mastra__timer_start(&ts[1], 40) == 0);
  CHECK(mastra__loop_alive(loop) == 7);
  deadline = mastra__now_ms() + 2000;
  while (mastra__loop_alive(loop) > 0 && mastra__now_ms() < deadline)
    mastra__loop_run_once(loop, -1);
  for (i = 0; i < 10; i++) {
    int want = (i == 0 || i == 4 || i == 9) ? 0 : 1;
    if (fired_at_pos[i] != want) ok = 0;
  }
  CHECK(ok);
  mastra__loop_unref(loop);
}

/* A callback stops a timer due at the same time, and restarts another. */
static mastra__timer t_a, t_b, t_c;
static int fa, fb, fc;

static void on_a(mastra__timer *t) {
  (void)t;
  fa++;
  mastra__timer_stop(&t_b);
  mastra__timer_start(&t_c, 30); /* was due now: pushed back */
}

static void on_b(mastra__timer *t) {
  (void)t;
  fb++;
}

static void on_c(mastra__timer *t) {
  (void)t;
  fc++;
}

static void test_timer_stop_in_callback(void) {
  mastra__loop *loop = mastra__loop_new();
  uint64_t t0, deadline;
  if (!CHECK(loop != NULL)) return;
  mastra__timer_init(loop, &t_a, on_a, NULL);
  mastra__timer_init(loop, &t_b, on_b, NULL);
  mastra__timer_init(loop, &t_c, on_c, NULL);
  t0 = mastra__now_ms();
  mastra__timer_start(&t_a, 5);
  mastra__timer_start(&t_b, 5);
  mastra__timer_start(&t_c, 5);
  deadline = t0 + 2000;
  while (fa == 0 && mastra__now_ms() < deadline)
    mastra__loop_run_once(loop, -1);
  CHECK(fa == 1);
  CHECK(fb == 0);
  CHECK(fc == 0);
  CHECK(mastra__loop_alive(loop) == 1);
  while (mastra__loop_alive(loop) > 0 && mastra__now_ms() < deadline)
    mastra__loop_run_once(loop, -1);
  CHECK(fb == 0);
  CHECK(fc == 1);
  CHECK(mastra__now_ms() - t0 >= 35);
  /* a 0 ms timer fires on the next turn, even a non-blocking one */
  mastra__timer_start(&t_b, 0);
  CHECK(mastra__loop_next_timeout(loop) == 0);
  CHECK(mastra__loop_run_once(loop, 0) == 0);
  CHECK(fb == 1);
  /* a stopped timer never fires */
  mastra__timer_start(&t_b, 1);
  mastra__timer_stop(&t_b);
  CHECK(mastra__loop_next_timeout(loop) == -1);
  sleep_ms(5);
  mastra__loop_run_once(loop, 0);
  CHECK(fb == 1);
  mastra__loop_unref(loop);
}

/* }====== */

/* {====== signals and interrupts ====== */

static void test_signals(void) {
  mastra__loop *loop = mastra__loop_new();
  const uint64_t *ids = NULL;
  size_t n, i;
  int in_order = 1;
  uint64_t a, b, t0;
  if (!CHECK(loop != NULL)) return;
  a = mastra__loop_newid(loop);
  b = mastra__loop_newid(loop);
  CHECK(a != 0 && b != a);
  CHECK(mastra__loop_pending(loop) == 0);
  CHECK(mastra__loop_take_signals(loop, &ids) == 0);
  for (i = 0; i < 1000; i++) CHECK(mastra__loop_signal(loop, 5000 + i) == 0);
  CHECK(mastra__loop_pending(loop) == 1000);
  /* pending ids: the loop must not block */
  CHECK(mastra__loop_next_timeout(loop) == 0);
  t0 = mastra__now_ms();
  CHECK(mastra__loop_run_once(loop, -1) == 0);
  CHECK(mastra__now_ms() - t0 < 500);
  n = mastra__loop_take_signals(loop, &ids);
  CHECK(n == 1000);
  for (i = 0; i < n && i < 1000; i++)
    if (ids[i] != 5000 + i) in_order = 0;
  CHECK(in_order);
  CHECK(mastra__loop_pending(loop) == 0);
  CHECK(mastra__loop_next_timeout(loop) == -1);
  /* handed over once */
  CHECK(mastra__loop_take_signals(loop, &ids) == 0);
  /* the same id may be queued twice */
  mastra__loop_signal(loop, a);
  mastra__loop_signal(loop, b);
  mastra__loop_signal(loop, a);
  n = mastra__loop_take_signals(loop, &ids);
  CHECK(n == 3 && ids[0] == a && ids[1] == b && ids[2] == a);
  mastra__loop_unref(loop);
}

static mastra__loop *volatile g_intr_loop;

static void *interrupt_later(void *arg) {
  (void)arg;
  sleep_ms(100);
  mastra__loop_interrupt(g_intr_loop);
  return NULL;
}

static void on_usr1(int sig) {
  (void)sig;
  mastra__loop_interrupt(g_intr_loop);
}

static void *signal_later(void *arg) {
  sleep_ms(100);
  pthread_kill(*(pthread_t *)arg, SIGUSR1);
  return NULL;
}

static mastra__timer backstop;

static void on_backstop(mastra__timer *t) { (void)t; }

static void test_interrupt(void) {
  mastra__loop *loop = mastra__loop_new();
  struct pollfd pfd;
  struct sigaction sa, old;
  pthread_t th, self = pthread_self();
  uint64_t t0, dt;
  if (!CHECK(loop != NULL)) return;
  g_intr_loop = loop;
  CHECK(mastra__loop_take_interrupt(loop) == 0);

  /* before the wait: run_once(-1) does not block */
  mastra__loop_interrupt(loop);
  CHECK(mastra__loop_next_timeout(loop) == 0);
  pfd.fd = mastra__loop_fd(loop);
  pfd.events = POLLIN;
  pfd.revents = 0;
  CHECK(poll(&pfd, 1, 0) == 1 && (pfd.revents & POLLIN));
  t0 = mastra__now_ms();
  CHECK(mastra__loop_run_once(loop, -1) == 0);
  CHECK(mastra__now_ms() - t0 < 500);
  CHECK(mastra__loop_take_interrupt(loop) == 1);
  CHECK(mastra__loop_take_interrupt(loop) == 0);
  /* the wake-up was consumed: the fd is quiet and waiting waits again */
  pfd.revents = 0;
  CHECK(poll(&pfd, 1, 0) == 0);
  t0 = mastra__now_ms();
  mastra__loop_run_once(loop, 100);
  CHECK(mastra__now_ms() - t0 >= 90);

  /* from another thread, while run_once(-1) waits (a backstop timer ends
  ** the wait if the wake-up is lost, so that the check fails, not hangs) */
  mastra__timer_init(loop, &backstop, on_backstop, NULL);
  mastra__timer_start(&backstop, 3000);
  CHECK(pthread_create(&th, NULL, interrupt_later, NULL) == 0);
  t0 = mastra__now_ms();
  CHECK(mastra__loop_run_once(loop, -1) == 0);
  dt = mastra__now_ms() - t0;
  pthread_join(th, NULL);
  mastra__timer_stop(&backstop);
  if (!CHECK(dt >= 50 && dt < 2000))
    fprintf(stderr, "  run_once returned after %llu ms\n",
            (unsigned long long)dt);
  CHECK(mastra__loop_take_interrupt(loop) == 1);
  CHECK(mastra__loop_take_interrupt(loop) == 0);

  /* from a signal handler (the runner's SIGINT path) */
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, &old);
  CHECK(pthread_create(&th, NULL, signal_later, &self) == 0);
  t0 = mastra__now_ms();
  CHECK(mastra__loop_run_once(loop, -1) == 0);
  dt = mastra__now_ms() - t0;
  pthread_join(th, NULL);
  sigaction(SIGUSR1, &old, NULL);
  CHECK(dt >= 50 && dt < 5000);
  CHECK(mastra__loop_take_interrupt(loop) == 1);
  CHECK(mastra__loop_take_interrupt(loop) == 0);
  g_intr_loop = NULL;
  mastra__loop_unref(loop);
}

/* }====== */

/* {====== processes ====== */

static void test_proc_echo(void) {
  mastra__loop *loop = mastra__loop_new();
  mastra__proc *p;
  sink out = {0}, err = {0};
  int hits;
  if (!CHECK(loop != NULL)) return;
  p = spawn(loop, "echo hi", 0, 0);
  if (p != NULL) {
    CHECK(p->pid > 0);
    CHECK(p->id != 0);
    CHECK(!p->done);
    hits = run_until_done(loop, p, &out, &err, 5000);
    CHECK(p->done);
    CHECK(p->exited && p->out_eof && p->err_eof);
    CHECK(hits > 0); /* state changes signal the id */
    CHECK(strcmp(sink_str(&out), "hi\n") == 0);
    CHECK(err.len == 0);
    CHECK(p->exit_code == 0);
    CHECK(p->term_signal == 0);
    CHECK(!p->timed_out && !p->kill_requested);
    CHECK(mastra__proc_kill(p) == 0); /* finished: nothing to kill */
    CHECK(!p->kill_requested);
    CHECK(mastra__loop_alive(loop) == 0);
    mastra__proc_release(p);
  }
  sink_free(&out);
  sink_free(&err);

  p = spawn(loop, "echo oops >&2; exit 3", 0, 0);
  if (p != NULL) {
    run_until_done(loop, p, &out, &err, 5000);
    CHECK(p->done);
    CHECK(p->exit_code == 3);
    CHECK(p->term_signal == 0);
    CHECK(out.len == 0);
    CHECK(strcmp(sink_str(&err), "oops\n") == 0);
    mastra__proc_release(p);
  }
  sink_free(&out);
  sink_free(&err);

  /* only the given environment */
  p = spawn(loop, "echo \"[$HOME]\"", 0, 0);
  if (p != NULL) {
    run_until_done(loop, p, &out, NULL, 5000);
    CHECK(strcmp(sink_str(&out), "[]\n") == 0);
    mastra__proc_release(p);
  }
  sink_free(&out);
  loop_free(loop);
}

static void test_proc_kill(void) {
  mastra__loop *loop = mastra__loop_new();
  mastra__proc *p;
  sink out = {0};
  uint64_t t0, dt;
  if (!CHECK(loop != NULL)) return;

  p = spawn(loop, "sleep 30", 0, 0);
  if (p != NULL) {
    pid_t pid = p->pid;
    run_for(loop, 50);
    CHECK(!p->done);
    t0 = mastra__now_ms();
    CHECK(mastra__proc_kill(p) == 1);
    CHECK(mastra__proc_kill(p) == 1); /* still running: no second TERM */
    CHECK(p->kill_requested);
    run_until_done(loop, p, NULL, NULL, 5000);
    dt = mastra__now_ms() - t0;
    CHECK(p->done);
    CHECK(p->exit_code == 128 + SIGTERM);
    CHECK(p->term_signal == SIGTERM);
    CHECK(!p->timed_out);
    CHECK(dt < 1000); /* SIGTERM worked: no grace period */
    CHECK(mastra__proc_kill(p) == 0);
    CHECK(group_alive(pid) == 0);
    mastra__proc_release(p);
  }

  /* SIGTERM ignored: SIGKILL after the grace period */
  p = spawn(loop, "trap '' TERM; echo ready; sleep 30", 0, 0);
  if (p != NULL) {
    pid_t pid = p->pid;
    CHECK(run_until_output(loop, p, &out, "ready", 5000));
    t0 = mastra__now_ms();
    CHECK(mastra__proc_kill(p) == 1);
    run_until_done(loop, p, &out, NULL, MASTRA__PROC_KILL_GRACE_MS + 3000);
    dt = mastra__now_ms() - t0;
    CHECK(p->done);
    CHECK(p->exit_code == 128 + SIGKILL);
    CHECK(p->term_signal == SIGKILL);
    if (!CHECK(dt >= MASTRA__PROC_KILL_GRACE_MS - 50
               && dt < MASTRA__PROC_KILL_GRACE_MS + 1000))
      fprintf(stderr, "  ended %llu ms after the kill\n",
              (unsigned long long)dt);
    CHECK(group_alive(pid) == 0);
    mastra__proc_release(p);
  }
  sink_free(&out);

  /* deadline */
  p = spawn(loop, "sleep 30", 0, 200);
  if (p != NULL) {
    t0 = mastra__now_ms();
    run_until_done(loop, p, NULL, NULL, 5000);
    dt = mastra__now_ms() - t0;
    CHECK(p->done);
    CHECK(p->timed_out);
    CHECK(p->kill_requested);
    CHECK(p->exit_code == 128 + SIGTERM);
    if (!CHECK(dt >= 190 && dt < 1500))
      fprintf(stderr, "  timed out after %llu ms\n", (unsigned long long)dt);
    mastra__proc_release(p);
  }
  /* a deadline that does not expire changes nothing */
  p = spawn(loop, "exit 0", 0, 10000);
  if (p != NULL) {
    run_until_done(loop, p, NULL, NULL, 5000);
    CHECK(p->done && !p->timed_out && p->exit_code == 0);
    CHECK(mastra__loop_alive(loop) == 0); /* the deadline timer is gone */
    mastra__proc_release(p);
  }
  loop_free(loop);
}

static void test_proc_bad_cwd(void) {
  mastra__loop *loop = mastra__loop_new();
  mastra__proc_opts o;
  mastra__proc *p = (mastra__proc *)&o; /* must be reset to NULL */
  const char *dir = "/nonexistent/mastra-test-no-such-dir";
  char err[256] = "";
  int rc;
  if (!CHECK(loop != NULL)) return;
  memset(&o, 0, sizeof o);
  o.command = "echo hi";
  o.cwd = dir;
  o.envp = test_env;
  rc = mastra__proc_spawn(loop, &o, &p, err, sizeof err);
  CHECK(rc < 0);
  CHECK(p == NULL);
  if (!CHECK(strstr(err, dir) != NULL)) fprintf(stderr, "  error: %s\n", err);
  CHECK(mastra__loop_alive(loop) == 0);
  CHECK(count_children() == 0);
  /* a good cwd is used */
  o.cwd = "/tmp";
  o.command = "pwd";
  rc = mastra__proc_spawn(loop, &o, &p, err, sizeof err);
  if (CHECK(rc == 0 && p != NULL)) {
    sink out = {0};
    run_until_done(loop, p, &out, NULL, 5000);
    CHECK(strcmp(sink_str(&out), "/tmp\n") == 0);
    sink_free(&out);
    mastra__proc_release(p);
  }
  loop_free(loop);
}

static void test_proc_stdin(void) {
  mastra__loop *loop = mastra__loop_new();
  mastra__proc *p;
  sink out = {0};
  const char *text = "hello\nworld\n";
  if (!CHECK(loop != NULL)) return;
  p = spawn(loop, "cat", 1, 0);
  if (p != NULL) {
    CHECK(mastra__proc_write(p, text, strlen(text)) == (ssize_t)strlen(text));
    CHECK(mastra__proc_want_write(p) == 0);
    run_for(loop, 20);
    mastra__proc_close_stdin(p);
    CHECK(mastra__proc_write(p, "x", 1) == -EBADF);
    CHECK(mastra__proc_want_write(p) == -EBADF);
    run_until_done(loop, p, &out, NULL, 5000);
    CHECK(p->done);
    CHECK(p->exit_code == 0);
    CHECK(strcmp(sink_str(&out), text) == 0);
    mastra__proc_release(p);
  }
  sink_free(&out);

  /* without stdin_pipe, stdin is /dev/null */
  p = spawn(loop, "cat", 0, 0);
  if (p != NULL) {
    run_until_done(loop, p, &out, NULL, 5000);
    CHECK(p->done && p->exit_code == 0 && out.len == 0);
    CHECK(mastra__proc_write(p, "x", 1) == -EBADF);
    mastra__proc_release(p);
  }
  sink_free(&out);

  /* the reader went away: -EPIPE, and no SIGPIPE for us */
  p = spawn(loop, "exec </dev/null; echo ready; sleep 30", 1, 0);
  if (p != NULL) {
    CHECK(run_until_output(loop, p, &out, "ready", 5000));
    CHECK(mastra__proc_write(p, "x", 1) == -EPIPE);
    CHECK(mastra__proc_kill(p) == 1);
    run_until_done(loop, p, NULL, NULL, 5000);
    CHECK(p->done);
    mastra__proc_release(p);
  }
  sink_free(&out);
  loop_free(loop);
}

#define SEQ_LINES 400000

static void test_proc_big_output(void) {
  mastra__loop *loop = mastra__loop_new();
  mastra__proc *p;
  sink out = {0}, want = {0};
  char cmd[64], line[32];
  uint64_t deadline;
  size_t paused_len;
  int i, n;
  if (!CHECK(loop != NULL)) return;
  for (i = 1; i <= SEQ_LINES; i++) {
    n = snprintf(line, sizeof line, "%d\n", i);
    sink_add(&want, line, (size_t)n);
  }
  CHECK(want.len > 2 * MASTRA__PROC_PENDING_MAX);
  snprintf(cmd, sizeof cmd, "seq 1 %d", SEQ_LINES);
  p = spawn(loop, cmd, 0, 0);
  if (p != NULL) {
    /* nobody consumes: reading pauses at the limit */
    const uint64_t *ids;
    deadline = mastra__now_ms() + 5000;
    while (p->out.len < MASTRA__PROC_PENDING_MAX && !p->done
           && mastra__now_ms() < deadline) {
      mastra__loop_run_once(loop, 50);
      mastra__loop_take_signals(loop, &ids);
    }
    CHECK(p->out.len >= MASTRA__PROC_PENDING_MAX);
    run_for(loop, 200);
    paused_len = p->out.len;
    CHECK(!p->out_io.active);
    CHECK(!p->done && !p->exited); /* the child is blocked writing */
    run_for(loop, 200);
    CHECK(p->out.len == paused_len);
    if (!CHECK(paused_len <= MASTRA__PROC_PENDING_MAX + 128 * 1024))
      fprintf(stderr, "  %zu bytes pending\n", paused_len);
    /* consuming resumes it */
    run_until_done(loop, p, &out, NULL, 20000);
    CHECK(p->done);
    CHECK(p->exit_code == 0);
    if (!CHECK(out.len == want.len))
      fprintf(stderr, "  got %zu bytes, want %zu\n", out.len, want.len);
    CHECK(out.len == want.len && memcmp(out.data, want.data, out.len) == 0);
    mastra__proc_release(p);
  }
  sink_free(&out);
  sink_free(&want);
  loop_free(loop);
}

static void test_proc_release(void) {
  mastra__loop *loop = mastra__loop_new();
  mastra__proc *p;
  sink out = {0};
  uint64_t deadline, t0;
  const uint64_t *ids;
  if (!CHECK(loop != NULL)) return;

  p = spawn(loop, "sleep 30", 0, 0);
  if (p != NULL) {
    pid_t pid = p->pid;
    run_for(loop, 50);
    CHECK(count_children() == 1);
    mastra__proc_release(p); /* p is the loop's now */
    mastra__loop_take_signals(loop, &ids);
    deadline = mastra__now_ms() + 5000;
    while (mastra__loop_alive(loop) > 0 && mastra__now_ms() < deadline)
      mastra__loop_run_once(loop, 100);
    CHECK(mastra__loop_alive(loop) == 0);
    CHECK(mastra__loop_pending(loop) == 0); /* an orphan signals nothing */
    CHECK(count_children() == 0);
    CHECK(kill(pid, 0) < 0 && errno == ESRCH);
  }

  /* an orphan that ignores SIGTERM: SIGKILL after the grace period */
  p = spawn(loop, "trap '' TERM; echo ready; sleep 30", 0, 0);
  if (p != NULL) {
    pid_t pid = p->pid;
    CHECK(run_until_output(loop, p, &out, "ready", 5000));
    t0 = mastra__now_ms();
    mastra__proc_release(p);
    deadline = t0 + MASTRA__PROC_KILL_GRACE_MS + 3000;
    while (mastra__loop_alive(loop) > 0 && mastra__now_ms() < deadline)
      mastra__loop_run_once(loop, 100);
    CHECK(mastra__loop_alive(loop) == 0);
    CHECK(mastra__now_ms() - t0 < MASTRA__PROC_KILL_GRACE_MS + 1000);
    CHECK(count_children() == 0);
    CHECK(group_alive(pid) == 0);
  }
  sink_free(&out);

  /* an orphan with a lot of output: drained, not buffered, not blocked */
  p = spawn(loop, "seq 1 400000; exit 7", 0, 0);
  if (p != NULL) {
    mastra__proc_release(p);
    deadline = mastra__now_ms() + 10000;
    while (mastra__loop_alive(loop) > 0 && mastra__now_ms() < deadline)
      mastra__loop_run_once(loop, 100);
    CHECK(mastra__loop_alive(loop) == 0);
    CHECK(count_children() == 0);
  }
  loop_free(loop);
}

static void test_loop_close(void) {
  mastra__loop *loop = mastra__loop_new();
  mastra__proc *p, *q;
  mastra__proc_opts o;
  char err[256] = "";
  uint64_t t0;
  int status;
  if (!CHECK(loop != NULL)) return;
  p = spawn(loop, "sleep 30", 0, 0);
  q = spawn(loop, "sleep 30", 0, 0);
  if (p != NULL && q != NULL) {
    pid_t pid = p->pid, qpid = q->pid;
    run_for(loop, 50);
    mastra__proc_release(q); /* an orphan goes with the loop too */
    CHECK(count_children() == 2);
    t0 = mastra__now_ms();
    mastra__loop_close(loop);
    CHECK(mastra__now_ms() - t0 < 1000);
    CHECK(mastra__loop_closed(loop));
    CHECK(p->done);
    CHECK(mastra__loop_alive(loop) == 0);
    /* reaped: no zombie, not our child any more */
    CHECK(waitpid(pid, &status, WNOHANG) < 0 && errno == ECHILD);
    CHECK(waitpid(qpid, &status, WNOHANG) < 0 && errno == ECHILD);
    CHECK(count_children() == 0);
    CHECK(group_alive(pid) == 0);
    CHECK(group_alive(qpid) == 0);
    /* nothing starts on a closed loop */
    memset(&o, 0, sizeof o);
    o.command = "echo hi";
    o.envp = test_env;
    q = (mastra__proc *)&o;
    CHECK(mastra__proc_spawn(loop, &o, &q, err, sizeof err) < 0);
    CHECK(q == NULL);
    CHECK(strstr(err, "closed") != NULL);
    mastra__loop_close(loop); /* twice is harmless */
    mastra__proc_release(p);
  } else {
    if (p != NULL) mastra__proc_release(p);
    if (q != NULL) mastra__proc_release(q);
  }
  loop_free(loop);
}

/* }====== */

typedef void (*test_fn)(void);

static void run_test(const char *name, test_fn fn) {
  int fails = g_fail, fds = count_fds(), fds_after, kids;
  fn();
  fds_after = count_fds();
  if (!CHECK(fds_after == fds))
    fprintf(stderr, "  %s: %d descriptors before, %d after\n", name, fds,
            fds_after);
  kids = count_children();
  if (!CHECK(kids == 0)) {
    int c, g;
    fprintf(stderr, "  %s: %d child processes left\n", name, kids);
    scan_procs(0, &c, &g, 1);
  }
  fprintf(stderr, "%s %s\n", g_fail == fails ? "ok  " : "FAIL", name);
}

int main(void) {
  int fds0 = count_fds();
  alarm(120); /* a hang is a failure */
  CHECK(fds0 > 0);
  run_test("timer heap", test_timer_heap);
  run_test("timer stop positions", test_timer_stop_positions);
  run_test("timer stop in callback", test_timer_stop_in_callback);
  run_test("signals", test_signals);
  run_test("interrupt", test_interrupt);
  run_test("process echo / exit code", test_proc_echo);
  run_test("process kill / grace / deadline", test_proc_kill);
  run_test("process bad cwd", test_proc_bad_cwd);
  run_test("process stdin", test_proc_stdin);
  run_test("process big output", test_proc_big_output);
  run_test("process release", test_proc_release);
  run_test("loop close", test_loop_close);
  CHECK(count_fds() == fds0);
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}
