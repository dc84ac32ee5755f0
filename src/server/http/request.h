/*
** A request to mastra-platform (request.c): its state while libmicrohttpd
** delivers it (httpd.c fills the body), and the pieces the routes read:
** the JSON body, query arguments, percent-decoded path parts.
*/
#ifndef MP_REQUEST_H
#define MP_REQUEST_H

#include <stddef.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

typedef struct mp_request {
  char *body;
  size_t len, cap, limit;
  int too_large;
  int busy;             /* the body would pass srv->max_uploads: 503 */
  size_t reserved;      /* bytes of srv->uploads_in_flight it holds */
  size_t *in_flight;    /* where they are counted (released at the end) */
  int responded;        /* a response was queued early (401, 413) */
  /* a route's state across a suspension of the connection (the legacy
  ** exec): state_free(state) runs when the request ends, however it ends */
  void *state;
  void (*state_free)(void *state);
  /* a body taken as it comes instead of into `body` (a bucket PUT: the
  ** route sets it when called with `begin` at the head, router.h):
  ** sink_write(state, piece, len) returns 0, or -1 once it failed (the
  ** rest is dropped; the route answers the failure at the end). len still
  ** counts the bytes. */
  int begin;
  int (*sink_write)(void *state, const char *data, size_t len);
  int sink_failed;
} mp_request;

/* A request handler's calls after the first: take the body as it comes
** (past r->limit nothing more is kept; bytes past what the request reserved
** are counted in *in_flight, up to max_in_flight). 1: this call is done,
** return *result (more body is welcome, an early answer was queued, a 413
** for a body over the limit or a 503 past max_in_flight); 0: the body is
** complete, answer the request. */
int mp_request_feed(struct MHD_Connection *conn, mp_request *r,
                    const char *upload, size_t *upload_size,
                    size_t *in_flight, size_t max_in_flight,
                    enum MHD_Result *result);
/* A request's head, for the first call of either daemon's handler: its
** body's announced length in *length (0 without Content-Length). 1: fine;
** 0: two or more Content-Length headers (their lengths could disagree),
** after answering 400 (r->responded is set): return *result. */
int mp_request_length(struct MHD_Connection *conn, mp_request *r,
                      unsigned long long *length, enum MHD_Result *result);
/* The end of a request, however it ended (MHD_OPTION_NOTIFY_COMPLETED):
** its reservation is given back, state_free runs, the request is freed. */
void mp_request_completed(void *cls, struct MHD_Connection *conn,
                          void **req_cls,
                          enum MHD_RequestTerminationCode why);
/* Whether the JSON text has a \u0000 escape inside a string: cJSON would
** silently cut the string there, so such bodies (and exec WebSocket
** messages) are refused. */
int mp_json_has_nul(const char *s, size_t n);

/* The body as a JSON object (an empty body is {} unless required); NULL
** after answering 400. */
cJSON *mp_request_json(struct MHD_Connection *conn, mp_request *r,
                       int required);

/* Percent-decode s[0..n) into a new string; plus_space for query values.
** NULL on a bad escape; *out_len gets the length (NUL bytes included). */
char *mp_pct_decode(const char *s, size_t n, int plus_space, size_t *out_len);

/* Percent-encode s into out (n bytes, always terminated; cut short when
** it does not fit): every byte but the unreserved A-Z a-z 0-9 - . _ ~.
** Returns the length written. */
size_t mp_pct_encode(const char *s, char *out, size_t n);

/* A query argument, decoded (malloc'd), or NULL when absent; *bad is set
** for a bad escape or a NUL byte. */
char *mp_query_arg(struct MHD_Connection *conn, const char *name, int *bad);
/* whether the query argument is the text "true" */
int mp_query_true(struct MHD_Connection *conn, const char *name);

#endif
