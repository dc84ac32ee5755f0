/*
** The layout of one stream's spool file (spool.c): byte k of the stream
** lives in 1 MiB slots of the file, which the stream's segments (k / 1 MiB)
** take in turn. A segment that an ack let go of gives its slot back, and
** the next segment writes over it, so a command that streams for long
** reuses the same few pages of tmpfs or page cache: on a VM a page the
** kernel allocates afresh for each 4 KiB, and frees again at the ack, cost
** more than the copy into it (bench/RESULTS.md). A few free slots are kept
** warm; the rest are punched out, so a client that lagged and caught up
** gives the space back.
**
** The map is in memory while the exec runs; an ended exec's record carries
** it (execs.c), so a restarted server replays the same bytes. A record
** without one (an older server's) is the identity map: offsets are file
** positions.
*/
#ifndef MP_SPOOL_H
#define MP_SPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define MP_SPOOL_SEG ((uint64_t)1 << 20) /* a slot, and a segment */
#define MP_SPOOL_WARM 2                  /* free slots kept unpunched */

typedef struct mp_spool {
  int fd;                 /* the file; -1: none */
  uint64_t start, end;    /* the retained bytes [start, end) */
  uint32_t *slot;         /* slot of segment start / SEG + k, k < nseg */
  size_t nseg, seg_cap;
  uint32_t warm[MP_SPOOL_WARM]; /* free slots, not punched */
  size_t nwarm;
  uint32_t *cold;         /* free slots, punched */
  size_t ncold, cold_cap;
  uint32_t nslots;        /* slots the file has ever had */
} mp_spool;

/* empty, with no file */
void mp_spool_init(mp_spool *s);
/* the map and the file descriptor go (the file stays) */
void mp_spool_free(mp_spool *s);
/* the file descriptor goes, the map stays: reads fail until
** mp_spool_reopen gives it the file again */
void mp_spool_close(mp_spool *s);
/* the spool's file, opened again (fd: the spool owns it) */
void mp_spool_reopen(mp_spool *s, int fd);
/* n bytes at s->end, which moves past what was written: 0, or -1 and
** errno when not all of them could be */
int mp_spool_append(mp_spool *s, const void *data, size_t n);
/* up to n bytes at off (start <= off < end): how many, or -1 */
ssize_t mp_spool_read(mp_spool *s, uint64_t off, void *buf, size_t n);
/* the bytes below to go (start <= to <= end) */
void mp_spool_forget(mp_spool *s, uint64_t to);
/* The map of [start, end) as the record keeps it: slots[k] for the
** segments start / SEG onward, *n of them (pointer into s). */
const uint32_t *mp_spool_slots(const mp_spool *s, size_t *n);
/* Take a record's map: nslots slots (NULL: the identity map) for
** [start, end) of the open fd, which the spool then owns. 0, or -1 when
** the map does not fit (fd stays the caller's). */
int mp_spool_load(mp_spool *s, int fd, uint64_t start, uint64_t end,
                  const uint32_t *slots, size_t nslots);

#endif
