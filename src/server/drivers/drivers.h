/*
** The registry of sandbox drivers (drivers.c): the choice at startup, and
** the drivers' own flags of `mastra-platform serve`.
*/
#ifndef MP_DRIVERS_H
#define MP_DRIVERS_H

#include <stdio.h>

#include "sandbox/sandbox.h"

/* Sets srv->driver, before the records are loaded: the requested one
** (NULL or "": the default, the first of the list that can run here, each
** one that cannot saying why on stderr). 0, or -1 after saying why on
** stderr (an unknown name; a requested driver that cannot run; a flag
** that asks a driver for what it cannot do). */
int mp_driver_pick(mp_server *srv, const char *requested);
/* Once the loop runs and the trash is emptied */
void mp_driver_start(mp_server *srv);
/* At exit, after mp_sandbox_free_all, or on the way out of a failed start
** once mp_driver_pick succeeded (then a no-op) */
void mp_driver_finish(mp_server *srv);
/* the flag of some driver named name ("--warm-pool"), or NULL */
const mp_driver_flag *mp_driver_flag_find(const char *name);
/* every driver's flags, for --help */
void mp_driver_usage(FILE *out);

#endif
