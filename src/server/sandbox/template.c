/*
** Templates (docs/platform.md "Templates"): the records' life and the
** build. A definition (checked, and named by its hash, in template_def.c)
** is a template of its (project, environment); the first request for it
** starts its build, every later one (a create, a build request) sees the
** same record: one build, however many wait.
**
** A build is a sandbox of the project MP_TEMPLATE_BUILD_PROJECT, over the
** base, with the server's outbound networking: the operations run in it
** one after the other (setWorkdir and setEnvs change the ones after them;
** the installs are commands), each bounded by what is left of the build's
** time. When the last one has succeeded, the sandbox is destroyed with
** keep_layer set: the driver moves its own layer (the overlay's upper
** directory) to DATA/templates/<key>/layer.tmp, which becomes layer once
** its size is within the limit, and only then does state.json say ready.
** A failure (an operation's exit code, the time limit, the size limit, a
** full disk, a cancel, a restart) keeps build.log and the error (the
** operation, its exit code, its output's tail), removes the half-made
** layer and never says ready. The files are template_store.c's.
*/
#define _GNU_SOURCE
#include "sandbox/template_store.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "sandbox/activity.h"
#include "sandbox/sandbox.h"
#include "util/log.h"
#include "util/trash.h"
#include "util.h"

#define RETRY_AFTER_MS 500
#define BUILD_TIMEOUT_MS (30 * 60 * 1000)
#define MAX_LAYER_BYTES (20ull << 30)
/* a data disk with less room than this failed a build's operation */
#define FULL_DISK_BYTES (1ull << 20)

/* {====== records ====== */

static mp_template *by_key(mp_server *srv, const char *key) {
  mp_template *t;
  for (t = srv->templates; t != NULL; t = t->next)
    if (strcmp(t->key, key) == 0) return t;
  return NULL;
}

mp_template *mp_template_find(mp_server *srv, const char *project,
                              const char *environment, const char *id) {
  mp_template *t;
  for (t = srv->templates; t != NULL; t = t->next)
    if (strcmp(t->id, id) == 0 && strcmp(t->project, project) == 0
        && (environment == NULL || environment[0] == '\0'
            || strcmp(t->environment, environment) == 0))
      return t;
  return NULL;
}

mp_template_status mp_template_status_of(const mp_template *t) { return t->status; }
const char *mp_template_id(const mp_template *t) { return t->id; }
const char *mp_template_key(const mp_template *t) { return t->key; }
const char *mp_template_error(const mp_template *t) { return t->error; }
int mp_template_retry_after_ms(const mp_template *t) {
  (void)t;
  return RETRY_AFTER_MS;
}
const cJSON *mp_template_env(const mp_template *t) {
  return t->env != NULL && t->env->child != NULL ? t->env : NULL;
}

void mp_template_runtime(const mp_template *t, int *cpu_count, int *memory_mb,
                         const char **workdir) {
  *cpu_count = t->cpu_count;
  *memory_mb = t->memory_mb;
  *workdir = t->workdir[0] ? t->workdir : NULL;
}

static void on_step(mastra__timer *tm);

static mp_template *template_new(mp_server *srv, const char *project,
                                 const char *environment, const char *id,
                                 const char *key, const char *family,
                                 const cJSON *definition) {
  mp_template *t = calloc(1, sizeof *t);
  if (t == NULL) return NULL;
  t->srv = srv;
  snprintf(t->id, sizeof t->id, "%s", id);
  snprintf(t->key, sizeof t->key, "%s", key);
  snprintf(t->project, sizeof t->project, "%s", project);
  snprintf(t->environment, sizeof t->environment, "%s", environment);
  snprintf(t->family, sizeof t->family, "%s", family);
  t->definition = cJSON_Duplicate(definition, 1);
  t->env = cJSON_CreateObject();
  mastra__timer_init(srv->loop, &t->step, on_step, t);
  t->next = srv->templates;
  srv->templates = t;
  return t;
}

/* what a template's sandboxes get from its operations: env, workdir,
** limits */
static void settle_runtime(mp_template *t) {
  cJSON_Delete(t->env);
  t->env = cJSON_CreateObject();
  t->workdir[0] = '\0';
  t->cpu_count = t->memory_mb = 0;
  mp_template_def_runtime(t->definition, t->env, t->workdir, sizeof t->workdir,
                          &t->cpu_count, &t->memory_mb);
}

static void unlink_template(mp_server *srv, mp_template *t) {
  mp_template **p;
  for (p = &srv->templates; *p != NULL; p = &(*p)->next)
    if (*p == t) {
      *p = t->next;
      return;
    }
}

static void template_free(mp_template *t) {
  mastra__timer_stop(&t->step);
  if (t->log != NULL) fclose(t->log);
  cJSON_Delete(t->definition);
  cJSON_Delete(t->build_envs);
  cJSON_Delete(t->env);
  cJSON_Delete(t->op_env);
  free(t);
}

size_t mp_template_users(mp_server *srv, const mp_template *t) {
  size_t n = 0;
  mp_sandbox *sb;
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next)
    if (!sb->destroyed_ms && strcmp(sb->template_key, t->key) == 0) n++;
  return n;
}

cJSON *mp_template_json(const mp_template *t, int legacy) {
  char ts[32];
  cJSON *o = cJSON_CreateObject();
  const char *w = mp_template_status_word(t->status);
  if (!legacy && t->status == MP_TEMPLATE_BUILDING) w = "pending";
  cJSON_AddStringToObject(o, "templateId", t->id);
  cJSON_AddStringToObject(o, "status", w);
  if (t->status == MP_TEMPLATE_FAILED) cJSON_AddStringToObject(o, "error", t->error);
  else if (legacy) cJSON_AddNullToObject(o, "error");
  if (!legacy && t->status == MP_TEMPLATE_BUILDING)
    cJSON_AddNumberToObject(o, "retryAfterMs", RETRY_AFTER_MS);
  /* ours */
  cJSON_AddStringToObject(o, "environmentId", t->environment);
  if (t->family[0]) cJSON_AddStringToObject(o, "family", t->family);
  mp_iso8601(t->created_ms, ts);
  cJSON_AddStringToObject(o, "createdAt", ts);
  if (t->built_ms) {
    mp_iso8601(t->built_ms, ts);
    cJSON_AddStringToObject(o, "builtAt", ts);
  }
  if (t->status == MP_TEMPLATE_READY)
    cJSON_AddNumberToObject(o, "sizeBytes", (double)t->size_bytes);
  cJSON_AddNumberToObject(o, "operations",
                          cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(
                              t->definition, "operations")));
  cJSON_AddNumberToObject(o, "sandboxes", (double)mp_template_users(t->srv, t));
  return o;
}

cJSON *mp_template_list(mp_server *srv, const char *project,
                        const char *environment) {
  cJSON *a = cJSON_CreateArray();
  mp_template *t;
  for (t = srv->templates; t != NULL; t = t->next)
    if ((project == NULL || strcmp(t->project, project) == 0)
        && (environment == NULL || strcmp(t->environment, environment) == 0))
      cJSON_AddItemToArray(a, mp_template_json(t, 0));
  return a;
}

/* }====== */

/* {====== the build ====== */

static void build_fail(mp_template *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int retry_build(mp_server *srv, const cJSON *args, char *err,
                       size_t errlen) {
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(args, "key");
  mp_template *t = cJSON_IsString(k) ? by_key(srv, k->valuestring) : NULL;
  if (t == NULL) {
    snprintf(err, errlen, "the template is gone");
    return -1;
  }
  return mp_template_retry(srv, t, err, errlen);
}

/* let go of the build sandbox (its layer with its tree) */
static void drop_build_sandbox(mp_template *t) {
  mp_sandbox *sb = t->sb;
  if (sb == NULL) return;
  t->sb = NULL;
  if (t->proc != NULL) {
    mastra__proc *p = t->proc;
    t->proc = NULL;
    mp_sandbox_exec_done(t->srv, sb, p); /* kills it */
  }
  mp_sandbox_forget(sb, &t->gone);
  free(sb->keep_layer);
  sb->keep_layer = NULL;
  mp_sandbox_destroy(t->srv, sb, NULL);
}

static void build_fail(mp_template *t, const char *fmt, ...) {
  va_list ap;
  cJSON *args;
  va_start(ap, fmt);
  vsnprintf(t->error, sizeof t->error, fmt, ap);
  va_end(ap);
  t->status = MP_TEMPLATE_FAILED;
  mastra__timer_stop(&t->step);
  drop_build_sandbox(t);
  mp_template_drop_half_layer(t);
  if (t->log != NULL) {
    fprintf(t->log, "\n== failed: %s\n", t->error);
    fclose(t->log);
    t->log = NULL;
  }
  /* a full disk: saved by the next sweep or at exit, once there is room
  ** (the build sandbox's tree goes to the trash above) */
  t->dirty = mp_template_save_state(t) < 0;
  mp_log("template %s (%s) failed: %s", t->id, t->environment, t->error);
  args = cJSON_CreateObject();
  cJSON_AddStringToObject(args, "key", t->key);
  mp_failure_record(t->srv, t->project, t->environment, "template", t->id,
                    t->error, retry_build, args);
  cJSON_Delete(args);
}

static void tail_add(mp_template *t, const char *data, size_t n) {
  if (n == 0) return; /* an empty read: data may be NULL */
  if (t->log != NULL) fwrite(data, 1, n, t->log);
  if (n >= MP_TEMPLATE_TAIL_MAX) {
    memcpy(t->tail, data + n - MP_TEMPLATE_TAIL_MAX, MP_TEMPLATE_TAIL_MAX);
    t->tail_len = MP_TEMPLATE_TAIL_MAX;
    return;
  }
  if (t->tail_len + n > MP_TEMPLATE_TAIL_MAX) {
    size_t drop = t->tail_len + n - MP_TEMPLATE_TAIL_MAX;
    memmove(t->tail, t->tail + drop, t->tail_len - drop);
    t->tail_len -= drop;
  }
  memcpy(t->tail + t->tail_len, data, n);
  t->tail_len += n;
}

static void start_op(mp_template *t);

/* " (the data disk is full: ...)" when the build's layer has no room left
** on the data directory's file system (what a failing operation's output
** may not say, or not in its tail), else "" */
static const char *disk_full(const mp_server *srv) {
  static char note[160];
  struct statvfs v;
  unsigned long long left;
  if (statvfs(srv->data_dir, &v) < 0) return "";
  left = (unsigned long long)v.f_bavail * v.f_frsize;
  if (left >= FULL_DISK_BYTES && v.f_favail != 0) return "";
  snprintf(note, sizeof note, " (the data disk is full: %llu KiB and %llu"
           " inodes left under %s)", left >> 10, (unsigned long long)v.f_favail,
           srv->data_dir);
  return note;
}

static void op_notify(mastra__proc *p, void *data) {
  mp_template *t = data;
  const char *m;
  tail_add(t, p->out.data, p->out.len);
  mastra__proc_consumed(p, &p->out);
  tail_add(t, p->err.data, p->err.len);
  mastra__proc_consumed(p, &p->err);
  if (!p->done || t->proc != p) return;
  t->proc = NULL;
  mp_sandbox_exec_done(t->srv, t->sb, p);
  m = cJSON_GetObjectItemCaseSensitive(
          cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(t->definition,
                                                              "operations"), t->op),
          "method")->valuestring;
  if (p->timed_out || p->exit_code != 0) {
    char tail[MP_TEMPLATE_TAIL_MAX + 1];
    memcpy(tail, t->tail, t->tail_len);
    tail[t->tail_len] = '\0';
    if (t->srv->stopping)
      build_fail(t, "the build did not finish: the server stopped during it"
                 " (operation #%d, %s)", t->op + 1, m);
    else if (p->timed_out)
      build_fail(t, "operation #%d (%s) did not finish within the build's time"
                 " limit; output's tail:\n%s", t->op + 1, m, tail);
    else
      build_fail(t, "operation #%d (%s) exited with %d%s; output's tail:\n%s",
                 t->op + 1, m, p->exit_code, disk_full(t->srv), tail);
    return;
  }
  t->op++;
  mastra__timer_start(&t->step, 0); /* off this callback */
}

static void on_build_gone(mp_waiter *w, mp_sandbox *sb, int rc,
                          const char *name, const char *message) {
  mp_template *t = w->data;
  char tmp[4400], layer[4400];
  unsigned long long walked;
  (void)name;
  t->sb = NULL;
  free(sb->keep_layer);
  sb->keep_layer = NULL;
  if (rc < 0) {
    build_fail(t, "the build sandbox could not be destroyed: %s",
               message ? message : "?");
    return;
  }
  mp_template_path(t, "layer.tmp", tmp, sizeof tmp);
  mp_template_path(t, "layer", layer, sizeof layer);
  if (mp_template_tree_size(tmp, &walked) < 0) {
    build_fail(t, "the build's layer was not kept (%s)", strerror(errno));
    return;
  }
  if (walked > MAX_LAYER_BYTES) {
    build_fail(t, "the build's layer holds %llu MiB, more than the limit of %llu MiB",
               walked >> 20, MAX_LAYER_BYTES >> 20);
    return;
  }
  t->size_bytes = walked;
  chmod(tmp, 0555); /* read-only: a lower layer, never written */
  if (rename(tmp, layer) < 0) {
    build_fail(t, "cannot keep the layer: %s", strerror(errno));
    return;
  }
  t->status = MP_TEMPLATE_READY;
  t->built_ms = mastra__wall_ms();
  if (mp_template_save_state(t) < 0) {
    int e = errno;
    mastra__remove_tree(layer);
    build_fail(t, "cannot write its state: %s%s", strerror(e),
               e == ENOSPC ? " (the disk is full)" : "");
    return;
  }
  if (t->log != NULL) {
    fprintf(t->log, "\n== ready (%llu bytes)\n", t->size_bytes);
    fclose(t->log);
    t->log = NULL;
  }
  cJSON_Delete(t->build_envs);
  t->build_envs = NULL;
  mp_log("template %s (%s) is ready: %llu KiB in %.1f s", t->id, t->environment,
         t->size_bytes >> 10, (double)(t->built_ms - t->created_ms) / 1000);
}

/* every operation succeeded: keep the layer */
static void finish_build(mp_template *t) {
  char tmp[4400];
  mp_sandbox *sb = t->sb;
  mp_template_path(t, "layer.tmp", tmp, sizeof tmp);
  mastra__remove_tree(tmp);
  sb->keep_layer = strdup(tmp);
  if (sb->keep_layer == NULL) {
    build_fail(t, "out of memory");
    return;
  }
  t->gone.done = on_build_gone;
  t->gone.data = t;
  mp_sandbox_destroy(t->srv, sb, &t->gone);
}

static void start_op(mp_template *t) {
  const cJSON *ops = cJSON_GetObjectItemCaseSensitive(t->definition, "operations");
  while (t->op < cJSON_GetArraySize(ops)) {
    const cJSON *o = cJSON_GetArrayItem(ops, t->op);
    const char *m = cJSON_GetObjectItemCaseSensitive(o, "method")->valuestring;
    int skip;
    char *cmd, cwd[1024], err[1024];
    mp_exec_spec spec;
    cJSON *env;
    int64_t left = t->deadline_ms - mastra__wall_ms();
    int rc;
    snprintf(cwd, sizeof cwd, "%s", t->cwd);
    cmd = mp_template_def_command(o, t->op_env, t->cwd, sizeof t->cwd, &skip);
    if (skip) {
      if (t->log != NULL) fprintf(t->log, "== operation #%d (%s)\n", t->op + 1, m);
      t->op++;
      continue;
    }
    if (cmd == NULL) {
      build_fail(t, "out of memory");
      return;
    }
    if (left <= 0) {
      free(cmd);
      build_fail(t, "the build's time limit passed before operation #%d (%s)",
                 t->op + 1, m);
      return;
    }
    if (t->log != NULL) {
      fprintf(t->log, "== operation #%d (%s): %s\n", t->op + 1, m, cmd);
      fflush(t->log);
    }
    t->tail_len = 0;
    env = cJSON_Duplicate(t->op_env, 1);
    if (t->build_envs != NULL) {
      const cJSON *x;
      cJSON_ArrayForEach(x, t->build_envs) {
        cJSON_DeleteItemFromObjectCaseSensitive(env, x->string);
        cJSON_AddStringToObject(env, x->string, x->valuestring);
      }
    }
    memset(&spec, 0, sizeof spec);
    spec.command = cmd;
    spec.cwd = cwd[0] ? cwd : NULL;
    spec.env = env;
    spec.timeout_ms = (uint64_t)left;
    rc = mp_sandbox_exec(t->srv, t->sb, &spec, op_notify, t, &t->proc, err,
                         sizeof err);
    free(cmd);
    cJSON_Delete(env);
    if (rc < 0) {
      t->proc = NULL;
      build_fail(t, "operation #%d (%s) could not start: %s", t->op + 1, m, err);
    }
    return;
  }
  finish_build(t);
}

static void on_step(mastra__timer *tm) {
  mp_template *t = tm->data;
  if (t->status == MP_TEMPLATE_BUILDING && t->sb != NULL && t->proc == NULL)
    start_op(t);
}

static int start_build(mp_template *t, char *err, size_t errlen) {
  char path[4400];
  mp_create_spec spec;
  mp_sandbox *sb;
  int rc;
  mp_template_drop_half_layer(t);
  if (mp_template_save_definition(t, err, errlen) < 0) return -1;
  t->status = MP_TEMPLATE_BUILDING;
  t->error[0] = '\0';
  t->created_ms = t->last_used_ms = mastra__wall_ms();
  t->dirty = 0;
  t->built_ms = 0;
  t->size_bytes = 0;
  if (mp_template_save_state(t) < 0) {
    snprintf(err, errlen, "cannot write its state: %s", strerror(errno));
    return -1;
  }
  if (t->log != NULL) fclose(t->log);
  mp_template_path(t, "build.log", path, sizeof path);
  t->log = fopen(path, "we");
  settle_runtime(t);
  cJSON_Delete(t->op_env);
  t->op_env = cJSON_CreateObject();
  t->cwd[0] = '\0';
  t->op = 0;
  t->deadline_ms = t->created_ms + BUILD_TIMEOUT_MS;
  memset(&spec, 0, sizeof spec);
  spec.project = MP_TEMPLATE_BUILD_PROJECT;
  spec.environment = t->environment;
  spec.idle_timeout_min = 525600; /* a build is never idle */
  rc = mp_sandbox_create(t->srv, &spec, &sb, NULL, err, errlen);
  if (rc != 0) {
    build_fail(t, "cannot create the build sandbox: %s", err);
    return 0; /* failed, as a build does */
  }
  t->sb = sb;
  mp_log("building template %s (%s) in %s: %d operation(s)", t->id,
         t->environment, sb->id,
         cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(t->definition,
                                                             "operations")));
  mastra__timer_start(&t->step, 0);
  return 0;
}

int mp_template_request(mp_server *srv, const char *project,
                        const char *environment, const cJSON *definition,
                        const cJSON *build_envs, mp_template **out, char *err,
                        size_t errlen) {
  char id[MP_TEMPLATE_ID_MAX], key[MP_TEMPLATE_KEY_MAX], family[MP_TEMPLATE_FAMILY_MAX + 1];
  mp_template *t;
  int rc;
  *out = NULL;
  if (!srv->driver->templates) {
    snprintf(err, errlen, "the %s driver does not run templates: start"
             " mastra-platform with --driver namespaces", srv->driver->name);
    return -2;
  }
  if (build_envs != NULL && !cJSON_IsNull(build_envs)
      && mp_env_check(build_envs, MP_CREATE_TEMPLATE_ENVS, err, errlen) < 0)
    return -2;
  rc = mp_template_def_check(definition, project, environment, id, key, family, err, errlen);
  if (rc < 0) return rc;
  t = by_key(srv, key);
  if (t != NULL) {
    t->last_used_ms = mastra__wall_ms(); /* saved by the sweep */
    t->dirty = 1;
    if (family[0] && strcmp(family, t->family) != 0)
      snprintf(t->family, sizeof t->family, "%s", family);
    *out = t;
    return 0;
  }
  t = template_new(srv, project, environment, id, key, family, definition);
  if (t == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (cJSON_IsObject(build_envs)) t->build_envs = cJSON_Duplicate(build_envs, 1);
  if (start_build(t, err, errlen) < 0) {
    unlink_template(srv, t);
    template_free(t);
    return -1;
  }
  *out = t;
  return 0;
}

int mp_template_retry(mp_server *srv, mp_template *t, char *err,
                      size_t errlen) {
  (void)srv;
  if (t->status != MP_TEMPLATE_FAILED) {
    snprintf(err, errlen, "template %s is %s, not failed", t->id,
             mp_template_status_word(t->status));
    return -1;
  }
  return start_build(t, err, errlen);
}

int mp_template_remove(mp_server *srv, mp_template *t, char *err,
                       size_t errlen) {
  char dir[4400];
  size_t n = mp_template_users(srv, t);
  if (n > 0) {
    snprintf(err, errlen, "template %s is used by %zu live sandbox(es)", t->id, n);
    return -1;
  }
  if (t->status == MP_TEMPLATE_BUILDING)
    mp_log("template %s (%s): its build is cancelled", t->id, t->environment);
  drop_build_sandbox(t);
  /* the driver's warm members over its layer go first (never a layer that
  ** something the server runs mounts) */
  if (srv->driver->template_gone != NULL) srv->driver->template_gone(srv, t->key);
  unlink_template(srv, t);
  mp_template_path(t, "", dir, sizeof dir);
  mp_trash(srv, dir);
  template_free(t);
  return 0;
}

void mp_template_free_all(mp_server *srv) {
  mastra__timer_stop(&srv->template_sweep);
  while (srv->templates != NULL) {
    mp_template *t = srv->templates;
    srv->templates = t->next;
    if (t->dirty && t->status != MP_TEMPLATE_BUILDING) mp_template_save_state(t);
    t->sb = NULL; /* the sandboxes are freed by their owner */
    t->proc = NULL;
    template_free(t);
  }
}

/* }====== */

/* {====== retention ====== */

static int64_t retention_ms(const mp_server *srv) {
  return (int64_t)(srv->template_retention_days * 86400000.0);
}

/* when the sweep removes t (0: never, as things are: it builds, a live
** sandbox uses it, or the retention is 0) */
static int64_t remove_at(mp_server *srv, const mp_template *t) {
  int64_t keep = retention_ms(srv);
  if (keep <= 0 || t->status == MP_TEMPLATE_BUILDING || mp_template_users(srv, t) > 0)
    return 0;
  return t->last_used_ms + keep;
}

cJSON *mp_template_inspect(mp_server *srv, const char *project,
                           const char *environment) {
  cJSON *a = cJSON_CreateArray();
  mp_template *t;
  for (t = srv->templates; t != NULL; t = t->next) {
    cJSON *o, *users;
    mp_sandbox *sb;
    int64_t at;
    if ((project != NULL && strcmp(t->project, project) != 0)
        || (environment != NULL && strcmp(t->environment, environment) != 0))
      continue;
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "templateId", t->id);
    cJSON_AddStringToObject(o, "key", t->key);
    cJSON_AddStringToObject(o, "family", t->family);
    cJSON_AddStringToObject(o, "status", mp_template_status_word(t->status));
    if (t->status == MP_TEMPLATE_FAILED) cJSON_AddStringToObject(o, "error", t->error);
    cJSON_AddNumberToObject(o, "operations", cJSON_GetArraySize(
        cJSON_GetObjectItemCaseSensitive(t->definition, "operations")));
    if (t->status == MP_TEMPLATE_READY)
      cJSON_AddNumberToObject(o, "sizeBytes", (double)t->size_bytes);
    else
      cJSON_AddNullToObject(o, "sizeBytes");
    cJSON_AddNumberToObject(o, "createdAt", (double)t->created_ms);
    if (t->built_ms) cJSON_AddNumberToObject(o, "builtAt", (double)t->built_ms);
    else cJSON_AddNullToObject(o, "builtAt");
    cJSON_AddNumberToObject(o, "lastUsedAt", (double)t->last_used_ms);
    users = cJSON_AddArrayToObject(o, "usedBy");
    for (sb = srv->sandboxes; sb != NULL; sb = sb->next)
      if (!sb->destroyed_ms && strcmp(sb->template_key, t->key) == 0)
        cJSON_AddItemToArray(users, cJSON_CreateString(sb->id));
    at = remove_at(srv, t);
    if (at > 0) cJSON_AddNumberToObject(o, "removeAt", (double)at);
    else cJSON_AddNullToObject(o, "removeAt");
    cJSON_AddNumberToObject(o, "retentionDays", srv->template_retention_days);
    cJSON_AddItemToArray(a, o);
  }
  return a;
}

/* a template in use is used now; one unused for the retention goes (never
** one that builds, never one a live sandbox uses) */
static void sweep(mp_server *srv) {
  mp_template *t, *next;
  int64_t now = mastra__wall_ms();
  char err[256];
  for (t = srv->templates; t != NULL; t = next) {
    int64_t at = remove_at(srv, t);
    next = t->next;
    if (t->status != MP_TEMPLATE_BUILDING && mp_template_users(srv, t) > 0) {
      t->last_used_ms = now;
      t->dirty = 1;
    } else if (at > 0 && now >= at) {
      mp_log("retention: template %s (%s), unused for %g days, is removed", t->id,
             t->environment, srv->template_retention_days);
      if (mp_template_remove(srv, t, err, sizeof err) == 0) continue;
    }
    if (t->dirty && t->status != MP_TEMPLATE_BUILDING && mp_template_save_state(t) == 0)
      t->dirty = 0;
  }
}

/* a quarter of the retention, within [1 s, 1 h] */
static void arm_sweep(mp_server *srv) {
  int64_t every = retention_ms(srv) / 4;
  if (retention_ms(srv) <= 0) every = 3600000; /* last used is still saved */
  if (every < 1000) every = 1000;
  if (every > 3600000) every = 3600000;
  mastra__timer_start(&srv->template_sweep, (uint64_t)every);
}

static void on_sweep(mastra__timer *tm) {
  mp_server *srv = tm->data;
  sweep(srv);
  arm_sweep(srv);
}

/* }====== */

/* {====== startup ====== */

static void load_one(mp_server *srv, const char *key) {
  char path[4400], layer[4400];
  cJSON *def, *st;
  const cJSON *v, *pv, *ev;
  mp_template *t;
  char id[MP_TEMPLATE_ID_MAX], k2[MP_TEMPLATE_KEY_MAX],
      family[MP_TEMPLATE_FAMILY_MAX + 1], err[1024];
  mp_template_read(srv, key, &def, &st);
  pv = cJSON_GetObjectItemCaseSensitive(st, "projectId");
  ev = cJSON_GetObjectItemCaseSensitive(st, "environmentId");
  if (def == NULL || !cJSON_IsString(pv) || !cJSON_IsString(ev)
      || mp_template_def_check(def, pv->valuestring, ev->valuestring, id, k2,
                               family, err, sizeof err) < 0
      || strcmp(k2, key) != 0) {
    mp_log("templates/%s is not a template: removed", key);
    snprintf(path, sizeof path, "%s/templates/%s", srv->data_dir, key);
    mp_trash(srv, path);
    goto done;
  }
  t = template_new(srv, pv->valuestring, ev->valuestring, id, key, family, def);
  if (t == NULL) goto done;
  settle_runtime(t);
  v = cJSON_GetObjectItemCaseSensitive(st, "createdMs");
  t->created_ms = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
  v = cJSON_GetObjectItemCaseSensitive(st, "builtMs");
  t->built_ms = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
  v = cJSON_GetObjectItemCaseSensitive(st, "lastUsedMs");
  t->last_used_ms = cJSON_IsNumber(v) && v->valuedouble > 0 ? (int64_t)v->valuedouble
                    : t->built_ms ? t->built_ms : t->created_ms;
  v = cJSON_GetObjectItemCaseSensitive(st, "sizeBytes");
  t->size_bytes = cJSON_IsNumber(v) ? (unsigned long long)v->valuedouble : 0;
  v = cJSON_GetObjectItemCaseSensitive(st, "status");
  mp_template_path(t, "layer", layer, sizeof layer);
  if (cJSON_IsString(v) && strcmp(v->valuestring, "ready") == 0
      && access(layer, F_OK) == 0) {
    t->status = MP_TEMPLATE_READY;
  } else {
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(st, "error");
    t->status = MP_TEMPLATE_FAILED;
    mp_template_drop_half_layer(t);
    if (cJSON_IsString(v) && strcmp(v->valuestring, "failed") == 0 && cJSON_IsString(e))
      snprintf(t->error, sizeof t->error, "%s", e->valuestring);
    else {
      mastra__remove_tree(layer);
      snprintf(t->error, sizeof t->error, "the build did not finish: the server"
               " stopped during it (retry it, or request the template again after"
               " removing it)");
      mp_template_save_state(t);
    }
  }
done:
  cJSON_Delete(def);
  cJSON_Delete(st);
}

void mp_template_load(mp_server *srv) {
  char path[4400];
  DIR *d;
  struct dirent *e;
  mp_sandbox *sb, *next;
  /* the build sandboxes of a previous instance: their builds are over */
  for (sb = srv->sandboxes; sb != NULL; sb = next) {
    next = sb->next;
    if (!sb->destroyed_ms && strcmp(sb->project, MP_TEMPLATE_BUILD_PROJECT) == 0) {
      mp_log("destroying %s, the build sandbox of a previous start", sb->id);
      mp_sandbox_destroy(srv, sb, NULL);
    }
  }
  snprintf(path, sizeof path, "%s/templates", srv->data_dir);
  d = opendir(path);
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (strlen(e->d_name) != 32
        || strspn(e->d_name, "0123456789abcdef") != 32)
      continue;
    load_one(srv, e->d_name);
  }
  closedir(d);
}

void mp_template_start(mp_server *srv) {
  mastra__timer_init(srv->loop, &srv->template_sweep, on_sweep, srv);
  sweep(srv);
  arm_sweep(srv);
}

/* }====== */
