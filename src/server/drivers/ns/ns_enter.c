/*
** A command of a running `namespaces` sandbox, with root (ns_enter.h): the
** server's child enters the sandbox itself and execs its /bin/sh there, so
** a command costs one exec, as with the process driver (driver_ns.c
** spawns `__ns-exec`, ns_exec.c, for a sandbox still starting, and
** without root).
**
** The child is a vfork (proc.c) born in the sandbox's pid namespace: the
** server's pid namespace for children is the sandbox's around the spawn
** (setns with the init's pidfd; a pid namespace for children changes for
** the calling thread alone, and the server's other threads start no
** process), and its own again after. In the child (raw system calls only:
** it shares the server's memory, and glibc's credential calls would signal
** the server's threads) enter_sandbox joins the sandbox's cgroups, then
** the mount, uts, ipc and net namespaces of its init (pid 1 of its pid
** namespace), then its user namespace, as uid and gid 0 there. The
** credential change leaves the child non-dumpable until its exec, and it
** holds no descriptor of the server's by then (proc.c closes them first):
** nothing in the sandbox can read the memory it shares with the server.
*/
#define _GNU_SOURCE
#include "drivers/ns/ns_enter.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/log.h"
#include "drivers/ns/ns_cgroup.h"

typedef struct enter_args {
  int ncg;
  char cgp[MP_NSCG_MAX][4500];
} enter_args;

/* in the vfork child: 0, or an errno */
static int enter_sandbox(void *data) {
  const enter_args *a = data;
  int i, fd, e;
  for (i = 0; i < a->ncg; i++) {
    fd = open(a->cgp[i], O_WRONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    e = write(fd, "0", 1) == 1 ? 0 : errno;
    close(fd);
    if (e != 0) return e;
  }
  fd = (int)syscall(SYS_pidfd_open, 1, 0);
  if (fd < 0) return errno;
  e = 0;
  if (setns(fd, CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET) < 0
      || setns(fd, CLONE_NEWUSER) < 0 || syscall(SYS_setgroups, 0, NULL) < 0
      || syscall(SYS_setresgid, 0, 0, 0) < 0
      || syscall(SYS_setresuid, 0, 0, 0) < 0)
    e = errno;
  close(fd);
  return e;
}

int mp_ns_enter_spawn(mastra__loop *loop, int init_fd, int own_pidns,
                      const char *id, mastra__proc_opts *opts,
                      mastra__proc **out, int *rc, char *err, size_t errlen) {
  enter_args a;
  int i;
  a.ncg = mp_nscg_count();
  for (i = 0; i < a.ncg; i++)
    mp_nscg_procs(id, i, a.cgp[i], sizeof a.cgp[i]);
  opts->before_exec = enter_sandbox;
  opts->before_exec_data = &a;
  if (setns(init_fd, CLONE_NEWPID) < 0) return 0;
  *rc = mastra__proc_spawn(loop, opts, out, err, errlen);
  if (setns(own_pidns, CLONE_NEWPID) < 0) {
    /* its next children would be born in the sandbox */
    mp_log("cannot return to the server's pid namespace: %s",
           strerror(errno));
    abort();
  }
  return 1;
}
