/*
** A stream's spool file, its bytes in reused slots (spool.h).
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sandbox/spool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEG MP_SPOOL_SEG

void mp_spool_init(mp_spool *s) {
  memset(s, 0, sizeof *s);
  s->fd = -1;
}

void mp_spool_free(mp_spool *s) {
  if (s->fd >= 0) close(s->fd);
  free(s->slot);
  free(s->cold);
  mp_spool_init(s);
}

void mp_spool_close(mp_spool *s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

void mp_spool_reopen(mp_spool *s, int fd) {
  mp_spool_close(s);
  s->fd = fd;
}

static int grow(uint32_t **a, size_t *cap, size_t need) {
  size_t n = *cap != 0 ? *cap : 4;
  uint32_t *p;
  if (need <= *cap) return 0;
  while (n < need) n *= 2;
  p = realloc(*a, n * sizeof *p);
  if (p == NULL) return -1;
  *a = p;
  *cap = n;
  return 0;
}

/* a free slot for the next segment: a warm one, a punched one, or one
** past the file's end */
static int take_slot(mp_spool *s, uint32_t *out) {
  if (s->nwarm > 0) {
    *out = s->warm[--s->nwarm];
  } else if (s->ncold > 0) {
    *out = s->cold[--s->ncold];
  } else {
    if (s->nslots == UINT32_MAX) {
      errno = EFBIG;
      return -1;
    }
    *out = s->nslots++;
  }
  return 0;
}

static void give_slot(mp_spool *s, uint32_t slot) {
  if (s->nwarm < MP_SPOOL_WARM) {
    s->warm[s->nwarm++] = slot;
    return;
  }
  /* its pages go back; a slot that cannot be listed is simply never used
  ** again (the file keeps its hole) */
  (void)fallocate(s->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  (off_t)(slot * SEG), (off_t)SEG);
  if (grow(&s->cold, &s->cold_cap, s->ncold + 1) == 0)
    s->cold[s->ncold++] = slot;
}

static off_t pos_of(const mp_spool *s, uint64_t off) {
  return (off_t)(s->slot[off / SEG - s->start / SEG] * SEG + off % SEG);
}

int mp_spool_append(mp_spool *s, const void *data, size_t n) {
  const char *p = data;
  while (n > 0) {
    size_t m = (size_t)(SEG - s->end % SEG);
    ssize_t w;
    if (s->end % SEG == 0) { /* a new segment */
      uint32_t slot;
      if (grow(&s->slot, &s->seg_cap, s->nseg + 1) < 0) return -1;
      if (take_slot(s, &slot) < 0) return -1;
      s->slot[s->nseg++] = slot;
    }
    if (m > n) m = n;
    w = pwrite(s->fd, p, m, pos_of(s, s->end));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      if (s->end % SEG == 0) give_slot(s, s->slot[--s->nseg]);
      return -1;
    }
    s->end += (uint64_t)w;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

ssize_t mp_spool_read(mp_spool *s, uint64_t off, void *buf, size_t n) {
  char *p = buf;
  size_t got = 0;
  if (s->fd < 0 || off < s->start || off >= s->end) return -1;
  if (n > s->end - off) n = (size_t)(s->end - off);
  while (got < n) {
    size_t m = (size_t)(SEG - off % SEG);
    ssize_t r;
    if (m > n - got) m = n - got;
    r = pread(s->fd, p + got, m, pos_of(s, off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return got > 0 ? (ssize_t)got : -1;
    if (r == 0) break;
    got += (size_t)r;
    off += (uint64_t)r;
  }
  return (ssize_t)got;
}

void mp_spool_forget(mp_spool *s, uint64_t to) {
  size_t drop, k;
  if (to <= s->start) return;
  if (to > s->end) to = s->end;
  /* the segments wholly below `to` */
  drop = (size_t)(to / SEG - s->start / SEG);
  if (drop > s->nseg) drop = s->nseg;
  for (k = 0; k < drop; k++) give_slot(s, s->slot[k]);
  memmove(s->slot, s->slot + drop, (s->nseg - drop) * sizeof *s->slot);
  s->nseg -= drop;
  s->start = to;
}

const uint32_t *mp_spool_slots(const mp_spool *s, size_t *n) {
  *n = s->nseg;
  return s->slot;
}

/* the segments that [start, end) touches */
static uint64_t segments(uint64_t start, uint64_t end) {
  return (end + SEG - 1) / SEG - start / SEG;
}

int mp_spool_load(mp_spool *s, int fd, uint64_t start, uint64_t end,
                  const uint32_t *slots, size_t nslots) {
  uint64_t need, k;
  mp_spool_init(s);
  if (start > end) return -1;
  need = segments(start, end);
  if (slots != NULL ? nslots != need
                    : (end + SEG - 1) / SEG > UINT32_MAX)
    return -1;
  if (grow(&s->slot, &s->seg_cap, (size_t)need) < 0) return -1;
  for (k = 0; k < need; k++) {
    uint32_t v = slots != NULL ? slots[k] : (uint32_t)(start / SEG + k);
    if (v == UINT32_MAX) {
      free(s->slot);
      mp_spool_init(s);
      return -1;
    }
    s->slot[k] = v;
    if (v >= s->nslots) s->nslots = v + 1;
  }
  s->nseg = (size_t)need;
  s->fd = fd;
  s->start = start;
  s->end = end;
  return 0;
}
