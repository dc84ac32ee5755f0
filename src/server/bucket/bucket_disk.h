/*
** The on-disk layout of the bucket store (bucket_disk.c), private to the
** store: bucket.c builds the operations of bucket.h on these.
*/
#ifndef MP_BUCKET_DISK_H
#define MP_BUCKET_DISK_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bucket/bucket.h"

#define MP_BUCKET_KEY_MAX 1024
#define MP_BUCKET_CT_MAX 127 /* mp_object_info.content_type holds 128 with the NUL */
#define MP_DISK_NAME_LEN 64  /* an object file's name: SHA-256(key) in hex */

struct mp_bucket_store {
  int rootfd;
  unsigned long tmp_counter; /* names the temporary files */
};

/* the header of an object file */
typedef struct mp_disk_hdr {
  uint32_t keylen, ctlen;
  uint64_t size;
  int64_t mtime_ms;
  size_t hdrlen;
  char key[MP_BUCKET_KEY_MAX + 1];
  char ct[MP_BUCKET_CT_MAX + 1];
} mp_disk_hdr;

/* the data of a new object: from memory (src_fd < 0) or copied from the
** content of an open object file */
typedef struct mp_disk_source {
  const void *data;
  size_t len;
  int src_fd;
  off_t src_off;
} mp_disk_source;

/* printf into err (if not NULL) */
void mp_disk_set_err(char *err, size_t errlen, const char *fmt, ...);
/* close fd (if >= 0) without changing errno */
void mp_disk_close_keep_errno(int fd);

/* the object file name of key: 64 hex digits and a NUL */
void mp_disk_filename(const char *key, char out[MP_DISK_NAME_LEN + 1]);
/* whether a directory entry's name is an object file's */
int mp_disk_is_object_name(const char *name);

/* open <root>/<project>/<bucket>; with create, make the missing levels
** (each new directory is fsync'd into its parent). -1 with errno. */
int mp_disk_bucket_dir(mp_bucket_store *st, const char *project,
                       const char *bucket, int create);
/* a fresh DIR on directory dfd, independent of dfd's offset */
DIR *mp_disk_scan(int dfd, const char *name);
/* remove the temporary files a crash left in <root>/<p>/<b>/ */
void mp_disk_sweep(int rootfd);

/* parse the header of an open object file: 0, or -1 (errno EIO when the
** file is not an object) */
int mp_disk_read_hdr(int fd, mp_disk_hdr *h);
/* open the object `key` in bucket directory bfd and read its header:
** MP_BUCKET_OK (*fdout open), NOT_FOUND or IO */
int mp_disk_open(int bfd, const char *key, mp_disk_hdr *h, int *fdout);
/* open name in directory dfd for reading, never blocking and never
** following a symlink: -1 (errno) unless it is a regular file (EINVAL) */
int mp_disk_open_file(int dfd, const char *name);
/* size, time and content type of info from a header */
void mp_disk_fill_info(mp_object_info *info, const mp_disk_hdr *h);
/* write object `key` atomically and durably into bfd: MP_BUCKET_OK,
** EXISTS (noreplace and the key exists) or IO */
/* MP_BUCKET_NOSPACE for a full disk or quota (errno e), else MP_BUCKET_IO */
int mp_disk_io_code(int e);
int mp_disk_write(mp_bucket_store *st, int bfd, const char *key,
                  const char *ct, const mp_disk_source *src, int noreplace,
                  char *err, size_t errlen);
/* an object written in pieces (bucket.h, mp_bucket_upload): open its
** temporary file in bfd with a header of size 0 (*fd, tmpname); the
** caller appends the content to *fd */
int mp_disk_upload_open(mp_bucket_store *st, int bfd, const char *key,
                        const char *ct, int *fd, char tmpname[64], char *err,
                        size_t errlen);
/* write the header with the final size, then as mp_disk_write: fsync,
** rename over the object (noreplace: EXISTS if it exists). fd is closed
** and, on failure, the temporary file removed. */
int mp_disk_upload_commit(int bfd, int fd, const char *tmpname,
                          const char *key, const char *ct, uint64_t size,
                          int noreplace, char *err, size_t errlen);
/* does object key exist (an unreadable one counts as existing)? */
int mp_disk_exists(int bfd, const char *key);

#endif
