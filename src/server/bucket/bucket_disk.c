/*
** The on-disk layout of the bucket store (bucket_disk.h): directories,
** the object file format, reading a header, writing an object atomically
** and durably, and the sweep of temporary files. The operations on top
** (names, keys, put, get, delete, copy, mkdir, listing) are bucket.c.
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
** file, which mp_bucket_open() removes. An object that arrives in pieces
** (a streamed PUT) grows in its temporary file behind a header of size 0,
** which the commit rewrites with the size before the fsync and the
** rename; an abort unlinks it. A move is a copy (atomic) then
** an unlink of the source (a crash in between leaves both).
**
** The store keeps one descriptor open (the root directory) and is meant
** for one thread. The root should be dedicated to the store: the
** temporary-file sweep at open looks at every <root>/<dir>/<dir>/.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "bucket/bucket_disk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "sha256.h"
#include "util.h"

#define HDR_FIXED 32
#define HDR_MAX (HDR_FIXED + MP_BUCKET_KEY_MAX + MP_BUCKET_CT_MAX)
#define TMP_PREFIX ".mpb-tmp-"
#define MAGIC "MPBOBJ1\n"

/* {====== small helpers ====== */

void mp_disk_set_err(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  if (err == NULL || errlen == 0)
    return;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* n-byte little-endian integers of the header */
static void put_le(unsigned char *p, uint64_t v, int n) {
  int i;
  for (i = 0; i < n; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int n) {
  uint64_t v = 0;
  int i;
  for (i = n - 1; i >= 0; i--)
    v = v << 8 | p[i];
  return v;
}

void mp_disk_close_keep_errno(int fd) {
  int e = errno;
  if (fd >= 0)
    close(fd);
  errno = e;
}

/* }====== */

/* {====== names ====== */

void mp_disk_filename(const char *key, char out[MP_DISK_NAME_LEN + 1]) {
  mastra__sha256_hex(key, strlen(key), out);
}

int mp_disk_is_object_name(const char *name) {
  int i;
  for (i = 0; i < MP_DISK_NAME_LEN; i++)
    if (!((name[i] >= '0' && name[i] <= '9') ||
          (name[i] >= 'a' && name[i] <= 'f')))
      return 0;
  return name[MP_DISK_NAME_LEN] == '\0';
}

/* }====== */

/* {====== directories ====== */

/* open <root>/<project>/<bucket>; with create, make the missing levels
** (each new directory is fsync'd into its parent). -1 with errno. */
int mp_disk_bucket_dir(mp_bucket_store *st, const char *project,
                      const char *bucket, int create) {
  const int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW;
  int pfd, bfd;
  if (create) {
    if (mkdirat(st->rootfd, project, 0700) == 0) {
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
    if (mkdirat(pfd, bucket, 0700) == 0) {
      if (mastra__fsync_fd(pfd) < 0) {
        mp_disk_close_keep_errno(pfd);
        return -1;
      }
    } else if (errno != EEXIST) {
      mp_disk_close_keep_errno(pfd);
      return -1;
    }
  }
  bfd = openat(pfd, bucket, flags);
  mp_disk_close_keep_errno(pfd);
  return bfd;
}

/* a fresh DIR on directory dfd, independent of dfd's offset */
DIR *mp_disk_scan(int dfd, const char *name) {
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  DIR *d;
  if (fd < 0)
    return NULL;
  d = fdopendir(fd);
  if (d == NULL)
    mp_disk_close_keep_errno(fd);
  return d;
}

static int is_dot(const char *n) {
  return strcmp(n, ".") == 0 || strcmp(n, "..") == 0;
}

/* the next subdirectory of d (not "." or ".."), opened; NULL at the end */
static DIR *next_dir(DIR *d) {
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    DIR *sub;
    if (is_dot(e->d_name))
      continue;
    sub = mp_disk_scan(dirfd(d), e->d_name);
    if (sub != NULL)
      return sub;
  }
  return NULL;
}

void mp_disk_sweep(int rootfd) {
  DIR *rd = mp_disk_scan(rootfd, "."), *pd, *bd;
  if (rd == NULL)
    return;
  while ((pd = next_dir(rd)) != NULL) {       /* projects */
    while ((bd = next_dir(pd)) != NULL) {     /* buckets */
      struct dirent *oe;
      int removed = 0;
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

/* parse the header of an open object file: 0, or -1 (errno EIO when the
** file is not an object) */
int mp_disk_read_hdr(int fd, mp_disk_hdr *h) {
  unsigned char buf[HDR_MAX];
  ssize_t n;
  do {
    n = pread(fd, buf, sizeof buf, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0)
    return -1;
  if (n < HDR_FIXED || memcmp(buf, MAGIC, 8) != 0)
    goto bad;
  h->keylen = (uint32_t)get_le(buf + 8, 4);
  h->ctlen = (uint32_t)get_le(buf + 12, 4);
  h->size = get_le(buf + 16, 8);
  h->mtime_ms = (int64_t)get_le(buf + 24, 8);
  if (h->keylen == 0 || h->keylen > MP_BUCKET_KEY_MAX || h->ctlen > MP_BUCKET_CT_MAX)
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

int mp_disk_open_file(int dfd, const char *name) {
  struct stat sb;
  /* O_NONBLOCK: opening a FIFO for reading would wait for a writer, and
  ** the only thread with it; on a regular file it changes nothing */
  int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return -1;
  if (fstat(fd, &sb) < 0) {
    mp_disk_close_keep_errno(fd);
    return -1;
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

/* open the object `key` in bucket directory bfd and read its header:
** MP_BUCKET_OK (*fdout open), NOT_FOUND or IO */
int mp_disk_open(int bfd, const char *key, mp_disk_hdr *h, int *fdout) {
  char fname[MP_DISK_NAME_LEN + 1];
  struct stat sb;
  int fd;
  mp_disk_filename(key, fname);
  fd = mp_disk_open_file(bfd, fname);
  if (fd < 0)
    return errno == ENOENT ? MP_BUCKET_NOT_FOUND : MP_BUCKET_IO;
  if (mp_disk_read_hdr(fd, h) < 0 || fstat(fd, &sb) < 0) {
    mp_disk_close_keep_errno(fd);
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

void mp_disk_fill_info(mp_object_info *info, const mp_disk_hdr *h) {
  info->size = h->size;
  info->mtime_ms = h->mtime_ms;
  memcpy(info->content_type, h->ct, h->ctlen + 1);
}

/* create a temporary file in bfd: its fd, name in tmpname */
static int tmp_create(mp_bucket_store *st, int bfd, char tmpname[64]) {
  for (;;) {
    int fd;
    snprintf(tmpname, 64, TMP_PREFIX "%ld-%lu", (long)getpid(),
             ++st->tmp_counter);
    fd = openat(bfd, tmpname,
                O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
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
  if (cl > MP_BUCKET_CT_MAX)
    cl = MP_BUCKET_CT_MAX; /* mp_object_info cannot hold more */
  memcpy(buf, MAGIC, 8);
  put_le(buf + 8, kl, 4);
  put_le(buf + 12, cl, 4);
  put_le(buf + 16, size, 8);
  put_le(buf + 24, (uint64_t)mtime, 8);
  memcpy(buf + HDR_FIXED, key, kl);
  memcpy(buf + HDR_FIXED + kl, ct, cl);
  return HDR_FIXED + kl + cl;
}

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

int mp_disk_io_code(int e) {
  return e == ENOSPC || e == EDQUOT ? MP_BUCKET_NOSPACE : MP_BUCKET_IO;
}

/* The temporary file could not be made into the object: err says what
** failed (what: e), the file is closed (fd >= 0) and removed. The code. */
static int tmp_abandon(int bfd, int fd, const char *tmpname, const char *what,
                       int e, char *err, size_t errlen) {
  mp_disk_set_err(err, errlen, "%s: %s", what, strerror(e));
  if (fd >= 0) close(fd);
  unlinkat(bfd, tmpname, 0);
  return mp_disk_io_code(e);
}

/* fsync and close the temporary file fd, then rename it over fname: OK,
** EXISTS (noreplace) or IO/NOSPACE; on failure the temporary file is gone */
static int tmp_finish(int bfd, int fd, const char *tmpname, const char *fname,
                      int noreplace, char *err, size_t errlen) {
  int rc;
  while ((rc = fsync(fd)) < 0 && errno == EINTR)
    ;
  if (rc < 0)
    return tmp_abandon(bfd, fd, tmpname, "fsync object", errno, err, errlen);
  if (close(fd) < 0)
    return tmp_abandon(bfd, -1, tmpname, "close object", errno, err, errlen);
  if (tmp_commit(bfd, tmpname, fname, noreplace) < 0) {
    if (noreplace && errno == EEXIST) {
      unlinkat(bfd, tmpname, 0);
      mp_disk_set_err(err, errlen, "the object exists");
      return MP_BUCKET_EXISTS;
    }
    return tmp_abandon(bfd, -1, tmpname, "commit object", errno, err, errlen);
  }
  return MP_BUCKET_OK;
}

/* write object `key` atomically and durably into bfd */
int mp_disk_write(mp_bucket_store *st, int bfd, const char *key, const char *ct,
                     const mp_disk_source *src, int noreplace, char *err,
                     size_t errlen) {
  unsigned char hdr[HDR_MAX];
  char tmpname[64], fname[MP_DISK_NAME_LEN + 1];
  size_t hl;
  int fd;
  hl = make_hdr(hdr, key, ct, src->len, mastra__wall_ms());
  mp_disk_filename(key, fname);
  fd = tmp_create(st, bfd, tmpname);
  if (fd < 0) {
    mp_disk_set_err(err, errlen, "create temporary file: %s", strerror(errno));
    return mp_disk_io_code(errno);
  }
  if (mastra__write_all(fd, hdr, hl) < 0 ||
      (src->src_fd < 0 ? mastra__write_all(fd, src->data, src->len)
                       : copy_range(fd, src->src_fd, src->src_off,
                                    src->len)) < 0)
    return tmp_abandon(bfd, fd, tmpname, "write object", errno, err, errlen);
  return tmp_finish(bfd, fd, tmpname, fname, noreplace, err, errlen);
}

int mp_disk_upload_open(mp_bucket_store *st, int bfd, const char *key,
                        const char *ct, int *fd, char tmpname[64], char *err,
                        size_t errlen) {
  unsigned char hdr[HDR_MAX];
  size_t hl = make_hdr(hdr, key, ct, 0, 0);
  int e;
  *fd = tmp_create(st, bfd, tmpname);
  if (*fd < 0) {
    mp_disk_set_err(err, errlen, "create temporary file: %s", strerror(errno));
    return mp_disk_io_code(errno);
  }
  if (mastra__write_all(*fd, hdr, hl) == 0) return MP_BUCKET_OK;
  e = tmp_abandon(bfd, *fd, tmpname, "write object", errno, err, errlen);
  *fd = -1;
  return e;
}

int mp_disk_upload_commit(int bfd, int fd, const char *tmpname,
                          const char *key, const char *ct, uint64_t size,
                          int noreplace, char *err, size_t errlen) {
  unsigned char hdr[HDR_MAX];
  char fname[MP_DISK_NAME_LEN + 1];
  size_t hl = make_hdr(hdr, key, ct, size, mastra__wall_ms()), done = 0;
  mp_disk_filename(key, fname);
  while (done < hl) { /* the header, with the size now known */
    ssize_t n = pwrite(fd, hdr + done, hl - done, (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return tmp_abandon(bfd, fd, tmpname, "write object", n < 0 ? errno : EIO,
                         err, errlen);
    done += (size_t)n;
  }
  return tmp_finish(bfd, fd, tmpname, fname, noreplace, err, errlen);
}

/* does object key exist (an unreadable one counts as existing)? */
int mp_disk_exists(int bfd, const char *key) {
  mp_disk_hdr h;
  int fd, rc;
  rc = mp_disk_open(bfd, key, &h, &fd);
  if (rc == MP_BUCKET_OK)
    close(fd);
  return rc != MP_BUCKET_NOT_FOUND;
}

/* }====== */
