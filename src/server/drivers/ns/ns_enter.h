/*
** A command of a running `namespaces` sandbox, with root: the server's own
** child, born in the sandbox's pid namespace, execs `mastra-ns-init
** __ns-enter`, which enters the sandbox and execs its /bin/sh (ns_enter.c).
*/
#ifndef MP_NS_ENTER_H
#define MP_NS_ENTER_H

#include "proc.h"

/* Spawn opts (opts->command, env, stdin, timeout; opts->pdeathsig set; its
** exe, argv and cwd are set here) in sandbox id, whose init has the pidfd
** init_fd, through helper (mastra-ns-init), with cwd the sandbox's path
** and filter the syscall filter's file (ns_seccomp.h); own_pidns: the
** server's pid namespace (an fd). 1 when it spawned or
** failed (*rc: mastra__proc_spawn's), 0 when it cannot (the caller spawns
** another way). */
int mp_ns_enter_spawn(mastra__loop *loop, const char *helper, int init_fd,
                      int own_pidns, const char *id, const char *cwd,
                      const char *filter, mastra__proc_opts *opts, mastra__proc **out, int *rc,
                      char *err, size_t errlen);

#endif
