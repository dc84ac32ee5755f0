/*
** A command of a `namespaces` sandbox (ns_exec.h): the program that
** driver_ns.c spawns for each one, `mastra-ns-init __ns-exec ...` (or
** `mastra-platform __ns-exec ...` without mastra-ns-init), in the
** command's process group with its stdin, stdout and stderr, and the
** sandbox's ready socket as descriptor 3.
**
** It waits for the init's "R <pid>" on the ready socket (a starting init:
** the server never waits for it), joins the sandbox's cgroups, setns()es
** into the init's mount, uts, ipc, net and pid namespaces as host root,
** then into its user namespace, becomes uid/gid 0 there, and vforks: the
** child, in the sandbox's pid namespace, sets its parent-death signal,
** chdirs and execs /bin/sh -c (or says why it cannot and exits); this
** process (the one the server watches) ignores the group's termination
** signals and exits as the child did. Both die with the server
** (PR_SET_PDEATHSIG). A failure says why on stderr and exits 127.
** Without root (a server that is not root: ns_user.c) it joins the user
** namespace first, as its owner, and is not dumpable until the exec.
**
** The server spawns it (posix_spawn, no fork of the server): a small
** process that forks, where a fork of the server copied its page tables
** twice per command.
**
** `__ns-enter` (mp_ns_enter_main, below) is the command of a running
** sandbox with root: no wait for "R", no fork and no relay, as the
** server's child that execs it was born in the sandbox's pid namespace.
** Both enter the sandbox here, after the exec that ends the server's wait
** for its child (ns_enter.c): the sandbox may stop them, never the server.
*/
#define _GNU_SOURCE
#include "drivers/ns/init/ns_exec.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "drivers/ns/init/ns_sys.h"

/* a command waits this long for a starting init */
#define START_WAIT_MS 30000
#define READY_FD 3

extern char **environ;

static void say(const char *what, const char *detail) {
  char msg[1400];
  int n = snprintf(msg, sizeof msg, "mastra-platform: %s%s%s\n", what,
                   detail ? ": " : "", detail ? detail : "");
  if (n > 0 && write(2, msg, (size_t)n) < 0) _exit(127);
}

static void fail(const char *what, const char *detail) {
  say(what, detail);
  _exit(127);
}

static long since_ms(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (t1.tv_sec - t0->tv_sec) * 1000
         + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* the init's pid, once the ready socket says "R <pid>" */
static long await_ready(void) {
  struct pollfd pfd = {READY_FD, POLLIN, 0};
  struct timespec t0, pause = {0, 1000000};
  char buf[1100];
  ssize_t n;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    long waited = since_ms(&t0);
    if (waited >= START_WAIT_MS)
      fail("the sandbox did not start in time", NULL);
    if (poll(&pfd, 1, (int)(START_WAIT_MS - waited)) < 0 && errno != EINTR)
      fail("cannot wait for the sandbox", strerror(errno));
    n = recv(READY_FD, buf, sizeof buf - 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    buf[n > 0 ? n : 0] = '\0';
    /* "N": the server attaches its network, "R" follows; or the rest of
    ** the line is on its way */
    if (n > 0 && (buf[0] == 'N' || strchr(buf, '\n') == NULL)) {
      nanosleep(&pause, NULL);
      continue;
    }
    buf[strcspn(buf, "\n")] = '\0';
    if (n <= 0 || buf[0] != 'R')
      fail("the sandbox did not start", n > 2 ? buf + 2 : "its init exited");
    return atol(buf + 2);
  }
}

/* exit as the child did */
static void relay(pid_t g) {
  struct sigaction sa;
  struct rlimit none = {0, 0};
  sigset_t set;
  int status, sig;
  while (waitpid(g, &status, 0) < 0)
    if (errno != EINTR) _exit(127);
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  sig = WTERMSIG(status);
  setrlimit(RLIMIT_CORE, &none);
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = SIG_DFL;
  sigaction(sig, &sa, NULL);
  sigemptyset(&set);
  sigprocmask(SIG_SETMASK, &set, NULL);
  kill(getpid(), sig);
  _exit(128 + sig);
}

int mp_ns_exec_main(int argc, char **argv) {
  /* argv: NAME __ns-exec SERVER_PID CWD FILTER [CGROUP_PROCS...] --
  **       COMMAND; FILTER: the syscall filter's file (ns_seccomp.c) */
  static const int quiet[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1,
                              SIGUSR2, SIGPIPE, SIGALRM};
  char *sh[4];
  int i, last, pidfd, unpriv;
  long init;
  pid_t g;
  if (argc < 7 || strcmp(argv[argc - 2], "--") != 0) {
    say("__ns-exec: wrong arguments", NULL);
    return 127;
  }
  last = argc - 2;
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0
      || getppid() != (pid_t)atol(argv[2]))
    fail("the server is gone", NULL);
  init = await_ready();
  /* on the host: the mount namespace's setns below hides the file */
  if (mp_ns_filter_load(argv[4]) < 0)
    fail("cannot read the syscall filter", strerror(errno));
  for (i = 5; i < last; i++)
    if (mp_ns_write_text(argv[i], "0") < 0)
      fail("cannot join the sandbox's cgroup", strerror(errno));
  pidfd = (int)syscall(SYS_pidfd_open, (pid_t)init, 0);
  /* without root: not dumpable (no id changes, so the kernel would leave
  ** this process ptrace-able by the sandbox's root, the same host uid,
  ** until the exec), then the user namespace first (its owner has the
  ** capabilities the others need; its setgroups is denied) */
  unpriv = geteuid() != 0;
  if (unpriv) prctl(PR_SET_DUMPABLE, 0);
  if (pidfd < 0
      || (unpriv && setns(pidfd, CLONE_NEWUSER) < 0)
      || setns(pidfd, CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC
                          | CLONE_NEWNET | CLONE_NEWPID) < 0
      || (!unpriv && (setns(pidfd, CLONE_NEWUSER) < 0
                      || setgroups(0, NULL) < 0))
      || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
    fail("cannot enter the sandbox", strerror(errno));
  close(pidfd);
  close(READY_FD);
  /* the sandbox's syscall filter, here and in the child (the relay makes
  ** no call it denies) */
  if (mp_ns_filter_install() < 0)
    fail("cannot install the syscall filter", strerror(errno));
  /* vfork: no copy of the page tables for a child that only execs (a
  ** fork's copy cost more than the rest of this program here); this
  ** process waits until it did */
  g = vfork();
  if (g < 0) fail("cannot start /bin/sh", strerror(errno));
  if (g == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) _exit(127);
    if (chdir(argv[3]) < 0) {
      char msg[4300];
      snprintf(msg, sizeof msg, "cannot run in directory '%s'", argv[3]);
      fail(msg, strerror(errno));
    }
    sh[0] = "sh";
    sh[1] = "-c";
    sh[2] = argv[argc - 1];
    sh[3] = NULL;
    execve("/bin/sh", sh, mp_ns_env_unwrap(environ));
    fail("cannot start /bin/sh", strerror(errno));
  }
  /* the group's signals are the child's to act on */
  for (i = 0; i < (int)(sizeof quiet / sizeof quiet[0]); i++)
    signal(quiet[i], SIG_IGN);
  close_range(0, ~0u, 0);
  relay(g);
  return 127;
}

/* A command of a running sandbox, with root (ns_exec.h, ns_enter.c): this
** process is the server's vforked child after its exec, born in the
** sandbox's pid namespace, in its own process group with the command's
** descriptors 0, 1, 2 alone and the parent-death signal armed. Until the
** exec that ended the server's wait it was host root in the host's user
** namespace, which nothing in the sandbox may signal; from here on the
** server waits for nothing of it. It joins the sandbox's cgroups, setns()es
** into the mount, uts, ipc and net namespaces of the init (pid 1 of its
** pid namespace) as host root, then into its user namespace as uid and gid
** 0 (from there sandbox root may stop it: that holds this command alone),
** and execs /bin/sh -c in place: the process the server watches is the
** command's shell, with no relay. A failure says why on stderr and exits
** 127. */
int mp_ns_enter_main(int argc, char **argv) {
  /* argv: NAME __ns-enter CWD FILTER [CGROUP_PROCS...] -- COMMAND */
  char *sh[4];
  int i, last, pidfd;
  if (argc < 6 || strcmp(argv[argc - 2], "--") != 0) {
    say("__ns-enter: wrong arguments", NULL);
    return 127;
  }
  last = argc - 2;
  /* on the host: the mount namespace's setns below hides the file */
  if (mp_ns_filter_load(argv[3]) < 0)
    fail("cannot read the syscall filter", strerror(errno));
  for (i = 4; i < last; i++)
    if (mp_ns_write_text(argv[i], "0") < 0)
      fail("cannot join the sandbox's cgroup", strerror(errno));
  /* the init: pid 1 of the pid namespace this process was born in */
  pidfd = (int)syscall(SYS_pidfd_open, 1, 0);
  /* not dumpable until the exec (the credential change below makes it so
  ** too): the sandbox's root may not ptrace what host root set up */
  prctl(PR_SET_DUMPABLE, 0);
  if (pidfd < 0
      || setns(pidfd, CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC
                          | CLONE_NEWNET) < 0
      || setns(pidfd, CLONE_NEWUSER) < 0 || setgroups(0, NULL) < 0
      || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
    fail("cannot enter the sandbox", strerror(errno));
  close(pidfd);
  /* the credential change cleared the parent-death signal; a server that
  ** died before it is armed again left this process to the sandbox's init
  ** (its parent is outside the pid namespace: 0 while it lives) */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != 0)
    fail("the server is gone", NULL);
  if (chdir(argv[2]) < 0) {
    char msg[4300];
    snprintf(msg, sizeof msg, "cannot run in directory '%s'", argv[2]);
    fail(msg, strerror(errno));
  }
  sh[0] = "sh";
  sh[1] = "-c";
  sh[2] = argv[argc - 1];
  sh[3] = NULL;
  /* the sandbox's syscall filter, the last step before the exec */
  if (mp_ns_filter_install() < 0)
    fail("cannot install the syscall filter", strerror(errno));
  execve("/bin/sh", sh, mp_ns_env_unwrap(environ));
  fail("cannot start /bin/sh", strerror(errno));
  return 127;
}
