/*
** Tests of a stream's spool (src/server/sandbox/spool.h): a stream written
** and acknowledged in uneven steps reads back byte for byte, freed slots
** are written over instead of growing the file, a record's map reopens the
** same bytes, an older server's file (no map) reads as offsets, and a
** write that fails counts nothing it did not write. Works in a fresh
** directory under $TMPDIR (or /tmp) and removes it at the end.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/spool.h"

#include "check.h"

#define SEG MP_SPOOL_SEG
#define TOTAL (24u << 20) /* the stream the model test writes */

/* xorshift64*: reproducible steps */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd(uint64_t below) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (rng_state * 0x2545f4914f6cdd1du) % below;
}

/* byte k of the stream: not periodic in 1 MiB, so a segment in the wrong
** slot reads wrong */
static unsigned char byte_at(uint64_t k) {
  return (unsigned char)((k * 2654435761u) >> 13 ^ k >> 20);
}

static char g_dir[4096];

static int open_file(const char *name) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", g_dir, name);
  return open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

static off_t file_size(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? st.st_size : -1;
}

/* [off, off + n) of s is the stream's */
static int reads_back(mp_spool *s, uint64_t off, size_t n) {
  static unsigned char buf[3 * (1 << 20)];
  size_t i;
  ssize_t r;
  if (n > sizeof buf) n = sizeof buf;
  if (n > s->end - off) n = (size_t)(s->end - off);
  r = mp_spool_read(s, off, buf, n);
  if (r != (ssize_t)n) return 0;
  for (i = 0; i < n; i++)
    if (buf[i] != byte_at(off + i)) return 0;
  return 1;
}

static int append_stream(mp_spool *s, size_t n) {
  static unsigned char buf[1 << 19];
  size_t i;
  if (n > sizeof buf) n = sizeof buf;
  for (i = 0; i < n; i++) buf[i] = byte_at(s->end + i);
  return mp_spool_append(s, buf, n);
}

/* A reader that keeps up: appends and acks in uneven steps, every read in
** between checked; the map never spans more than the retained bytes need,
** and the file gets a new slot only when none is free. Then the map
** reopens the same bytes. */
static void test_streaming(void) {
  mp_spool s, t;
  size_t n;
  const uint32_t *slots;
  size_t peak = 0;
  int bounded = 1, ok = 1;
  mp_spool_init(&s);
  s.fd = open_file("stream");
  CHECK(s.fd >= 0);
  while (s.end < TOTAL) {
    uint64_t retained;
    uint64_t n_add = 1 + rnd(300000);
    if (n_add > TOTAL - s.end) n_add = TOTAL - s.end;
    if (append_stream(&s, (size_t)n_add) < 0) ok = 0;
    if (s.end > s.start
        && !reads_back(&s, s.start + rnd(s.end - s.start),
                       (size_t)(1 + rnd(100000))))
      ok = 0;
    if (rnd(3) == 0) mp_spool_forget(&s, s.start + rnd(s.end - s.start + 1));
    retained = s.end - s.start;
    if (s.nseg > retained / SEG + 2) bounded = 0;
    if (s.nseg > peak) peak = s.nseg;
    if (s.nslots > peak || s.nslots != s.nseg + s.nwarm + s.ncold) bounded = 0;
  }
  CHECK(ok);
  CHECK(bounded);
  CHECK(s.end == TOTAL);
  /* 24 segments in a file of a few slots */
  CHECK(file_size(s.fd) < (off_t)(TOTAL / 2));
  CHECK(s.nslots < TOTAL / SEG / 2);
  /* reads that cross slots, to the end */
  CHECK(reads_back(&s, s.start, (size_t)(s.end - s.start)));
  CHECK(mp_spool_read(&s, s.end, (char[1]){0}, 1) == -1);
  if (s.start > 0) CHECK(mp_spool_read(&s, s.start - 1, (char[1]){0}, 1) == -1);
  /* what a record keeps reopens the same bytes */
  slots = mp_spool_slots(&s, &n);
  CHECK(mp_spool_load(&t, dup(s.fd), s.start, s.end, slots, n) == 0);
  CHECK(reads_back(&t, t.start, (size_t)(t.end - t.start)));
  mp_spool_free(&t);
  /* a map of the wrong length is refused, and the fd stays the caller's */
  CHECK(mp_spool_load(&t, s.fd, s.start, s.end, slots, n + 1) == -1);
  CHECK(s.start == s.end
        || mp_spool_load(&t, s.fd, s.end, s.start, NULL, 0) == -1);
  CHECK(t.fd == -1);
  mp_spool_free(&s);
}

/* A reader that lagged: 8 MiB retained, then all acked. The spare slots
** beyond the warm ones are punched (the file's blocks go), and reused. */
static void test_lag(void) {
  mp_spool s;
  struct stat st;
  uint64_t i, slots_before;
  mp_spool_init(&s);
  s.fd = open_file("lag");
  for (i = 0; i < 16; i++) CHECK(append_stream(&s, 1 << 19) == 0);
  CHECK(s.nslots == 8);
  mp_spool_forget(&s, s.end);
  CHECK(s.start == s.end && s.nseg == 0);
  CHECK(s.nwarm == MP_SPOOL_WARM && s.ncold == 8 - MP_SPOOL_WARM);
  CHECK(fstat(s.fd, &st) == 0);
  /* the warm slots' blocks stay, the others' went */
  CHECK((uint64_t)st.st_blocks * 512 <= MP_SPOOL_WARM * SEG + 65536);
  slots_before = s.nslots;
  for (i = 0; i < 16; i++) CHECK(append_stream(&s, 1 << 19) == 0);
  CHECK(s.nslots == slots_before); /* all in the freed slots */
  CHECK(reads_back(&s, s.start, (size_t)(s.end - s.start)));
  mp_spool_free(&s);
}

/* An older server's spool: offsets are file positions (no map). */
static void test_identity(void) {
  mp_spool s;
  unsigned char buf[4096];
  uint64_t k;
  int fd = open_file("old"), ok = 1;
  for (k = 0; k < 3 * SEG; k += sizeof buf) {
    size_t i;
    for (i = 0; i < sizeof buf; i++) buf[i] = byte_at(k + i);
    if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) ok = 0;
  }
  CHECK(ok);
  CHECK(mp_spool_load(&s, fd, SEG + 12345, 3 * SEG - 7, NULL, 0) == 0);
  CHECK(s.nseg == 2);
  CHECK(reads_back(&s, s.start, (size_t)(s.end - s.start)));
  mp_spool_free(&s);
}

/* A write that fails: -1 and ENOSPC, and end stays where the bytes end. */
static void test_full(void) {
  mp_spool s;
  mp_spool_init(&s);
  s.fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (s.fd < 0) {
    printf("# no /dev/full: the failing write is not tested\n");
    return;
  }
  errno = 0;
  CHECK(append_stream(&s, 1000) == -1);
  CHECK(errno == ENOSPC);
  CHECK(s.end == 0 && s.nseg == 0);
  mp_spool_free(&s);
  CHECK(s.fd == -1);
}

int main(void) {
  const char *tmp = getenv("TMPDIR");
  int fds = count_fds();
  char cmd[4200];
  snprintf(g_dir, sizeof g_dir, "%s/test-spool-XXXXXX",
           tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
  if (mkdtemp(g_dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  test_streaming();
  test_lag();
  test_identity();
  test_full();
  CHECK(count_fds() == fds);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", g_dir);
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}
