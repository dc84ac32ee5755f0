/*
** The sandbox routes of mastra-platform, under /v1/.../projects/{p}/sandbox
** (docs/platform.md): create, get, delete, the checkpoint routes and the
** exec lease; POST .../exec (the legacy exec) is exec_legacy.c.
*/
#include "routes_sandbox.h"

#include <stdio.h>
#include <string.h>

#include "checkpoint.h"
#include "exec_legacy.h"
#include "lease.h"
#include "log.h"
#include "respond.h"
#include "sandbox.h"

/* providerResourceId: proc_<hex> for sbx_<hex> */
static void add_provider_id(cJSON *o, const mp_sandbox *sb) {
  char prid[MP_ID_MAX + 8];
  snprintf(prid, sizeof prid, "proc_%s", sb->id + 4);
  cJSON_AddStringToObject(o, "providerResourceId", prid);
}

static cJSON *sandbox_json(const mp_sandbox *sb) {
  char ts[32];
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", sb->id);
  add_provider_id(o, sb);
  cJSON_AddStringToObject(o, "status", sb->destroyed_ms ? "destroyed" : "ready");
  mp_iso8601(sb->created_ms, ts);
  cJSON_AddStringToObject(o, "createdAt", ts);
  if (sb->destroyed_ms) {
    mp_iso8601(sb->destroyed_ms, ts);
    cJSON_AddStringToObject(o, "destroyedAt", ts);
  } else {
    cJSON_AddNullToObject(o, "destroyedAt");
  }
  cJSON_AddNullToObject(o, "instanceUrl");
  cJSON_AddStringToObject(o, "environmentId", sb->environment);
  cJSON_AddStringToObject(o, "networkIsolation", sb->network);
  cJSON_AddBoolToObject(o, "restoredFromCheckpoint", sb->restored);
  return o;
}

static const char *opt_string(const cJSON *body, const char *field,
                              char *why, size_t n, int *bad) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, field);
  if (v == NULL || cJSON_IsNull(v)) return NULL;
  if (!cJSON_IsString(v)) {
    snprintf(why, n, "field '%s' must be a string", field);
    *bad = 1;
    return NULL;
  }
  return v->valuestring;
}

static enum MHD_Result create_sandbox(mp_server *srv,
                                      struct MHD_Connection *conn,
                                      const char *project, mp_request *r) {
  cJSON *body = mp_request_json(conn, r, 0);
  const cJSON *v, *env;
  mp_create_spec spec;
  mp_sandbox *sb;
  char why[512] = "", err[512];
  int bad = 0;
  if (body == NULL) return MHD_YES;
  memset(&spec, 0, sizeof spec);
  spec.project = project;
  spec.recovery_key = opt_string(body, "id", why, sizeof why, &bad);
  if (!bad) spec.environment = opt_string(body, "environmentId", why, sizeof why, &bad);
  if (!bad) spec.network = opt_string(body, "networkIsolation", why, sizeof why, &bad);
  if (!bad && (spec.environment == NULL || spec.environment[0] == '\0')) {
    snprintf(why, sizeof why, "field 'environmentId' is required");
    bad = 1;
  }
  if (!bad && spec.network != NULL && strcmp(spec.network, "ISOLATED") != 0
      && strcmp(spec.network, "PRIVATE") != 0) {
    snprintf(why, sizeof why, "field 'networkIsolation' must be \"ISOLATED\""
             " or \"PRIVATE\" (got \"%.64s\")", spec.network);
    bad = 1;
  }
  v = cJSON_GetObjectItemCaseSensitive(body, "idleTimeoutMinutes");
  if (!bad && v != NULL && !cJSON_IsNull(v)) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 525600) {
      snprintf(why, sizeof why, "field 'idleTimeoutMinutes' must be a number"
               " of minutes between 0 and 525600");
      bad = 1;
    } else {
      spec.idle_timeout_min = v->valuedouble;
    }
  }
  env = cJSON_GetObjectItemCaseSensitive(body, "env");
  if (!bad && mp_env_check(env, "env", why, sizeof why) < 0) bad = 1;
  if (!bad && spec.recovery_key && strlen(spec.recovery_key) >= MP_NAME_MAX) {
    snprintf(why, sizeof why, "field 'id' is longer than %d bytes",
             MP_NAME_MAX - 1);
    bad = 1;
  }
  if (!bad && strlen(spec.environment) >= MP_NAME_MAX) {
    snprintf(why, sizeof why, "field 'environmentId' is too long");
    bad = 1;
  }
  if (bad) {
    cJSON_Delete(body);
    return mp_send_error(conn, 400, "invalid_request", "%s", why);
  }
  spec.env = cJSON_IsObject(env) ? env : NULL;
  if (mp_sandbox_create(srv, &spec, &sb, err, sizeof err) < 0) {
    cJSON_Delete(body);
    return mp_send_error(conn, 500, "internal_error",
                         "cannot create the sandbox: %s", err);
  }
  cJSON_Delete(body);
  mp_log("created %s (project %s, environment %s%s%s)", sb->id, sb->project,
         sb->environment, sb->restored ? ", restored from checkpoint" : "",
         sb->recovery_key[0] ? "" : ", no recovery key");
  return mp_send_json(conn, 201, sandbox_json(sb));
}

static enum MHD_Result lease(mp_server *srv, struct MHD_Connection *conn,
                             mp_sandbox *sb) {
  char token[2 * MP_LEASE_TOKEN_BYTES + 1], ts[32];
  int64_t expires;
  cJSON *o;
  if (mp_lease_mint(srv, sb, token, &expires) < 0)
    return mp_send_error(conn, 500, "internal_error", "cannot mint a lease");
  o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "provider", "railway");
  cJSON_AddStringToObject(o, "sandboxId", sb->id);
  add_provider_id(o, sb);
  cJSON_AddStringToObject(o, "jwt", token);
  cJSON_AddStringToObject(o, "wsEndpoint", srv->ws_url);
  cJSON_AddStringToObject(o, "subprotocol", "railway-shell");
  mp_iso8601(expires, ts);
  cJSON_AddStringToObject(o, "expiresAt", ts);
  return mp_send_json(conn, 200, o);
}

static enum MHD_Result checkpoint(mp_server *srv, struct MHD_Connection *conn,
                                  mp_sandbox *sb, mp_request *r, int del) {
  cJSON *body = mp_request_json(conn, r, 0);
  const cJSON *id;
  char name[64];
  int rc;
  if (body == NULL) return MHD_YES;
  id = cJSON_GetObjectItemCaseSensitive(body, "id");
  if (id != NULL && !cJSON_IsNull(id) && !cJSON_IsString(id)) {
    cJSON_Delete(body);
    return mp_send_error(conn, 400, "invalid_request",
                         "field 'id' must be a string");
  }
  if (cJSON_IsString(id) && sb->recovery_key[0] == '\0'
      && strlen(id->valuestring) < MP_NAME_MAX)
    snprintf(sb->recovery_key, sizeof sb->recovery_key, "%s", id->valuestring);
  cJSON_Delete(body);
  if (del) {
    if (sb->recovery_key[0] == '\0' || mp_checkpoint_delete(srv, sb) < 0)
      return mp_send_error(conn, 404, "not_found",
                           "sandbox %s has no checkpoint", sb->id);
    return mp_send_empty(conn, 204);
  }
  if (sb->destroyed_ms)
    return mp_send_error(conn, 410, "gone", "sandbox %s was destroyed", sb->id);
  rc = mp_checkpoint_capture(srv, sb, name, 1);
  if (rc < 0)
    return mp_send_error(conn, 500, "internal_error",
                         "capturing the checkpoint of %s failed", sb->id);
  body = cJSON_CreateObject();
  cJSON_AddStringToObject(body, "checkpointName", name);
  cJSON_AddStringToObject(body, "status", rc == 0 ? "captured" : "skipped");
  return mp_send_json(conn, 200, body);
}

enum MHD_Result mp_routes_sandbox(mp_server *srv, struct MHD_Connection *conn,
                                  const char *method, const char *project,
                                  char **seg, int nseg, mp_request *r) {
  mp_sandbox *sb;
  if (nseg == 1) {
    if (strcmp(method, "POST") == 0)
      return create_sandbox(srv, conn, project, r);
    return mp_send_error(conn, 405, "invalid_request",
                         "use POST to create a sandbox");
  }
  sb = mp_sandbox_lookup(srv, project, seg[1]);
  if (sb == NULL)
    return mp_send_error(conn, 404, "not_found", "sandbox %.64s not found",
                         seg[1]);
  if (nseg == 2) {
    if (strcmp(method, "GET") == 0) return mp_send_json(conn, 200, sandbox_json(sb));
    if (strcmp(method, "DELETE") == 0) {
      if (!sb->destroyed_ms) mp_log("destroying %s", sb->id);
      mp_sandbox_destroy(srv, sb);
      return mp_send_empty(conn, 204);
    }
  } else if (nseg == 3 && strcmp(seg[2], "exec-lease") == 0
             && strcmp(method, "POST") == 0) {
    if (sb->destroyed_ms)
      return mp_send_error(conn, 410, "gone", "sandbox %s was destroyed",
                           sb->id);
    return lease(srv, conn, sb);
  } else if (nseg == 3 && strcmp(seg[2], "checkpoint") == 0
             && (strcmp(method, "POST") == 0 || strcmp(method, "DELETE") == 0)) {
    return checkpoint(srv, conn, sb, r, method[0] == 'D');
  } else if (nseg == 3 && strcmp(seg[2], "exec") == 0
             && strcmp(method, "POST") == 0) {
    return mp_exec_legacy(srv, conn, sb, r);
  }
  return mp_send_error(conn, 404, "not_found",
                       "no route for %s /sandbox/%.64s%s%.32s", method, seg[1],
                       nseg > 2 ? "/" : "", nseg > 2 ? seg[2] : "");
}
