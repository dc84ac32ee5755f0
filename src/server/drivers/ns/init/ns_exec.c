/*
** A command of a `namespaces` sandbox (ns_exec.h): the program that
** driver_ns.c spawns for each one, `mastra-ns-init __ns-exec ...` (or
** `mastra-platform __ns-exec ...` without mastra-ns-init), in the
** command's process group with its stdin, stdout and stderr, and the
** sandbox's ready socket as MP_NS_READY_FD (its arguments: ns_init.h).
**
** It waits for the init's "R <pid>" on the ready socket (a starting init:
** the server never waits for it), joins the sandbox's cgroups, setns()es
** into the init's mount, uts, ipc, net and pid namespaces as host root,
** then into its user namespace, becomes uid/gid 0 there, and vforks: the
** child, in the sandbox's pid namespace, sets its parent-death signal,
** chdirs and execs /bin/sh -c (or says why it cannot and exits); this
** process (the one the server watches) ignores the group's termination
** signals and exits as the child did. Both die with the server
** (PR_SET_PDEATHSIG). A failure says "mastra-platform: <step>: <ERRNO
** NAME>" on stderr and exits MP_NS_EXIT_FAILED (127); an init that failed,
** "mastra-platform: the sandbox did not start: " and its own message.
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

extern char **environ;

static void say(const char *what, const char *detail) {
  char msg[1400];
  int n = snprintf(msg, sizeof msg, "mastra-platform: %s%s%s\n", what,
                   detail ? ": " : "", detail ? detail : "");
  if (n > 0 && write(2, msg, (size_t)n) < 0) _exit(MP_NS_EXIT_FAILED);
}

static void fail(const char *what, const char *detail) {
  say(what, detail);
  _exit(MP_NS_EXIT_FAILED);
}

/* a failed step: "<step>: <ERRNO NAME>" (ns_init.h) */
static void fail_step(const char *step) {
  fail(step, mp_ns_errno_name(errno));
}

static void join_cgroups(char **argv, int first, int last) {
  int i;
  for (i = first; i < last; i++) {
    if (mp_ns_write_text(argv[i], "0") < 0) {
      char step[4600];
      snprintf(step, sizeof step, "join the cgroup %s", argv[i]);
      fail_step(step);
    }
  }
}

/* chdir to the command's directory, in the sandbox */
static void enter_cwd(const char *cwd) {
  if (chdir(cwd) < 0) {
    char step[4300];
    snprintf(step, sizeof step, "cannot run in directory '%s'", cwd);
    fail_step(step);
  }
}

/* exec the command's /bin/sh -c, under the sandbox's syscall filter */
static void exec_sh(char *command) {
  char *sh[4];
  sh[0] = "sh";
  sh[1] = "-c";
  sh[2] = command;
  sh[3] = NULL;
  execve("/bin/sh", sh, mp_ns_env_unwrap(environ));
  fail_step("execve /bin/sh");
}

static long since_ms(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (t1.tv_sec - t0->tv_sec) * 1000
         + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* the init's pid, once the ready socket says MP_NS_SAY_READY, "R <pid>" */
static long await_ready(void) {
  struct pollfd pfd = {MP_NS_READY_FD, POLLIN, 0};
  struct timespec t0, pause = {0, 1000000};
  char buf[MP_NS_LINE_MAX];
  ssize_t n;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    long waited = since_ms(&t0);
    if (waited >= START_WAIT_MS)
      fail("the sandbox did not start in time", NULL);
    if (poll(&pfd, 1, (int)(START_WAIT_MS - waited)) < 0 && errno != EINTR)
      fail_step("wait for the sandbox's init");
    n = recv(MP_NS_READY_FD, buf, sizeof buf - 1, MSG_PEEK | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    buf[n > 0 ? n : 0] = '\0';
    /* "N": the server attaches its network, "R" follows; or the rest of
    ** the line is on its way */
    if (n > 0 && (buf[0] == MP_NS_SAY_NET || strchr(buf, '\n') == NULL)) {
      nanosleep(&pause, NULL);
      continue;
    }
    buf[strcspn(buf, "\n")] = '\0';
    /* "E <step>: <ERRNO NAME>": the init's own words */
    if (n <= 0 || buf[0] != MP_NS_SAY_READY)
      fail("the sandbox did not start",
           n > 2 && buf[0] == MP_NS_SAY_ERROR ? buf + 2 : "its init exited");
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
    if (errno != EINTR) _exit(MP_NS_EXIT_FAILED);
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
  /* argv: ns_init.h, MP_NS_EXEC_* */
  static const int quiet[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1,
                              SIGUSR2, SIGPIPE, SIGALRM};
  int i, last, pidfd, unpriv;
  long init;
  pid_t g;
  if (argc < MP_NS_EXEC_CGROUPS + 2
      || strcmp(argv[argc - 2], MP_NS_ARG_END) != 0) {
    say("__ns-exec: wrong arguments", NULL);
    return MP_NS_EXIT_FAILED;
  }
  last = argc - 2;
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0
      || getppid() != (pid_t)atol(argv[MP_NS_EXEC_SERVER_PID]))
    fail("the server is gone", NULL);
  init = await_ready();
  /* on the host: the mount namespace's setns below hides the file */
  if (mp_ns_filter_load(argv[MP_NS_EXEC_FILTER]) < 0)
    fail_step("read the syscall filter");
  join_cgroups(argv, MP_NS_EXEC_CGROUPS, last);
  pidfd = (int)syscall(SYS_pidfd_open, (pid_t)init, 0);
  /* without root: not dumpable (no id changes, so the kernel would leave
  ** this process ptrace-able by the sandbox's root, the same host uid,
  ** until the exec), then the user namespace first (its owner has the
  ** capabilities the others need; its setgroups is denied) */
  unpriv = geteuid() != 0;
  if (unpriv) prctl(PR_SET_DUMPABLE, 0);
  if (pidfd < 0) fail_step("pidfd_open the sandbox's init");
  if (unpriv && setns(pidfd, CLONE_NEWUSER) < 0)
    fail_step("join the sandbox's user namespace");
  if (setns(pidfd, CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET
                       | CLONE_NEWPID) < 0)
    fail_step("join the sandbox's mount, uts, ipc, net and pid namespaces");
  if (!unpriv && setns(pidfd, CLONE_NEWUSER) < 0)
    fail_step("join the sandbox's user namespace");
  if (!unpriv && setgroups(0, NULL) < 0) fail_step("setgroups");
  if (setresgid(0, 0, 0) < 0) fail_step("setresgid 0");
  if (setresuid(0, 0, 0) < 0) fail_step("setresuid 0");
  close(pidfd);
  close(MP_NS_READY_FD);
  /* the sandbox's syscall filter, here and in the child (the relay makes
  ** no call it denies) */
  if (mp_ns_filter_install() < 0) fail_step("install the syscall filter");
  /* vfork: no copy of the page tables for a child that only execs (a
  ** fork's copy cost more than the rest of this program here); this
  ** process waits until it did */
  g = vfork();
  if (g < 0) fail_step("vfork /bin/sh");
  if (g == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) _exit(MP_NS_EXIT_FAILED);
    enter_cwd(argv[MP_NS_EXEC_CWD]);
    exec_sh(argv[argc - 1]);
  }
  /* the group's signals are the child's to act on */
  for (i = 0; i < (int)(sizeof quiet / sizeof quiet[0]); i++)
    signal(quiet[i], SIG_IGN);
  mp_ns_close_all();
  relay(g);
  return MP_NS_EXIT_FAILED;
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
** command's shell, with no relay. A failure says "mastra-platform:
** <step>: <ERRNO NAME>" on stderr and exits MP_NS_EXIT_FAILED (127). */
int mp_ns_enter_main(int argc, char **argv) {
  /* argv: ns_init.h, MP_NS_ENTER_* */
  int last, pidfd;
  if (argc < MP_NS_ENTER_CGROUPS + 2
      || strcmp(argv[argc - 2], MP_NS_ARG_END) != 0) {
    say("__ns-enter: wrong arguments", NULL);
    return MP_NS_EXIT_FAILED;
  }
  last = argc - 2;
  /* on the host: the mount namespace's setns below hides the file */
  if (mp_ns_filter_load(argv[MP_NS_ENTER_FILTER]) < 0)
    fail_step("read the syscall filter");
  join_cgroups(argv, MP_NS_ENTER_CGROUPS, last);
  /* the init: pid 1 of the pid namespace this process was born in */
  pidfd = (int)syscall(SYS_pidfd_open, 1, 0);
  /* not dumpable until the exec (the credential change below makes it so
  ** too): the sandbox's root may not ptrace what host root set up */
  prctl(PR_SET_DUMPABLE, 0);
  if (pidfd < 0) fail_step("pidfd_open the sandbox's init");
  if (setns(pidfd, CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET)
      < 0)
    fail_step("join the sandbox's mount, uts, ipc and net namespaces");
  if (setns(pidfd, CLONE_NEWUSER) < 0)
    fail_step("join the sandbox's user namespace");
  if (setgroups(0, NULL) < 0) fail_step("setgroups");
  if (setresgid(0, 0, 0) < 0) fail_step("setresgid 0");
  if (setresuid(0, 0, 0) < 0) fail_step("setresuid 0");
  close(pidfd);
  /* the credential change cleared the parent-death signal; a server that
  ** died before it is armed again left this process to the sandbox's init
  ** (its parent is outside the pid namespace: 0 while it lives) */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != 0)
    fail("the server is gone", NULL);
  enter_cwd(argv[MP_NS_ENTER_CWD]);
  /* the sandbox's syscall filter, the last step before the exec */
  if (mp_ns_filter_install() < 0) fail_step("install the syscall filter");
  exec_sh(argv[argc - 1]);
  return MP_NS_EXIT_FAILED;
}
