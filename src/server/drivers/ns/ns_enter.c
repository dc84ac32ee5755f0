/*
** A command of a running `namespaces` sandbox, with root (ns_enter.h): the
** server's child is born in the sandbox's pid namespace and execs
** `mastra-ns-init __ns-enter` (ns_exec.c), which enters the sandbox and
** execs its /bin/sh in place: the command's process is the server's own
** child, as with the process driver, with no relay process (driver_ns.c
** spawns `__ns-exec`, which forks /bin/sh and relays, for a sandbox still
** starting, and without root).
**
** The rule (docs/platform.md): nothing a sandbox can do may delay the
** server's thread, so the server never waits on a child that a sandbox can
** signal. The child is a vfork (proc.c), and the server's thread waits
** inside vfork() until the child's exec. So the child does nothing there
** that would let the sandbox reach it: it stays host root in the host's
** user namespace (the sandbox's root may neither signal nor ptrace it,
** though it sees it in its pid namespace) and in the host's mount
** namespace, and execs the host's mastra-ns-init at once (proc.c's setup
** only: signals, process group, parent-death signal, descriptors). The
** cgroups, the namespaces and the credential change come after that exec,
** in the helper, which the server does not wait for: a sandbox that stops
** it (pidstop in spec/namespaces_freeze_spec.lua) stops its own command.
** Entering the sandbox in the vfork child itself, as before, made it
** signalable from its setns(CLONE_NEWUSER) until its exec, and a sandbox
** that SIGSTOPped it there froze every request of the server.
**
** The server's pid namespace for children is the sandbox's around the
** spawn (setns with the init's pidfd; a pid namespace for children
** changes for the calling thread alone, and the server's other threads
** start no process), and its own again after.
*/
#define _GNU_SOURCE
#include "drivers/ns/ns_enter.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "util/log.h"
#include "drivers/ns/ns_cgroup.h"
#include "drivers/ns/init/ns_exec.h"

int mp_ns_enter_spawn(mastra__loop *loop, const char *helper, int init_fd,
                      int own_pidns, const char *id, const char *cwd,
                      const char *filter, mastra__proc_opts *opts, mastra__proc **out, int *rc,
                      char *err, size_t errlen) {
  char cgp[MP_NSCG_MAX][4500], *argv[MP_NS_ENTER_CGROUPS + 3 + MP_NSCG_MAX];
  int i, n;
  argv[0] = "mastra-ns-enter";
  argv[1] = MP_NS_ENTER_ARG;
  argv[MP_NS_ENTER_CWD] = (char *)cwd;
  argv[MP_NS_ENTER_FILTER] = (char *)filter;
  n = MP_NS_ENTER_CGROUPS;
  for (i = 0; i < mp_nscg_count(); i++) {
    mp_nscg_join_file(id, i, cgp[i], sizeof cgp[i]);
    argv[n++] = cgp[i];
  }
  argv[n++] = MP_NS_ARG_END;
  argv[n++] = (char *)opts->command;
  argv[n] = NULL;
  opts->exe = helper;
  opts->argv = argv;
  opts->cwd = NULL; /* the helper's chdir, in the sandbox's mount namespace */
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
