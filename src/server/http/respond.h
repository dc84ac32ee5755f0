/*
** Responses of mastra-platform (respond.c): JSON bodies, empty bodies and
** the errors of the protocol, {"error":{"message":...,"type":...}}. Each
** returns what a libmicrohttpd request handler returns.
*/
#ifndef MP_RESPOND_H
#define MP_RESPOND_H

#include <stddef.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>

/* Queue json (which is deleted) as the body, application/json. */
enum MHD_Result mp_send_json(struct MHD_Connection *conn, int status,
                             cJSON *json);
enum MHD_Result mp_send_empty(struct MHD_Connection *conn, int status);
/* Queue {"error":{"message":...,"type":...}} with status. */
enum MHD_Result mp_send_error(struct MHD_Connection *conn, int status,
                              const char *type, const char *fmt, ...);

#endif
