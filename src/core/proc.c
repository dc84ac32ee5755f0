/*
** Child processes on the loop (see proc.h for the lifetime rules).
*/
#define _GNU_SOURCE
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define READ_CHUNK 65536

static void check_done(mastra__proc *p);

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static void stop_io(mastra__io *io) {
  mastra__io_stop(io);
  close_fd(&io->fd);
}

static void notify(mastra__proc *p) {
  if (p->orphan) return;
  if (p->notify != NULL)
    p->notify(p, p->notify_data);
  else
    mastra__loop_signal(p->loop, p->id);
}

/* Read what the pipe has, up to the pending limit. */
static void on_output(mastra__io *io, uint32_t revents) {
  mastra__proc *p = io->data;
  mastra__buf *b = io == &p->out_io ? &p->out : &p->err;
  int got = 0;
  (void)revents;
  for (;;) {
    ssize_t n;
    if (b->len >= MASTRA__PROC_PENDING_MAX && !p->orphan) {
      mastra__io_stop(io); /* resumed by mastra__proc_consumed */
      break;
    }
    if (b->cap - b->len < READ_CHUNK) {
      size_t cap = b->cap ? b->cap * 2 : READ_CHUNK * 2;
      char *d;
      while (cap - b->len < READ_CHUNK) cap *= 2;
      d = realloc(b->data, cap);
      if (d == NULL) break; /* try again on the next readiness */
      b->data = d;
      b->cap = cap;
    }
    n = read(io->fd, b->data + b->len, b->cap - b->len);
    if (n > 0) {
      b->len += (size_t)n;
      got = 1;
      if (p->orphan) b->len = 0; /* nobody will read it */
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    /* EOF or a read error: this stream is over */
    stop_io(io);
    if (io == &p->out_io) p->out_eof = 1; else p->err_eof = 1;
    got = 1;
    check_done(p);
    break;
  }
  if (got) notify(p);
}

static void on_exit_ready(mastra__io *io, uint32_t revents) {
  mastra__proc *p = io->data;
  siginfo_t si;
  (void)revents;
  memset(&si, 0, sizeof si);
  if (waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED | WNOHANG | WNOWAIT) < 0
      || si.si_pid == 0)
    return;
  mastra__io_stop(io); /* keep the fd: the zombie is reaped in check_done */
  p->exited = 1;
  if (si.si_code == CLD_EXITED) {
    p->exit_code = si.si_status;
  } else {
    p->term_signal = si.si_status;
    p->exit_code = 128 + si.si_status;
  }
  check_done(p);
  notify(p);
}

static void on_stdin_writable(mastra__io *io, uint32_t revents) {
  mastra__proc *p = io->data;
  (void)revents;
  mastra__io_stop(io);
  notify(p);
}

static void on_deadline(mastra__timer *t) {
  mastra__proc *p = t->data;
  p->timed_out = 1;
  mastra__proc_kill(p);
  notify(p);
}

static void on_grace(mastra__timer *t) {
  mastra__proc *p = t->data;
  if (!p->done) kill(-p->pid, SIGKILL);
}

/* exit_io watches pidfd: stop it, and never close that descriptor twice */
static void stop_exit_io(mastra__proc *p) {
  mastra__io_stop(&p->exit_io);
  p->exit_io.fd = -1;
}

static void reap(mastra__proc *p) {
  siginfo_t si;
  if (p->pidfd < 0) return;
  while (waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED) < 0 && errno == EINTR)
    ;
  stop_exit_io(p);
  close_fd(&p->pidfd);
}

static void check_done(mastra__proc *p) {
  if (p->done || !p->exited || !p->out_eof || !p->err_eof) return;
  p->done = 1;
  /* sweep what is left of the group while the zombie still holds its id */
  if (p->kill_requested) kill(-p->pid, SIGKILL);
  reap(p);
  mastra__timer_stop(&p->deadline);
  mastra__timer_stop(&p->grace);
  stop_io(&p->in_io);
  if (p->orphan) mastra__loop_defer_free(p->loop, &p->handle);
}

/* Stop watching the process: its descriptors and its timers. */
static void unwatch(mastra__proc *p) {
  stop_exit_io(p);
  stop_io(&p->out_io);
  stop_io(&p->err_io);
  stop_io(&p->in_io);
  mastra__timer_stop(&p->deadline);
  mastra__timer_stop(&p->grace);
}

static void proc_free(mastra__handle *h) {
  mastra__proc *p = (mastra__proc *)h;
  mastra__loop *loop = p->loop;
  mastra__loop_remove_handle(loop, h);
  unwatch(p);
  close_fd(&p->pidfd);
  free(p->out.data);
  free(p->err.data);
  free(p);
  mastra__loop_unref(loop);
}

/* The loop is going away: end the group now and reap the leader. */
static void proc_shutdown(mastra__handle *h) {
  mastra__proc *p = (mastra__proc *)h;
  if (!p->done) {
    kill(-p->pid, SIGKILL);
    p->done = 1;
  }
  reap(p);
  unwatch(p);
  if (p->orphan) proc_free(h);
}

static int set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* /bin/sh (or opts->exe) in its own process group, stdin/stdout/stderr
** from in0, o1, e1, opts->fd3 as 3, every other descriptor closed, signals
** unblocked and at their defaults. Returns 0 or an errno. */
static int spawn_posix(const mastra__proc_opts *opts, int in0, int o1, int e1,
                       char *const *argv, pid_t *pid) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  sigset_t none, all;
  int rc;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&fa, in0, 0);
  posix_spawn_file_actions_adddup2(&fa, o1, 1);
  posix_spawn_file_actions_adddup2(&fa, e1, 2);
  if (opts->fd3 > 2) posix_spawn_file_actions_adddup2(&fa, opts->fd3, 3);
  if (opts->cwd != NULL) posix_spawn_file_actions_addchdir_np(&fa, opts->cwd);
  posix_spawn_file_actions_addclosefrom_np(&fa, opts->fd3 > 2 ? 4 : 3);
  sigemptyset(&none);
  sigfillset(&all);
  sigdelset(&all, SIGKILL);
  sigdelset(&all, SIGSTOP);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK
                                      | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  rc = posix_spawn(pid, opts->exe ? opts->exe : "/bin/sh", &fa, &attr, argv,
                   opts->envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return rc;
}

/* The child of spawn_fork (a vfork: it returns never, and touches only its
** own locals): the same setup as spawn_posix, plus the parent-death
** signal; a failure is reported as an errno on `report`. */
static void child_exec(const mastra__proc_opts *opts, int in0, int o1,
                       int e1, char *const *argv, pid_t parent, int report) {
  struct sigaction dfl;
  sigset_t none;
  int fds[3], i, rc;
  pid_t pp;
  fds[0] = in0;
  fds[1] = o1;
  fds[2] = e1;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (i = 1; i < NSIG; i++) sigaction(i, &dfl, NULL); /* EINVAL: skipped */
  if (setpgid(0, 0) < 0 || prctl(PR_SET_PDEATHSIG, opts->pdeathsig) < 0)
    goto fail;
  /* it died before the signal was armed (0: a parent outside the pid
  ** namespace the caller made this child in, alive) */
  pp = getppid();
  if (pp != parent && pp != 0) {
    errno = ESRCH;
    goto fail;
  }
  /* no source may be clobbered by an earlier dup2 */
  for (i = 0; i < 3; i++)
    if (fds[i] < 3 && (fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3)) < 0)
      goto fail;
  if (report < 3 && (report = fcntl(report, F_DUPFD_CLOEXEC, 3)) < 0)
    goto fail;
  for (i = 0; i < 3; i++)
    if (dup2(fds[i], i) < 0) goto fail;
  if (report > 3) close_range(3, (unsigned)report - 1, 0);
  close_range((unsigned)report + 1, ~0u, 0);
  if (opts->cwd != NULL && chdir(opts->cwd) < 0) goto fail;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  execve(opts->exe ? opts->exe : "/bin/sh", argv, opts->envp);
fail:
  rc = errno;
  if (write(report, &rc, sizeof rc) < 0) _exit(127);
  _exit(127);
}

/* vfork and exec, for what posix_spawn cannot do before the exec (the
** parent-death signal). vfork, as posix_spawn does: a fork copied the
** caller's page tables, and its writes then took copy-on-write faults,
** for a child that only execs; this thread waits until it did. So the
** child changes neither its credentials nor its user namespace before
** the exec: a child that another uid or user namespace can SIGSTOP there
** holds this thread for as long as it likes (issue 30; ns_enter.c enters
** a sandbox in the program it execs). Who can signal it is who can
** signal the caller: the process driver's commands, the caller's own uid,
** could stop the server itself. The child (child_exec) writes nothing of
** ours: its locals, and errno, which we do not read after. It reports a
** failed setup or execve through a close-on-exec pipe; EOF on it means
** the exec happened. Returns 0 or an errno, like posix_spawn. */
static int spawn_fork(const mastra__proc_opts *opts, int in0, int o1, int e1,
                      char *const *argv, pid_t *out) {
  int report[2], rc = 0;
  pid_t parent = getpid(), pid;
  sigset_t all, old;
  ssize_t n;
  if (pipe2(report, O_CLOEXEC) < 0) return errno;
  /* no handler of ours may run in the child before the defaults are set */
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid = vfork();
  if (pid == 0) child_exec(opts, in0, o1, e1, argv, parent, report[1]);
  if (pid < 0) rc = errno;
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    return rc;
  }
  do n = read(report[0], &rc, sizeof rc); while (n < 0 && errno == EINTR);
  close(report[0]);
  if (n == (ssize_t)sizeof rc) {
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
      ;
    return rc;
  }
  *out = pid;
  return 0;
}

int mastra__proc_spawn(mastra__loop *loop, const mastra__proc_opts *opts,
                       mastra__proc **out, char *err, size_t errlen) {
  int in[2] = {-1, -1}, o[2] = {-1, -1}, e[2] = {-1, -1};
  char *argv[4];
  mastra__proc *p;
  pid_t pid;
  int rc;

  *out = NULL;
  if (mastra__loop_closed(loop)) {
    snprintf(err, errlen, "the event loop is closed");
    return -EINVAL;
  }
  p = calloc(1, sizeof *p);
  if (p == NULL) {
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  p->pidfd = -1;
  if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0) goto sys_fail;
  if (opts->stdin_pipe) {
    if (pipe2(in, O_CLOEXEC) < 0) goto sys_fail;
  } else {
    in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in[0] < 0) goto sys_fail;
  }
  if (set_nonblock(o[0]) < 0 || set_nonblock(e[0]) < 0
      || (in[1] >= 0 && set_nonblock(in[1]) < 0))
    goto sys_fail;

  argv[0] = "sh";
  argv[1] = "-c";
  argv[2] = (char *)opts->command;
  argv[3] = NULL;
  if (opts->pdeathsig != 0)
    rc = opts->fd3 > 2 ? EINVAL
         : spawn_fork(opts, in[0], o[1], e[1],
                      opts->argv ? opts->argv : argv, &pid);
  else
    rc = spawn_posix(opts, in[0], o[1], e[1], opts->argv ? opts->argv : argv,
                     &pid);
  if (rc != 0) {
    if (opts->cwd != NULL && (rc == ENOENT || rc == ENOTDIR || rc == EACCES))
      snprintf(err, errlen, "cannot run in directory '%s': %s", opts->cwd,
               strerror(rc));
    else
      snprintf(err, errlen, "cannot start %s: %s",
               opts->exe ? opts->exe : "/bin/sh", strerror(rc));
    goto fail;
  }
  p->pid = pid;
  p->pidfd = pidfd_open(pid, 0);
  if (p->pidfd < 0) {
    /* cannot watch it: do not leave it running unobserved */
    rc = errno;
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, 0);
    snprintf(err, errlen, "pidfd_open: %s", strerror(rc));
    goto fail;
  }
  close_fd(&in[0]);
  close_fd(&o[1]);
  close_fd(&e[1]);

  mastra__loop_ref(loop);
  p->loop = loop;
  p->id = mastra__loop_newid(loop);
  p->handle.shutdown = proc_shutdown;
  p->handle.free = proc_free;
  mastra__loop_add_handle(loop, &p->handle);
  mastra__timer_init(loop, &p->deadline, on_deadline, p);
  mastra__timer_init(loop, &p->grace, on_grace, p);
  mastra__io_init(loop, &p->exit_io, p->pidfd, on_exit_ready, p);
  mastra__io_init(loop, &p->out_io, o[0], on_output, p);
  mastra__io_init(loop, &p->err_io, e[0], on_output, p);
  mastra__io_init(loop, &p->in_io, in[1], on_stdin_writable, p);
  rc = mastra__io_start(&p->exit_io, EPOLLIN);
  if (rc == 0) rc = mastra__io_start(&p->out_io, EPOLLIN);
  if (rc == 0) rc = mastra__io_start(&p->err_io, EPOLLIN);
  if (rc == 0 && opts->timeout_ms > 0)
    rc = mastra__timer_start(&p->deadline, opts->timeout_ms);
  if (rc < 0) {
    rc = -rc;
    snprintf(err, errlen, "cannot watch the process: %s", strerror(rc));
    p->orphan = 1;
    proc_shutdown(&p->handle);
    return -rc;
  }
  *out = p;
  return 0;

sys_fail:
  rc = errno;
  snprintf(err, errlen, "cannot create pipes: %s", strerror(rc));
fail:
  close_fd(&in[0]);
  close_fd(&in[1]);
  close_fd(&o[0]);
  close_fd(&o[1]);
  close_fd(&e[0]);
  close_fd(&e[1]);
  free(p);
  return -rc;
}

int mastra__proc_kill(mastra__proc *p) {
  if (p->done) return 0;
  if (!p->kill_requested) {
    p->kill_requested = 1;
    kill(-p->pid, SIGTERM);
    mastra__timer_start(&p->grace, MASTRA__PROC_KILL_GRACE_MS);
  }
  return 1;
}

ssize_t mastra__proc_write(mastra__proc *p, const char *data, size_t len) {
  sigset_t pipe_set, old;
  ssize_t n;
  int saved;
  if (p->in_io.fd < 0) return -EBADF;
  /* a reader that went away must not kill the host with SIGPIPE */
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  do n = write(p->in_io.fd, data, len); while (n < 0 && errno == EINTR);
  saved = errno;
  if (n < 0 && saved == EPIPE && !sigismember(&old, SIGPIPE)) {
    struct timespec zero = {0, 0};
    sigtimedwait(&pipe_set, NULL, &zero);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (n >= 0) return n;
  if (saved == EAGAIN || saved == EWOULDBLOCK) return 0;
  return -saved;
}

int mastra__proc_want_write(mastra__proc *p) {
  if (p->in_io.fd < 0) return -EBADF;
  return mastra__io_start(&p->in_io, EPOLLOUT);
}

void mastra__proc_close_stdin(mastra__proc *p) { stop_io(&p->in_io); }

void mastra__proc_consumed(mastra__proc *p, mastra__buf *stream) {
  mastra__io *io = stream == &p->out ? &p->out_io : &p->err_io;
  stream->len = 0;
  if (io->fd >= 0 && !io->active) mastra__io_start(io, EPOLLIN);
}

void mastra__proc_release(mastra__proc *p) {
  p->orphan = 1;
  if (p->done || mastra__loop_closed(p->loop)) {
    /* from inside a notify callback, the free waits for the dispatch end */
    mastra__loop_defer_free(p->loop, &p->handle);
    return;
  }
  /* nobody reads any more: drop what waits, and keep draining the pipes */
  mastra__proc_consumed(p, &p->out);
  mastra__proc_consumed(p, &p->err);
  mastra__proc_close_stdin(p);
  mastra__proc_kill(p);
}
