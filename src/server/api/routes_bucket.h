/*
** The bucket routes of mastra-platform (routes_bucket.c).
*/
#ifndef MP_ROUTES_BUCKET_H
#define MP_ROUTES_BUCKET_H

#include <microhttpd.h>

#include "http/request.h"
#include "server.h"

/* .../fs/{raw_bucket}/{raw_key}: both still percent-encoded. */
enum MHD_Result mp_routes_bucket(mp_server *srv, struct MHD_Connection *conn,
                                 const char *method, const char *project,
                                 const char *raw_bucket, const char *raw_key,
                                 mp_request *r);

#endif
