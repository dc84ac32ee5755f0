/*
** A command of a `namespaces` sandbox (ns_exec.c): `mastra-ns-init
** __ns-exec ...`, spawned by driver_ns.c with the sandbox's ready socket as
** MP_NS_READY_FD, and `__ns-enter ...` for a running sandbox with root
** (their arguments: ns_init.h).
*/
#ifndef MP_NS_EXEC_H
#define MP_NS_EXEC_H

#include "drivers/ns/init/ns_init.h" /* MP_NS_EXEC_ARG, MP_NS_ENTER_ARG */

int mp_ns_exec_main(int argc, char **argv);

/* a command of a running sandbox, with root (ns_enter.c): exec'd by the
** server's vforked child, born in the sandbox's pid namespace, as host
** root; it enters the sandbox and execs its /bin/sh in place. */
int mp_ns_enter_main(int argc, char **argv);

#endif
