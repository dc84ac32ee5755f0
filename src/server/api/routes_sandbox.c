/*
** The sandbox routes of mastra-platform, under /v1/.../projects/{p}/sandbox
** (docs/platform.md): create, get, delete, the checkpoint routes and the
** exec lease; POST .../exec (the legacy exec) is exec_legacy.c.
**
** A create that restores a checkpoint, a DELETE that captures one and a
** POST /checkpoint wait for tar (checkpoint.c) with the connection
** suspended; the waiting state hangs on the request, so a client that
** goes away is forgotten, and the tar goes on.
*/
#include "api/routes_sandbox.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/routes_exec.h"
#include "sandbox/checkpoint.h"
#include "sandbox/execs.h"
#include "api/exec_legacy.h"
#include "sandbox/lease.h"
#include "util/log.h"
#include "sandbox/record.h"
#include "http/respond.h"
#include "sandbox/sandbox.h"
#include "sandbox/template.h"

/* providerResourceId: proc_<hex> for sbx_<hex> */
static void add_provider_id(cJSON *o, const mp_sandbox *sb) {
  char prid[MP_ID_MAX + 8];
  snprintf(prid, sizeof prid, "proc_%s", sb->id + 4);
  cJSON_AddStringToObject(o, "providerResourceId", prid);
}

/* o[key] = the comma-separated rules of list, as a JSON list */
static void add_rule_list(cJSON *o, const char *key, const char *list) {
  cJSON *a = cJSON_AddArrayToObject(o, key);
  char rule[512];
  while (a != NULL && *list) {
    size_t n = strcspn(list, ",");
    if (n > 0 && n < sizeof rule) {
      memcpy(rule, list, n);
      rule[n] = '\0';
      cJSON_AddItemToArray(a, cJSON_CreateString(rule));
    }
    list += n + (list[n] == ',');
  }
}

static cJSON *sandbox_json(const mp_sandbox *sb) {
  char ts[32];
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", sb->id);
  add_provider_id(o, sb);
  /* "destroying": destroyed, and some of its processes are still being
  ** killed (drain.c) */
  cJSON_AddStringToObject(o, "status", !sb->destroyed_ms ? "ready"
                          : sb->draining ? "destroying" : "destroyed");
  mp_iso8601(sb->created_ms, ts);
  cJSON_AddStringToObject(o, "createdAt", ts);
  if (sb->destroyed_ms) {
    mp_iso8601(sb->destroyed_ms, ts);
    cJSON_AddStringToObject(o, "destroyedAt", ts);
  } else {
    cJSON_AddNullToObject(o, "destroyedAt");
  }
  cJSON_AddNullToObject(o, "instanceUrl");
  cJSON_AddStringToObject(o, MP_CREATE_ENVIRONMENT, sb->environment);
  cJSON_AddStringToObject(o, MP_CREATE_NETWORK, sb->network);
  /* ours (not upstream's): the driver that runs it, process | namespaces */
  cJSON_AddStringToObject(o, "driver", sb->srv->driver->name);
  if (sb->srv->driver->limits != NULL)
    cJSON_AddStringToObject(o, "limits", sb->srv->driver->limits(sb->srv));
  /* ours: its template's limits and working directory (the namespaces
  ** driver's cgroups; docs/platform.md "Templates") */
  if (sb->cpu_count > 0) cJSON_AddNumberToObject(o, "cpuCount", sb->cpu_count);
  if (sb->memory_mb > 0) cJSON_AddNumberToObject(o, "memoryMB", sb->memory_mb);
  if (sb->workdir[0] != '\0') cJSON_AddStringToObject(o, "workdir", sb->workdir);
  cJSON_AddBoolToObject(o, "restoredFromCheckpoint", sb->restored);
  if (sb->restored_from[0] != '\0')
    cJSON_AddStringToObject(o, "restoredCheckpointName", sb->restored_from);
  else
    cJSON_AddNullToObject(o, "restoredCheckpointName");
  cJSON_AddBoolToObject(o, "checkpointDeleted", sb->checkpoint_deleted);
  if (sb->egress_rules) { /* ours: its own rules, PUT /sandbox/{id}/egress */
    cJSON *rules = cJSON_AddObjectToObject(o, "egressRules");
    if (rules != NULL) {
      if (sb->egress_allow_given) add_rule_list(rules, "allow", sb->egress_allow);
      add_rule_list(rules, "deny", sb->egress_deny);
    }
  }
  /* ours: the counts of its outbound connections (the namespaces driver) */
  if (sb->srv->driver->egress != NULL) {
    cJSON *e = cJSON_CreateObject();
    if (e != NULL && sb->srv->driver->egress((mp_sandbox *)sb, e, 0) == 0)
      cJSON_AddItemToObject(o, "egress", e);
    else
      cJSON_Delete(e);
  }
  return o;
}

/* GET /sandbox/{id}/egress (ours): the counts and the log */
static enum MHD_Result egress_log(struct MHD_Connection *conn, mp_sandbox *sb) {
  cJSON *o;
  if (sb->srv->driver->egress == NULL)
    return mp_send_error(conn, 404, "not_found", "the %s driver has no egress log",
                         sb->srv->driver->name);
  o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "sandboxId", sb->id);
  sb->srv->driver->egress(sb, o, 1 << 20);
  return mp_send_json(conn, 200, o);
}

/* The rules of body[key] (a list of strings, each one rule) joined with
** commas into out: 1 (given), 0 (absent), -1 and why */
static int rule_list(const cJSON *body, const char *key, char *out, size_t n,
                     char *why, size_t wn) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(body, key), *e;
  size_t len = 0;
  out[0] = '\0';
  if (v == NULL) return 0;
  if (!cJSON_IsArray(v)) {
    snprintf(why, wn, "field '%s' must be a list of rules (CIDRs a.b.c.d/n,"
             " addresses, domain names, *.names)", key);
    return -1;
  }
  cJSON_ArrayForEach(e, v) {
    size_t el = cJSON_IsString(e) ? strlen(e->valuestring) : 0;
    if (el == 0 || strcspn(e->valuestring, ", \t\r\n") != el) {
      snprintf(why, wn, "field '%s' holds %s: each item is one rule (a CIDR"
               " a.b.c.d/n, an address, a domain name or *.name)", key,
               cJSON_IsString(e) ? "an empty item or one with a space or a"
               " comma" : "an item that is not a string");
      return -1;
    }
    if (len + el + 2 > n) {
      snprintf(why, wn, "field '%s' has more than %zu bytes of rules", key, n - 2);
      return -1;
    }
    if (len > 0) out[len++] = ',';
    memcpy(out + len, e->valuestring, el + 1);
    len += el;
  }
  return 1;
}

/* PUT /sandbox/{id}/egress (ours; the lease lists "egressRules"): the
** sandbox's own allow and deny rules, which narrow the server's policy.
** Set once: a second PUT is a 409, so no rule can be widened later. */
static enum MHD_Result egress_rules(mp_server *srv, struct MHD_Connection *conn,
                                    mp_sandbox *sb, mp_request *r) {
  char allow[sizeof sb->egress_allow], deny[sizeof sb->egress_deny];
  char why[600] = "", err[400];
  int has_allow = 0, has_deny = 0;
  const cJSON *item;
  cJSON *body;
  if (srv->driver->egress_narrow == NULL)
    return mp_send_error(conn, 404, "not_found", "the %s driver has no egress rules: its"
                         " sandboxes reach what the host reaches (docs/platform.md,"
                         " \"Drivers\")", srv->driver->name);
  if (sb->destroyed_ms)
    return mp_send_error(conn, 410, "sandbox_destroyed", "sandbox %s was destroyed", sb->id);
  if (sb->destroying)
    return mp_send_error(conn, 409, "conflict", "sandbox %s is being destroyed", sb->id);
  if (sb->egress_rules)
    return mp_send_error(conn, 409, "conflict", "the egress rules of sandbox %s are set"
                         " already: a sandbox's rules are set once, at its start (create"
                         " another sandbox for other rules)", sb->id);
  body = mp_request_json(conn, r, 1);
  if (body == NULL) return MHD_YES;
  cJSON_ArrayForEach(item, body) {
    if (strcmp(item->string, "allow") != 0 && strcmp(item->string, "deny") != 0) {
      snprintf(why, sizeof why, "unknown field '%.64s': the body is {\"allow\": [rules],"
               " \"deny\": [rules]}", item->string);
      break;
    }
  }
  if (why[0] == '\0'
      && ((has_allow = rule_list(body, "allow", allow, sizeof allow, why, sizeof why)) < 0
          || (has_deny = rule_list(body, "deny", deny, sizeof deny, why, sizeof why)) < 0))
    has_allow = has_deny = 0;
  else if (why[0] == '\0' && !has_allow && !has_deny)
    snprintf(why, sizeof why, "give 'allow', 'deny' or both: lists of rules");
  cJSON_Delete(body);
  if (why[0] != '\0') return mp_send_error(conn, 400, "invalid_request", "%s", why);
  if (srv->driver->egress_narrow(sb, has_allow ? allow : NULL, has_deny ? deny : NULL,
                                 err, sizeof err) < 0)
    return mp_send_error(conn, 400, "invalid_request", "egress rule: %s", err);
  mp_record_save(srv, sb);
  mp_log("sandbox %s: its egress rules: allow %s; deny %s", sb->id,
         has_allow ? (allow[0] ? allow : "nothing") : "what the server allows",
         has_deny ? deny : "nothing more");
  return mp_send_json(conn, 200, sandbox_json(sb));
}

/* {====== waiting for tar ====== */

typedef struct route_wait {
  mp_waiter w;
  struct MHD_Connection *conn;
  mp_sandbox *sb;
  int suspended, finished, rc;
  int joined; /* a create answered with the live sandbox of its id */
  int retry;  /* a create that waited for that sandbox's destroy */
  char name[MP_CHECKPOINT_NAME_MAX];
  char message[1400];
} route_wait;

static void on_route_done(mp_waiter *w, mp_sandbox *sb, int rc,
                          const char *name, const char *message) {
  route_wait *st = w->data;
  (void)sb;
  st->finished = 1;
  st->rc = rc;
  snprintf(st->name, sizeof st->name, "%s", name ? name : "");
  snprintf(st->message, sizeof st->message, "%s", message ? message : "");
  if (st->suspended) {
    st->suspended = 0;
    MHD_resume_connection(st->conn);
  }
}

static void route_wait_free(void *state) {
  route_wait *st = state;
  if (!st->finished && st->sb != NULL) mp_sandbox_forget(st->sb, &st->w);
  free(st);
}

/* state for waiting on sb, hung on r; NULL if out of memory */
static route_wait *route_wait_new(struct MHD_Connection *conn, mp_request *r,
                                  mp_sandbox *sb) {
  route_wait *st = calloc(1, sizeof *st);
  if (st == NULL) return NULL;
  st->conn = conn;
  st->sb = sb;
  st->w.done = on_route_done;
  st->w.data = st;
  r->state = st;
  r->state_free = route_wait_free;
  return st;
}

/* The wait state of a capture or destroy of sb; NULL after answering 409
** (sb is being restored) or 500 (*res is the answer). */
static route_wait *route_wait_on(struct MHD_Connection *conn, mp_request *r,
                                 mp_sandbox *sb, enum MHD_Result *res) {
  route_wait *st;
  if (sb->restoring) {
    *res = mp_send_error(conn, 409, "conflict", "sandbox %s is being"
                         " restored", sb->id);
    return NULL;
  }
  st = route_wait_new(conn, r, sb);
  if (st == NULL)
    *res = mp_send_error(conn, 500, "internal_error", "out of memory");
  return st;
}

/* After starting the work: suspend until it is done, unless it already is
** (then answer, which the caller does on `1`). */
static int route_wait_park(route_wait *st) {
  if (st->finished) return 1;
  st->suspended = 1;
  MHD_suspend_connection(st->conn);
  return 0;
}

/* }====== */

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

/* The sandbox of a create: 201 and outcome "created", or 200 and
** "connected" when the create joined the live sandbox of its id. */
static enum MHD_Result answer_create(struct MHD_Connection *conn,
                                     route_wait *st) {
  mp_sandbox *sb = st->sb;
  cJSON *o;
  if (st->rc == MP_CHECKPOINT_NO_SPACE)
    return mp_send_error(conn, 507, "insufficient_storage", "cannot create"
                         " the sandbox: restoring its checkpoint failed: %s"
                         " (the platform's disk is full: free space under its"
                         " data directory)", st->message);
  if (st->rc < 0)
    return mp_send_error(conn, 500, "internal_error", "cannot create the"
                         " sandbox: restoring its checkpoint failed: %s",
                         st->message);
  if (st->joined)
    mp_log("a create with id \"%s\" answered with %s", sb->recovery_key,
           sb->id);
  else if (sb->restored)
    mp_log("created %s (project %s, environment %s, restored from %s)",
           sb->id, sb->project, sb->environment, sb->restored_from);
  else
    mp_log("created %s (project %s, environment %s%s)", sb->id, sb->project,
           sb->environment, sb->recovery_key[0] ? "" : ", no recovery key");
  o = sandbox_json(sb);
  cJSON_AddStringToObject(o, "outcome", st->joined ? "connected" : "created");
  return mp_send_json(conn, st->joined ? 200 : 201, o);
}

/* A create with a templateDefinition (sandbox/template.c): 0 when the
** template is ready (spec names it; its env goes under the create's, in
** body); else -1 and *res: 202 templatePending while it builds (no sandbox
** yet: the client asks again after retryAfterMs), 422 when it failed, 400
** when the definition is wrong. whose: what the template is, for its
** failure's message ("": the create's own). */
static int template_of(mp_server *srv, struct MHD_Connection *conn,
                       const char *project, cJSON *body, const cJSON *def,
                       const char *whose, mp_create_spec *spec,
                       enum MHD_Result *res) {
  mp_template *t;
  char err[1400];
  const cJSON *tenv, *x;
  const cJSON *benv =
      cJSON_GetObjectItemCaseSensitive(body, MP_CREATE_TEMPLATE_ENVS);
  int rc = mp_template_request(srv, project, spec->environment, def, benv,
                               &t, err, sizeof err);
  if (rc < 0) {
    *res = rc == -2 ? mp_send_error(conn, 400, "invalid_request", "%s", err)
                    : mp_send_error(conn, 500, "internal_error", "%s", err);
    return -1;
  }
  if (mp_template_status_of(t) == MP_TEMPLATE_FAILED) {
    *res = mp_send_error(conn, 422, "template_build_failed", "%stemplate %s failed"
                         " to build: %s", whose, mp_template_id(t),
                         mp_template_error(t));
    return -1;
  }
  if (mp_template_status_of(t) != MP_TEMPLATE_READY) {
    cJSON *o = cJSON_CreateObject(), *p = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "pending");
    cJSON_AddStringToObject(p, "templateId", mp_template_id(t));
    cJSON_AddNumberToObject(p, "retryAfterMs", mp_template_retry_after_ms(t));
    cJSON_AddItemToObject(o, "templatePending", p);
    *res = mp_send_json(conn, 202, o);
    return -1;
  }
  spec->template_key = mp_template_key(t);
  mp_template_runtime(t, &spec->cpu_count, &spec->memory_mb, &spec->workdir);
  tenv = mp_template_env(t);
  if (tenv != NULL) { /* the template's env, under the create's own */
    cJSON *env = cJSON_GetObjectItemCaseSensitive(body, MP_CREATE_ENV);
    if (!cJSON_IsObject(env)) {
      cJSON_DeleteItemFromObjectCaseSensitive(body, MP_CREATE_ENV);
      env = cJSON_AddObjectToObject(body, MP_CREATE_ENV);
    }
    cJSON_ArrayForEach(x, tenv)
      if (cJSON_GetObjectItemCaseSensitive(env, x->string) == NULL)
        cJSON_AddStringToObject(env, x->string, x->valuestring);
    spec->env = env;
  }
  return 0;
}

static enum MHD_Result create_sandbox(mp_server *srv,
                                      struct MHD_Connection *conn,
                                      const char *project, mp_request *r) {
  cJSON *body;
  const cJSON *v, *env;
  mp_create_spec spec;
  mp_sandbox *sb;
  route_wait *st;
  char why[512] = "", err[1024];
  int bad = 0, rc;
  if (r->state != NULL) { /* resumed */
    route_wait *was = r->state;
    if (!was->retry) return answer_create(conn, was);
    /* the sandbox of its id is gone (or was kept): create again */
    r->state = NULL;
    r->state_free = NULL;
    route_wait_free(was);
  }
  if (srv->stopping)
    return mp_send_error(conn, 503, "unavailable", "the platform is shutting"
                         " down");
  body = mp_request_json(conn, r, 0);
  if (body == NULL) return MHD_YES;
  memset(&spec, 0, sizeof spec);
  spec.project = project;
  spec.recovery_key = opt_string(body, MP_CREATE_ID, why, sizeof why, &bad);
  {
    const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                MP_CREATE_KEY_HEADER);
    spec.key_explicit = h != NULL && strcasecmp(h, "explicit") == 0;
  }
  if (!bad) spec.environment = opt_string(body, MP_CREATE_ENVIRONMENT, why, sizeof why, &bad);
  if (!bad) spec.network = opt_string(body, MP_CREATE_NETWORK, why, sizeof why, &bad);
  if (!bad) spec.seed = opt_string(body, MP_CREATE_SEED, why, sizeof why, &bad);
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
  v = cJSON_GetObjectItemCaseSensitive(body, MP_CREATE_IDLE);
  if (!bad && v != NULL && !cJSON_IsNull(v)) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 525600) {
      snprintf(why, sizeof why, "field 'idleTimeoutMinutes' must be a number"
               " of minutes between 0 and 525600");
      bad = 1;
    } else {
      spec.idle_timeout_min = v->valuedouble;
    }
  }
  env = cJSON_GetObjectItemCaseSensitive(body, MP_CREATE_ENV);
  if (!bad && mp_env_check(env, MP_CREATE_ENV, why, sizeof why) < 0) bad = 1;
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
  v = cJSON_GetObjectItemCaseSensitive(body, MP_CREATE_TEMPLATE);
  if (v != NULL && !cJSON_IsNull(v)) {
    enum MHD_Result res;
    if (template_of(srv, conn, project, body, v, "", &spec, &res) < 0) {
      cJSON_Delete(body);
      return res;
    }
  } else {
    /* A create without a template that restores a checkpoint taken over
    ** one: that template, rebuilt from the definition the checkpoint kept
    ** when it is gone (templatePending meanwhile), or an error that says
    ** so; the checkpoint holds only the sandbox's own layer. */
    char tkey[MP_TEMPLATE_KEY_MAX];
    cJSON *kept = NULL;
    if (mp_checkpoint_template(srv, project, spec.environment, spec.recovery_key,
                               spec.seed, tkey, &kept) == 1) {
      enum MHD_Result res;
      if (kept == NULL) {
        cJSON_Delete(body);
        return mp_send_error(conn, 409, "template_gone", "the checkpoint this"
                             " create restores was taken over template %s, and"
                             " kept no definition of it to rebuild it: create"
                             " with its templateDefinition", tkey);
      }
      rc = template_of(srv, conn, project, body, kept,
                       "the checkpoint this create restores needs its"
                       " template: ", &spec, &res);
      cJSON_Delete(kept);
      if (rc < 0) {
        cJSON_Delete(body);
        return res;
      }
    }
  }
  st = route_wait_new(conn, r, NULL);
  if (st == NULL) {
    cJSON_Delete(body);
    return mp_send_error(conn, 500, "internal_error", "out of memory");
  }
  rc = mp_sandbox_create(srv, &spec, &sb, &st->w, err, sizeof err);
  cJSON_Delete(body);
  if (rc == -2) return mp_send_error(conn, 400, "invalid_request", "%s", err);
  if (rc == -3)
    return mp_send_error(conn, 507, "insufficient_storage",
                         "cannot create the sandbox: %s (the platform's disk is"
                         " full: free space under its data directory)", err);
  if (rc < 0)
    return mp_send_error(conn, 500, "internal_error",
                         "cannot create the sandbox: %s", err);
  st->sb = sb;
  st->joined = rc >= 2;
  st->retry = rc == 4;
  if (rc == 1 || rc == 3 || rc == 4) {
    if (!route_wait_park(st)) return MHD_YES;
    if (rc == 4) return create_sandbox(srv, conn, project, r); /* gone */
    return answer_create(conn, st);
  }
  st->finished = 1; /* nothing to wait for */
  return answer_create(conn, st);
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
  { /* our extension, also with --exec-stdin off: the bounds of an exec */
    cJSON *limits = cJSON_AddObjectToObject(o, "limits");
    if (limits != NULL)
      cJSON_AddNumberToObject(limits, "execEnvBytes",
                              (double)mp_exec_env_max());
  }
  if (srv->exec_stdin) { /* our extensions: the hosted platform sends none */
    cJSON *caps = cJSON_AddArrayToObject(o, "capabilities");
    if (caps != NULL) {
      cJSON_AddItemToArray(caps, cJSON_CreateString("stdin"));
      cJSON_AddItemToArray(caps, cJSON_CreateString("keepRunning"));
      cJSON_AddItemToArray(caps, cJSON_CreateString(MP_EXEC_EXTENSION));
      if (srv->driver->egress_narrow != NULL)
        cJSON_AddItemToArray(caps, cJSON_CreateString("egressRules"));
    }
  }
  return mp_send_json(conn, 200, o);
}

static enum MHD_Result answer_capture(struct MHD_Connection *conn,
                                      route_wait *st) {
  cJSON *o;
  if (st->rc == MP_CHECKPOINT_NO_SPACE)
    return mp_send_error(conn, 507, "insufficient_storage", "%s", st->message);
  if (st->rc < 0)
    return mp_send_error(conn, 500, "internal_error", "%s", st->message);
  o = cJSON_CreateObject();
  if (st->rc == 0 && st->name[0] != '\0')
    cJSON_AddStringToObject(o, "checkpointName", st->name);
  else
    cJSON_AddNullToObject(o, "checkpointName");
  cJSON_AddStringToObject(o, "status", st->rc == 0 ? "captured" : "skipped");
  return mp_send_json(conn, 200, o);
}

static enum MHD_Result checkpoint(mp_server *srv, struct MHD_Connection *conn,
                                  mp_sandbox *sb, mp_request *r, int del) {
  cJSON *body;
  const cJSON *id;
  char key[MP_NAME_MAX];
  route_wait *st;
  enum MHD_Result res;
  if (r->state != NULL) return answer_capture(conn, r->state); /* resumed */
  body = mp_request_json(conn, r, 0);
  if (body == NULL) return MHD_YES;
  id = cJSON_GetObjectItemCaseSensitive(body, "id");
  if (id != NULL && !cJSON_IsNull(id) && !cJSON_IsString(id)) {
    cJSON_Delete(body);
    return mp_send_error(conn, 400, "invalid_request",
                         "field 'id' must be a string");
  }
  if (cJSON_IsString(id) && strlen(id->valuestring) >= MP_NAME_MAX) {
    cJSON_Delete(body);
    return mp_send_error(conn, 400, "invalid_request",
                         "field 'id' is longer than %d bytes", MP_NAME_MAX - 1);
  }
  if (cJSON_IsString(id) && id->valuestring[0] != '\0'
      && sb->recovery_key[0] == '\0' && !sb->destroyed_ms) {
    snprintf(sb->recovery_key, sizeof sb->recovery_key, "%s", id->valuestring);
    mp_record_save(srv, sb);
  }
  snprintf(key, sizeof key, "%s", cJSON_IsString(id) && id->valuestring[0]
           ? id->valuestring : sb->recovery_key);
  cJSON_Delete(body);
  if (del) {
    /* final: no implicit capture of the key's sandboxes brings it back */
    if (key[0] == '\0')
      return mp_send_error(conn, 404, "not_found", "sandbox %s has no"
                           " recovery key, so no checkpoint", sb->id);
    if (mp_checkpoint_drop(srv, sb, key) != 0)
      return mp_send_error(conn, 404, "not_found", "no checkpoint for key"
                           " \"%.64s\" (none will be captured implicitly)",
                           key);
    mp_log("checkpoint of key \"%s\" deleted (through %s)", key, sb->id);
    return mp_send_empty(conn, 204);
  }
  if (sb->destroyed_ms)
    return mp_send_error(conn, 410, "sandbox_destroyed", "sandbox %s was destroyed", sb->id);
  if ((st = route_wait_on(conn, r, sb, &res)) == NULL) return res;
  st->w.explicit_request = 1;
  mp_checkpoint_capture(srv, sb, &st->w);
  if (route_wait_park(st)) return answer_capture(conn, st);
  return MHD_YES;
}

static enum MHD_Result answer_destroy(struct MHD_Connection *conn,
                                      route_wait *st) {
  if (st->rc == MP_CHECKPOINT_NO_SPACE)
    return mp_send_error(conn, 507, "insufficient_storage", "%s", st->message);
  if (st->rc < 0)
    return mp_send_error(conn, 500, "internal_error", "%s", st->message);
  return mp_send_empty(conn, 204);
}

static enum MHD_Result destroy(mp_server *srv, struct MHD_Connection *conn,
                               mp_sandbox *sb, mp_request *r) {
  route_wait *st;
  enum MHD_Result res;
  if (r->state != NULL) return answer_destroy(conn, r->state); /* resumed */
  if ((st = route_wait_on(conn, r, sb, &res)) == NULL) return res;
  if (!sb->destroyed_ms && !sb->destroying) mp_log("destroying %s", sb->id);
  mp_sandbox_destroy(srv, sb, &st->w);
  if (route_wait_park(st)) return answer_destroy(conn, st);
  return MHD_YES;
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
    if (strcmp(method, "DELETE") == 0) return destroy(srv, conn, sb, r);
  } else if (nseg == 3 && strcmp(seg[2], "exec-lease") == 0
             && strcmp(method, "POST") == 0) {
    if (sb->destroyed_ms)
      return mp_send_error(conn, 410, "sandbox_destroyed", "sandbox %s was destroyed",
                           sb->id);
    if (sb->destroying || sb->restoring)
      return mp_send_error(conn, 409, "conflict", "sandbox %s is being %s",
                           sb->id, sb->destroying ? "destroyed" : "restored");
    return lease(srv, conn, sb);
  } else if (nseg == 3 && strcmp(seg[2], "checkpoint") == 0
             && (strcmp(method, "POST") == 0 || strcmp(method, "DELETE") == 0)) {
    return checkpoint(srv, conn, sb, r, method[0] == 'D');
  } else if (nseg == 3 && strcmp(seg[2], "exec") == 0
             && strcmp(method, "POST") == 0) {
    return mp_exec_legacy(srv, conn, sb, r);
  } else if (nseg >= 3 && nseg <= 5 && strcmp(seg[2], "execs") == 0) {
    return mp_routes_exec(srv, conn, method, sb, seg, nseg, r);
  } else if (nseg == 3 && strcmp(seg[2], "egress") == 0 && strcmp(method, "GET") == 0) {
    return egress_log(conn, sb);
  } else if (nseg == 3 && strcmp(seg[2], "egress") == 0 && strcmp(method, "PUT") == 0) {
    return egress_rules(srv, conn, sb, r);
  }
  return mp_send_error(conn, 404, "not_found",
                       "no route for %s /sandbox/%.64s%s%.32s", method, seg[1],
                       nseg > 2 ? "/" : "", nseg > 2 ? seg[2] : "");
}
