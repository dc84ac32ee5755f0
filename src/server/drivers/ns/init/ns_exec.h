/*
** A command of a `namespaces` sandbox (ns_exec.c): `mastra-ns-init
** __ns-exec SERVER_PID CWD [CGROUP_PROCS...] -- COMMAND`, spawned by
** driver_ns.c with the sandbox's ready socket as descriptor 3, and
** `__ns-enter` for a running sandbox with root.
*/
#ifndef MP_NS_EXEC_H
#define MP_NS_EXEC_H

/* the argument that selects this program */
#define MP_NS_EXEC_ARG "__ns-exec"

int mp_ns_exec_main(int argc, char **argv);

/* `mastra-ns-init __ns-enter CWD [CGROUP_PROCS...] -- COMMAND`: a command
** of a running sandbox, with root (ns_enter.c): exec'd by the server's
** vforked child, born in the sandbox's pid namespace, as host root; it
** enters the sandbox and execs its /bin/sh in place. */
#define MP_NS_ENTER_ARG "__ns-enter"

int mp_ns_enter_main(int argc, char **argv);

#endif
