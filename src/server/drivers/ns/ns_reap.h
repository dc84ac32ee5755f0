/*
** What is left of a `namespaces` sandbox (ns_reap.c): the driver's
** kill_strays and left (sandbox.h, mp_driver), over its box (ns_box.h).
*/
#ifndef MP_NS_REAP_H
#define MP_NS_REAP_H

#include <stddef.h>

#include "drivers/ns/ns_box.h"

/* mp_driver.kill_strays: SIGKILL the processes in sb's cgroup but its
** keeper, its init and its commands' groups; how many */
size_t mp_ns_kill_strays(mp_sandbox *sb, int (*in_command)(void *data,
                                                           long pgrp),
                         void *data);
/* mp_driver.left: after the teardown, SIGKILL what is left of sb (its
** keeper, its init, what its cgroups hold) and return how many; its
** cgroups are removed once empty */
size_t mp_ns_left(mp_server *srv, mp_sandbox *sb);

#endif
