/*
** The retained output of a stream (retained.h): one block holding the
** newest bytes. A block under BIG_BLOCK is malloc'd; one of BIG_BLOCK or
** more is an anonymous mapping aligned to 2 MiB and advised
** MADV_HUGEPAGE, grown with mremap. Which kind a block is follows from
** its size alone (a buffer never shrinks).
*/
#define _GNU_SOURCE
#include "retained.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BIG_BLOCK ((size_t)2 << 20)
#define HUGE_PAGE ((size_t)2 << 20)
#define PAGE ((size_t)4096)
#define FIRST_CAP ((size_t)1024)

static size_t page_round(size_t n) {
  return (n + PAGE - 1) & ~(PAGE - 1);
}

/* A mapping of len bytes (a multiple of PAGE) starting on a huge page
** boundary, advised for huge pages; NULL when none can be made. */
static char *map_block(size_t len) {
  char *m, *a;
  size_t extra = HUGE_PAGE - PAGE;
  m = mmap(NULL, len + extra, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  a = (char *)(((uintptr_t)m + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
  if (a > m) munmap(m, (size_t)(a - m));
  if (m + len + extra > a + len)
    munmap(a + len, (size_t)(m + len + extra - (a + len)));
  /* a kernel without transparent huge pages says EINVAL: small pages
  ** then, which is what malloc would have given */
  (void)madvise(a, len, MADV_HUGEPAGE);
  return a;
}

static void free_block(char *data, size_t cap) {
  if (data == NULL) return;
  if (cap >= BIG_BLOCK)
    munmap(data, cap);
  else
    free(data);
}

/* Give the block (its retained bytes moved to its start) newcap bytes. */
static int resize(mastra__retained *r, size_t newcap) {
  char *q;
  if (newcap < BIG_BLOCK) {
    q = realloc(r->data, newcap);
    if (q == NULL) return -1;
  } else {
    newcap = page_round(newcap);
    if (r->cap >= BIG_BLOCK) {
      q = mremap(r->data, r->cap, newcap, MREMAP_MAYMOVE);
      if (q == MAP_FAILED) return -1;
    } else {
      q = map_block(newcap);
      if (q == NULL) return -1;
      if (r->len > 0) memcpy(q, r->data, r->len);
      free(r->data);
    }
  }
  r->data = q;
  r->cap = newcap;
  return 0;
}

/* Room for n more bytes after the retained ones. The retained bytes move
** to the block's start only when they then fill at most half of it, and a
** block that grows becomes twice what it must hold: each byte is moved
** O(1) times on average, and a buffer of a bounded max holds at most
** 2 * (max + n) bytes. */
static int reserve(mastra__retained *r, size_t n) {
  size_t need = r->len + n;
  if (r->start + need <= r->cap) return 0;
  if (r->start > 0) {
    memmove(r->data, r->data + r->start, r->len);
    r->start = 0;
    if (need <= r->cap / 2) return 0;
  }
  if (need > ((size_t)-1) / 2) {
    errno = ENOMEM;
    return -1;
  }
  return resize(r, need * 2 > FIRST_CAP ? need * 2 : FIRST_CAP);
}

void mastra__retained_init(mastra__retained *r, size_t max) {
  memset(r, 0, sizeof *r);
  r->max = max;
}

/* Byte i of the retained bytes followed by s. */
static unsigned char byte_at(const mastra__retained *r, const char *s,
                             size_t i) {
  return (unsigned char)(i < r->len ? r->data[r->start + i]
                                    : s[i - r->len]);
}

int mastra__retained_append(mastra__retained *r, const char *s, size_t n) {
  size_t total, cut = 0, from_old, from_s, add;
  if (n == 0) return 0;
  if (n > ((size_t)-1) - r->len) {
    errno = ENOMEM;
    return -1;
  }
  total = r->len + n;
  if (total > r->max) {
    size_t stop;
    cut = total - r->max;
    stop = total - cut > 3 ? cut + 3 : total;
    while (cut < stop && (byte_at(r, s, cut) & 0xC0) == 0x80) cut++;
  }
  /* keep bytes [cut, total) of the retained ones followed by s */
  from_old = cut < r->len ? cut : r->len;
  from_s = cut > r->len ? cut - r->len : 0;
  add = n - from_s;
  r->start = r->len > from_old ? r->start + from_old : 0;
  r->len -= from_old;
  r->dropped += from_old;
  if (add > 0 && reserve(r, add) < 0) {
    r->dropped += n; /* nothing of s is kept */
    return -1;
  }
  if (add > 0) memcpy(r->data + r->start + r->len, s + from_s, add);
  r->len += add;
  r->dropped += from_s;
  return 0;
}

void mastra__retained_free(mastra__retained *r) {
  free_block(r->data, r->cap);
  r->data = NULL;
  r->cap = r->start = r->len = 0;
}
