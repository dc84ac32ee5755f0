/*
** The init of a `namespaces` sandbox (ns_init.c): `mastra-platform
** __ns-init SERVER_PID ID BASE ROOT READY_FD [CGROUP_PROCS...]`, exec'd by
** driver_ns.c in a child of the server.
*/
#ifndef MP_NS_INIT_H
#define MP_NS_INIT_H

#include "drivers/ns/init/ns_sys.h" /* mp_ns_write_text */

/* root in a sandbox is this host uid (and gid), and the sandbox's ids
** 0..MP_NS_UID_COUNT-1 are host ids MP_NS_UID_BASE.. */
#define MP_NS_UID_BASE 100000
#define MP_NS_UID_COUNT 65536

/* the descriptor a keeper finds its id map's user namespace on (ns_idmap.c) */
#define MP_NS_IDMAP_FD 4

/* a base that holds this file layers its usr directory over the host's
** /usr (ns_init.c; base.c builds it); without it, its usr is a whole copy */
#define MP_BASE_HOST_USR ".mastra-host-usr"
/* a sandbox of a template: ROOT/template links to the template's layer,
** the root's lower layer above the base (and its usr above the base's) */
#define MP_NS_TEMPLATE_LINK "template"

/* A command's environment reaches mastra-ns-init (__ns-exec, __ns-enter)
** with every entry prefixed MP_NS_ENV_PREFIX: the program starts as host
** root, and neither the dynamic loader (of a build that is not static, or
** of mastra-platform itself as the fallback) nor libc may act on an
** LD_PRELOAD, GLIBC_TUNABLES or GCONV_PATH that a request set, which could
** name a file the sandbox wrote. The program strips the prefix in the
** environment it hands the command's /bin/sh (mp_ns_env_unwrap). */
#define MP_NS_ENV_PREFIX "MASTRA_NS_ENV_"

/* the argument that selects this program in mastra-platform's main */
#define MP_NS_INIT_ARG "__ns-init"

int mp_ns_init_main(int argc, char **argv);

#endif
