/*
** The sandbox routes of mastra-platform (routes_sandbox.c).
*/
#ifndef MP_ROUTES_SANDBOX_H
#define MP_ROUTES_SANDBOX_H

#include <microhttpd.h>

#include "http/request.h"
#include "server.h"

/* .../sandbox[/{id}[/{action}]]: seg holds the decoded path segments
** from "sandbox" on. */
enum MHD_Result mp_routes_sandbox(mp_server *srv, struct MHD_Connection *conn,
                                  const char *method, const char *project,
                                  char **seg, int nseg, mp_request *r);

#endif
