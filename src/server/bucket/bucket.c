/*
** The bucket store (bucket.h): checks of names and keys, and the
** operations (open, put, read, head, delete, copy, mkdir, list) on top of
** the on-disk layout of bucket_disk.c, where the format of an object file
** and the durability of a write are described.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "bucket/bucket.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bucket/bucket_disk.h"
#include "util.h"

/* {====== names and keys ====== */

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

const char *mp_bucket_key_check(const char *key, size_t len) {
  size_t i, seg = 0;
  if (key == NULL)
    return "no key";
  if (len > MP_BUCKET_KEY_MAX)
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

/* }====== */

/* {====== the operations ====== */

mp_bucket_store *mp_bucket_open(const char *root, char *err, size_t errlen) {
  mp_bucket_store *st;
  if (root == NULL || root[0] == '\0') {
    mp_disk_set_err(err, errlen, "no root directory");
    return NULL;
  }
  st = calloc(1, sizeof *st);
  if (st == NULL) {
    mp_disk_set_err(err, errlen, "out of memory");
    return NULL;
  }
  if (mastra__mkdirs(root, 0700, NULL) < 0) {
    mp_disk_set_err(err, errlen, "mkdir %s: %s", root, strerror(errno));
    free(st);
    return NULL;
  }
  st->rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (st->rootfd < 0) {
    mp_disk_set_err(err, errlen, "open %s: %s", root, strerror(errno));
    free(st);
    return NULL;
  }
  mp_disk_sweep(st->rootfd);
  return st;
}

void mp_bucket_close(mp_bucket_store *st) {
  if (st == NULL)
    return;
  close(st->rootfd);
  free(st);
}

/* The bucket directory of a put of key (created if missing): its fd, or
** a code (< 0) with err set. */
static int put_dir(mp_bucket_store *st, const char *project,
                   const char *bucket, const char *key, char *err,
                   size_t errlen) {
  int bfd;
  if (!name_ok(project) || !name_ok(bucket)) {
    mp_disk_set_err(err, errlen, "bad project or bucket name");
    return MP_BUCKET_BAD_KEY;
  }
  if (!object_key_ok(key)) {
    mp_disk_set_err(err, errlen, "bad key: %s",
            key && *key ? mp_bucket_key_check(key, strlen(key)) : "empty");
    return MP_BUCKET_BAD_KEY;
  }
  bfd = mp_disk_bucket_dir(st, project, bucket, 1);
  if (bfd < 0) {
    mp_disk_set_err(err, errlen, "bucket directory: %s", strerror(errno));
    return mp_disk_io_code(errno);
  }
  return bfd;
}

int mp_bucket_put(mp_bucket_store *st, const char *project,
                  const char *bucket, const char *key, const void *data,
                  size_t len, const char *content_type, int if_none_match,
                  char *err, size_t errlen) {
  mp_disk_source src;
  int bfd, rc;
  if (data == NULL && len > 0) {
    mp_disk_set_err(err, errlen, "no data");
    return MP_BUCKET_IO;
  }
  bfd = put_dir(st, project, bucket, key, err, errlen);
  if (bfd < 0) return bfd;
  if (if_none_match && mp_disk_exists(bfd, key)) {
    close(bfd);
    mp_disk_set_err(err, errlen, "the object exists");
    return MP_BUCKET_EXISTS;
  }
  src.data = data;
  src.len = len;
  src.src_fd = -1;
  src.src_off = 0;
  rc = mp_disk_write(st, bfd, key, content_type ? content_type : "", &src,
                 if_none_match, err, errlen);
  close(bfd);
  return rc;
}

struct mp_bucket_upload {
  int bfd, fd;
  uint64_t size;
  char tmpname[64];
  char *key;
  char ct[MP_BUCKET_CT_MAX + 1];
};

int mp_bucket_upload_begin(mp_bucket_store *st, const char *project,
                           const char *bucket, const char *key,
                           const char *content_type, mp_bucket_upload **out,
                           char *err, size_t errlen) {
  mp_bucket_upload *u;
  int bfd, rc;
  *out = NULL;
  bfd = put_dir(st, project, bucket, key, err, errlen);
  if (bfd < 0) return bfd;
  u = calloc(1, sizeof *u);
  if (u == NULL || (u->key = strdup(key)) == NULL) {
    free(u);
    close(bfd);
    mp_disk_set_err(err, errlen, "out of memory");
    return MP_BUCKET_NOMEM;
  }
  u->bfd = bfd;
  snprintf(u->ct, sizeof u->ct, "%s", content_type ? content_type : "");
  rc = mp_disk_upload_open(st, bfd, key, u->ct, &u->fd, u->tmpname, err,
                           errlen);
  if (rc < 0) {
    free(u->key);
    free(u);
    close(bfd);
    return rc;
  }
  *out = u;
  return MP_BUCKET_OK;
}

int mp_bucket_upload_write(mp_bucket_upload *u, const void *data, size_t len,
                           char *err, size_t errlen) {
  if (mastra__write_all(u->fd, data, len) < 0) {
    mp_disk_set_err(err, errlen, "write object: %s", strerror(errno));
    return mp_disk_io_code(errno);
  }
  u->size += len;
  return MP_BUCKET_OK;
}

static void upload_free(mp_bucket_upload *u) {
  close(u->bfd);
  free(u->key);
  free(u);
}

int mp_bucket_upload_commit(mp_bucket_upload *u, int if_none_match, char *err,
                            size_t errlen) {
  int rc;
  if (if_none_match && mp_disk_exists(u->bfd, u->key)) {
    mp_bucket_upload_abort(u);
    mp_disk_set_err(err, errlen, "the object exists");
    return MP_BUCKET_EXISTS;
  }
  rc = mp_disk_upload_commit(u->bfd, u->fd, u->tmpname, u->key, u->ct,
                             u->size, if_none_match, err, errlen);
  upload_free(u);
  return rc;
}

void mp_bucket_upload_abort(mp_bucket_upload *u) {
  if (u == NULL) return;
  close(u->fd);
  unlinkat(u->bfd, u->tmpname, 0);
  upload_free(u);
}

int mp_bucket_open_read(mp_bucket_store *st, const char *project,
                        const char *bucket, const char *key, int *fd,
                        uint64_t *offset, mp_object_info *info) {
  mp_disk_hdr h;
  int bfd, rc;
  *fd = -1;
  *offset = 0;
  memset(info, 0, sizeof *info);
  if (!name_ok(project) || !name_ok(bucket) || !object_key_ok(key))
    return MP_BUCKET_BAD_KEY;
  bfd = mp_disk_bucket_dir(st, project, bucket, 0);
  if (bfd < 0)
    return errno == ENOENT ? MP_BUCKET_NOT_FOUND : MP_BUCKET_IO;
  rc = mp_disk_open(bfd, key, &h, fd);
  mp_disk_close_keep_errno(bfd);
  if (rc != MP_BUCKET_OK)
    return rc;
  info->key = strdup(key);
  if (info->key == NULL) {
    close(*fd);
    *fd = -1;
    return MP_BUCKET_NOMEM;
  }
  mp_disk_fill_info(info, &h);
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
  bfd = mp_disk_bucket_dir(st, project, bucket, 0);
  if (bfd < 0)
    return errno == ENOENT ? MP_BUCKET_NOT_FOUND : MP_BUCKET_IO;
  if (!recursive) {
    char fname[MP_DISK_NAME_LEN + 1];
    mp_disk_hdr h;
    int fd;
    rc = mp_disk_open(bfd, key, &h, &fd);
    if (rc == MP_BUCKET_OK) {
      close(fd);
      mp_disk_filename(key, fname);
      if (unlinkat(bfd, fname, 0) < 0 || mastra__fsync_fd(bfd) < 0)
        rc = errno == ENOENT ? MP_BUCKET_NOT_FOUND : MP_BUCKET_IO;
    }
  } else {
    size_t plen = strlen(key);
    int removed = 0;
    DIR *d = mp_disk_scan(bfd, ".");
    struct dirent *e;
    rc = MP_BUCKET_OK;
    if (d == NULL) {
      mp_disk_close_keep_errno(bfd);
      return MP_BUCKET_IO;
    }
    while ((e = readdir(d)) != NULL) {
      mp_disk_hdr h;
      int fd;
      if (!mp_disk_is_object_name(e->d_name))
        continue;
      fd = mp_disk_open_file(bfd, e->d_name);
      if (fd < 0)
        continue;
      if (mp_disk_read_hdr(fd, &h) == 0 && under(h.key, key, plen)) {
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
  mp_disk_source os;
  mp_disk_hdr h;
  int bfd, fd, rc;
  if (!name_ok(project) || !name_ok(bucket)) {
    mp_disk_set_err(err, errlen, "bad project or bucket name");
    return MP_BUCKET_BAD_KEY;
  }
  if (!object_key_ok(src) || !object_key_ok(dst)) {
    mp_disk_set_err(err, errlen, "bad %s key", object_key_ok(src) ? "destination"
                                                          : "source");
    return MP_BUCKET_BAD_KEY;
  }
  bfd = mp_disk_bucket_dir(st, project, bucket, 0);
  if (bfd < 0) {
    if (errno == ENOENT) {
      mp_disk_set_err(err, errlen, "no such object");
      return MP_BUCKET_NOT_FOUND;
    }
    mp_disk_set_err(err, errlen, "bucket directory: %s", strerror(errno));
    return MP_BUCKET_IO;
  }
  rc = mp_disk_open(bfd, src, &h, &fd);
  if (rc != MP_BUCKET_OK) {
    if (rc == MP_BUCKET_NOT_FOUND)
      mp_disk_set_err(err, errlen, "no such object");
    else
      mp_disk_set_err(err, errlen, "read object: %s", strerror(errno));
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
  rc = mp_disk_write(st, bfd, dst, h.ct, &os, 0, err, errlen);
  close(fd);
  if (rc == MP_BUCKET_OK && move) {
    char fname[MP_DISK_NAME_LEN + 1];
    mp_disk_filename(src, fname);
    if (unlinkat(bfd, fname, 0) < 0 || mastra__fsync_fd(bfd) < 0) {
      mp_disk_set_err(err, errlen, "remove source: %s", strerror(errno));
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
    mp_disk_set_err(err, errlen, "no key");
    return MP_BUCKET_BAD_KEY;
  }
  n = strlen(key);
  if (n == 0) { /* the root always exists */
    if (!name_ok(project) || !name_ok(bucket)) {
      mp_disk_set_err(err, errlen, "bad project or bucket name");
      return MP_BUCKET_BAD_KEY;
    }
    return MP_BUCKET_OK;
  }
  marker = malloc(n + 2);
  if (marker == NULL) {
    mp_disk_set_err(err, errlen, "out of memory");
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

static int add_content(list_acc *a, const mp_disk_hdr *h) {
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
  mp_disk_fill_info(oi, h);
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
  bfd = mp_disk_bucket_dir(st, project, bucket, 0);
  if (bfd < 0)
    return errno == ENOENT ? MP_BUCKET_OK : MP_BUCKET_IO;
  d = mp_disk_scan(bfd, ".");
  if (d == NULL) {
    mp_disk_close_keep_errno(bfd);
    return MP_BUCKET_IO;
  }
  while ((e = readdir(d)) != NULL) {
    mp_disk_hdr h;
    const char *rest, *cut;
    int fd, ok;
    if (!mp_disk_is_object_name(e->d_name))
      continue;
    fd = mp_disk_open_file(bfd, e->d_name);
    if (fd < 0)
      continue;
    ok = mp_disk_read_hdr(fd, &h) == 0;
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
