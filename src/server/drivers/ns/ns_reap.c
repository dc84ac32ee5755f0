/*
** What is left of a `namespaces` sandbox (ns_reap.h): its strays at a
** destroy, before the checkpoint's capture, and after its teardown what
** the destroy's drain (sandbox/drain.c) waits for: the keeper, the init
** and what the cgroups hold.
*/
#define _GNU_SOURCE
#include "drivers/ns/ns_reap.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "drivers/ns/ns_cgroup.h"
#include "drivers/ns/ns_uids.h"
#include "sandbox/orphans.h"

typedef struct stray_scan {
  const ns_box *b;
  int (*in_command)(void *data, long pgrp);
  void *data;
  size_t n;
} stray_scan;

static void kill_stray(long pid, void *data) {
  stray_scan *s = data;
  unsigned long long start;
  long pgrp;
  char state;
  if (pid == (long)s->b->keeper || pid == s->b->init_pid) return;
  if (mp_orphans_proc_stat(pid, &state, &pgrp, &start) < 0 || state == 'Z'
      || s->in_command(s->data, pgrp))
    return;
  if (kill((pid_t)pid, SIGKILL) == 0) s->n++;
}

/* a destroy's strays, from the sandbox's cgroup (every process of the
** sandbox is in it): all but the keeper, the init and the commands'
** groups. No cgroups: none (they die with the init at the teardown). */
size_t mp_ns_kill_strays(mp_sandbox *sb, int (*in_command)(void *data,
                                                           long pgrp),
                         void *data) {
  stray_scan s;
  s.b = sb->driver_data;
  s.in_command = in_command;
  s.data = data;
  s.n = 0;
  if (s.b != NULL && s.b->cg_made) mp_nscg_each(sb->id, kill_stray, &s);
  return s.n;
}

typedef struct left_scan {
  const ns_box *b;
  size_t n;
} left_scan;

static void kill_left(long pid, void *data) {
  left_scan *s = data;
  if (pid > 1 && kill((pid_t)pid, SIGKILL) == 0) s->n++;
}

/* What is left of a torn-down sandbox (mp_driver.left): its keeper until
** the loop reaps it, its init until its pidfd says it exited (after every
** other process of its pid namespace), and whatever its cgroups hold
** (the commands' relays too), each SIGKILLed again; its cgroups are
** removed as soon as they are empty. Without cgroups, the keeper and the
** init: the rest of the sandbox lives in the init's pid namespace. */
size_t mp_ns_left(mp_server *srv, mp_sandbox *sb) {
  ns_box *b = sb->driver_data;
  left_scan s;
  (void)srv;
  if (b == NULL) return 0;
  s.b = b;
  s.n = 0;
  /* the keeper and the init, again (pidfds: never a reused pid) */
  if (b->init_fd >= 0)
    syscall(SYS_pidfd_send_signal, b->init_fd, SIGKILL, NULL, 0);
  if (b->keeper_fd >= 0)
    syscall(SYS_pidfd_send_signal, b->keeper_fd, SIGKILL, NULL, 0);
  if (b->keeper_fd >= 0) s.n++; /* on_keeper_exit reaps it */
  if (b->init_fd >= 0) {
    struct pollfd pfd = {b->init_fd, POLLIN, 0};
    if (poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLIN | POLLHUP))) {
      mastra__io_stop(&b->init_io);
      close(b->init_fd);
      b->init_fd = -1;
    } else {
      s.n++;
    }
  }
  if (b->cg_made) {
    size_t before = s.n;
    mp_nscg_each(b->id, kill_left, &s);
    if (s.n == before && mp_nscg_remove(b->id) == 0) {
      b->cg_made = 0;
      mastra__timer_stop(&b->rmdir_timer);
      mp_ns_uids_put_if_gone(b);
    } else if (s.n == before) {
      s.n++; /* not removable yet: a process on its way out */
    }
  }
  return s.n;
}
