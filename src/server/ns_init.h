/*
** The init of a `namespaces` sandbox (ns_init.c): `mastra-platform
** __ns-init SERVER_PID ID BASE ROOT READY_FD [CGROUP_PROCS...]`, exec'd by
** driver_ns.c in a child of the server.
*/
#ifndef MP_NS_INIT_H
#define MP_NS_INIT_H

#include "ns_sys.h" /* mp_ns_write_text */

/* root in a sandbox is this host uid (and gid), and the sandbox's ids
** 0..MP_NS_UID_COUNT-1 are host ids MP_NS_UID_BASE.. */
#define MP_NS_UID_BASE 100000
#define MP_NS_UID_COUNT 65536

/* the argument that selects this program in mastra-platform's main */
#define MP_NS_INIT_ARG "__ns-init"

int mp_ns_init_main(int argc, char **argv);

#endif
