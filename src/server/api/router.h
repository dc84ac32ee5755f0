/*
** The router of mastra-platform (router.c): authentication and dispatch.
*/
#ifndef MP_ROUTER_H
#define MP_ROUTER_H

#include <stddef.h>

#include <microhttpd.h>

#include "http/request.h"
#include "server.h"

/* Whether the request may go on: the bearer token matches (constant-time
** compare), or the path admits by other means (/ws/exec: its lease). */
int mp_router_authorized(mp_server *srv, struct MHD_Connection *conn,
                         const char *url);
/* The largest body the route of url accepts. */
size_t mp_router_body_limit(mp_server *srv, const char *url,
                            const char *method);
/* Whether the route of url takes its body as it comes (a bucket PUT):
** then mp_route is called once at the head with r->begin set, and the
** route sets r->sink_write (or answers at once). */
int mp_router_streams_body(const char *url, const char *method);
/* Answer a request whose body has arrived (r->body, r->len). */
enum MHD_Result mp_route(mp_server *srv, struct MHD_Connection *conn,
                         const char *url, const char *method, mp_request *r);

#endif
