/*
** The template routes of mastra-platform (routes_template.c).
*/
#ifndef MP_ROUTES_TEMPLATE_H
#define MP_ROUTES_TEMPLATE_H

#include <microhttpd.h>

#include "http/request.h"
#include "server.h"

/* .../sandbox/templates[/builds | /{id}] (seg from "sandbox" on), and
** upstream's older .../templates[/{id}] (seg from "templates" on) */
enum MHD_Result mp_routes_template(mp_server *srv, struct MHD_Connection *conn,
                                   const char *method, const char *project,
                                   char **seg, int nseg, mp_request *r);

#endif
