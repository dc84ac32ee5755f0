/*
** Tests of the bucket store (src/server/bucket/bucket.h). No framework: CHECK
** counts, the last line of stdout is "N passed, N failed", and the exit
** status is 1 on a failure. Works in a fresh directory under $TMPDIR (or
** /tmp) and removes it at the end.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bucket/bucket.h"

#include "check.h"

/* {====== helpers ====== */

static char g_tmp[4096];  /* the test's directory: the parent of the root */
static char g_root[4200]; /* the store's root */
static char g_err[256];

/* xorshift64*: reproducible pseudo-random bytes */
static uint64_t rng_state = 0x9e3779b97f4a7c15u;

static uint64_t rnd64(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545f4914f6cdd1du;
}

static void fill_random(unsigned char *p, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    p[i] = (unsigned char)(rnd64() >> 56);
}


static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* a snapshot of a tree: "path size mtime" of every entry, as one string */
static char *g_snap;
static size_t g_snaplen;

static int snap_cb(const char *path, const struct stat *sb, int type,
                   struct FTW *f) {
  char line[8192];
  int n;
  char *ns;
  (void)type;
  (void)f;
  n = snprintf(line, sizeof line, "%s %lld %lld.%09ld\n", path,
               (long long)sb->st_size, (long long)sb->st_mtim.tv_sec,
               sb->st_mtim.tv_nsec);
  if (n < 0)
    return 1;
  ns = realloc(g_snap, g_snaplen + (size_t)n + 1);
  if (ns == NULL)
    return 1;
  g_snap = ns;
  memcpy(g_snap + g_snaplen, line, (size_t)n + 1);
  g_snaplen += (size_t)n;
  return 0;
}

static char *snapshot(const char *dir) {
  char *s;
  g_snap = NULL;
  g_snaplen = 0;
  if (nftw(dir, snap_cb, 16, FTW_PHYS) != 0) {
    free(g_snap);
    return NULL;
  }
  s = g_snap ? g_snap : strdup("");
  g_snap = NULL;
  return s;
}

static int rm_cb(const char *path, const struct stat *sb, int type,
                 struct FTW *f) {
  (void)sb;
  (void)f;
  if (type == FTW_DP)
    rmdir(path);
  else
    unlink(path);
  return 0;
}

static void rm_tree(const char *dir) {
  nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static int file_exists(const char *path) {
  struct stat sb;
  return lstat(path, &sb) == 0;
}

/* names in <root>/<p>/<b> that are not 64 lowercase hex digits */
static int count_foreign_files(const char *p, const char *b) {
  char path[8192];
  DIR *d;
  struct dirent *e;
  int n = 0;
  snprintf(path, sizeof path, "%s/%s/%s", g_root, p, b);
  d = opendir(path);
  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL) {
    size_t i, len = strlen(e->d_name);
    int hex = len == 64;
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    for (i = 0; hex && i < len; i++)
      hex = (e->d_name[i] >= '0' && e->d_name[i] <= '9') ||
            (e->d_name[i] >= 'a' && e->d_name[i] <= 'f');
    if (!hex)
      n++;
  }
  closedir(d);
  return n;
}

static int count_files(const char *p, const char *b) {
  char path[8192];
  DIR *d;
  struct dirent *e;
  int n = 0;
  snprintf(path, sizeof path, "%s/%s/%s", g_root, p, b);
  d = opendir(path);
  if (d == NULL)
    return -1;
  while ((e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
      n++;
  closedir(d);
  return n;
}

/* read object key whole, through mp_bucket_open_read (as a GET does):
** *data is malloc'd (NULL when len is 0); info->key is set too */
static int get_all(mp_bucket_store *st, const char *project,
                   const char *bucket, const char *key, void **data,
                   size_t *len, mp_object_info *info) {
  uint64_t off;
  size_t done = 0;
  char *buf = NULL;
  int fd, rc = mp_bucket_open_read(st, project, bucket, key, &fd, &off, info);
  *data = NULL;
  *len = 0;
  if (rc != MP_BUCKET_OK)
    return rc;
  if (info->size > 0 && (buf = malloc((size_t)info->size)) == NULL)
    rc = MP_BUCKET_NOMEM;
  while (rc == MP_BUCKET_OK && done < info->size) {
    ssize_t n = pread(fd, buf + done, (size_t)info->size - done,
                      (off_t)(off + done));
    if (n <= 0)
      rc = MP_BUCKET_IO;
    else
      done += (size_t)n;
  }
  close(fd);
  if (rc != MP_BUCKET_OK) {
    free(buf);
    mp_object_info_free(info);
    return rc;
  }
  *data = buf;
  *len = (size_t)info->size;
  return MP_BUCKET_OK;
}

/* get key and compare with (data, len) */
static int same_object(mp_bucket_store *st, const char *p, const char *b,
                       const char *key, const void *data, size_t len) {
  void *got = NULL;
  size_t glen = 99;
  mp_object_info info;
  int ok;
  if (get_all(st, p, b, key, &got, &glen, &info) != MP_BUCKET_OK)
    return 0;
  ok = glen == len && info.size == len && info.key != NULL &&
       strcmp(info.key, key) == 0 && (len == 0 || memcmp(got, data, len) == 0);
  free(got);
  mp_object_info_free(&info);
  return ok;
}

static int put_str(mp_bucket_store *st, const char *p, const char *b,
                   const char *key, const char *s) {
  return mp_bucket_put(st, p, b, key, s, strlen(s), "text/plain", 0, g_err,
                       sizeof g_err);
}

static int listing_is(const mp_listing *l, const char *const *contents,
                      size_t nc, const char *const *prefixes, size_t np) {
  size_t i;
  if (l->ncontents != nc || l->nprefixes != np)
    return 0;
  for (i = 0; i < nc; i++)
    if (strcmp(l->contents[i].key, contents[i]) != 0)
      return 0;
  for (i = 0; i < np; i++)
    if (strcmp(l->prefixes[i], prefixes[i]) != 0)
      return 0;
  return 1;
}

static void dump_listing(const char *what, const mp_listing *l) {
  size_t i;
  fprintf(stderr, "listing %s: %zu contents, %zu prefixes\n", what,
          l->ncontents, l->nprefixes);
  for (i = 0; i < l->ncontents; i++)
    fprintf(stderr, "  C %s\n", l->contents[i].key);
  for (i = 0; i < l->nprefixes; i++)
    fprintf(stderr, "  P %s\n", l->prefixes[i]);
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* }====== */

/* {====== key and name checks ====== */

static void test_checks(void) {
  char big[2001];
  static const char *good[] = {"a", "a/b", "a/", "dir with space/a&b.txt",
                               "\xc3\xbcn\xc3\xaf/\xe6\x96\x87.txt",
                               "...", ".hidden", "a/.b", "a..b/c", "why?#"};
  static const char *bad[] = {"../x", "/abs", "a//b", "a/./b", "a/..",
                              ".", "..", "./a", "/", "a/../b", "x//"};
  size_t i;
  for (i = 0; i < N(good); i++)
    CHECK(mp_bucket_key_check(good[i], strlen(good[i])) == NULL);
  for (i = 0; i < N(bad); i++)
    CHECK(mp_bucket_key_check(bad[i], strlen(bad[i])) != NULL);
  CHECK(mp_bucket_key_check("", 0) == NULL); /* the root */
  CHECK(mp_bucket_key_check("a\0b", 3) != NULL);
  memset(big, 'k', sizeof big - 1);
  big[2000] = '\0';
  CHECK(mp_bucket_key_check(big, 1024) == NULL);
  CHECK(mp_bucket_key_check(big, 1025) != NULL);
  CHECK(mp_bucket_key_check(big, 2000) != NULL);

  CHECK(mp_bucket_name_check("proj") == NULL);
  CHECK(mp_bucket_name_check("dev-bucket.1") == NULL);
  CHECK(mp_bucket_name_check("...") == NULL);
  CHECK(mp_bucket_name_check("") != NULL);
  CHECK(mp_bucket_name_check(".") != NULL);
  CHECK(mp_bucket_name_check("..") != NULL);
  CHECK(mp_bucket_name_check("a/b") != NULL);
  CHECK(mp_bucket_name_check(NULL) != NULL);
  memset(big, 'n', 256);
  big[256] = '\0';
  CHECK(mp_bucket_name_check(big) != NULL);
  big[255] = '\0';
  CHECK(mp_bucket_name_check(big) == NULL);
}

/* }====== */

/* {====== put, get, head ====== */

static void test_put_get(mp_bucket_store *st) {
  unsigned char bin[1000];
  unsigned char *big;
  const size_t bigsz = 10u * 1024 * 1024;
  void *got;
  size_t glen, i;
  mp_object_info info;
  int64_t t0 = wall_ms();
  char path[8192], key1k[1025];
  const char *uni = "\xc3\xbcn\xc3\xaf\x63\xc3\xb8\x64\xc3\xa9/"
                    "\xe6\x96\x87\xe4\xbb\xb6 name.txt";

  for (i = 0; i < sizeof bin; i++)
    bin[i] = (unsigned char)(i % 7 == 0 ? 0 : i);
  CHECK(mp_bucket_put(st, "p", "b", "bin/nul.dat", bin, sizeof bin,
                      "application/octet-stream", 0, g_err,
                      sizeof g_err) == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "b", "bin/nul.dat", bin, sizeof bin));
  CHECK(mp_bucket_head(st, "p", "b", "bin/nul.dat", &info) == MP_BUCKET_OK);
  CHECK(info.key && strcmp(info.key, "bin/nul.dat") == 0);
  CHECK(info.size == sizeof bin);
  CHECK(strcmp(info.content_type, "application/octet-stream") == 0);
  CHECK(info.mtime_ms >= t0 - 1000 && info.mtime_ms <= wall_ms() + 1000);
  mp_object_info_free(&info);
  CHECK(info.key == NULL);
  mp_object_info_free(&info); /* twice is harmless */

  /* the content type comes back from get too; none given → "" */
  got = NULL;
  CHECK(get_all(st, "p", "b", "bin/nul.dat", &got, &glen, &info) ==
        MP_BUCKET_OK);
  CHECK(strcmp(info.content_type, "application/octet-stream") == 0);
  free(got);
  mp_object_info_free(&info);
  CHECK(mp_bucket_put(st, "p", "b", "noct", "x", 1, NULL, 0, g_err,
                      sizeof g_err) == MP_BUCKET_OK);
  CHECK(mp_bucket_head(st, "p", "b", "noct", &info) == MP_BUCKET_OK);
  CHECK(strcmp(info.content_type, "") == 0);
  mp_object_info_free(&info);

  /* an empty object */
  CHECK(mp_bucket_put(st, "p", "b", "empty", NULL, 0, "text/plain", 0, g_err,
                      sizeof g_err) == MP_BUCKET_OK);
  got = (void *)1;
  glen = 5;
  CHECK(get_all(st, "p", "b", "empty", &got, &glen, &info) ==
        MP_BUCKET_OK);
  CHECK(glen == 0 && info.size == 0);
  free(got);
  mp_object_info_free(&info);

  /* 10 MB, byte-identical */
  big = malloc(bigsz);
  CHECK(big != NULL);
  if (big) {
    double t = now_s();
    fill_random(big, bigsz);
    big[0] = 0;
    big[bigsz - 1] = 0;
    CHECK(mp_bucket_put(st, "p", "b", "big/ten.bin", big, bigsz,
                        "application/x-big", 0, g_err,
                        sizeof g_err) == MP_BUCKET_OK);
    printf("# 10 MB put: %.1f ms\n", (now_s() - t) * 1000);
    t = now_s();
    CHECK(same_object(st, "p", "b", "big/ten.bin", big, bigsz));
    printf("# 10 MB get: %.1f ms\n", (now_s() - t) * 1000);
    CHECK(mp_bucket_head(st, "p", "b", "big/ten.bin", &info) ==
          MP_BUCKET_OK);
    CHECK(info.size == bigsz);
    mp_object_info_free(&info);
    free(big);
  }

  /* overwrite */
  CHECK(put_str(st, "p", "b", "over", "first") == MP_BUCKET_OK);
  CHECK(put_str(st, "p", "b", "over", "second!") == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "b", "over", "second!", 7));

  /* if-none-match */
  CHECK(mp_bucket_put(st, "p", "b", "over", "third", 5, "text/x", 1, g_err,
                      sizeof g_err) == MP_BUCKET_EXISTS);
  CHECK(same_object(st, "p", "b", "over", "second!", 7));
  CHECK(mp_bucket_head(st, "p", "b", "over", &info) == MP_BUCKET_OK);
  CHECK(strcmp(info.content_type, "text/plain") == 0);
  mp_object_info_free(&info);
  CHECK(mp_bucket_put(st, "p", "b", "fresh", "new", 3, NULL, 1, g_err,
                      sizeof g_err) == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "b", "fresh", "new", 3));
  CHECK(count_foreign_files("p", "b") == 0); /* the refused temp is gone */

  /* "a" and "a/b" coexist */
  CHECK(put_str(st, "p", "b", "a", "file a") == MP_BUCKET_OK);
  CHECK(put_str(st, "p", "b", "a/b", "file a/b") == MP_BUCKET_OK);
  CHECK(put_str(st, "p", "b", "a/", "") == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "b", "a", "file a", 6));
  CHECK(same_object(st, "p", "b", "a/b", "file a/b", 8));
  CHECK(same_object(st, "p", "b", "a/", "", 0));

  /* unicode, spaces, punctuation; a 1024-byte key */
  CHECK(put_str(st, "p", "b", uni, "unicode") == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "b", uni, "unicode", 7));
  CHECK(put_str(st, "p", "b", "dir with space/a&b.txt", "sp") ==
        MP_BUCKET_OK);
  CHECK(same_object(st, "p", "b", "dir with space/a&b.txt", "sp", 2));
  CHECK(put_str(st, "p", "b", "notes/why?.txt", "q") == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "b", "notes/why?.txt", "q", 1));
  memset(key1k, 'k', 1024);
  key1k[1024] = '\0';
  CHECK(put_str(st, "p", "b", key1k, "long key") == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "b", key1k, "long key", 8));

  /* the layout: a file named by SHA-256 of the key */
  CHECK(put_str(st, "p", "b", "abc", "layout") == MP_BUCKET_OK);
  snprintf(path, sizeof path, "%s/p/b/%s", g_root,
           "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(file_exists(path));
  CHECK(put_str(st, "p", "b",
                "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "two blocks") == MP_BUCKET_OK);
  snprintf(path, sizeof path, "%s/p/b/%s", g_root,
           "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(file_exists(path));
  memset(key1k, 'a', 1000);
  key1k[1000] = '\0';
  CHECK(put_str(st, "p", "b", key1k, "1000 a") == MP_BUCKET_OK);
  snprintf(path, sizeof path, "%s/p/b/%s", g_root,
           "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
  CHECK(file_exists(path));
  snprintf(path, sizeof path, "%s/p/b/%s", g_root,
           "1fc8e5e9811d767c2eef3cd3908443459b19ae255af8c917d65e7a97fa3c13d3");
  CHECK(file_exists(path)); /* the unicode key */

  /* missing objects, buckets and projects: not created by reads */
  CHECK(get_all(st, "p", "b", "nope", &got, &glen, &info) ==
        MP_BUCKET_NOT_FOUND);
  CHECK(info.key == NULL);
  CHECK(mp_bucket_head(st, "p", "b", "nope", &info) == MP_BUCKET_NOT_FOUND);
  CHECK(get_all(st, "p", "nob", "x", &got, &glen, &info) ==
        MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_head(st, "nop", "b", "x", &info) == MP_BUCKET_NOT_FOUND);
  snprintf(path, sizeof path, "%s/p/nob", g_root);
  CHECK(!file_exists(path));
  snprintf(path, sizeof path, "%s/nop", g_root);
  CHECK(!file_exists(path));

  /* buckets and projects are separate */
  CHECK(put_str(st, "p", "b2", "over", "other bucket") == MP_BUCKET_OK);
  CHECK(put_str(st, "q", "b", "over", "other project") == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "b", "over", "second!", 7));
  CHECK(same_object(st, "p", "b2", "over", "other bucket", 12));
  CHECK(same_object(st, "q", "b", "over", "other project", 13));

  /* a long content type is cut to what mp_object_info holds */
  {
    char ct[300];
    memset(ct, 'c', sizeof ct - 1);
    ct[sizeof ct - 1] = '\0';
    CHECK(mp_bucket_put(st, "p", "b", "longct", "x", 1, ct, 0, g_err,
                        sizeof g_err) == MP_BUCKET_OK);
    CHECK(mp_bucket_head(st, "p", "b", "longct", &info) == MP_BUCKET_OK);
    CHECK(strlen(info.content_type) == 127);
    mp_object_info_free(&info);
  }
}

/* }====== */

/* {====== delete, copy, move, mkdir ====== */

static void test_delete(mp_bucket_store *st) {
  static const char *keys[] = {"d/x", "d/y/z", "d/", "d2", "dx", "d/y/",
                               "e", "e/1", "eel", "e/f/2"};
  size_t i;
  mp_object_info info;
  mp_listing l;
  for (i = 0; i < N(keys); i++)
    CHECK(put_str(st, "p", "del", keys[i], keys[i]) == MP_BUCKET_OK);

  CHECK(mp_bucket_delete(st, "p", "del", "d2", 0) == MP_BUCKET_OK);
  CHECK(mp_bucket_head(st, "p", "del", "d2", &info) == MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_delete(st, "p", "del", "d2", 0) == MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_delete(st, "p", "del", "missing", 0) ==
        MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_delete(st, "p", "nobucket", "x", 0) ==
        MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_delete(st, "p", "nobucket", "x/", 1) ==
        MP_BUCKET_NOT_FOUND);
  /* a non-recursive delete of a marker removes only the marker */
  CHECK(mp_bucket_delete(st, "p", "del", "d/y/", 0) == MP_BUCKET_OK);
  CHECK(mp_bucket_head(st, "p", "del", "d/y/z", &info) == MP_BUCKET_OK);
  mp_object_info_free(&info);

  /* recursive with a trailing '/': every key under it, marker included */
  CHECK(mp_bucket_delete(st, "p", "del", "d/", 1) == MP_BUCKET_OK);
  CHECK(mp_bucket_head(st, "p", "del", "d/x", &info) == MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_head(st, "p", "del", "d/y/z", &info) ==
        MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_head(st, "p", "del", "d/", &info) == MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_head(st, "p", "del", "dx", &info) == MP_BUCKET_OK);
  mp_object_info_free(&info);
  CHECK(mp_bucket_delete(st, "p", "del", "d/", 1) == MP_BUCKET_NOT_FOUND);

  /* recursive without '/': "e" and "e/..." but not "eel" */
  CHECK(mp_bucket_delete(st, "p", "del", "e", 1) == MP_BUCKET_OK);
  CHECK(mp_bucket_head(st, "p", "del", "e", &info) == MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_head(st, "p", "del", "e/1", &info) == MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_head(st, "p", "del", "e/f/2", &info) ==
        MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_head(st, "p", "del", "eel", &info) == MP_BUCKET_OK);
  mp_object_info_free(&info);

  /* the root, recursively: everything left */
  CHECK(mp_bucket_delete(st, "p", "del", "", 0) == MP_BUCKET_BAD_KEY);
  CHECK(mp_bucket_delete(st, "p", "del", "", 1) == MP_BUCKET_OK);
  CHECK(mp_bucket_list(st, "p", "del", "", NULL, &l) == MP_BUCKET_OK);
  CHECK(l.ncontents == 0 && l.nprefixes == 0);
  mp_listing_free(&l);
  CHECK(count_files("p", "del") == 0);
  CHECK(mp_bucket_delete(st, "p", "del", "", 1) == MP_BUCKET_NOT_FOUND);
}

static void test_copy_move(mp_bucket_store *st) {
  mp_object_info info;
  CHECK(mp_bucket_put(st, "p", "cp", "src", "source\0data", 11, "text/src",
                      0, g_err, sizeof g_err) == MP_BUCKET_OK);
  CHECK(mp_bucket_copy(st, "p", "cp", "src", "dst/copy", 0, g_err,
                       sizeof g_err) == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "cp", "src", "source\0data", 11));
  CHECK(same_object(st, "p", "cp", "dst/copy", "source\0data", 11));
  CHECK(mp_bucket_head(st, "p", "cp", "dst/copy", &info) == MP_BUCKET_OK);
  CHECK(strcmp(info.content_type, "text/src") == 0);
  mp_object_info_free(&info);

  /* the destination is overwritten */
  CHECK(put_str(st, "p", "cp", "existing", "old content here") ==
        MP_BUCKET_OK);
  CHECK(mp_bucket_copy(st, "p", "cp", "src", "existing", 0, g_err,
                       sizeof g_err) == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "cp", "existing", "source\0data", 11));

  /* move: the source is gone */
  CHECK(mp_bucket_copy(st, "p", "cp", "src", "moved", 1, g_err,
                       sizeof g_err) == MP_BUCKET_OK);
  CHECK(mp_bucket_head(st, "p", "cp", "src", &info) == MP_BUCKET_NOT_FOUND);
  CHECK(same_object(st, "p", "cp", "moved", "source\0data", 11));
  /* move over an existing object */
  CHECK(put_str(st, "p", "cp", "m2", "to be moved") == MP_BUCKET_OK);
  CHECK(mp_bucket_copy(st, "p", "cp", "m2", "existing", 1, g_err,
                       sizeof g_err) == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "cp", "existing", "to be moved", 11));
  CHECK(mp_bucket_head(st, "p", "cp", "m2", &info) == MP_BUCKET_NOT_FOUND);
  /* onto itself: nothing lost */
  CHECK(mp_bucket_copy(st, "p", "cp", "moved", "moved", 1, g_err,
                       sizeof g_err) == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "cp", "moved", "source\0data", 11));
  CHECK(mp_bucket_copy(st, "p", "cp", "moved", "moved", 0, g_err,
                       sizeof g_err) == MP_BUCKET_OK);
  CHECK(same_object(st, "p", "cp", "moved", "source\0data", 11));
  /* missing source, bad keys */
  CHECK(mp_bucket_copy(st, "p", "cp", "nothing", "x", 0, g_err,
                       sizeof g_err) == MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_copy(st, "p", "cp", "nothing", "x", 1, g_err,
                       sizeof g_err) == MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_copy(st, "p", "nobucket", "a", "x", 0, g_err,
                       sizeof g_err) == MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_copy(st, "p", "cp", "moved", "../x", 1, g_err,
                       sizeof g_err) == MP_BUCKET_BAD_KEY);
  CHECK(mp_bucket_copy(st, "p", "cp", "moved", "", 0, g_err,
                       sizeof g_err) == MP_BUCKET_BAD_KEY);
  CHECK(same_object(st, "p", "cp", "moved", "source\0data", 11));
  CHECK(count_foreign_files("p", "cp") == 0);
}

static void test_mkdir(mp_bucket_store *st) {
  mp_object_info info;
  CHECK(mp_bucket_mkdir(st, "p", "mk", "dir", g_err, sizeof g_err) ==
        MP_BUCKET_OK);
  CHECK(mp_bucket_head(st, "p", "mk", "dir/", &info) == MP_BUCKET_OK);
  CHECK(info.size == 0);
  mp_object_info_free(&info);
  CHECK(mp_bucket_head(st, "p", "mk", "dir", &info) == MP_BUCKET_NOT_FOUND);
  CHECK(mp_bucket_mkdir(st, "p", "mk", "dir2/", g_err, sizeof g_err) ==
        MP_BUCKET_OK);
  CHECK(mp_bucket_head(st, "p", "mk", "dir2/", &info) == MP_BUCKET_OK);
  mp_object_info_free(&info);
  CHECK(mp_bucket_mkdir(st, "p", "mk", "dir", g_err, sizeof g_err) ==
        MP_BUCKET_OK); /* again */
  CHECK(mp_bucket_mkdir(st, "p", "mk", "a/b/c", g_err, sizeof g_err) ==
        MP_BUCKET_OK);
  CHECK(mp_bucket_head(st, "p", "mk", "a/b/c/", &info) == MP_BUCKET_OK);
  mp_object_info_free(&info);
  CHECK(mp_bucket_mkdir(st, "p", "mk", "", g_err, sizeof g_err) ==
        MP_BUCKET_OK);
  CHECK(mp_bucket_mkdir(st, "p", "mk", "../up", g_err, sizeof g_err) ==
        MP_BUCKET_BAD_KEY);
  CHECK(mp_bucket_mkdir(st, "p", "mk", "a//", g_err, sizeof g_err) ==
        MP_BUCKET_BAD_KEY);
  CHECK(count_files("p", "mk") == 3);
}

/* }====== */

/* {====== list ====== */

static void test_list(mp_bucket_store *st) {
  static const char *keys[] = {
      "a.txt", "b/1.txt", "b/2.txt", "b/c/3.txt", "m/", "m/x", "z/",
      "dir with space/a&b.txt", "\xc3\xbcn\xc3\xaf/f", "b", "foo/",
      "foo/bar.md"};
  mp_listing l;
  size_t i;
  for (i = 0; i < N(keys); i++)
    CHECK(mp_bucket_put(st, "p", "lst", keys[i], keys[i], strlen(keys[i]),
                        i == 0 ? "text/a" : NULL, 0, g_err,
                        sizeof g_err) == MP_BUCKET_OK);

  CHECK(mp_bucket_list(st, "p", "lst", "", "/", &l) == MP_BUCKET_OK);
  {
    static const char *c[] = {"a.txt", "b"};
    static const char *p[] = {"b/", "dir with space/", "foo/", "m/", "z/",
                              "\xc3\xbcn\xc3\xaf/"};
    if (!CHECK(listing_is(&l, c, N(c), p, N(p))))
      dump_listing("root", &l);
    if (l.ncontents > 0) {
      CHECK(l.contents[0].size == 5);
      CHECK(strcmp(l.contents[0].content_type, "text/a") == 0);
      CHECK(l.contents[0].mtime_ms > 0);
    }
  }
  mp_listing_free(&l);
  CHECK(l.contents == NULL && l.ncontents == 0 && l.prefixes == NULL);

  /* NULL prefix is the root */
  CHECK(mp_bucket_list(st, "p", "lst", NULL, "/", &l) == MP_BUCKET_OK);
  CHECK(l.ncontents == 2 && l.nprefixes == 6);
  mp_listing_free(&l);

  CHECK(mp_bucket_list(st, "p", "lst", "b/", "/", &l) == MP_BUCKET_OK);
  {
    static const char *c[] = {"b/1.txt", "b/2.txt"};
    static const char *p[] = {"b/c/"};
    if (!CHECK(listing_is(&l, c, N(c), p, N(p))))
      dump_listing("b/", &l);
  }
  mp_listing_free(&l);

  /* a marker is a content of its own listing, a prefix of its parent's */
  CHECK(mp_bucket_list(st, "p", "lst", "m/", "/", &l) == MP_BUCKET_OK);
  {
    static const char *c[] = {"m/", "m/x"};
    if (!CHECK(listing_is(&l, c, N(c), NULL, 0)))
      dump_listing("m/", &l);
  }
  mp_listing_free(&l);
  CHECK(mp_bucket_list(st, "p", "lst", "foo/", "/", &l) == MP_BUCKET_OK);
  {
    static const char *c[] = {"foo/", "foo/bar.md"};
    if (!CHECK(listing_is(&l, c, N(c), NULL, 0)))
      dump_listing("foo/", &l);
    if (l.ncontents == 2)
      CHECK(l.contents[1].size == 10);
  }
  mp_listing_free(&l);

  /* without a delimiter: recursive */
  CHECK(mp_bucket_list(st, "p", "lst", "", NULL, &l) == MP_BUCKET_OK);
  {
    static const char *c[] = {"a.txt", "b", "b/1.txt", "b/2.txt",
                              "b/c/3.txt", "dir with space/a&b.txt", "foo/",
                              "foo/bar.md", "m/", "m/x", "z/",
                              "\xc3\xbcn\xc3\xaf/f"};
    if (!CHECK(listing_is(&l, c, N(c), NULL, 0)))
      dump_listing("recursive", &l);
  }
  mp_listing_free(&l);
  CHECK(mp_bucket_list(st, "p", "lst", "b/", "", &l) == MP_BUCKET_OK);
  {
    static const char *c[] = {"b/1.txt", "b/2.txt", "b/c/3.txt"};
    if (!CHECK(listing_is(&l, c, N(c), NULL, 0)))
      dump_listing("b/ recursive", &l);
  }
  mp_listing_free(&l);
  /* a prefix that is not a directory: "b" matches "b" and "b/..." */
  CHECK(mp_bucket_list(st, "p", "lst", "b", "/", &l) == MP_BUCKET_OK);
  {
    static const char *c[] = {"b"};
    static const char *p[] = {"b/"};
    if (!CHECK(listing_is(&l, c, N(c), p, N(p))))
      dump_listing("b", &l);
  }
  mp_listing_free(&l);
  CHECK(mp_bucket_list(st, "p", "lst", "dir with space/", "/", &l) ==
        MP_BUCKET_OK);
  {
    static const char *c[] = {"dir with space/a&b.txt"};
    CHECK(listing_is(&l, c, N(c), NULL, 0));
  }
  mp_listing_free(&l);

  /* nothing there */
  CHECK(mp_bucket_list(st, "p", "lst", "nothing/", "/", &l) == MP_BUCKET_OK);
  CHECK(l.ncontents == 0 && l.nprefixes == 0);
  mp_listing_free(&l);
  CHECK(mp_bucket_list(st, "p", "nobucket", "", "/", &l) == MP_BUCKET_OK);
  CHECK(l.ncontents == 0 && l.nprefixes == 0);
  mp_listing_free(&l);
  CHECK(mp_bucket_list(st, "..", "lst", "", "/", &l) == MP_BUCKET_BAD_KEY);
  mp_listing_free(&l);
}

/* }====== */

/* {====== bad keys and names ====== */

static void test_bad_keys(mp_bucket_store *st) {
  static const char *bad[] = {"../x", "/abs", "a//b", "a/./b", "..",
                              "a/../../../escape", "../../../../tmp/evil",
                              "", "/"};
  static const char *badnames[] = {"..", ".", "", "a/b", "../p"};
  char *before, *after, *before_root, *after_root;
  char key2k[2001];
  mp_object_info info;
  mp_listing l;
  void *got;
  size_t glen, i;

  CHECK(put_str(st, "p", "bk", "keep", "kept") == MP_BUCKET_OK);
  before = snapshot(g_tmp);
  before_root = snapshot(g_root);
  CHECK(before != NULL && before_root != NULL);

  memset(key2k, 'x', 2000);
  key2k[2000] = '\0';
  for (i = 0; i < N(bad); i++) {
    const char *k = bad[i];
    CHECK(mp_bucket_put(st, "p", "bk", k, "evil", 4, NULL, 0, g_err,
                        sizeof g_err) == MP_BUCKET_BAD_KEY);
    CHECK(get_all(st, "p", "bk", k, &got, &glen, &info) ==
          MP_BUCKET_BAD_KEY);
    CHECK(mp_bucket_head(st, "p", "bk", k, &info) == MP_BUCKET_BAD_KEY);
    CHECK(mp_bucket_copy(st, "p", "bk", "keep", k, 0, g_err,
                         sizeof g_err) == MP_BUCKET_BAD_KEY);
    CHECK(mp_bucket_copy(st, "p", "bk", k, "new", 1, g_err,
                         sizeof g_err) == MP_BUCKET_BAD_KEY);
    if (k[0] != '\0') {
      CHECK(mp_bucket_delete(st, "p", "bk", k, 0) == MP_BUCKET_BAD_KEY);
      CHECK(mp_bucket_delete(st, "p", "bk", k, 1) == MP_BUCKET_BAD_KEY);
      CHECK(mp_bucket_mkdir(st, "p", "bk", k, g_err, sizeof g_err) ==
            MP_BUCKET_BAD_KEY);
    }
  }
  CHECK(mp_bucket_put(st, "p", "bk", key2k, "evil", 4, NULL, 0, g_err,
                      sizeof g_err) == MP_BUCKET_BAD_KEY);
  CHECK(mp_bucket_mkdir(st, "p", "bk", key2k, g_err, sizeof g_err) ==
        MP_BUCKET_BAD_KEY);
  key2k[1024] = '\0';
  CHECK(mp_bucket_mkdir(st, "p", "bk", key2k, g_err, sizeof g_err) ==
        MP_BUCKET_BAD_KEY); /* 1025 with the '/' */
  CHECK(mp_bucket_head(st, "p", "bk", key2k, &info) == MP_BUCKET_NOT_FOUND);
  key2k[1024] = 'x';
  CHECK(get_all(st, "p", "bk", key2k, &got, &glen, &info) ==
        MP_BUCKET_BAD_KEY);

  for (i = 0; i < N(badnames); i++) {
    const char *n = badnames[i];
    CHECK(mp_bucket_put(st, n, "bk", "k", "evil", 4, NULL, 0, g_err,
                        sizeof g_err) == MP_BUCKET_BAD_KEY);
    CHECK(mp_bucket_put(st, "p", n, "k", "evil", 4, NULL, 0, g_err,
                        sizeof g_err) == MP_BUCKET_BAD_KEY);
    CHECK(get_all(st, "p", n, "k", &got, &glen, &info) ==
          MP_BUCKET_BAD_KEY);
    CHECK(mp_bucket_head(st, n, "bk", "k", &info) == MP_BUCKET_BAD_KEY);
    CHECK(mp_bucket_delete(st, "p", n, "", 1) == MP_BUCKET_BAD_KEY);
    CHECK(mp_bucket_copy(st, n, "bk", "keep", "k", 0, g_err,
                         sizeof g_err) == MP_BUCKET_BAD_KEY);
    CHECK(mp_bucket_mkdir(st, "p", n, "d", g_err, sizeof g_err) ==
          MP_BUCKET_BAD_KEY);
    CHECK(mp_bucket_list(st, n, "bk", "", "/", &l) == MP_BUCKET_BAD_KEY);
  }

  after = snapshot(g_tmp);
  after_root = snapshot(g_root);
  CHECK(before && after && strcmp(before, after) == 0);
  CHECK(before_root && after_root && strcmp(before_root, after_root) == 0);
  CHECK(same_object(st, "p", "bk", "keep", "kept", 4));
  free(before);
  free(after);
  free(before_root);
  free(after_root);
}

/* }====== */

/* {====== durability ====== */

static void test_reopen(mp_bucket_store **stp) {
  char path[8192];
  mp_listing l;
  mp_object_info info;
  int fd, found = 0;
  size_t i;

  mp_bucket_close(*stp);
  *stp = mp_bucket_open(g_root, g_err, sizeof g_err);
  CHECK(*stp != NULL);
  if (*stp == NULL)
    return;
  CHECK(same_object(*stp, "p", "b", "over", "second!", 7));
  CHECK(same_object(*stp, "p", "b", "a/b", "file a/b", 8));
  CHECK(same_object(*stp, "p", "cp", "moved", "source\0data", 11));
  CHECK(same_object(*stp, "q", "b", "over", "other project", 13));
  CHECK(mp_bucket_head(*stp, "p", "b", "big/ten.bin", &info) ==
        MP_BUCKET_OK);
  CHECK(info.size == 10u * 1024 * 1024);
  mp_object_info_free(&info);
  CHECK(mp_bucket_head(*stp, "p", "mk", "dir/", &info) == MP_BUCKET_OK);
  mp_object_info_free(&info);
  CHECK(count_foreign_files("p", "b") == 0);
  CHECK(count_foreign_files("p", "cp") == 0);
  CHECK(count_foreign_files("p", "lst") == 0);

  /* a temporary file as a crash leaves it: removed at open, never listed */
  snprintf(path, sizeof path, "%s/p/b/.mpb-tmp-99999-1", g_root);
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  CHECK(fd >= 0);
  if (fd >= 0) {
    CHECK(write(fd, "MPBOBJ1\npartial", 15) == 15);
    close(fd);
  }
  snprintf(path, sizeof path, "%s/q/b/.mpb-tmp-1-2", g_root);
  fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
  CHECK(fd >= 0);
  if (fd >= 0)
    close(fd);
  CHECK(count_foreign_files("p", "b") == 1);
  CHECK(mp_bucket_list(*stp, "p", "b", "", NULL, &l) == MP_BUCKET_OK);
  for (i = 0; i < l.ncontents; i++)
    if (strstr(l.contents[i].key, "tmp") || strstr(l.contents[i].key,
                                                   "partial"))
      found = 1;
  CHECK(!found);
  mp_listing_free(&l);

  mp_bucket_close(*stp);
  *stp = mp_bucket_open(g_root, g_err, sizeof g_err);
  CHECK(*stp != NULL);
  if (*stp == NULL)
    return;
  CHECK(count_foreign_files("p", "b") == 0);
  CHECK(count_foreign_files("q", "b") == 0);
  snprintf(path, sizeof path, "%s/p/b/.mpb-tmp-99999-1", g_root);
  CHECK(!file_exists(path));
  CHECK(same_object(*stp, "p", "b", "over", "second!", 7));
}

static void test_many(mp_bucket_store **stp) {
  enum { COUNT = 1000 };
  char key[64], val[256];
  mp_listing l;
  double t;
  int i, ok = 1;

  t = now_s();
  for (i = 0; i < COUNT; i++) {
    snprintf(key, sizeof key, "many/%04d/obj-%d.txt", i % 37, i);
    snprintf(val, sizeof val, "value %d %.*s", i, i % 200,
             "0123456789012345678901234567890123456789012345678901234567890"
             "1234567890123456789012345678901234567890123456789012345678901"
             "2345678901234567890123456789012345678901234567890123456789012"
             "345678901234567890");
    if (mp_bucket_put(*stp, "p", "many", key, val, strlen(val), NULL, 0,
                      g_err, sizeof g_err) != MP_BUCKET_OK)
      ok = 0;
  }
  t = now_s() - t;
  CHECK(ok);
  printf("# 1000 puts: %.1f ms (%.2f ms each)\n", t * 1000, t);

  mp_bucket_close(*stp);
  *stp = mp_bucket_open(g_root, g_err, sizeof g_err);
  CHECK(*stp != NULL);
  if (*stp == NULL)
    return;
  ok = 1;
  for (i = 0; i < COUNT; i++) {
    snprintf(key, sizeof key, "many/%04d/obj-%d.txt", i % 37, i);
    snprintf(val, sizeof val, "value %d %.*s", i, i % 200,
             "0123456789012345678901234567890123456789012345678901234567890"
             "1234567890123456789012345678901234567890123456789012345678901"
             "2345678901234567890123456789012345678901234567890123456789012"
             "345678901234567890");
    if (!same_object(*stp, "p", "many", key, val, strlen(val)))
      ok = 0;
  }
  CHECK(ok);
  CHECK(count_files("p", "many") == COUNT);
  t = now_s();
  CHECK(mp_bucket_list(*stp, "p", "many", "", NULL, &l) == MP_BUCKET_OK);
  printf("# list of 1000: %.1f ms\n", (now_s() - t) * 1000);
  CHECK(l.ncontents == COUNT);
  mp_listing_free(&l);
  CHECK(mp_bucket_list(*stp, "p", "many", "many/", "/", &l) == MP_BUCKET_OK);
  CHECK(l.ncontents == 0 && l.nprefixes == 37);
  if (l.nprefixes == 37) {
    CHECK(strcmp(l.prefixes[0], "many/0000/") == 0);
    CHECK(strcmp(l.prefixes[36], "many/0036/") == 0);
  }
  mp_listing_free(&l);
  CHECK(mp_bucket_delete(*stp, "p", "many", "many/", 1) == MP_BUCKET_OK);
  CHECK(count_files("p", "many") == 0);
}

/* }====== */

/* An object written in pieces (a streamed PUT): invisible until the
** commit; an abort leaves nothing; If-None-Match at the commit. */
static void test_upload(mp_bucket_store *st) {
  static unsigned char data[300000];
  mp_bucket_upload *u = NULL;
  mp_object_info info;
  size_t off;
  int fds = count_fds();
  fill_random(data, sizeof data);
  CHECK(mp_bucket_upload_begin(st, "up", "b", "big.bin", "application/x-test",
                               &u, g_err, sizeof g_err) == MP_BUCKET_OK);
  if (!CHECK(u != NULL)) return;
  for (off = 0; off < sizeof data; off += 7000) {
    size_t n = sizeof data - off < 7000 ? sizeof data - off : 7000;
    CHECK(mp_bucket_upload_write(u, data + off, n, g_err, sizeof g_err)
          == MP_BUCKET_OK);
  }
  /* nothing visible yet: one temporary file */
  CHECK(mp_bucket_head(st, "up", "b", "big.bin", &info) == MP_BUCKET_NOT_FOUND);
  CHECK(count_foreign_files("up", "b") == 1);
  CHECK(mp_bucket_upload_commit(u, 0, g_err, sizeof g_err) == MP_BUCKET_OK);
  CHECK(same_object(st, "up", "b", "big.bin", data, sizeof data));
  memset(&info, 0, sizeof info);
  CHECK(mp_bucket_head(st, "up", "b", "big.bin", &info) == MP_BUCKET_OK);
  CHECK(info.size == sizeof data);
  CHECK(strcmp(info.content_type, "application/x-test") == 0);
  mp_object_info_free(&info);
  CHECK(count_foreign_files("up", "b") == 0);
  /* an empty one */
  CHECK(mp_bucket_upload_begin(st, "up", "b", "empty", "", &u, g_err,
                               sizeof g_err) == MP_BUCKET_OK);
  CHECK(mp_bucket_upload_commit(u, 0, g_err, sizeof g_err) == MP_BUCKET_OK);
  CHECK(same_object(st, "up", "b", "empty", "", 0));
  /* aborted: the old object stays, no temporary file */
  CHECK(mp_bucket_upload_begin(st, "up", "b", "big.bin", "", &u, g_err,
                               sizeof g_err) == MP_BUCKET_OK);
  CHECK(mp_bucket_upload_write(u, "half", 4, g_err, sizeof g_err)
        == MP_BUCKET_OK);
  mp_bucket_upload_abort(u);
  mp_bucket_upload_abort(NULL);
  CHECK(same_object(st, "up", "b", "big.bin", data, sizeof data));
  CHECK(count_foreign_files("up", "b") == 0);
  /* If-None-Match: the key exists at the commit */
  CHECK(mp_bucket_upload_begin(st, "up", "b", "big.bin", "", &u, g_err,
                               sizeof g_err) == MP_BUCKET_OK);
  CHECK(mp_bucket_upload_write(u, "new", 3, g_err, sizeof g_err)
        == MP_BUCKET_OK);
  CHECK(mp_bucket_upload_commit(u, 1, g_err, sizeof g_err) == MP_BUCKET_EXISTS);
  CHECK(same_object(st, "up", "b", "big.bin", data, sizeof data));
  CHECK(count_foreign_files("up", "b") == 0);
  /* bad keys are refused at the start */
  u = NULL;
  CHECK(mp_bucket_upload_begin(st, "up", "b", "../x", "", &u, g_err,
                               sizeof g_err) == MP_BUCKET_BAD_KEY);
  CHECK(u == NULL);
  CHECK(count_fds() == fds);
}

int main(void) {
  const char *tmpdir = getenv("TMPDIR");
  mp_bucket_store *st;
  int fds_before, fds_after;

  setvbuf(stdout, NULL, _IONBF, 0);
  snprintf(g_tmp, sizeof g_tmp, "%s/test_bucket.XXXXXX",
           tmpdir && *tmpdir ? tmpdir : "/tmp");
  if (mkdtemp(g_tmp) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  snprintf(g_root, sizeof g_root, "%s/store/root", g_tmp);
  fds_before = count_fds();

  test_checks();

  CHECK(mp_bucket_open("", g_err, sizeof g_err) == NULL);
  st = mp_bucket_open(g_root, g_err, sizeof g_err); /* makes the parents */
  if (!CHECK(st != NULL)) {
    fprintf(stderr, "open: %s\n", g_err);
  } else {
    CHECK(count_fds() == fds_before + 1);
    test_put_get(st);
    test_delete(st);
    test_copy_move(st);
    test_mkdir(st);
    test_list(st);
    test_bad_keys(st);
    test_upload(st);
    test_reopen(&st);
    if (st)
      test_many(&st);
    if (st)
      CHECK(count_fds() == fds_before + 1);
    mp_bucket_close(st);
  }
  mp_bucket_close(NULL);

  fds_after = count_fds();
  CHECK(fds_before >= 0 && fds_after == fds_before);
  rm_tree(g_tmp);
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
