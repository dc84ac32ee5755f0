/*
** mastra-ns-init: the init of a `namespaces` sandbox (ns_init.c) as a
** program of its own, linked with libc alone (statically where the build
** allows): the server execs it at every sandbox start, and loading
** mastra-platform itself (libcurl, libmicrohttpd and their ~35 libraries)
** cost ~14 ms of each start. driver_ns.c finds it beside mastra-platform,
** or installed in MP_NS_INIT_INSTALLED relative to it, and falls back to
** `mastra-platform __ns-init` without it.
*/
#include "ns_init.h"

int main(int argc, char **argv) { return mp_ns_init_main(argc, argv); }
