/*
** The `namespaces` driver of mastra-platform (driver_ns.c): each sandbox
** in its own user, mount, pid, uts, ipc and net namespaces over an overlay
** of the base, with cgroup limits.
*/
#ifndef MP_DRIVER_NS_H
#define MP_DRIVER_NS_H

#include "sandbox/sandbox.h"

extern const mp_driver mp_ns_driver;

/* 1 if the driver can run here; else 0 and why says what is missing */
int mp_ns_available(char *why, size_t n);
/* At startup, before the records are loaded: the base directory, the
** limits of each sandbox (0: none), and the sweep of what a previous
** server of this data directory left (cgroups; the net module's bridges,
** veths and hosts files); egress: --egress (net.h). -1 after saying why
** on stderr. */
int mp_ns_setup(mp_server *srv, const char *base, long long pids_max,
                long long memory_max, int egress, int warm_pool);
/* Once the loop runs and the trash is emptied: the warm pool (warm_pool
** keepers and inits of ISOLATED sandboxes started ahead), after removing
** a killed server's */
void mp_ns_start(mp_server *srv);

/* What limits a sandbox's processes, for its JSON's `limits`: "cgroup
** v1", "cgroup v2" (with " (delegated)" without root), or "none: <why>" */
const char *mp_ns_limits(void);
/* At exit, after every sandbox was released and the loop closed: remove
** the warm pool's directory and this data directory's cgroups, close the
** PRIVATE networks. */
void mp_ns_finish(void);

#endif
