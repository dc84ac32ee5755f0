/*
** The `namespaces` driver of mastra-platform (driver_ns.c): each sandbox
** in its own user, mount, pid, uts, ipc and net namespaces over an overlay
** of the base, with cgroup limits.
*/
#ifndef MP_DRIVER_NS_H
#define MP_DRIVER_NS_H

#include "sandbox/sandbox.h"

/* its flags, availability, setup, start and finish are in the table */
extern const mp_driver mp_ns_driver;

#endif
