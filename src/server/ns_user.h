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

/* In a process that just unshared CLONE_NEWUSER: map root in it to the
** process's host uid and gid (outer ids, read before the unshare), one id
** each, with setgroups denied. 0, or -1 with errno. */
int mp_ns_map_self(unsigned uid, unsigned gid);

/* The directory of this process's own cgroup: in the cgroup v1 hierarchy
** of `controller`, or in cgroup v2 where controller is NULL. 0, or -1. */
int mp_ns_own_cgroup(const char *controller, char *out, size_t n);

#endif
