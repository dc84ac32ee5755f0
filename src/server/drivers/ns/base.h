/*
** The base of the `namespaces` driver (base.c): the read-only lower layer
** every sandbox's root is an overlay of.
*/
#ifndef MP_BASE_H
#define MP_BASE_H

#include <stddef.h>

#include "drivers/ns/init/ns_init.h" /* MP_BASE_HOST_USR */

/* 1 if dir holds a finished base */
int mp_base_ready(const char *dir);
/* Build dir from the host's tools (a layer of /usr over the host's, a
** curated /etc: base.c), plus TypeScript and tsx from
** the npm registry unless minimal (without them, and saying so, when the
** registry cannot be reached). Blocks: run it before serving, never on the
** loop. Replaces an older base only once the new one is complete.
** 0, or -1 and err says why. */
int mp_base_build(const char *dir, int minimal, char *err, size_t errlen);
/* `mastra-platform base build [--data-dir DIR] [--base DIR] [--minimal]`:
** the exit status */
int mp_base_command(int argc, char **argv);

#endif
