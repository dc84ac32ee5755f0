/*
** The choice of the driver at startup (drivers.c).
*/
#ifndef MP_DRIVERS_H
#define MP_DRIVERS_H

#include "sandbox/sandbox.h"

typedef struct mp_driver_opts {
  const char *requested; /* "process", "namespaces" or NULL: the default */
  const char *base;      /* the base directory, or NULL: DATA/base */
  long long pids_max;    /* per sandbox (namespaces) */
  long long memory_max;  /* bytes per sandbox (namespaces) */
  int egress;            /* --egress: NAT out of PRIVATE networks (net.h) */
  int warm_pool;         /* warm sandboxes (namespaces; driver_ns.c) */
} mp_driver_opts;

#define MP_DEFAULT_PIDS_MAX 1024
#define MP_DEFAULT_MEMORY_MAX (2LL << 30)
#define MP_DEFAULT_WARM_POOL 2
#define MP_WARM_POOL_MAX 64

/* Sets srv->driver, before the records are loaded: `namespaces` where it
** can run (root, or unprivileged user namespaces), after building a
** missing base (a minimal one, host tools, when the default start finds
** none; a full one when `namespaces` was requested), else
** `process` with one line on stderr saying why (and how to build the
** base); a requested `namespaces` is an error where it cannot run. 0, or
** -1 after saying why on stderr. */
int mp_driver_pick(mp_server *srv, const mp_driver_opts *o);
/* Once the loop runs and the trash is emptied (the warm pool) */
void mp_driver_start(mp_server *srv);
/* At exit, after mp_sandbox_free_all: what the driver keeps for the whole
** server (the namespaces driver's cgroups) */
void mp_driver_finish(mp_server *srv);
/* `mastra-platform base build [--data-dir DIR] [--base DIR] [--minimal]`:
** the exit status */
int mp_base_command(int argc, char **argv);
/* a size in bytes with an optional k, m or g suffix (powers of 1024), or
** -1 */
long long mp_parse_size(const char *v);

#endif
