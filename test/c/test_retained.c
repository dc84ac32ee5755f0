/*
** Tests of the retained output buffer (src/core/retained.h): after every
** append, the buffer holds what a plain model holds (every byte appended,
** minus the oldest beyond max, minus up to 3 continuation bytes after the
** cut) and counts the rest as dropped, for limits from 0 to unbounded and
** appends that take the block past 2 MiB (from malloc to a mapping of its
** own, then mremap) and back into a block that is moved to its start.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "retained.h"

#include "check.h"

/* The model: the retained bytes in a plain array, cut the same way. */
typedef struct {
  unsigned char *b;
  size_t len, max;
  uint64_t dropped;
} model;

static void model_append(model *m, const unsigned char *s, size_t n) {
  size_t total = m->len + n, cut = 0, stop;
  unsigned char *all = malloc(total ? total : 1);
  if (all == NULL) abort();
  if (m->len) memcpy(all, m->b, m->len);
  memcpy(all + m->len, s, n);
  if (total > m->max) {
    cut = total - m->max;
    stop = cut + 3 < total ? cut + 3 : total;
    while (cut < stop && (all[cut] & 0xC0) == 0x80) cut++;
  }
  free(m->b);
  m->b = malloc(total - cut ? total - cut : 1);
  if (m->b == NULL) abort();
  memcpy(m->b, all + cut, total - cut);
  m->len = total - cut;
  m->dropped += cut;
  free(all);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) { /* xorshift64 */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* n bytes, a third of them continuation bytes (0x80-0xBF) */
static void fill(unsigned char *s, size_t n) {
  size_t i;
  for (i = 0; i < n; i++) {
    uint64_t v = next();
    s[i] = (unsigned char)(v % 3 == 0 ? 0x80 | (v >> 8 & 0x3F) : v >> 16);
  }
}

static int same(const mastra__retained *r, const model *m) {
  return r->len == m->len && r->dropped == m->dropped
      && (m->len == 0 || memcmp(r->data + r->start, m->b, m->len) == 0);
}

/* appends of sizes up to `biggest` into a buffer of max, checked each time */
static void run(size_t max, size_t biggest, int appends) {
  mastra__retained r;
  model m = {NULL, 0, max, 0};
  unsigned char *s = malloc(biggest);
  int i, ok = 1;
  if (s == NULL) abort();
  mastra__retained_init(&r, max);
  for (i = 0; i < appends && ok; i++) {
    size_t n = (size_t)(next() % (biggest + 1));
    fill(s, n);
    ok = CHECK(mastra__retained_append(&r, (const char *)s, n) == 0);
    model_append(&m, s, n);
    ok = ok && CHECK(same(&r, &m));
    ok = ok && CHECK(max == SIZE_MAX || r.len <= max);
    /* a bounded buffer's block stays within twice what it holds */
    ok = ok && CHECK(max == SIZE_MAX || r.cap <= 1024
                     || r.cap <= 2 * (max + biggest) + 4096);
  }
  if (!ok) fprintf(stderr, "  max %zu, append %d\n", max, i);
  mastra__retained_free(&r);
  CHECK(r.data == NULL && r.len == 0);
  free(m.b);
  free(s);
}

static void test_rule(void) {
  mastra__retained r;
  /* "é" is C3 A9: a cut after C3 drops A9 too */
  mastra__retained_init(&r, 5);
  CHECK(mastra__retained_append(&r, "x\xc3\xa9", 3) == 0);
  CHECK(mastra__retained_append(&r, "abcd", 4) == 0);
  CHECK(r.len == 4 && memcmp(r.data + r.start, "abcd", 4) == 0);
  CHECK(r.dropped == 3);
  mastra__retained_free(&r);
  /* 0 keeps nothing and allocates nothing, and counts */
  mastra__retained_init(&r, 0);
  CHECK(mastra__retained_append(&r, "abc", 3) == 0);
  CHECK(r.len == 0 && r.dropped == 3 && r.data == NULL);
  mastra__retained_free(&r);
}

/* everything kept past 2 MiB: the block becomes a mapping of its own on a
** huge page boundary, then grows in place or moves, bytes intact */
static void test_big(void) {
  mastra__retained r;
  model m = {NULL, 0, SIZE_MAX, 0};
  size_t piece = 65536, i;
  unsigned char *s = malloc(piece);
  int aligned = 0, ok = 1;
  if (s == NULL) abort();
  mastra__retained_init(&r, SIZE_MAX);
  for (i = 0; i < 160 && ok; i++) { /* 10 MiB */
    fill(s, piece);
    ok = CHECK(mastra__retained_append(&r, (const char *)s, piece) == 0);
    model_append(&m, s, piece);
    if (r.cap >= ((size_t)2 << 20) && !aligned) {
      aligned = 1;
      CHECK(((uintptr_t)r.data & (((uintptr_t)2 << 20) - 1)) == 0);
    }
  }
  CHECK(aligned);
  CHECK(same(&r, &m));
  mastra__retained_free(&r);
  free(m.b);
  free(s);
}

int main(void) {
  test_rule();
  test_big();
  run(SIZE_MAX, 4096, 200);
  run(0, 100, 50);
  run(1, 10, 200);
  run(7, 20, 500);
  run(1000, 300, 2000);
  run(100000, 70000, 300);
  run((size_t)3 << 20, (size_t)1 << 20, 40); /* the block crosses 2 MiB */
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}
