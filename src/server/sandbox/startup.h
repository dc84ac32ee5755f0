/*
** Opening and closing the parts of mastra-platform that hold state
** (startup.c), shared by main.c and the fuzz harness (fuzz/fuzz_server.c).
*/
#ifndef MP_STARTUP_H
#define MP_STARTUP_H

#include <stddef.h>

#include "server.h"

/* With srv's options set (data_dir, driver, limits): create the data
** directories, open the bucket store and the loop, load the records.
** -1: err says what failed (what was opened is closed again). */
int mp_server_open(mp_server *srv, char *err, size_t errlen);
/* After the HTTP daemon stopped: close the loop (it kills and reaps what
** is left), free the records and leases, close the bucket store. */
void mp_server_close(mp_server *srv);

#endif
