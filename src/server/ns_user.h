/*
** The namespaces driver without root (ns_user.c, docs/platform.md
** "Drivers"): a user namespace of the server's own, where root is the
** server's uid and gid, and the cgroups delegated to the server.
*/
#ifndef MP_NS_USER_H
#define MP_NS_USER_H
#include <stddef.h>

/* 1 if this process can make an unprivileged user namespace and, inside
** it, the mount, pid, uts, ipc and net namespaces of a sandbox (tried for
** real in a child: a sysctl or a security module may forbid it); else 0
** and why */
int mp_ns_user_probe(char *why, size_t n);

/* Run fn in a forked child (a probe that must not touch this process):
** 1 if it returned 0; else 0, and why is what it wrote in msg. */
int mp_ns_try(int (*fn)(void *arg, char *msg, size_t n), void *arg,
              char *why, size_t n);

/* The directory of this process's own cgroup: in the cgroup v1 hierarchy
** of `controller`, or in cgroup v2 where controller is NULL. 0, or -1. */
int mp_ns_own_cgroup(const char *controller, char *out, size_t n);

/* The cgroups delegated to this server (its own cgroup's directory is
** writable, as systemd makes a user's): the data directory's cgroup,
** <own>/mastra-platform/<hex>, per v1 hierarchy (pids, memory, cpu) that
** has one, or the v2 one (the server first moves itself to the leaf
** <own>/mastra-server, so that <own> may enable the controllers of its
** children). Made; their paths in out; how many (0: none). */
int mp_ns_user_cgroups(int v2, const char *hex, char (*out)[4300], int max);

/* What limits the sandboxes, for their JSON (driver_ns.h, mp_ns_limits),
** from the cgroups in use (ncg); without any, it says so in the log */
void mp_ns_limits_say(int ncg, int v2, int unpriv, char *out, size_t n);

/* why a server without root has no PRIVATE networks, and what to do */
void mp_ns_user_no_net(char *err, size_t n);

#endif
