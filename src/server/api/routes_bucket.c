/*
** The bucket routes of mastra-platform: /v1/.../projects/{p}/fs/{bucket}/
** {key} (docs/platform.md). GET of a key ending in '/' (or of the bucket)
** lists, GET of an object sends its file (sendfile), HEAD,
** PUT (If-None-Match: *), DELETE (?recursive=true), and POST with
** ?op=copy|rename|mkdir. The store itself is bucket.c.
**
** A PUT's body is not held in memory: the route is called at the head
** (r->begin) and opens an upload of the store (a temporary file), each
** piece of the body is written to it as it comes (r->sink_write), and at
** the end of the body the upload is committed. A body that does not end
** (the connection dropped, 413) is aborted when the request ends:
** nothing of it is visible.
*/
#define _GNU_SOURCE
#include "api/routes_bucket.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bucket/bucket.h"
#include "util/log.h"
#include "http/respond.h"

static void http_date(int64_t ms, char out[64]) {
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  strftime(out, 64, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static enum MHD_Result bucket_error(struct MHD_Connection *conn, int rc,
                                    const char *key, const char *err) {
  switch (rc) {
  case MP_BUCKET_NOT_FOUND:
    return mp_send_error(conn, 404, "not_found", "object '%.200s' not found",
                         key);
  case MP_BUCKET_EXISTS:
    return mp_send_error(conn, 412, "invalid_request",
                         "object '%.200s' already exists (If-None-Match: *)",
                         key);
  case MP_BUCKET_BAD_KEY:
    return mp_send_error(conn, 400, "invalid_request", "bad key '%.200s'", key);
  case MP_BUCKET_NOSPACE:
    return mp_send_error(conn, 507, "insufficient_storage",
                         "the platform's disk is full: %s (free space under its"
                         " data directory, then try again)",
                         err && err[0] ? err : "no space");
  default:
    return mp_send_error(conn, 500, "internal_error", "storage error: %s",
                         err && err[0] ? err : "unknown");
  }
}

static enum MHD_Result list_objects(mp_server *srv,
                                    struct MHD_Connection *conn,
                                    const char *project, const char *bucket,
                                    const char *key) {
  int bad = 0, rc;
  char *prefix = mp_query_arg(conn, "prefix", &bad);
  char *delim = mp_query_arg(conn, "delimiter", &bad);
  mp_listing l;
  cJSON *root, *contents, *prefixes;
  size_t i;
  if (bad) {
    free(prefix);
    free(delim);
    return mp_send_error(conn, 400, "invalid_request",
                         "bad 'prefix' or 'delimiter' (escapes or NUL)");
  }
  if (prefix == NULL && key[0] != '\0') prefix = strdup(key);
  memset(&l, 0, sizeof l);
  rc = mp_bucket_list(srv->buckets, project, bucket, prefix ? prefix : "",
                      delim, &l);
  free(prefix);
  free(delim);
  if (rc < 0) return bucket_error(conn, rc, key, NULL);
  root = cJSON_CreateObject();
  contents = cJSON_AddArrayToObject(root, "contents");
  prefixes = cJSON_AddArrayToObject(root, "commonPrefixes");
  for (i = 0; i < l.ncontents; i++) {
    char ts[32];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "key", l.contents[i].key);
    cJSON_AddNumberToObject(o, "size", (double)l.contents[i].size);
    mp_iso8601(l.contents[i].mtime_ms, ts);
    cJSON_AddStringToObject(o, "lastModified", ts);
    cJSON_AddItemToArray(contents, o);
  }
  for (i = 0; i < l.nprefixes; i++)
    cJSON_AddItemToArray(prefixes, cJSON_CreateString(l.prefixes[i]));
  mp_listing_free(&l);
  return mp_send_json(conn, 200, root);
}

static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)cls;
  (void)pos;
  (void)buf;
  (void)max;
  return MHD_CONTENT_READER_END_WITH_ERROR;
}

/* Queue resp (the object's bytes, or only its size for HEAD) with the
** object's Last-Modified and Content-Type. Frees info. */
static enum MHD_Result queue_object(struct MHD_Connection *conn,
                                    struct MHD_Response *resp,
                                    mp_object_info *info) {
  char date[64];
  enum MHD_Result rc;
  if (resp == NULL) {
    mp_object_info_free(info);
    return MHD_NO;
  }
  http_date(info->mtime_ms, date);
  MHD_add_response_header(resp, "Last-Modified", date);
  MHD_add_response_header(resp, "Content-Type", info->content_type[0]
                          ? info->content_type : "application/octet-stream");
  mp_object_info_free(info);
  rc = MHD_queue_response(conn, 200, resp);
  MHD_destroy_response(resp);
  return rc;
}

static enum MHD_Result head_object(mp_server *srv, struct MHD_Connection *conn,
                                   const char *project, const char *bucket,
                                   const char *key) {
  mp_object_info info;
  int st;
  memset(&info, 0, sizeof info);
  st = mp_bucket_head(srv->buckets, project, bucket, key, &info);
  if (st < 0) return bucket_error(conn, st, key, NULL);
  /* HEAD: the size is announced, the reader is never called */
  return queue_object(conn, MHD_create_response_from_callback(
                                info.size, 4096, no_body, NULL, NULL),
                      &info);
}

/* a GET's object: libmicrohttpd sends it from its file (sendfile: no copy
** through user space, and the page cache's pages are not counted in the
** server's memory as a mapping's are). Safe because the store never
** changes an object file in place (a PUT renames a new file over it, a
** DELETE unlinks it): the open file keeps the bytes that were current when
** the GET began. */
static enum MHD_Result get_object(mp_server *srv, struct MHD_Connection *conn,
                                  const char *project, const char *bucket,
                                  const char *key) {
  mp_object_info info;
  struct MHD_Response *resp;
  uint64_t off;
  int fd, st;
  st = mp_bucket_open_read(srv->buckets, project, bucket, key, &fd, &off, &info);
  if (st < 0) return bucket_error(conn, st, key, NULL);
  /* the response owns fd from here, and closes it */
  resp = MHD_create_response_from_fd_at_offset64(info.size, fd, off);
  if (resp == NULL) {
    close(fd);
    mp_object_info_free(&info);
    return mp_send_error(conn, 500, "internal_error", "cannot read object %s",
                         key);
  }
  return queue_object(conn, resp, &info);
}

typedef struct put_state {
  mp_bucket_upload *u;   /* NULL once committed */
  int rc;                /* the first failure of a write */
  char err[512];
} put_state;

static int put_sink(void *state, const char *data, size_t len) {
  put_state *ps = state;
  if (ps->rc < 0) return -1;
  ps->rc = mp_bucket_upload_write(ps->u, data, len, ps->err, sizeof ps->err);
  return ps->rc < 0 ? -1 : 0;
}

static void put_state_free(void *state) {
  put_state *ps = state;
  mp_bucket_upload_abort(ps->u);
  free(ps);
}

static enum MHD_Result put_object(mp_server *srv, struct MHD_Connection *conn,
                                  const char *project, const char *bucket,
                                  const char *key, mp_request *r) {
  const char *inm =
      MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "If-None-Match");
  const char *type =
      MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
  int none_match = inm != NULL && strcmp(inm, "*") == 0;
  char err[512] = "";
  put_state *ps;
  int rc;
  if (r->begin) { /* the head: open the upload the body goes to */
    ps = calloc(1, sizeof *ps);
    if (ps == NULL) return MHD_NO;
    rc = mp_bucket_upload_begin(srv->buckets, project, bucket, key,
                                type ? type : "", &ps->u, err, sizeof err);
    if (rc < 0) {
      free(ps);
      return bucket_error(conn, rc, key, err);
    }
    r->state = ps;
    r->state_free = put_state_free;
    r->sink_write = put_sink;
    return MHD_YES;
  }
  if (r->sink_write != NULL) { /* the body is in: commit it */
    ps = r->state;
    if (ps->rc < 0) return bucket_error(conn, ps->rc, key, ps->err);
    rc = mp_bucket_upload_commit(ps->u, none_match, err, sizeof err);
    ps->u = NULL;
  } else {
    rc = mp_bucket_put(srv->buckets, project, bucket, key, r->body, r->len,
                       type ? type : "", none_match, err, sizeof err);
  }
  return rc < 0 ? bucket_error(conn, rc, key, err) : mp_send_empty(conn, 200);
}

static enum MHD_Result post_object(mp_server *srv, struct MHD_Connection *conn,
                                   const char *project, const char *bucket,
                                   const char *key, mp_request *r) {
  const char *op = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "op");
  char err[512] = "";
  int rc;
  if (op != NULL && strcmp(op, "mkdir") == 0) {
    rc = mp_bucket_mkdir(srv->buckets, project, bucket, key, err, sizeof err);
    if (rc < 0) return bucket_error(conn, rc, key, err);
    return mp_send_empty(conn, 201);
  }
  if (op != NULL && (strcmp(op, "copy") == 0 || strcmp(op, "rename") == 0)) {
    cJSON *body = mp_request_json(conn, r, 1);
    const cJSON *dest;
    const char *why;
    if (body == NULL) return MHD_YES;
    dest = cJSON_GetObjectItemCaseSensitive(body, "destination");
    if (!cJSON_IsString(dest) || dest->valuestring[0] == '\0') {
      cJSON_Delete(body);
      return mp_send_error(conn, 400, "invalid_request",
                           "field 'destination' must be a non-empty key");
    }
    why = mp_bucket_key_check(dest->valuestring, strlen(dest->valuestring));
    if (why != NULL) {
      enum MHD_Result out = mp_send_error(conn, 400, "invalid_request",
                                          "field 'destination': %s", why);
      cJSON_Delete(body);
      return out;
    }
    rc = mp_bucket_copy(srv->buckets, project, bucket, key,
                        dest->valuestring, op[0] == 'r', err, sizeof err);
    cJSON_Delete(body);
    if (rc < 0) return bucket_error(conn, rc, key, err);
    return mp_send_empty(conn, 204);
  }
  return mp_send_error(conn, 400, "invalid_request",
                       "POST on an object needs ?op=copy, ?op=rename or"
                       " ?op=mkdir");
}

enum MHD_Result mp_routes_bucket(mp_server *srv, struct MHD_Connection *conn,
                                 const char *method, const char *project,
                                 const char *raw_bucket, const char *raw_key,
                                 mp_request *r) {
  size_t blen, klen;
  char *bucket = mp_pct_decode(raw_bucket, strlen(raw_bucket), 0, &blen);
  char *key = mp_pct_decode(raw_key, strlen(raw_key), 0, &klen);
  const char *why = NULL;
  enum MHD_Result out;
  int rc;
  if (bucket == NULL || key == NULL) {
    why = "bad percent-escape in the path";
  } else if (strlen(bucket) != blen || (why = mp_bucket_name_check(bucket))) {
    if (why == NULL) why = "NUL byte in the bucket name";
  } else if (klen > 0 && (why = mp_bucket_key_check(key, klen)) != NULL) {
  }
  if (why != NULL) {
    out = mp_send_error(conn, 400, "invalid_request", "%s", why);
    goto done;
  }
  if (strcmp(method, "GET") == 0) {
    if (klen == 0 || key[klen - 1] == '/')
      out = list_objects(srv, conn, project, bucket, key);
    else
      out = get_object(srv, conn, project, bucket, key);
  } else if (strcmp(method, "HEAD") == 0) {
    out = head_object(srv, conn, project, bucket, key);
  } else if (klen == 0) {
    out = mp_send_error(conn, 400, "invalid_request",
                        "%s needs an object key", method);
  } else if (strcmp(method, "PUT") == 0) {
    out = put_object(srv, conn, project, bucket, key, r);
  } else if (strcmp(method, "DELETE") == 0) {
    rc = mp_bucket_delete(srv->buckets, project, bucket, key,
                          mp_query_true(conn, "recursive"));
    out = rc < 0 ? bucket_error(conn, rc, key, NULL) : mp_send_empty(conn, 204);
  } else if (strcmp(method, "POST") == 0) {
    out = post_object(srv, conn, project, bucket, key, r);
  } else {
    out = mp_send_error(conn, 405, "invalid_request",
                        "method %s is not allowed on objects", method);
  }
done:
  free(bucket);
  free(key);
  return out;
}
