/*
** The disk use of a directory tree (diskuse.c), measured by a thread of
** its own: the server's thread only reads the last result and asks for a
** new one, never waits for a walk.
*/
#ifndef MP_DISKUSE_H
#define MP_DISKUSE_H

#include <stdint.h>

typedef struct mp_diskuse mp_diskuse;

mp_diskuse *mp_diskuse_new(const char *dir);
/* The last result: bytes on disk (allocated blocks), when it was measured
** (ms since the epoch; 0: not yet), whether a walk runs now. A new walk
** starts when the last result is older than max_age_ms and none runs. */
void mp_diskuse_get(mp_diskuse *du, int64_t max_age_ms, uint64_t *bytes,
                    int64_t *at_ms, int *walking);
/* Stop a walk (at its next file) and free everything. */
void mp_diskuse_free(mp_diskuse *du);

#endif
