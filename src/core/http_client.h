/*
** HTTP client on the event loop: libcurl's multi_socket interface driven
** by mastra__io watchers and one mastra__timer (the shape of curl's
** docs/examples/multi-uv.c).
**
** Two layers:
**   - mastra__multi: one CURLM on the loop. Its socket callback starts and
**     stops a watcher per socket, its timer callback arms one timer; the
**     watchers and the timer call curl_multi_socket_action, then drain
**     curl_multi_info_read and hand each finished transfer to its `done`
**     function. The HTTP requests of a loop share one (created on first
**     use, shut down with the loop); each WebSocket has its own
**     (ws_client.h says why).
**   - mastra__http_req: one request with its response kept in C, or
**     streamed: its request body written in pieces (mastra__http_write,
**     mastra__http_finish) and its response body taken in pieces
**     (mastra__http_take), each direction paused while its queue is empty
**     (the body to send) or full (the body received).
**
** Invariants:
**   - No libcurl callback calls libcurl, Lua, or frees anything: the timer
**     callback only arms the loop's timer; the socket callback only starts,
**     stops and (deferred) frees watchers.
**   - A request signals its id on the loop when it finishes; a streamed
**     one also when received bytes wait in an empty queue, when its
**     send queue falls below MASTRA__HTTP_SEND_LOW and when it empties.
**     Nothing else does.
**   - Only the owner's calls (from Lua, never from a libcurl callback)
**     unpause a transfer (curl_easy_pause).
*/
#ifndef MASTRA_HTTP_CLIENT_H
#define MASTRA_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "loop.h"

#define MASTRA__HTTP_DEFAULT_TIMEOUT_MS 60000
#define MASTRA__HTTP_MAX_REDIRECTS 20
/* a streamed response pauses while this many received bytes wait */
#define MASTRA__HTTP_RECV_HIGH (256 * 1024)
/* a streamed request's id is signalled when its queue falls below this
** (and when it empties) */
#define MASTRA__HTTP_SEND_LOW (256 * 1024)

/* {====== a libcurl multi on the loop ====== */

typedef struct mastra__xfer mastra__xfer;
typedef struct mastra__multi mastra__multi;
typedef struct mastra__multi_sock mastra__multi_sock;

/* A transfer of a multi. CURLOPT_PRIVATE of `easy` points to it. `done`
** runs from the loop's dispatch once libcurl reports the transfer
** finished; it may remove the easy handle (mastra__multi_remove) and
** close the multi (mastra__multi_close), and must not free the multi. */
struct mastra__xfer {
  CURL *easy;
  void (*done)(mastra__xfer *x, CURLcode result);
  mastra__multi *multi;       /* while added */
  mastra__xfer *prev, *next;  /* the multi's list of transfers */
};

struct mastra__multi {
  mastra__loop *loop;
  CURLM *multi;               /* NULL once closed */
  mastra__timer timer;
  mastra__multi_sock *socks;  /* watched sockets */
  mastra__xfer *xfers;        /* added transfers */
  int depth;                  /* > 0 inside socket_action + drain */
  int close_pending;          /* close once depth drops to 0 */
};

/* Returns 0, or -1 when libcurl cannot create a multi handle. */
int mastra__multi_init(mastra__multi *m, mastra__loop *loop);
/* Remove every transfer (without calling `done`) and clean up. From
** inside a `done` function the cleanup waits until the drain returns. */
void mastra__multi_close(mastra__multi *m);
CURLMcode mastra__multi_add(mastra__multi *m, mastra__xfer *x);
/* Remove x's easy handle (no-op if it is not added). */
void mastra__multi_remove(mastra__xfer *x);

/* CURLE_COULDNT_CONNECT -> "CURLE_COULDNT_CONNECT" */
const char *mastra__curl_code_name(CURLcode rc);

/* }====== */

/* {====== HTTP requests ====== */

typedef struct mastra__http_header {
  char *name;   /* lower-cased */
  char *value;
} mastra__http_header;

typedef struct mastra__http_opts {
  const char *method;          /* NULL: GET */
  const char *url;
  const char *const *headers;  /* "Name: value" lines */
  size_t nheaders;
  const char *body;            /* NULL: none */
  size_t body_len;
  uint64_t timeout_ms;         /* 0: none */
  int no_follow;               /* 1: do not follow redirects */
  /* 1: a new connection, closed after: libcurl silently sends a request
  ** again when a kept-alive connection it reused drops before the answer,
  ** which a request that must not run twice (a create) cannot afford */
  int fresh_connection;
  const char *ca_file;         /* PEM bundle to trust; NULL: the system's */
  /* 1: the body comes through mastra__http_write and mastra__http_finish
  ** (`body` is ignored); body_size is its length (Content-Length), or -1
  ** when unknown (chunked) */
  int stream_body;
  int64_t body_size;
  /* 1: the response body is taken in pieces with mastra__http_take */
  int stream_response;
} mastra__http_opts;

typedef struct mastra__http_req mastra__http_req;

struct mastra__http_req {
  mastra__handle handle;
  mastra__xfer xfer;
  mastra__loop *loop;
  uint64_t id;
  struct curl_slist *req_headers;
  char *req_body;
  /* the response (of the last request when redirects were followed) */
  long status;
  mastra__http_header *headers;
  size_t nheaders, capheaders;
  char *body;                 /* streamed: the received bytes not yet taken */
  size_t body_len, body_cap;
  /* a streamed request body: the bytes queued to send are out[off..len) */
  char *out;
  size_t out_off, out_len, out_cap;
  int64_t out_size;           /* the announced length, or -1 */
  uint64_t out_total;         /* bytes written so far */
  /* the outcome */
  unsigned done : 1, orphan : 1, oom : 1, closed : 1;
  unsigned stream_body : 1, stream_response : 1, out_eof : 1, head : 1;
  unsigned send_paused : 1, recv_paused : 1;
  CURLcode result;
  char errbuf[CURL_ERROR_SIZE];
};

/* Start a request on the loop's shared multi. Returns 0, or -1 with
** `err` set (out of memory, the loop is closed). */
int mastra__http_start(mastra__loop *loop, const mastra__http_opts *opts,
                       mastra__http_req **out, char *err, size_t errlen);
/* The failure of a finished request: its CURLcode name and a message
** (curl_easy_strerror, then CURLOPT_ERRORBUFFER when it says more). */
const char *mastra__http_error_name(const mastra__http_req *r);
void mastra__http_error_message(const mastra__http_req *r, char *out,
                                size_t outlen);
/* A streamed request body: queue len bytes (all of them: the caller
** waits while mastra__http_buffered() >= MASTRA__HTTP_SEND_LOW). Returns 0,
** or -1 with *why set: "ENOTCONN" (the request finished: read its
** result), "EPIPE" (the body was finished), "EFBIG" (more than the
** announced size), "ENOMEM". */
int mastra__http_write(mastra__http_req *r, const char *data, size_t len,
                       const char **why);
/* The end of a streamed request body. -1 with *why ("ENOTCONN", "EPIPE",
** or "EINVAL": fewer bytes than the announced size). */
int mastra__http_finish(mastra__http_req *r, const char **why);
/* Bytes queued to send. */
size_t mastra__http_buffered(const mastra__http_req *r);
/* A streamed response: the received bytes waiting (*len may be 0); once
** the caller has copied them, mastra__http_taken empties the queue and
** lets the transfer go on. */
const char *mastra__http_take(mastra__http_req *r, size_t *len);
void mastra__http_taken(mastra__http_req *r);
/* The owner lets go: a running request is cancelled. Never signals. */
void mastra__http_release(mastra__http_req *r);

/* }====== */

#endif
