/*
** A command of a `namespaces` sandbox (ns_exec.c): `mastra-ns-init
** __ns-exec SERVER_PID CWD [CGROUP_PROCS...] -- COMMAND`, spawned by
** driver_ns.c with the sandbox's ready socket as descriptor 3.
*/
#ifndef MP_NS_EXEC_H
#define MP_NS_EXEC_H

/* the argument that selects this program */
#define MP_NS_EXEC_ARG "__ns-exec"

int mp_ns_exec_main(int argc, char **argv);

#endif
