/*
** The end of a destroy (drain.h): a sandbox whose tree is gone may still
** have processes on the host. SIGKILL is asynchronous (a process dies
** when it next runs, a pid namespace after its init has reaped every
** member), and a fork storm makes children between a scan and the kill
** of their parent. So after the teardown the sandbox is drained: every
** check SIGKILLs its commands' groups and what the driver finds of it
** (srv->driver->left: the namespaces driver's cgroups, keeper and init;
** else the scan of /proc for its marker), and the destroy answers once a
** check finds nothing. Checks come from the driver's events
** (mp_sandbox_recheck: an init's pidfd, a keeper reaped) and from a timer
** on the loop, 2 ms after the teardown and doubling up to 50 ms (cgroup
** v1 has no event for an emptied cgroup; v2's cgroup.events would give
** one, see docs/platform.md). Nothing here waits: a check reads a few
** files and sends signals. At srv->destroy_wait_ms the waiters are told
** what is left (a process stuck in the kernel, in uninterruptible I/O,
** does not die of SIGKILL until that I/O ends), it is logged, and the
** checks go on every second until the sandbox is empty.
*/
#define _GNU_SOURCE
#include "sandbox/drain.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "sandbox/orphans.h"
#include "util/log.h"
#include "util.h"

#define DRAIN_FIRST_MS 2
#define DRAIN_STEP_MAX_MS 50
#define DRAIN_LATE_MS 1000

static int marked_of(void *data, const char *id, long pgrp) {
  const mp_sandbox *sb = data;
  (void)pgrp;
  return strcmp(id, sb->id) == 0;
}

/* SIGKILL what is left of sb; how many processes that was */
static size_t left_of(mp_sandbox *sb) {
  mp_server *srv = sb->srv;
  size_t i;
  for (i = 0; i < sb->nprocs; i++) /* its commands' groups, graceless now */
    if (!sb->procs[i]->done) kill(-sb->procs[i]->pid, SIGKILL);
  if (srv->driver->left != NULL) return srv->driver->left(srv, sb);
  /* a sandbox that never ran a command has no process to look for */
  if (sb->last_exec_ms == 0) return 0;
  return mp_orphans_kill_marked(marked_of, NULL, sb);
}

static void tell(mp_sandbox *sb, int rc, const char *message) {
  mp_drain_done done = sb->drain_done;
  sb->drain_done = NULL;
  if (done != NULL) done(sb, rc, message);
}

static void check(mp_sandbox *sb) {
  int64_t now = mastra__wall_ms();
  size_t n = left_of(sb);
  char msg[600];
  if (n == 0) {
    mastra__timer_stop(&sb->drain_timer);
    sb->draining = 0;
    if (sb->drain_late)
      mp_log("sandbox %s: its last processes are gone, %lld ms after its"
             " teardown", sb->id, (long long)(now - sb->drain_since_ms));
    sb->drain_late = 0;
    tell(sb, 0, NULL);
    return;
  }
  sb->drain_left = n;
  if (!sb->drain_late && now >= sb->drain_deadline_ms) {
    sb->drain_late = 1;
    snprintf(msg, sizeof msg,
             "sandbox %s is destroyed, but %zu of its processes were still on"
             " the host %lld ms after their SIGKILL (--destroy-wait): a"
             " process stuck in the kernel (uninterruptible I/O) dies only"
             " when that ends. The server goes on killing them every second"
             " and logs when they are gone; DELETE the sandbox again to wait"
             " for them", sb->id, n,
             (long long)(now - sb->drain_since_ms));
    mp_log("%s", msg);
    tell(sb, -1, msg);
  }
  if (sb->drain_late) {
    mastra__timer_start(&sb->drain_timer, DRAIN_LATE_MS);
    return;
  }
  mastra__timer_start(&sb->drain_timer, sb->drain_delay_ms);
  if (sb->drain_delay_ms < DRAIN_STEP_MAX_MS) sb->drain_delay_ms *= 2;
  if (sb->drain_delay_ms > DRAIN_STEP_MAX_MS)
    sb->drain_delay_ms = DRAIN_STEP_MAX_MS;
}

static void on_drain_timer(mastra__timer *t) { check(t->data); }

void mp_drain_start(mp_sandbox *sb, mp_drain_done done, int now) {
  int64_t t = mastra__wall_ms();
  sb->drain_done = done;
  if (sb->draining && !sb->drain_late) { /* keeps its deadline */
    if (now) check(sb);
    return;
  }
  if (!sb->draining) {
    mastra__timer_init(sb->srv->loop, &sb->drain_timer, on_drain_timer, sb);
    sb->drain_since_ms = t;
  }
  sb->draining = 1;
  sb->drain_late = 0;
  sb->drain_deadline_ms = t + (sb->srv->destroy_wait_ms > 0
                                ? sb->srv->destroy_wait_ms
                                : MP_DESTROY_WAIT_DEFAULT_S * 1000);
  sb->drain_delay_ms = DRAIN_FIRST_MS;
  if (now) {
    check(sb);
  } else {
    mastra__timer_start(&sb->drain_timer, DRAIN_FIRST_MS);
  }
}

void mp_sandbox_recheck(mp_sandbox *sb) {
  if (sb != NULL && sb->draining) check(sb);
}

void mp_drain_stop(mp_sandbox *sb) {
  mastra__timer_stop(&sb->drain_timer); /* a no-op if never started */
  sb->draining = 0;
  sb->drain_done = NULL;
}
