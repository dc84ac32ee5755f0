/*
** The `namespaces` driver on this host (ns_host.c): what it keeps for the
** whole server (the base, the init's binary, the ids, the cgroups' setup,
** the PRIVATE networks), whether it can run here, its setup and its
** finish. driver_ns.c (the sandboxes) reads mp_ns_host; nothing else of
** the server does.
*/
#ifndef MP_NS_HOST_H
#define MP_NS_HOST_H

#include <stddef.h>

#include "net/net.h"
#include "server.h"

typedef struct mp_ns_host_state {
  char base[4096];
  char init_bin[4200];         /* mastra-ns-init, or /proc/self/exe */
  int init_found;              /* init_bin is mastra-ns-init */
  char filter[4200];           /* the syscall filter's file (ns_seccomp.c) */
  int unpriv;                  /* not root: ns_user.c */
  char limits[300];            /* mp_ns_host_limits */
  int idmap_fd;                /* with root: ns_idmap.c; without: the
                               ** switch's user namespace (net.h); or -1 */
  int own_pidns;               /* with root: the server's pid namespace */
  mp_net *net;                 /* PRIVATE networks, or NULL */
  char net_err[512];           /* why net is NULL */
  struct mp_egress *egress;    /* the egress proxy (egress.h), or NULL: off */
  char egress_err[512];        /* why it is off */
} mp_ns_host_state;

extern mp_ns_host_state mp_ns_host;

/* once the loop runs: the egress proxy over the switch's way out */
void mp_ns_host_start(mp_server *srv);

/* 1 if the driver can run here; else 0 and why says what is missing */
int mp_ns_host_available(char *why, size_t n);
/* Before the records are loaded (the flags of ns_options.h are parsed):
** the base (built when missing), the init's binary, the cgroups' setup
** and the sweep of what a previous server of this data directory left
** (cgroups; the net module's bridges, veths and hosts files). 0, -1 (err:
** a flag asks for what cannot be done here: --egress) or -2 (err: the
** base cannot be built, so the driver cannot run here). */
int mp_ns_host_setup(mp_server *srv, char *err, size_t errlen);
/* what limits a sandbox's processes, for its JSON's `limits`: "cgroup
** v1", "cgroup v2" (with " (delegated)" without root), or "none: <why>" */
const char *mp_ns_host_limits(const mp_server *srv);
/* The server stops, its loop still there: close the egress proxy, whose
** sockets the loop watches. */
void mp_ns_host_stop(mp_server *srv);
/* At exit (after every sandbox was released and the loop closed), or after
** a failed start: remove this data directory's cgroups, close the PRIVATE
** networks and the descriptors kept. */
void mp_ns_host_finish(mp_server *srv);

#endif
