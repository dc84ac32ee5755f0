/*
** The bucket store of mastra-platform: objects addressed by
** (project, bucket, key), kept under <root>/<project>/<bucket>/ on disk.
** Storage only: HTTP is the router's business.
**
** Durability: a put that returned MP_BUCKET_OK survives a kill -9 of the
** server (temporary file, fsync, rename, fsync of the directory), and a
** crash never leaves a half-written object visible; temporary files left
** by a crash are removed when the store is opened.
**
** Keys are the percent-decoded object keys of the protocol: UTF-8 byte
** strings, "" is the root, a trailing '/' is a directory marker
** (mkdir). mp_bucket_key_check() says which keys are refused.
*/
#ifndef MP_BUCKET_H
#define MP_BUCKET_H

#include <stddef.h>
#include <stdint.h>

typedef struct mp_bucket_store mp_bucket_store;

enum {
  MP_BUCKET_OK = 0,
  MP_BUCKET_NOT_FOUND = -1,
  MP_BUCKET_EXISTS = -2,    /* put with if_none_match and the key exists */
  MP_BUCKET_BAD_KEY = -3,   /* see mp_bucket_key_check */
  MP_BUCKET_IO = -4,        /* errno-level failure: see the err text */
  MP_BUCKET_NOMEM = -5,
  MP_BUCKET_NOSPACE = -6    /* the disk (or the quota) is full */
};

typedef struct mp_object_info {
  char *key;                /* malloc'd */
  uint64_t size;
  int64_t mtime_ms;         /* last modification, wall clock */
  char content_type[128];   /* "" if none was given */
} mp_object_info;

typedef struct mp_listing {
  mp_object_info *contents; /* sorted by key */
  size_t ncontents;
  char **prefixes;          /* common prefixes (each ends with the delimiter), sorted */
  size_t nprefixes;
} mp_listing;

/* Open (creating) the store under root; removes leftover temporary files. */
mp_bucket_store *mp_bucket_open(const char *root, char *err, size_t errlen);
void mp_bucket_close(mp_bucket_store *st);

/* NULL if the key is acceptable, else why not: a '..' or '.' segment, a
** leading '/', an empty segment ("a//b"), a NUL byte, or longer than 1024. */
const char *mp_bucket_key_check(const char *key, size_t len);
/* project and bucket names: 1..255 bytes, no '/', no NUL, not "." or ".." */
const char *mp_bucket_name_check(const char *name);

int mp_bucket_put(mp_bucket_store *st, const char *project,
                  const char *bucket, const char *key, const void *data,
                  size_t len, const char *content_type, int if_none_match,
                  char *err, size_t errlen);
/* A put whose bytes come in pieces (a streamed PUT body): they go to a
** temporary file in the bucket directory as they come, so the store never
** holds them in memory. Commit makes it the object, durably and
** atomically (as mp_bucket_put; if_none_match: EXISTS when the key
** exists); abort removes it. Nothing is visible before the commit. Commit
** and abort free the upload. */
typedef struct mp_bucket_upload mp_bucket_upload;
int mp_bucket_upload_begin(mp_bucket_store *st, const char *project,
                           const char *bucket, const char *key,
                           const char *content_type, mp_bucket_upload **out,
                           char *err, size_t errlen);
int mp_bucket_upload_write(mp_bucket_upload *u, const void *data, size_t len,
                           char *err, size_t errlen);
int mp_bucket_upload_commit(mp_bucket_upload *u, int if_none_match, char *err,
                            size_t errlen);
void mp_bucket_upload_abort(mp_bucket_upload *u);
/* open the object for reading: *fd (the caller closes it) holds its bytes
** at [*offset, *offset + info->size); info->key is set too. The file stays
** readable however the key changes afterwards (a PUT renames a new file
** over it, a DELETE unlinks it). */
int mp_bucket_open_read(mp_bucket_store *st, const char *project,
                        const char *bucket, const char *key, int *fd,
                        uint64_t *offset, mp_object_info *info);
int mp_bucket_head(mp_bucket_store *st, const char *project,
                   const char *bucket, const char *key,
                   mp_object_info *info);
/* recursive: remove every key that starts with `key` (which then should end
** with '/'); NOT_FOUND if nothing was removed */
int mp_bucket_delete(mp_bucket_store *st, const char *project,
                     const char *bucket, const char *key, int recursive);
/* copy (or move) one object; the destination is overwritten */
int mp_bucket_copy(mp_bucket_store *st, const char *project,
                   const char *bucket, const char *src, const char *dst,
                   int move, char *err, size_t errlen);
/* store the directory marker `key/` (key without the trailing slash is fine) */
int mp_bucket_mkdir(mp_bucket_store *st, const char *project,
                    const char *bucket, const char *key, char *err,
                    size_t errlen);
/* keys starting with prefix; with a delimiter, keys with the delimiter after
** the prefix are rolled up into common prefixes */
int mp_bucket_list(mp_bucket_store *st, const char *project,
                   const char *bucket, const char *prefix,
                   const char *delimiter, mp_listing *out);
void mp_object_info_free(mp_object_info *info);
void mp_listing_free(mp_listing *l);

#endif
