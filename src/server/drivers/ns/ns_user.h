/*
** The namespaces driver without root (ns_user.c, docs/platform.md
** "Drivers"): a user namespace of the server's own, where root is the
** server's uid and gid. (The cgroups delegated to it: ns_cgroup.c.)
*/
#ifndef MP_NS_USER_H
#define MP_NS_USER_H
#include <stddef.h>

/* 1 if this process can make an unprivileged user namespace and, inside
** it, the mount, pid, uts, ipc and net namespaces of a sandbox (tried for
** real in a child: a sysctl or a security module may forbid it); else 0
** and why */
int mp_ns_user_probe(char *why, size_t n);

/* mp_ns_user_probe's steps under user namespace userns (a descriptor): 1
** if a keeper that joins it first can make a sandbox's namespaces; else 0
** and why */
int mp_ns_user_probe_under(int userns, char *why, size_t n);

/* Run fn in a forked child (a probe that must not touch this process):
** 1 if it returned 0; else 0, and why is what it wrote in msg. */
int mp_ns_try(int (*fn)(void *arg, char *msg, size_t n), void *arg,
              char *why, size_t n);

#endif
