/*
** The template routes of mastra-platform (docs/platform.md "Templates"):
**
**   POST   .../sandbox/templates/builds  {environmentId, templateDefinition,
**          templateBuildEnvs?} -> {status: ready|pending|failed, templateId,
**          retryAfterMs?, error?} (upstream's Template.build)
**   GET    .../sandbox/templates[?environmentId=]   ours: the list
**   GET    .../sandbox/templates/{id}[?environmentId=]  ours: one
**   DELETE .../sandbox/templates/{id}[?environmentId=]  ours: cancel its
**          build, remove it (409 while a sandbox uses it)
**   POST   .../templates {environmentId, definition} -> 202 {templateId,
**          status: queued|building|ready|failed, error} (upstream's
**          PlatformTemplateClient)
**   GET    .../templates/{id}?environmentId=  the same answer
**
** A build request of a failed template answers failed (with its error)
** until it is retried (the inspector's Retry, or "retry": true here).
*/
#include "api/routes_template.h"

#include <stdio.h>
#include <string.h>

#include "http/respond.h"
#include "sandbox/sandbox.h"
#include "sandbox/template.h"
#include "util/log.h"

static const char *env_query(struct MHD_Connection *conn) {
  return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND,
                                     MP_CREATE_ENVIRONMENT);
}

static enum MHD_Result build(mp_server *srv, struct MHD_Connection *conn,
                             const char *project, mp_request *r, int legacy) {
  cJSON *body = mp_request_json(conn, r, 0);
  const cJSON *env, *def, *benv, *retry;
  mp_template *t;
  char err[1400];
  int rc;
  if (body == NULL) return MHD_YES;
  env = cJSON_GetObjectItemCaseSensitive(body, MP_CREATE_ENVIRONMENT);
  def = cJSON_GetObjectItemCaseSensitive(body, legacy ? "definition" : MP_CREATE_TEMPLATE);
  benv = cJSON_GetObjectItemCaseSensitive(body, MP_CREATE_TEMPLATE_ENVS);
  retry = cJSON_GetObjectItemCaseSensitive(body, "retry");
  if (!cJSON_IsString(env) || env->valuestring[0] == '\0'
      || strlen(env->valuestring) >= MP_NAME_MAX) {
    cJSON_Delete(body);
    return mp_send_error(conn, 400, "invalid_request",
                         "field 'environmentId' is required");
  }
  if (def == NULL) {
    cJSON_Delete(body);
    return mp_send_error(conn, 400, "invalid_request", "field '%s' is required",
                         legacy ? "definition" : MP_CREATE_TEMPLATE);
  }
  rc = mp_template_request(srv, project, env->valuestring, def, benv, &t, err,
                           sizeof err);
  if (rc == 0 && cJSON_IsTrue(retry) && mp_template_status_of(t) == MP_TEMPLATE_FAILED)
    rc = mp_template_retry(srv, t, err, sizeof err);
  cJSON_Delete(body);
  if (rc == -2) return mp_send_error(conn, 400, "invalid_request", "%s", err);
  if (rc < 0) return mp_send_error(conn, 500, "internal_error", "%s", err);
  return mp_send_json(conn, legacy ? 202 : 200, mp_template_json(t, legacy));
}

static mp_template *lookup(mp_server *srv, struct MHD_Connection *conn,
                           const char *project, const char *id) {
  return mp_template_find(srv, project, env_query(conn), id);
}

enum MHD_Result mp_routes_template(mp_server *srv, struct MHD_Connection *conn,
                                   const char *method, const char *project,
                                   char **seg, int nseg, mp_request *r) {
  int legacy = strcmp(seg[0], "templates") == 0;
  int base = legacy ? 1 : 2; /* the segments before {id} */
  mp_template *t;
  char err[512];
  if (srv->stopping)
    return mp_send_error(conn, 503, "unavailable", "the platform is shutting down");
  if (legacy && nseg == 1 && strcmp(method, "POST") == 0)
    return build(srv, conn, project, r, 1);
  if (!legacy && nseg == 3 && strcmp(seg[2], "builds") == 0) {
    if (strcmp(method, "POST") == 0) return build(srv, conn, project, r, 0);
    return mp_send_error(conn, 405, "invalid_request", "use POST to build a template");
  }
  if (nseg == base && strcmp(method, "GET") == 0)
    return mp_send_json(conn, 200, mp_template_list(srv, project, env_query(conn)));
  if (nseg != base + 1)
    return mp_send_error(conn, 404, "not_found", "no such template route");
  t = lookup(srv, conn, project, seg[base]);
  if (t == NULL)
    return mp_send_error(conn, 404, "not_found", "template %.64s not found", seg[base]);
  if (strcmp(method, "GET") == 0) return mp_send_json(conn, 200, mp_template_json(t, legacy));
  if (strcmp(method, "DELETE") == 0) {
    char id[64];
    snprintf(id, sizeof id, "%s", mp_template_id(t));
    if (mp_template_remove(srv, t, err, sizeof err) < 0)
      return mp_send_error(conn, 409, "conflict", "%s", err);
    mp_log("template %s removed", id);
    return mp_send_empty(conn, 204);
  }
  return mp_send_error(conn, 405, "invalid_request", "use GET or DELETE on a template");
}
