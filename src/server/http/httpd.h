/*
** The HTTP daemons of mastra-platform (httpd.c): one pipeline (body
** limits, admission, the head deadline, streamed bodies, the in-flight
** body budget) for every site the server serves. A site says what its
** requests mean: the API (api/router.c) and the inspector
** (inspector/inspector.c).
*/
#ifndef MP_HTTPD_H
#define MP_HTTPD_H

#include <stddef.h>

#include <microhttpd.h>

#include "http/request.h"
#include "server.h"

/* the most connections libmicrohttpd takes, whatever the fd limit */
#define MP_CONNECTIONS_MAX 60000u
/* the default bound of the bodies read at once (srv->max_uploads) */
#define MP_UPLOADS_DEFAULT ((size_t)512 << 20)
/* the default deadline of a request's head (srv->header_timeout_s) */
#define MP_HEADER_TIMEOUT_DEFAULT_S 30u

typedef struct mp_site {
  const char *name; /* in messages: "API", "inspector" */
  /* the largest body the route of url takes */
  size_t (*body_limit)(mp_server *srv, const char *url, const char *method);
  /* whether the request may go on, at its head: 1; else 0 after queueing
  ** the answer (401, 403, 421, ...) whose result is *rc */
  int (*admit)(mp_server *srv, struct MHD_Connection *conn, const char *url,
               const char *method, enum MHD_Result *rc);
  /* whether url is routed at its head, before admission and any body (the
  ** API's /ws/exec: its lease admits it); NULL: none is */
  int (*at_head)(const char *url);
  /* whether the route of url takes its body as it comes (a bucket PUT):
  ** then route is called once at the head with r->begin set, and it sets
  ** r->sink_write (or answers at once); NULL: none does */
  int (*streams_body)(const char *url, const char *method);
  /* answer a request whose body has arrived (r->body, r->len) */
  enum MHD_Result (*route)(mp_server *srv, struct MHD_Connection *conn,
                           const char *url, const char *method,
                           mp_request *r);
  unsigned connection_limit; /* 0: 3/4 of the descriptor limit */
  int upgrades;              /* routes may suspend or upgrade connections */
} mp_site;

typedef struct mp_httpd mp_httpd;

struct sockaddr_storage;
/* Parse a --listen value, HOST:PORT (an IPv4 address, or an IPv6 one in
** brackets), into ss; host gets the address without brackets. -1: err
** says what is wrong. */
int mp_parse_listen(const char *listen, struct sockaddr_storage *ss,
                    char *host, size_t hostlen, char *err, size_t errlen);
/* Serve site on HOST:PORT (port 0: a free one), on srv's loop; NULL: err
** says why. */
mp_httpd *mp_httpd_start(mp_server *srv, const mp_site *site,
                         const char *listen, char *err, size_t errlen);
/* HOST:PORT (IPv6 in brackets) and the port it listens on */
const char *mp_httpd_address(const mp_httpd *h);
int mp_httpd_port(const mp_httpd *h);
/* Milliseconds until the daemon needs mp_httpd_run, -1: none (or h is
** NULL). */
int mp_httpd_timeout(const mp_httpd *h);
void mp_httpd_run(mp_httpd *h);
/* Stop accepting connections (those open are still served). */
void mp_httpd_quiesce(mp_httpd *h);
/* Stop and free h (NULL: nothing) */
void mp_httpd_stop(mp_httpd *h);

#endif
