/*
** The inspector's JSON endpoints (inspector_api.c), after inspector.c has
** authenticated the request (docs/inspector.md lists them).
*/
#ifndef MP_INSPECTOR_API_H
#define MP_INSPECTOR_API_H

#include <stddef.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

#include "http/request.h"
#include "server.h"

/* The largest body that the route of url takes. */
size_t mp_inspector_api_limit(mp_server *srv, const char *url,
                              const char *method);
/* Answer /api/... (everything but /api/session and /api/login-links). */
enum MHD_Result mp_inspector_api(mp_server *srv, struct MHD_Connection *conn,
                                 const char *url, const char *method,
                                 mp_request *r);
/* [{projectId, environmentId}] of every environment the platform knows */
cJSON *mp_inspector_environments(mp_server *srv);

#endif
