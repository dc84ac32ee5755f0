/*
** The bucket store (bucket.h).
**
** Disk layout
** -----------
** <root>/<project>/<bucket>/ is a flat directory. Each object is one
** regular file whose name is the 64 lowercase hex digits of SHA-256(key),
** so keys of any length and content ("a" next to "a/b", 1024 bytes of
** UTF-8, spaces) map to fixed, safe file names. The file is
**
**   offset 0   8 bytes  magic "MPBOBJ1\n"
**          8   u32 LE   key length (1..1024)
**         12   u32 LE   content-type length (0..127)
**         16   u64 LE   content length
**         24   i64 LE   modification time, ms since the epoch (wall clock)
**         32   key bytes, then content-type bytes, then the content
**
** and a read checks the magic, that the stored key equals the requested
** one (a hash collision reads as "not found") and that the file size
** matches the header. Listings scan the bucket directory and read each
** header with one pread (fine up to tens of thousands of objects); names
** that are not 64 hex digits are ignored.
**
** Writes: the object is written to a temporary file ".mpb-tmp-<pid>-<n>"
** in the bucket directory, fsync'd, renamed over the final name
** (renameat2 RENAME_NOREPLACE for if-none-match), and the directory is
** fsync'd; a new project or bucket directory is fsync'd into its parent.
** A crash leaves the old or the new object, plus possibly a temporary
** file, which mp_bucket_open() removes. A move is a copy (atomic) then
** an unlink of the source (a crash in between leaves both).
**
** The store keeps one descriptor open (the root directory) and is meant
** for one thread. The root should be dedicated to the store: the
** temporary-file sweep at open looks at every <root>/<dir>/<dir>/.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "bucket.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define KEY_MAX 1024
#define CT_MAX 127 /* mp_object_info.content_type holds 128 with the NUL */
#define HDR_FIXED 32
#define HDR_MAX (HDR_FIXED + KEY_MAX + CT_MAX)
#define HASH_HEX 64
#define TMP_PREFIX ".mpb-tmp-"
#define MAGIC "MPBOBJ1\n"

struct mp_bucket_store {
  int rootfd;
};

static unsigned long tmp_counter;

/* {====== SHA-256 (FIPS 180-4) ====== */

typedef struct sha256_ctx {
  uint32_t h[8];
  uint64_t len;
  unsigned char buf[64];
  size_t nbuf;
} sha256_ctx;

static const uint32_t sha256_k[64] = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
  0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
  0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
  0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
  0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
  0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror32(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

static void sha256_block(sha256_ctx *c, const unsigned char *p) {
  uint32_t w[64], a, b, cc, d, e, f, g, h;
  int i;
  for (i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
           (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
  for (i = 16; i < 64; i++) {
    uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  a = c->h[0]; b = c->h[1]; cc = c->h[2]; d = c->h[3];
  e = c->h[4]; f = c->h[5]; g = c->h[6]; h = c->h[7];
  for (i = 0; i < 64; i++) {
    uint32_t s1 = ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25);
    uint32_t ch = (e & f) ^ (~e & g);
    uint32_t t1 = h + s1 + ch + sha256_k[i] + w[i];
    uint32_t s0 = ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22);
    uint32_t maj = (a & b) ^ (a & cc) ^ (b & cc);
    uint32_t t2 = s0 + maj;
    h = g; g = f; f = e; e = d + t1;
    d = cc; cc = b; b = a; a = t1 + t2;
  }
  c->h[0] += a; c->h[1] += b; c->h[2] += cc; c->h[3] += d;
  c->h[4] += e; c->h[5] += f; c->h[6] += g; c->h[7] += h;
}

static void sha256_init(sha256_ctx *c) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                 0xa54ff53a, 0x510e527f, 0x9b05688c,
                                 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, iv, sizeof iv);
  c->len = 0;
  c->nbuf = 0;
}

static void sha256_update(sha256_ctx *c, const void *data, size_t n) {
  const unsigned char *p = data;
  c->len += n;
  while (n > 0) {
    size_t take = 64 - c->nbuf;
    if (take > n)
      take = n;
    memcpy(c->buf + c->nbuf, p, take);
    c->nbuf += take;
    p += take;
    n -= take;
    if (c->nbuf == 64) {
      sha256_block(c, c->buf);
      c->nbuf = 0;
    }
  }
}

static void sha256_final(sha256_ctx *c, unsigned char out[32]) {
  uint64_t bits = c->len * 8;
  unsigned char pad = 0x80, zero = 0, lenbuf[8];
  int i;
  sha256_update(c, &pad, 1);
  while (c->nbuf != 56)
    sha256_update(c, &zero, 1);
  for (i = 0; i < 8; i++)
    lenbuf[i] = (unsigned char)(bits >> (56 - 8 * i));
  sha256_update(c, lenbuf, 8);
  for (i = 0; i < 8; i++) {
    out[4 * i] = (unsigned char)(c->h[i] >> 24);
    out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
    out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
    out[4 * i + 3] = (unsigned char)c->h[i];
  }
}

/* the object file name of key: 64 hex digits and a NUL */
static void key_filename(const char *key, char out[HASH_HEX + 1]) {
  static const char hex[] = "0123456789abcdef";
  unsigned char d[32];
  sha256_ctx c;
  int i;
  sha256_init(&c);
  sha256_update(&c, key, strlen(key));
  sha256_final(&c, d);
  for (i = 0; i < 32; i++) {
    out[2 * i] = hex[d[i] >> 4];
    out[2 * i + 1] = hex[d[i] & 15];
  }
  out[HASH_HEX] = '\0';
}

static int is_object_name(const char *name) {
  int i;
  for (i = 0; i < HASH_HEX; i++)
    if (!((name[i] >= '0' && name[i] <= '9') ||
          (name[i] >= 'a' && name[i] <= 'f')))
      return 0;
  return name[HASH_HEX] == '\0';
}

/* }====== */

/* {====== small helpers ====== */

static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  if (err == NULL || errlen == 0)
    return;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static void put_u32(unsigned char *p, uint32_t v) {
  int i;
  for (i = 0; i < 4; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v) {
  int i;
  for (i = 0; i < 8; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p) {
  uint32_t v = 0;
  int i;
  for (i = 3; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  int i;
  for (i = 7; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

static void close_keep_errno(int fd) {
  int e = errno;
  if (fd >= 0)
    close(fd);
  errno = e;
}

static int name_ok(const char *name) {
  return mp_bucket_name_check(name) == NULL;
}

/* a key that names an object: valid and not the root */
static int object_key_ok(const char *key) {
  size_t n;
  if (key == NULL)
    return 0;
  n = strlen(key);
  return n > 0 && mp_bucket_key_check(key, n) == NULL;
}

/* }====== */

/* {====== directories ====== */

/* open <root>/<project>/<bucket>; with create, make the missing levels
** (each new directory is fsync'd into its parent). -1 with errno. */
static int bucket_dir(mp_bucket_store *st, const char *project,
                      const char *bucket, int create) {
  const int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW;
  int pfd, bfd;
  if (create) {
    if (mkdirat(st->rootfd, project, 0755) == 0) {
      if (mastra__fsync_fd(st->rootfd) < 0)
        return -1;
    } else if (errno != EEXIST) {
      return -1;
    }
  }
  pfd = openat(st->rootfd, project, flags);
  if (pfd < 0)
    return -1;
  if (create) {
    if (mkdirat(pfd, bucket, 0755) == 0) {
      if (mastra__fsync_fd(pfd) < 0) {
        close_keep_errno(pfd);
        return -1;
      }
    } else if (errno != EEXIST) {
      close_keep_errno(pfd);
      return -1;
    }
  }
  bfd = openat(pfd, bucket, flags);
  close_keep_errno(pfd);
  return bfd;
}

/* a fresh DIR on directory dfd, independent of dfd's offset */
static DIR *dir_scan(int dfd, const char *name) {
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  DIR *d;
  if (fd < 0)
    return NULL;
  d = fdopendir(fd);
  if (d == NULL)
    close_keep_errno(fd);
  return d;
}

static int is_dot(const char *n) {
  return strcmp(n, ".") == 0 || strcmp(n, "..") == 0;
}

/* remove the temporary files a crash left in <root>/<p>/<b>/ */
static void sweep_temporaries(int rootfd) {
  DIR *rd = dir_scan(rootfd, ".");
  struct dirent *pe;
  if (rd == NULL)
    return;
  while ((pe = readdir(rd)) != NULL) {
    DIR *pd;
    struct dirent *be;
    if (is_dot(pe->d_name))
      continue;
    pd = dir_scan(dirfd(rd), pe->d_name);
    if (pd == NULL)
      continue;
    while ((be = readdir(pd)) != NULL) {
      DIR *bd;
      struct dirent *oe;
      int removed = 0;
      if (is_dot(be->d_name))
        continue;
      bd = dir_scan(dirfd(pd), be->d_name);
      if (bd == NULL)
        continue;
      while ((oe = readdir(bd)) != NULL) {
        if (strncmp(oe->d_name, TMP_PREFIX, sizeof TMP_PREFIX - 1) == 0 &&
            unlinkat(dirfd(bd), oe->d_name, 0) == 0)
          removed = 1;
      }
      if (removed)
        mastra__fsync_fd(dirfd(bd));
      closedir(bd);
    }
    closedir(pd);
  }
  closedir(rd);
}

/* }====== */

/* {====== object files ====== */

typedef struct obj_hdr {
  uint32_t keylen, ctlen;
  uint64_t size;
  int64_t mtime_ms;
  size_t hdrlen;
  char key[KEY_MAX + 1];
  char ct[CT_MAX + 1];
} obj_hdr;

/* parse the header of an open object file: 0, or -1 (errno EIO when the
** file is not an object) */
static int read_hdr(int fd, obj_hdr *h) {
  unsigned char buf[HDR_MAX];
  ssize_t n;
  do {
    n = pread(fd, buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0)
    return -1;
  if (n < HDR_FIXED || memcmp(buf, MAGIC, 8) != 0)
    goto bad;
  h->keylen = get_u32(buf + 8);
  h->ctlen = get_u32(buf + 12);
  h->size = get_u64(buf + 16);
  h->mtime_ms = (int64_t)get_u64(buf + 24);
  if (h->keylen == 0 || h->keylen > KEY_MAX || h->ctlen > CT_MAX)
    goto bad;
  h->hdrlen = HDR_FIXED + h->keylen + h->ctlen;
  if ((size_t)n < h->hdrlen)
    goto bad;
  memcpy(h->key, buf + HDR_FIXED, h->keylen);
  h->key[h->keylen] = '\0';
  memcpy(h->ct, buf + HDR_FIXED + h->keylen, h->ctlen);
  h->ct[h->ctlen] = '\0';
  if (strlen(h->key) != h->keylen || strlen(h->ct) != h->ctlen)
    goto bad;
  return 0;
bad:
  errno = EIO;
  return -1;
}

/* open the object `key` in bucket directory bfd and read its header:
** MP_BUCKET_OK (*fdout open), NOT_FOUND or IO */
static int obj_open(int bfd, const char *key, obj_hdr *h, int *fdout) {
  char fname[HASH_HEX + 1];
  struct stat sb;
  int fd;
  key_filename(key, fname);
  fd = openat(bfd, fname, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return errno == ENOENT ? MP_BUCKET_NOT_FOUND : MP_BUCKET_IO;
  if (read_hdr(fd, h) < 0 || fstat(fd, &sb) < 0) {
    close_keep_errno(fd);
    return MP_BUCKET_IO;
  }
  if (strcmp(h->key, key) != 0) { /* a SHA-256 collision: not ours */
    close(fd);
    return MP_BUCKET_NOT_FOUND;
  }
  if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != h->hdrlen + h->size) {
    close(fd);
    errno = EIO;
    return MP_BUCKET_IO;
  }
  *fdout = fd;
  return MP_BUCKET_OK;
}

static void fill_info_fields(mp_object_info *info, const obj_hdr *h) {
  info->size = h->size;
  info->mtime_ms = h->mtime_ms;
  memcpy(info->content_type, h->ct, h->ctlen + 1);
}

/* create a temporary file in bfd: its fd, name in tmpname */
static int tmp_create(int bfd, char tmpname[64]) {
  for (;;) {
    int fd;
    snprintf(tmpname, 64, TMP_PREFIX "%ld-%lu", (long)getpid(),
             ++tmp_counter);
    fd = openat(bfd, tmpname,
                O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0 || errno != EEXIST)
      return fd;
  }
}

/* rename tmp over fname (or, with noreplace, fail with EEXIST if fname
** exists), then fsync the directory. -1 with errno. */
static int tmp_commit(int bfd, const char *tmpname, const char *fname,
                      int noreplace) {
  if (noreplace) {
    if (renameat2(bfd, tmpname, bfd, fname, RENAME_NOREPLACE) < 0) {
      if (errno != EINVAL && errno != ENOSYS)
        return -1;
      /* a filesystem without RENAME_NOREPLACE: link is exclusive too */
      if (linkat(bfd, tmpname, bfd, fname, 0) < 0)
        return -1;
      unlinkat(bfd, tmpname, 0);
    }
  } else if (renameat(bfd, tmpname, bfd, fname) < 0) {
    return -1;
  }
  return mastra__fsync_fd(bfd);
}

/* the fixed header + key + content type of a new object */
static size_t make_hdr(unsigned char *buf, const char *key,
                       const char *ct, uint64_t size, int64_t mtime) {
  size_t kl = strlen(key), cl = strlen(ct);
  if (cl > CT_MAX)
    cl = CT_MAX; /* mp_object_info cannot hold more */
  memcpy(buf, MAGIC, 8);
  put_u32(buf + 8, (uint32_t)kl);
  put_u32(buf + 12, (uint32_t)cl);
  put_u64(buf + 16, size);
  put_u64(buf + 24, (uint64_t)mtime);
  memcpy(buf + HDR_FIXED, key, kl);
  memcpy(buf + HDR_FIXED + kl, ct, cl);
  return HDR_FIXED + kl + cl;
}

/* the data of a new object: from memory (src_fd < 0) or copied from the
** content of an open object file */
typedef struct obj_source {
  const void *data;
  size_t len;
  int src_fd;
  off_t src_off;
} obj_source;

static int copy_range(int out, int in, off_t off, uint64_t len) {
  char buf[65536];
  while (len > 0) {
    size_t chunk = len > sizeof buf ? sizeof buf : (size_t)len;
    if (mastra__pread_all(in, buf, chunk, off) < 0 || mastra__write_all(out, buf, chunk) < 0)
      return -1;
    off += (off_t)chunk;
    len -= chunk;
  }
  return 0;
}

/* write object `key` atomically and durably into bfd */
static int obj_write(int bfd, const char *key, const char *ct,
                     const obj_source *src, int noreplace, char *err,
                     size_t errlen) {
  unsigned char hdr[HDR_MAX];
  char tmpname[64], fname[HASH_HEX + 1];
  size_t hl;
  int fd, rc;
  hl = make_hdr(hdr, key, ct, src->len, mastra__wall_ms());
  key_filename(key, fname);
  fd = tmp_create(bfd, tmpname);
  if (fd < 0) {
    set_err(err, errlen, "create temporary file: %s", strerror(errno));
    return MP_BUCKET_IO;
  }
  if (mastra__write_all(fd, hdr, hl) < 0 ||
      (src->src_fd < 0 ? mastra__write_all(fd, src->data, src->len)
                       : copy_range(fd, src->src_fd, src->src_off,
                                    src->len)) < 0) {
    set_err(err, errlen, "write object: %s", strerror(errno));
    goto fail;
  }
  while ((rc = fsync(fd)) < 0 && errno == EINTR)
    ;
  if (rc < 0) {
    set_err(err, errlen, "fsync object: %s", strerror(errno));
    goto fail;
  }
  if (close(fd) < 0) {
    fd = -1;
    set_err(err, errlen, "close object: %s", strerror(errno));
    goto fail;
  }
  fd = -1;
  if (tmp_commit(bfd, tmpname, fname, noreplace) < 0) {
    if (noreplace && errno == EEXIST) {
      unlinkat(bfd, tmpname, 0);
      set_err(err, errlen, "the object exists");
      return MP_BUCKET_EXISTS;
    }
    set_err(err, errlen, "commit object: %s", strerror(errno));
    goto fail;
  }
  return MP_BUCKET_OK;
fail:
  close_keep_errno(fd);
  unlinkat(bfd, tmpname, 0);
  return MP_BUCKET_IO;
}

/* does object key exist (an unreadable one counts as existing)? */
static int obj_exists(int bfd, const char *key) {
  obj_hdr h;
  int fd, rc;
  rc = obj_open(bfd, key, &h, &fd);
  if (rc == MP_BUCKET_OK)
    close(fd);
  return rc != MP_BUCKET_NOT_FOUND;
}

/* }====== */

/* {====== the API ====== */

const char *mp_bucket_key_check(const char *key, size_t len) {
  size_t i, seg = 0;
  if (key == NULL)
    return "no key";
  if (len > KEY_MAX)
    return "key longer than 1024 bytes";
  if (memchr(key, '\0', len) != NULL)
    return "NUL byte in key";
  if (len == 0)
    return NULL; /* the root */
  if (key[0] == '/')
    return "key starts with '/'";
  for (i = 0; i <= len; i++) {
    if (i == len || key[i] == '/') {
      size_t sl = i - seg;
      if (sl == 0 && i < len)
        return "empty segment in key";
      if (sl == 1 && key[seg] == '.')
        return "'.' segment in key";
      if (sl == 2 && key[seg] == '.' && key[seg + 1] == '.')
        return "'..' segment in key";
      seg = i + 1;
    }
  }
  return NULL;
}

const char *mp_bucket_name_check(const char *name) {
  size_t n;
  if (name == NULL)
    return "no name";
  n = strlen(name);
  if (n == 0)
    return "empty name";
  if (n > 255)
    return "name longer than 255 bytes";
  if (strchr(name, '/') != NULL)
    return "'/' in name";
  if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
    return "name is '.' or '..'";
  return NULL;
}

/* mkdir -p of an absolute or relative path */
static int mkdirs(const char *path) {
  char *p = strdup(path), *s;
  int rc = 0;
  if (p == NULL) {
    errno = ENOMEM;
    return -1;
  }
  for (s = p + 1; *s; s++) {
    if (*s != '/')
      continue;
    *s = '\0';
    if (mkdir(p, 0755) < 0 && errno != EEXIST) {
      rc = -1;
      break;
    }
    *s = '/';
  }
  if (rc == 0 && mkdir(p, 0755) < 0 && errno != EEXIST)
    rc = -1;
  {
    int e = errno;
    free(p);
    errno = e;
  }
  return rc;
}

mp_bucket_store *mp_bucket_open(const char *root, char *err, size_t errlen) {
  mp_bucket_store *st;
  if (root == NULL || root[0] == '\0') {
    set_err(err, errlen, "no root directory");
    return NULL;
  }
  st = malloc(sizeof *st);
  if (st == NULL) {
    set_err(err, errlen, "out of memory");
    return NULL;
  }
  if (mkdirs(root) < 0) {
    set_err(err, errlen, "mkdir %s: %s", root, strerror(errno));
    free(st);
    return NULL;
  }
  st->rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (st->rootfd < 0) {
    set_err(err, errlen, "open %s: %s", root, strerror(errno));
    free(st);
    return NULL;
  }
  sweep_temporaries(st->rootfd);
  return st;
}

void mp_bucket_close(mp_bucket_store *st) {
  if (st == NULL)
    return;
  close(st->rootfd);
  free(st);
}

int mp_bucket_put(mp_bucket_store *st, const char *project,
                  const char *bucket, const char *key, const void *data,
                  size_t len, const char *content_type, int if_none_match,
                  char *err, size_t errlen) {
  obj_source src;
  int bfd, rc;
  if (!name_ok(project) || !name_ok(bucket)) {
    set_err(err, errlen, "bad project or bucket name");
    return MP_BUCKET_BAD_KEY;
  }
  if (!object_key_ok(key)) {
    set_err(err, errlen, "bad key: %s",
            key && *key ? mp_bucket_key_check(key, strlen(key)) : "empty");
    return MP_BUCKET_BAD_KEY;
  }
  if (data == NULL && len > 0) {
    set_err(err, errlen, "no data");
    return MP_BUCKET_IO;
  }
  bfd = bucket_dir(st, project, bucket, 1);
  if (bfd < 0) {
    set_err(err, errlen, "bucket directory: %s", strerror(errno));
    return MP_BUCKET_IO;
  }
  if (if_none_match && obj_exists(bfd, key)) {
    close(bfd);
    set_err(err, errlen, "the object exists");
    return MP_BUCKET_EXISTS;
  }
  src.data = data;
  src.len = len;
  src.src_fd = -1;
  src.src_off = 0;
  rc = obj_write(bfd, key, content_type ? content_type : "", &src,
                 if_none_match, err, errlen);
  close(bfd);
  return rc;
}

int mp_bucket_open_read(mp_bucket_store *st, const char *project,
                        const char *bucket, const char *key, int *fd,
                        uint64_t *offset, mp_object_info *info) {
  obj_hdr h;
  int bfd, rc;
  *fd = -1;
  *offset = 0;
  memset(info, 0, sizeof *info);
  if (!name_ok(project) || !name_ok(bucket) || !object_key_ok(key))
    return MP_BUCKET_BAD_KEY;
  bfd = bucket_dir(st, project, bucket, 0);
  if (bfd < 0)
    return errno == ENOENT ? MP_BUCKET_NOT_FOUND : MP_BUCKET_IO;
  rc = obj_open(bfd, key, &h, fd);
  close_keep_errno(bfd);
  if (rc != MP_BUCKET_OK)
    return rc;
  info->key = strdup(key);
  if (info->key == NULL) {
    close(*fd);
    *fd = -1;
    return MP_BUCKET_NOMEM;
  }
  fill_info_fields(info, &h);
  *offset = h.hdrlen;
  return MP_BUCKET_OK;
}

int mp_bucket_head(mp_bucket_store *st, const char *project,
                   const char *bucket, const char *key,
                   mp_object_info *info) {
  uint64_t off;
  int fd, rc = mp_bucket_open_read(st, project, bucket, key, &fd, &off, info);
  if (rc == MP_BUCKET_OK)
    close(fd);
  return rc;
}

/* does key fall under the recursive delete of `pfx`? "" is everything,
** "d/" is every key starting with it, "d" is "d" itself and "d/..." */
static int under(const char *key, const char *pfx, size_t plen) {
  if (plen == 0 || pfx[plen - 1] == '/')
    return strncmp(key, pfx, plen) == 0;
  return strncmp(key, pfx, plen) == 0 &&
         (key[plen] == '\0' || key[plen] == '/');
}

int mp_bucket_delete(mp_bucket_store *st, const char *project,
                     const char *bucket, const char *key, int recursive) {
  int bfd, rc;
  if (!name_ok(project) || !name_ok(bucket) || key == NULL ||
      mp_bucket_key_check(key, strlen(key)) != NULL)
    return MP_BUCKET_BAD_KEY;
  if (!recursive && key[0] == '\0')
    return MP_BUCKET_BAD_KEY;
  bfd = bucket_dir(st, project, bucket, 0);
  if (bfd < 0)
    return errno == ENOENT ? MP_BUCKET_NOT_FOUND : MP_BUCKET_IO;
  if (!recursive) {
    char fname[HASH_HEX + 1];
    obj_hdr h;
    int fd;
    rc = obj_open(bfd, key, &h, &fd);
    if (rc == MP_BUCKET_OK) {
      close(fd);
      key_filename(key, fname);
      if (unlinkat(bfd, fname, 0) < 0 || mastra__fsync_fd(bfd) < 0)
        rc = errno == ENOENT ? MP_BUCKET_NOT_FOUND : MP_BUCKET_IO;
    }
  } else {
    size_t plen = strlen(key);
    int removed = 0;
    DIR *d = dir_scan(bfd, ".");
    struct dirent *e;
    rc = MP_BUCKET_OK;
    if (d == NULL) {
      close_keep_errno(bfd);
      return MP_BUCKET_IO;
    }
    while ((e = readdir(d)) != NULL) {
      obj_hdr h;
      int fd;
      if (!is_object_name(e->d_name))
        continue;
      fd = openat(bfd, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd < 0)
        continue;
      if (read_hdr(fd, &h) == 0 && under(h.key, key, plen)) {
        if (unlinkat(bfd, e->d_name, 0) == 0)
          removed++;
        else
          rc = MP_BUCKET_IO;
      }
      close(fd);
    }
    closedir(d);
    if (removed > 0 && mastra__fsync_fd(bfd) < 0)
      rc = MP_BUCKET_IO;
    if (rc == MP_BUCKET_OK && removed == 0)
      rc = MP_BUCKET_NOT_FOUND;
  }
  close(bfd);
  return rc;
}

int mp_bucket_copy(mp_bucket_store *st, const char *project,
                   const char *bucket, const char *src, const char *dst,
                   int move, char *err, size_t errlen) {
  obj_source os;
  obj_hdr h;
  int bfd, fd, rc;
  if (!name_ok(project) || !name_ok(bucket)) {
    set_err(err, errlen, "bad project or bucket name");
    return MP_BUCKET_BAD_KEY;
  }
  if (!object_key_ok(src) || !object_key_ok(dst)) {
    set_err(err, errlen, "bad %s key", object_key_ok(src) ? "destination"
                                                          : "source");
    return MP_BUCKET_BAD_KEY;
  }
  bfd = bucket_dir(st, project, bucket, 0);
  if (bfd < 0) {
    if (errno == ENOENT) {
      set_err(err, errlen, "no such object");
      return MP_BUCKET_NOT_FOUND;
    }
    set_err(err, errlen, "bucket directory: %s", strerror(errno));
    return MP_BUCKET_IO;
  }
  rc = obj_open(bfd, src, &h, &fd);
  if (rc != MP_BUCKET_OK) {
    if (rc == MP_BUCKET_NOT_FOUND)
      set_err(err, errlen, "no such object");
    else
      set_err(err, errlen, "read object: %s", strerror(errno));
    close(bfd);
    return rc;
  }
  if (strcmp(src, dst) == 0) { /* nothing to do, and never delete */
    close(fd);
    close(bfd);
    return MP_BUCKET_OK;
  }
  os.data = NULL;
  os.len = (size_t)h.size;
  os.src_fd = fd;
  os.src_off = (off_t)h.hdrlen;
  rc = obj_write(bfd, dst, h.ct, &os, 0, err, errlen);
  close(fd);
  if (rc == MP_BUCKET_OK && move) {
    char fname[HASH_HEX + 1];
    key_filename(src, fname);
    if (unlinkat(bfd, fname, 0) < 0 || mastra__fsync_fd(bfd) < 0) {
      set_err(err, errlen, "remove source: %s", strerror(errno));
      rc = MP_BUCKET_IO;
    }
  }
  close(bfd);
  return rc;
}

int mp_bucket_mkdir(mp_bucket_store *st, const char *project,
                    const char *bucket, const char *key, char *err,
                    size_t errlen) {
  char *marker;
  size_t n;
  int rc;
  if (key == NULL) {
    set_err(err, errlen, "no key");
    return MP_BUCKET_BAD_KEY;
  }
  n = strlen(key);
  if (n == 0) { /* the root always exists */
    if (!name_ok(project) || !name_ok(bucket)) {
      set_err(err, errlen, "bad project or bucket name");
      return MP_BUCKET_BAD_KEY;
    }
    return MP_BUCKET_OK;
  }
  marker = malloc(n + 2);
  if (marker == NULL) {
    set_err(err, errlen, "out of memory");
    return MP_BUCKET_NOMEM;
  }
  memcpy(marker, key, n + 1);
  if (key[n - 1] != '/') {
    marker[n] = '/';
    marker[n + 1] = '\0';
  }
  rc = mp_bucket_put(st, project, bucket, marker, NULL, 0, "", 1, err,
                     errlen);
  free(marker);
  return rc == MP_BUCKET_EXISTS ? MP_BUCKET_OK : rc;
}

/* {------ listing ------ */

typedef struct list_acc {
  mp_object_info *c;
  size_t nc, capc;
  char **p;
  size_t np, capp;
} list_acc;

static int add_content(list_acc *a, const obj_hdr *h) {
  mp_object_info *oi;
  if (a->nc == a->capc) {
    size_t cap = a->capc ? a->capc * 2 : 16;
    mp_object_info *nc = realloc(a->c, cap * sizeof *nc);
    if (nc == NULL)
      return -1;
    a->c = nc;
    a->capc = cap;
  }
  oi = &a->c[a->nc];
  memset(oi, 0, sizeof *oi);
  oi->key = strdup(h->key);
  if (oi->key == NULL)
    return -1;
  fill_info_fields(oi, h);
  a->nc++;
  return 0;
}

static int add_prefix(list_acc *a, const char *key, size_t len) {
  char *s;
  if (a->np == a->capp) {
    size_t cap = a->capp ? a->capp * 2 : 16;
    char **np = realloc(a->p, cap * sizeof *np);
    if (np == NULL)
      return -1;
    a->p = np;
    a->capp = cap;
  }
  s = malloc(len + 1);
  if (s == NULL)
    return -1;
  memcpy(s, key, len);
  s[len] = '\0';
  a->p[a->np++] = s;
  return 0;
}

static int cmp_info(const void *x, const void *y) {
  const mp_object_info *a = x, *b = y;
  return strcmp(a->key, b->key);
}

static int cmp_str(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

int mp_bucket_list(mp_bucket_store *st, const char *project,
                   const char *bucket, const char *prefix,
                   const char *delimiter, mp_listing *out) {
  list_acc a;
  DIR *d;
  struct dirent *e;
  size_t plen, dlen, i, j;
  int bfd;
  memset(out, 0, sizeof *out);
  memset(&a, 0, sizeof a);
  if (!name_ok(project) || !name_ok(bucket))
    return MP_BUCKET_BAD_KEY;
  if (prefix == NULL)
    prefix = "";
  if (delimiter == NULL)
    delimiter = "";
  plen = strlen(prefix);
  dlen = strlen(delimiter);
  bfd = bucket_dir(st, project, bucket, 0);
  if (bfd < 0)
    return errno == ENOENT ? MP_BUCKET_OK : MP_BUCKET_IO;
  d = dir_scan(bfd, ".");
  if (d == NULL) {
    close_keep_errno(bfd);
    return MP_BUCKET_IO;
  }
  while ((e = readdir(d)) != NULL) {
    obj_hdr h;
    const char *rest, *cut;
    int fd, ok;
    if (!is_object_name(e->d_name))
      continue;
    fd = openat(bfd, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
      continue;
    ok = read_hdr(fd, &h) == 0;
    close(fd);
    if (!ok || strncmp(h.key, prefix, plen) != 0)
      continue;
    rest = h.key + plen;
    cut = dlen ? strstr(rest, delimiter) : NULL;
    if (cut ? add_prefix(&a, h.key, (size_t)(cut - h.key) + dlen)
            : add_content(&a, &h)) {
      closedir(d);
      close(bfd);
      out->contents = a.c;
      out->ncontents = a.nc;
      out->prefixes = a.p;
      out->nprefixes = a.np;
      mp_listing_free(out);
      return MP_BUCKET_NOMEM;
    }
  }
  closedir(d);
  close(bfd);
  if (a.nc > 1)
    qsort(a.c, a.nc, sizeof *a.c, cmp_info);
  if (a.np > 1)
    qsort(a.p, a.np, sizeof *a.p, cmp_str);
  for (i = j = 0; i < a.np; i++) { /* unique */
    if (j > 0 && strcmp(a.p[j - 1], a.p[i]) == 0)
      free(a.p[i]);
    else
      a.p[j++] = a.p[i];
  }
  a.np = j;
  out->contents = a.c;
  out->ncontents = a.nc;
  out->prefixes = a.p;
  out->nprefixes = a.np;
  return MP_BUCKET_OK;
}

/* }------ */

void mp_object_info_free(mp_object_info *info) {
  if (info == NULL)
    return;
  free(info->key);
  info->key = NULL;
}

void mp_listing_free(mp_listing *l) {
  size_t i;
  if (l == NULL)
    return;
  for (i = 0; i < l->ncontents; i++)
    free(l->contents[i].key);
  for (i = 0; i < l->nprefixes; i++)
    free(l->prefixes[i]);
  free(l->contents);
  free(l->prefixes);
  memset(l, 0, sizeof *l);
}

/* }====== */
