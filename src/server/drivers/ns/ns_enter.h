/*
** A command of a running `namespaces` sandbox, spawned by the server's own
** child entering it (ns_enter.c), with root.
*/
#ifndef MP_NS_ENTER_H
#define MP_NS_ENTER_H

#include "proc.h"

/* Spawn opts (a /bin/sh of the sandbox: cwd and exe are the sandbox's
** paths; opts->pdeathsig set) in sandbox id, whose init has the pidfd
** init_fd; own_pidns: the server's pid namespace (an fd). 1 when it
** spawned or failed (*rc: mastra__proc_spawn's), 0 when it cannot (the
** caller spawns another way). */
int mp_ns_enter_spawn(mastra__loop *loop, int init_fd, int own_pidns,
                      const char *id, mastra__proc_opts *opts,
                      mastra__proc **out, int *rc, char *err, size_t errlen);

#endif
