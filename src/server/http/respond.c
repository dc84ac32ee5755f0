/*
** Responses of mastra-platform (see respond.h): every answer of the HTTP
** routes, the errors of the exec WebSocket handshake included, is queued
** here. An error answer (4xx, 5xx) closes its connection.
*/
#include "http/respond.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum MHD_Result send_buffer(struct MHD_Connection *conn, int status,
                                   const char *type, void *data, size_t len) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
  enum MHD_Result rc;
  if (resp == NULL) {
    free(data);
    return MHD_NO;
  }
  if (type != NULL) MHD_add_response_header(resp, "Content-Type", type);
  /* an error ends its connection: a client refused (401, a bad head) keeps
  ** nothing open, and whatever followed a bad request is not read as the
  ** next one */
  if (status >= 400) MHD_add_response_header(resp, "Connection", "close");
  rc = MHD_queue_response(conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return rc;
}

enum MHD_Result mp_send_json(struct MHD_Connection *conn, int status,
                             cJSON *json) {
  char *text = cJSON_PrintUnformatted(json);
  cJSON_Delete(json);
  if (text == NULL) return MHD_NO;
  return send_buffer(conn, status, "application/json", text, strlen(text));
}

enum MHD_Result mp_send_empty(struct MHD_Connection *conn, int status) {
  return send_buffer(conn, status, NULL, NULL, 0);
}

enum MHD_Result mp_send_error(struct MHD_Connection *conn, int status,
                              const char *type, const char *fmt, ...) {
  char msg[1024];
  cJSON *root = cJSON_CreateObject(), *e = cJSON_CreateObject();
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  cJSON_AddStringToObject(e, "message", msg);
  cJSON_AddStringToObject(e, "type", type);
  cJSON_AddItemToObject(root, "error", e);
  return mp_send_json(conn, status, root);
}
