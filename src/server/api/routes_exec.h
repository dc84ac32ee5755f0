/*
** The HTTP routes of resumable execs (routes_exec.c): /sandbox/{id}/execs
** and below, under the API's prefixes.
*/
#ifndef MP_ROUTES_EXEC_H
#define MP_ROUTES_EXEC_H

#include <microhttpd.h>

#include "http/request.h"
#include "sandbox/sandbox.h"

/* seg[2] is "execs" (nseg >= 3); seg[3] the exec id, seg[4] what of it */
enum MHD_Result mp_routes_exec(mp_server *srv, struct MHD_Connection *conn,
                               const char *method, mp_sandbox *sb,
                               char **seg, int nseg, mp_request *r);

#endif
