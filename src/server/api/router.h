/*
** The router of mastra-platform (router.c): the API's site of the HTTP
** pipeline (http/httpd.h): authentication, paths and dispatch.
*/
#ifndef MP_ROUTER_H
#define MP_ROUTER_H

#include <stddef.h>

#include "server.h"

/* Serve the API on HOST:PORT (port 0: a free one): srv->api, and
** srv->base_url and srv->ws_url. -1: err says why. */
int mp_api_start(mp_server *srv, const char *listen, char *err,
                 size_t errlen);

#endif
