/*
** The `process` driver of mastra-platform (driver_process.c): a sandbox is
** a directory on the host and its commands are process groups.
*/
#ifndef MP_DRIVER_PROCESS_H
#define MP_DRIVER_PROCESS_H

#include "sandbox/sandbox.h"

extern const mp_driver mp_process_driver;

/* the options of a command's process: spec's command, stdin and timeout,
** envp, cwd (a host path), SIGKILL when the server dies */
void mp_proc_opts(mastra__proc_opts *o, const mp_exec_spec *spec,
                  char *const *envp, const char *cwd);

#endif
