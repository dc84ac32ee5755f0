/*
** What happened in each environment (see activity.h): exec sessions and
** provisioning failures, kept in memory per (project, environment). The
** sessions of an environment are a ring of the last N; a running one
** holds its process pointer until mp_session_end, which finds it by that
** pointer. Nothing here survives a restart of the platform.
*/
#define _GNU_SOURCE
#include "sandbox/activity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/checkpoint.h"
#include "sandbox/sandbox.h"
#include "util.h"

#define COMMAND_MAX 2048
#define MESSAGE_MAX 1024

typedef struct session {
  uint64_t id;                /* 0: an empty slot */
  const mastra__proc *proc;   /* while it runs */
  char sandbox[MP_ID_MAX];
  char *key;                  /* the sandbox's recovery key, or "" */
  char *command;
  char status[16];            /* running exited timeout killed refused */
  int exit_code;
  int64_t started_ms, ended_ms;
  char *message;
} session;

typedef struct failure {
  struct failure *next;       /* newer to older */
  uint64_t id;
  char kind[32];
  char *subject, *message;
  int64_t at_ms;
  int retries;
  mp_failure_retry_fn retry;
  cJSON *args;
} failure;

typedef struct env_log {
  struct env_log *next;
  char project[MP_NAME_MAX];
  char environment[MP_NAME_MAX];
  session *ring;              /* cap slots; head: the next one written */
  size_t head;
  failure *failures;
} env_log;

struct mp_activity {
  env_log *envs;
  size_t cap;
  uint64_t next_id;
};

int mp_activity_start(mp_server *srv, size_t sessions_per_env) {
  struct mp_activity *a = calloc(1, sizeof *a);
  if (a == NULL) return -1;
  a->cap = sessions_per_env > 0 ? sessions_per_env : 1;
  a->next_id = 1;
  srv->activity = a;
  return 0;
}

static void session_clear(session *s) {
  free(s->key);
  free(s->command);
  free(s->message);
  memset(s, 0, sizeof *s);
}

static void failure_free(failure *f) {
  free(f->subject);
  free(f->message);
  cJSON_Delete(f->args);
  free(f);
}

void mp_activity_stop(mp_server *srv) {
  struct mp_activity *a = srv->activity;
  env_log *e, *enext;
  if (a == NULL) return;
  for (e = a->envs; e != NULL; e = enext) {
    size_t i;
    failure *f, *fnext;
    enext = e->next;
    for (i = 0; i < a->cap; i++) session_clear(&e->ring[i]);
    for (f = e->failures; f != NULL; f = fnext) {
      fnext = f->next;
      failure_free(f);
    }
    free(e->ring);
    free(e);
  }
  free(a);
  srv->activity = NULL;
}

/* the log of (project, environment); create: make it if missing */
static env_log *env_get(mp_server *srv, const char *project,
                        const char *environment, int create) {
  struct mp_activity *a = srv->activity;
  env_log *e;
  if (a == NULL) return NULL;
  for (e = a->envs; e != NULL; e = e->next)
    if (strcmp(e->project, project) == 0
        && strcmp(e->environment, environment) == 0)
      return e;
  if (!create || (e = calloc(1, sizeof *e)) == NULL) return NULL;
  e->ring = calloc(a->cap, sizeof *e->ring);
  if (e->ring == NULL) {
    free(e);
    return NULL;
  }
  snprintf(e->project, sizeof e->project, "%s", project);
  snprintf(e->environment, sizeof e->environment, "%s", environment);
  e->next = a->envs;
  a->envs = e;
  return e;
}

static char *dup_max(const char *s, size_t max) {
  return strndup(s != NULL ? s : "", max);
}

/* {====== exec sessions ====== */

static session *session_new(mp_server *srv, const mp_sandbox *sb,
                            const char *command) {
  env_log *e = env_get(srv, sb->project, sb->environment, 1);
  session *s;
  if (e == NULL) return NULL;
  s = &e->ring[e->head];
  e->head = (e->head + 1) % srv->activity->cap;
  session_clear(s);
  s->id = srv->activity->next_id++;
  snprintf(s->sandbox, sizeof s->sandbox, "%s", sb->id);
  s->key = dup_max(sb->recovery_key, MP_NAME_MAX);
  s->command = dup_max(command, COMMAND_MAX);
  s->started_ms = mastra__wall_ms();
  return s;
}

void mp_session_begin(mp_server *srv, const mp_sandbox *sb,
                      const char *command, const mastra__proc *p) {
  session *s = session_new(srv, sb, command);
  if (s == NULL) return;
  s->proc = p;
  strcpy(s->status, "running");
}

void mp_session_end(mp_server *srv, const mp_sandbox *sb,
                    const mastra__proc *p) {
  env_log *e = env_get(srv, sb->project, sb->environment, 0);
  size_t i;
  if (e == NULL) return;
  for (i = 0; i < srv->activity->cap; i++) {
    session *s = &e->ring[i];
    if (s->id == 0 || s->proc != p) continue;
    s->proc = NULL;
    s->ended_ms = mastra__wall_ms();
    if (!p->done) {
      strcpy(s->status, "killed");
      s->message = strdup("its client closed the exec before the command"
                          " ended (a client-side timeout or a cancel)");
    } else if (p->timed_out) {
      strcpy(s->status, "timeout");
      s->exit_code = p->exit_code;
      s->message = strdup("the server's timeout (timeoutSec) killed it");
    } else {
      strcpy(s->status, "exited");
      s->exit_code = p->exit_code;
    }
    return;
  }
}

void mp_session_refused(mp_server *srv, const mp_sandbox *sb,
                        const char *command, const char *why) {
  session *s = session_new(srv, sb, command);
  if (s == NULL) return;
  strcpy(s->status, "refused");
  s->ended_ms = s->started_ms;
  s->message = dup_max(why, MESSAGE_MAX);
}

static void add_time(cJSON *o, const char *name, int64_t ms) {
  if (ms > 0) cJSON_AddNumberToObject(o, name, (double)ms);
  else cJSON_AddNullToObject(o, name);
}

cJSON *mp_session_list(mp_server *srv, const char *project,
                       const char *environment) {
  cJSON *out = cJSON_CreateArray();
  env_log *e = env_get(srv, project, environment, 0);
  size_t i, cap;
  if (e == NULL) return out;
  cap = srv->activity->cap;
  for (i = 1; i <= cap; i++) { /* newest first: backwards from head */
    const session *s = &e->ring[(e->head + cap - i) % cap];
    cJSON *o;
    if (s->id == 0) continue;
    o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)s->id);
    cJSON_AddStringToObject(o, "sandboxId", s->sandbox);
    cJSON_AddStringToObject(o, "recoveryKey", s->key ? s->key : "");
    cJSON_AddStringToObject(o, "command", s->command ? s->command : "");
    cJSON_AddStringToObject(o, "status", s->status);
    if (strcmp(s->status, "exited") == 0 || strcmp(s->status, "timeout") == 0)
      cJSON_AddNumberToObject(o, "exitCode", s->exit_code);
    else
      cJSON_AddNullToObject(o, "exitCode");
    add_time(o, "startedAt", s->started_ms);
    add_time(o, "endedAt", s->ended_ms);
    cJSON_AddNumberToObject(o, "durationMs",
                            (double)((s->ended_ms ? s->ended_ms
                                                  : mastra__wall_ms())
                                     - s->started_ms));
    if (s->message) cJSON_AddStringToObject(o, "message", s->message);
    else cJSON_AddNullToObject(o, "message");
    cJSON_AddItemToArray(out, o);
  }
  return out;
}

/* }====== */

/* {====== provisioning failures ====== */

uint64_t mp_failure_record(mp_server *srv, const char *project,
                           const char *environment, const char *kind,
                           const char *subject, const char *message,
                           mp_failure_retry_fn retry, const cJSON *args) {
  env_log *e = env_get(srv, project, environment, 1);
  failure *f, **pp;
  size_t n;
  if (e == NULL || (f = calloc(1, sizeof *f)) == NULL) return 0;
  f->id = srv->activity->next_id++;
  snprintf(f->kind, sizeof f->kind, "%s", kind);
  f->subject = dup_max(subject, MP_NAME_MAX);
  f->message = dup_max(message, MESSAGE_MAX);
  f->at_ms = mastra__wall_ms();
  f->retry = retry;
  f->args = args != NULL ? cJSON_Duplicate(args, 1) : NULL;
  f->next = e->failures;
  e->failures = f;
  /* keep the newest MP_FAILURES_PER_ENV */
  for (pp = &e->failures, n = 0; *pp != NULL && n < MP_FAILURES_PER_ENV;
       pp = &(*pp)->next, n++) {
  }
  while (*pp != NULL) {
    failure *old = *pp;
    *pp = old->next;
    failure_free(old);
  }
  return f->id;
}

void mp_failure_record_create(mp_server *srv, const char *kind,
                              const char *subject, const mp_create_spec *spec,
                              const char *message, mp_failure_retry_fn retry) {
  cJSON *args = cJSON_CreateObject();
  cJSON_AddStringToObject(args, "projectId", spec->project);
  cJSON_AddStringToObject(args, MP_CREATE_ENVIRONMENT, spec->environment);
  if (spec->recovery_key != NULL && spec->recovery_key[0] != '\0')
    cJSON_AddStringToObject(args, MP_CREATE_ID, spec->recovery_key);
  if (spec->key_explicit) cJSON_AddTrueToObject(args, MP_CREATE_KEY_EXPLICIT);
  if (spec->network != NULL)
    cJSON_AddStringToObject(args, MP_CREATE_NETWORK, spec->network);
  cJSON_AddNumberToObject(args, MP_CREATE_IDLE, spec->idle_timeout_min);
  if (spec->seed != NULL)
    cJSON_AddStringToObject(args, MP_CREATE_SEED, spec->seed);
  if (spec->env != NULL)
    cJSON_AddItemToObject(args, MP_CREATE_ENV, cJSON_Duplicate(spec->env, 1));
  mp_failure_record(srv, spec->project, spec->environment, kind,
                    subject ? subject : "", message, retry, args);
  cJSON_Delete(args);
}

void mp_failure_record_restore(mp_server *srv, const mp_sandbox *sb,
                               const char *message, mp_failure_retry_fn retry) {
  mp_create_spec spec;
  char keyname[MP_CHECKPOINT_NAME_MAX], msg[MESSAGE_MAX];
  mp_checkpoint_key_name(sb, keyname);
  memset(&spec, 0, sizeof spec);
  spec.project = sb->project;
  spec.environment = sb->environment;
  spec.recovery_key = sb->recovery_key;
  spec.key_explicit = sb->key_explicit;
  spec.network = sb->network;
  spec.idle_timeout_min = sb->idle_timeout_min;
  spec.env = sb->env;
  /* a seed it restored from (a key's own checkpoint is found by the key) */
  if (sb->restored_from[0] != '\0' && strcmp(sb->restored_from, keyname) != 0)
    spec.seed = sb->restored_from;
  snprintf(msg, sizeof msg, "sandbox %s: its checkpoint %s could not be"
           " restored: %s", sb->id, sb->restored_from,
           message ? message : "unknown error");
  mp_failure_record_create(srv, "restore", sb->recovery_key, &spec, msg,
                           retry);
}

static const char *str_field(const cJSON *o, const char *name) {
  return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, name));
}

int mp_failure_create_spec(const cJSON *args, mp_create_spec *spec,
                           char *err, size_t errlen) {
  const cJSON *idle =
      cJSON_GetObjectItemCaseSensitive(args, MP_CREATE_IDLE);
  const cJSON *env = cJSON_GetObjectItemCaseSensitive(args, MP_CREATE_ENV);
  memset(spec, 0, sizeof *spec);
  spec->project = str_field(args, "projectId");
  spec->environment = str_field(args, MP_CREATE_ENVIRONMENT);
  spec->recovery_key = str_field(args, MP_CREATE_ID);
  spec->key_explicit = cJSON_IsTrue(
      cJSON_GetObjectItemCaseSensitive(args, MP_CREATE_KEY_EXPLICIT));
  spec->network = str_field(args, MP_CREATE_NETWORK);
  spec->seed = str_field(args, MP_CREATE_SEED);
  spec->env = cJSON_IsObject(env) ? env : NULL;
  spec->idle_timeout_min = cJSON_IsNumber(idle) ? idle->valuedouble : 0;
  if (spec->project == NULL || spec->environment == NULL) {
    snprintf(err, errlen, "the failure does not say what to create");
    return -1;
  }
  return 0;
}

cJSON *mp_failure_list(mp_server *srv, const char *project,
                       const char *environment) {
  cJSON *out = cJSON_CreateArray();
  env_log *e = env_get(srv, project, environment, 0);
  const failure *f;
  for (f = e != NULL ? e->failures : NULL; f != NULL; f = f->next) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", (double)f->id);
    cJSON_AddStringToObject(o, "kind", f->kind);
    cJSON_AddStringToObject(o, "subject", f->subject);
    cJSON_AddStringToObject(o, "message", f->message);
    cJSON_AddNumberToObject(o, "at", (double)f->at_ms);
    cJSON_AddBoolToObject(o, "retryable", f->retry != NULL);
    cJSON_AddNumberToObject(o, "retries", f->retries);
    cJSON_AddItemToArray(out, o);
  }
  return out;
}

int mp_failure_retry(mp_server *srv, uint64_t id, char *err, size_t errlen) {
  env_log *e;
  for (e = srv->activity ? srv->activity->envs : NULL; e; e = e->next) {
    failure **pp;
    for (pp = &e->failures; *pp != NULL; pp = &(*pp)->next) {
      failure *f = *pp, *newest;
      cJSON *args;
      uint64_t first;
      int rc;
      if (f->id != id) continue;
      if (f->retry == NULL) {
        snprintf(err, errlen, "a %s failure cannot be retried", f->kind);
        return -3;
      }
      /* the retry may record failures of its own (and so drop old ones,
      ** f among them): it gets its own copy of args; what it recorded is
      ** folded into f (its message, its time) when f is still there */
      first = srv->activity->next_id;
      args = f->args ? cJSON_Duplicate(f->args, 1) : NULL;
      rc = f->retry(srv, args, err, errlen);
      cJSON_Delete(args);
      newest = NULL;
      for (pp = &e->failures; *pp != NULL;) {
        failure *g = *pp;
        if (g->id >= first) {
          *pp = g->next;
          if (newest == NULL) newest = g; /* the list is newest first */
          else failure_free(g);
        } else {
          pp = &g->next;
        }
      }
      for (pp = &e->failures; *pp != NULL && (*pp)->id != id;
           pp = &(*pp)->next) {
      }
      f = *pp;
      if (f != NULL && rc < 0) {
        f->retries++;
        f->at_ms = mastra__wall_ms();
        if (newest != NULL) {
          free(f->message);
          f->message = newest->message;
          newest->message = NULL;
        }
      } else if (f != NULL) {
        *pp = f->next;
        failure_free(f);
      } else if (newest != NULL) { /* f was dropped: keep the new one */
        newest->next = e->failures;
        e->failures = newest;
        newest = NULL;
      }
      if (newest != NULL) failure_free(newest);
      return rc < 0 ? -1 : 0;
    }
  }
  snprintf(err, errlen, "no failure %llu (it was retried, or is older than"
           " the last %d)", (unsigned long long)id, MP_FAILURES_PER_ENV);
  return -2;
}

/* }====== */

int mp_env_listed(const cJSON *envs, const char *project,
                  const char *environment) {
  const cJSON *it;
  cJSON_ArrayForEach(it, envs) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(it, "projectId");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(it, "environmentId");
    if (cJSON_IsString(p) && cJSON_IsString(v)
        && strcmp(p->valuestring, project) == 0
        && strcmp(v->valuestring, environment) == 0)
      return 1;
  }
  return 0;
}

void mp_activity_environments(mp_server *srv, cJSON *envs) {
  const env_log *e;
  for (e = srv->activity ? srv->activity->envs : NULL; e; e = e->next) {
    cJSON *o;
    if (mp_env_listed(envs, e->project, e->environment)) continue;
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "projectId", e->project);
    cJSON_AddStringToObject(o, "environmentId", e->environment);
    cJSON_AddItemToArray(envs, o);
  }
}
