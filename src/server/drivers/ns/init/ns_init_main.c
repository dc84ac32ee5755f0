/*
** mastra-ns-init: the init of a `namespaces` sandbox (ns_init.c) and the
** entry of its commands (ns_exec.c: `__ns-exec`, `__ns-enter`) as a
** program of its own, linked with libc alone (statically where the build
** allows): the server execs it at every sandbox start and every command,
** and loading mastra-platform itself (libcurl, libmicrohttpd and their ~35
** libraries) cost ~14 ms each time. driver_ns.c finds it beside mastra-platform, or installed in
** MP_NS_INIT_INSTALLED relative to it, and falls back to `mastra-platform
** __ns-init` / `__ns-exec` without it (`__ns-enter` is this program's
** alone: without it a running sandbox's commands take `__ns-exec`).
*/
#include <string.h>

#include "drivers/ns/init/ns_exec.h"
#include "drivers/ns/init/ns_init.h"

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], MP_NS_EXEC_ARG) == 0)
    return mp_ns_exec_main(argc, argv);
  if (argc >= 2 && strcmp(argv[1], MP_NS_ENTER_ARG) == 0)
    return mp_ns_enter_main(argc, argv);
  return mp_ns_init_main(argc, argv);
}
