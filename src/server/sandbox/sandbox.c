/*
** Sandboxes of mastra-platform: records, lifecycle (create, destroy, idle
** reaping, shutdown) and the record files; the commands run in a sandbox
** through its driver are commands.c.
**
** A record outlives its sandbox by --destroyed-ttl (GET shows destroyedAt,
** exec-lease answers 410), then mp_sandbox_sweep frees it; at most
** --destroyed-max destroyed records are kept: they are in a list in destroy
** order (srv->gone), and a destroy that passes the bound frees the oldest
** (nothing walks every record). Each record is written to
** <data>/state/sandboxes/<id>.json when it changes (atomically).
** Checkpoints (checkpoint.c) are captured when a sandbox is destroyed or
** reaped, two seconds after the last command of a burst and at shutdown
** (unless an explicit DELETE /checkpoint marked the sandbox), and restored
** when a sandbox is created with the same recovery key (or a seed). tar
** runs on the loop: a create that restores and a destroy that captures
** finish when it does, and a destroy whose capture failed keeps the
** sandbox.
**
** Orphans: every command has a run file and MP_MARKER_VAR in its
** environment (orphans.c); a destroy kills the sandbox's marked processes
** that left its commands' groups, shutdown every group and every marked
** process, and a start after a crash what a previous server left running.
** A destroy (a DELETE, a reaping) is told to its waiters once nothing of
** the sandbox is left on the host (drain.c).
*/
#define _GNU_SOURCE
#include "sandbox/sandbox.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/activity.h"
#include "sandbox/checkpoint.h"
#include "sandbox/drain.h"
#include "sandbox/env.h"
#include "sandbox/lease.h"
#include "util/log.h"
#include "sandbox/orphans.h"
#include "sandbox/record.h"
#include "util.h"

#define CHECKPOINT_DEBOUNCE_MS 2000
/* a reaping whose capture failed is tried again after this */
#define REAP_RETRY_MS 60000

/* the capture after commands, or at shutdown: nobody waits for it */
static void on_debounced_done(mp_waiter *w, mp_sandbox *sb, int rc,
                              const char *name, const char *message) {
  (void)w;
  (void)sb;
  (void)rc;
  (void)name;
  (void)message; /* a failure was logged by checkpoint.c */
}

static void on_checkpoint_due(mastra__timer *t) {
  mp_sandbox *sb = t->data;
  if (sb->running == 0 && !sb->destroying)
    mp_checkpoint_capture(sb->srv, sb, &sb->debounced);
}

/* {====== records and the state file ====== */

static void on_idle(mastra__timer *t);
static void kill_strays(mp_server *srv, mp_sandbox *sb);

static mp_sandbox *sandbox_alloc(mp_server *srv) {
  mp_sandbox *sb = calloc(1, sizeof *sb);
  if (sb == NULL) return NULL;
  sb->srv = srv;
  mastra__timer_init(srv->loop, &sb->idle_timer, on_idle, sb);
  mastra__timer_init(srv->loop, &sb->checkpoint_timer, on_checkpoint_due, sb);
  sb->debounced.done = on_debounced_done;
  return sb;
}

/* {====== the lists: every record, and the destroyed ones in destroy
** order ====== */

static void list_add(mp_server *srv, mp_sandbox *sb) {
  sb->prev = NULL;
  sb->next = srv->sandboxes;
  if (sb->next != NULL) sb->next->prev = sb;
  srv->sandboxes = sb;
}

static void list_unlink(mp_server *srv, mp_sandbox *sb) {
  if (sb->prev != NULL) sb->prev->next = sb->next;
  else srv->sandboxes = sb->next;
  if (sb->next != NULL) sb->next->prev = sb->prev;
  sb->next = sb->prev = NULL;
}

/* sb was destroyed: it goes to the end of srv->gone */
static void gone_add(mp_server *srv, mp_sandbox *sb) {
  if (sb->gone) return;
  sb->gone = 1;
  sb->gone_next = NULL;
  sb->gone_prev = srv->gone_tail;
  if (srv->gone_tail != NULL) srv->gone_tail->gone_next = sb;
  else srv->gone = sb;
  srv->gone_tail = sb;
  srv->ngone++;
}

static void gone_unlink(mp_server *srv, mp_sandbox *sb) {
  if (!sb->gone) return;
  if (sb->gone_prev != NULL) sb->gone_prev->gone_next = sb->gone_next;
  else srv->gone = sb->gone_next;
  if (sb->gone_next != NULL) sb->gone_next->gone_prev = sb->gone_prev;
  else srv->gone_tail = sb->gone_prev;
  sb->gone_next = sb->gone_prev = NULL;
  sb->gone = 0;
  srv->ngone--;
}

/* }====== */

/* A record that never made it into the list: its memory goes. */
static void sandbox_discard(mp_sandbox *sb) {
  if (sb->driver_data != NULL && sb->srv->driver->release != NULL)
    sb->srv->driver->release(sb->srv, sb);
  cJSON_Delete(sb->env);
  free(sb->root);
  free(sb->dir);
  free(sb->keep_layer);
  free(sb);
}

static char *path_of(const char *a, const char *b, const char *c) {
  size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
  char *p = malloc(n);
  if (p != NULL) snprintf(p, n, "%s%s%s", a, b, c);
  return p;
}

/* its tree's paths, as long as they are (a record is about 1 KiB, not
** two PATH_MAX buffers); -1 out of memory */
static int set_dirs(mp_server *srv, mp_sandbox *sb) {
  sb->root = path_of(srv->data_dir, "/sandboxes/", sb->id);
  sb->dir = sb->root ? path_of(sb->root, "/workspace", "") : NULL;
  return sb->dir != NULL ? 0 : -1;
}

static void arm_idle(mp_sandbox *sb);

/* A record file named file: its fields are checked as if they came from
** the network (mp_record_read), and its id must be its file's name. */
static void load_record(mp_server *srv, const cJSON *o, const char *file) {
  char err[256];
  mp_sandbox *sb = sandbox_alloc(srv);
  size_t n = strlen(file) - 5; /* without .json */
  if (sb == NULL) return;
  int bad = mp_record_read(sb, o, err, sizeof err) < 0;
  if (!bad && mp_env_check(sb->env, "env", err, sizeof err) < 0) bad = 1;
  if (!bad && (strlen(sb->id) != n || strncmp(sb->id, file, n) != 0)) {
    snprintf(err, sizeof err, "its id is not its file's name");
    bad = 1;
  }
  if (!bad && mp_index_get(&srv->sandbox_index, sb->id) != NULL) {
    snprintf(err, sizeof err, "another record has its id");
    bad = 1;
  }
  if (bad) {
    mp_log("%s/state/sandboxes/%s is not a valid sandbox record (%s);"
           " skipped", srv->data_dir, file, err);
    sandbox_discard(sb);
    return;
  }
  if (mp_record_expired(srv, sb, mastra__wall_ms())) {
    mp_record_remove(srv, sb->id); /* kept long enough: forgotten */
    sandbox_discard(sb);
    return;
  }
  if (set_dirs(srv, sb) < 0
      || mp_index_put(&srv->sandbox_index, sb->id, sb) < 0) {
    sandbox_discard(sb);
    return;
  }
  if (!sb->destroyed_ms && sb->restoring) {
    /* the server stopped while tar extracted its checkpoint: the tree is
    ** partial, and its create never answered */
    mp_log("%s was being restored when the platform stopped: destroyed",
           sb->id);
    sb->restoring = 0;
    sb->destroyed_ms = mastra__wall_ms();
    srv->driver->teardown(srv, sb);
    mp_record_save(srv, sb);
  }
  if (!sb->destroyed_ms && srv->driver->prepare(srv, sb, err, sizeof err) < 0)
    sb->destroyed_ms = mastra__wall_ms();
  list_add(srv, sb);
  if (!sb->destroyed_ms) arm_idle(sb);
}

static int by_destroyed(const void *a, const void *b) {
  int64_t x = (*(mp_sandbox *const *)a)->destroyed_ms;
  int64_t y = (*(mp_sandbox *const *)b)->destroyed_ms;
  return x < y ? -1 : x > y;
}

static size_t trim_gone(mp_server *srv, const mp_sandbox *keep);

/* the destroyed records just loaded go to srv->gone, oldest first; those
** past srv->destroyed_max are forgotten */
static void queue_loaded(mp_server *srv) {
  mp_sandbox *sb, **v;
  size_t n = 0, i;
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next)
    if (sb->destroyed_ms) n++;
  v = n > 0 ? malloc(n * sizeof *v) : NULL;
  for (i = 0, sb = srv->sandboxes; sb != NULL; sb = sb->next)
    if (sb->destroyed_ms) {
      if (v != NULL) v[i++] = sb;
      else gone_add(srv, sb); /* out of memory: in the order read */
    }
  if (v != NULL) {
    qsort(v, n, sizeof *v, by_destroyed);
    for (i = 0; i < n; i++) gone_add(srv, v[i]);
    free(v);
  }
  n = trim_gone(srv, NULL);
  if (n == 0) return;
  malloc_trim(0); /* their pages go back, as after a sweep */
  mp_log("forgot %zu destroyed record(s) past --destroyed-max %zu", n,
         srv->destroyed_max);
}

int mp_state_load(mp_server *srv) {
  int rc;
  mp_sandbox_sweep_start(srv);
  rc = mp_record_load_all(srv, load_record);
  queue_loaded(srv);
  return rc;
}

/* }====== */

/* {====== lifecycle ====== */

mp_sandbox *mp_sandbox_lookup(mp_server *srv, const char *project,
                              const char *id) {
  mp_sandbox *sb = mp_index_get(&srv->sandbox_index, id);
  if (sb != NULL && project != NULL && strcmp(sb->project, project) != 0)
    return NULL;
  return sb;
}

mp_sandbox *mp_sandbox_find(mp_server *srv, const char *id) {
  mp_sandbox *sb = mp_sandbox_lookup(srv, NULL, id);
  return sb != NULL && !sb->destroyed_ms ? sb : NULL;
}

size_t mp_sandbox_live_count(mp_server *srv) {
  size_t n = 0;
  mp_sandbox *sb;
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next)
    if (!sb->destroyed_ms) n++;
  return n;
}

double mp_sandbox_idle_minutes(const mp_server *srv, const mp_sandbox *sb) {
  return sb->idle_timeout_min > 0 ? sb->idle_timeout_min
                                  : srv->default_idle_min;
}

static void arm_idle(mp_sandbox *sb) {
  int64_t due;
  double minutes = mp_sandbox_idle_minutes(sb->srv, sb);
  mastra__timer_stop(&sb->idle_timer);
  if (minutes <= 0 || sb->running > 0 || sb->destroyed_ms) return;
  due = (sb->last_exec_ms ? sb->last_exec_ms : sb->created_ms)
        + (int64_t)(minutes * 60000) - mastra__wall_ms();
  mastra__timer_start(&sb->idle_timer, due > 0 ? (uint64_t)due : 0);
}

static void on_idle(mastra__timer *t) {
  mp_sandbox *sb = t->data;
  if (sb->running > 0 || sb->destroyed_ms || sb->destroying) return;
  if (sb->sockets > 0) { /* not idle while an exec socket is open */
    mastra__timer_start(&sb->idle_timer, 1000);
    return;
  }
  mp_log("sandbox %s idle for %g min: reaping it", sb->id,
         mp_sandbox_idle_minutes(sb->srv, sb));
  mp_sandbox_destroy(sb->srv, sb, NULL);
}

/* tell the waiters of a restore or a destroy */
static void tell_waiters(mp_sandbox *sb, int rc, const char *name,
                         const char *message) {
  mp_waiter *w, *next;
  w = sb->waiters;
  sb->waiters = NULL;
  for (; w != NULL; w = next) {
    next = w->next;
    w->next = NULL;
    w->done(w, sb, rc, name, message);
  }
}

static void add_waiter(mp_sandbox *sb, mp_waiter *w) {
  if (w == NULL) return;
  w->next = sb->waiters;
  sb->waiters = w;
}

void mp_sandbox_forget(mp_sandbox *sb, mp_waiter *w) {
  mp_waiter **p;
  for (p = &sb->waiters; *p != NULL; p = &(*p)->next) {
    if (*p == w) {
      *p = w->next;
      w->next = NULL;
      return;
    }
  }
  mp_checkpoint_forget(sb, w);
}

static void teardown(mp_server *srv, mp_sandbox *sb) {
  sb->destroyed_ms = mastra__wall_ms();
  mp_lease_drop_sandbox(srv, sb);
  mastra__timer_stop(&sb->idle_timer);
  mastra__timer_stop(&sb->checkpoint_timer);
  if (srv->drop_execs != NULL) srv->drop_execs(sb, 1);
  srv->driver->teardown(srv, sb);
  mp_record_save(srv, sb);
  gone_add(srv, sb);
  trim_gone(srv, sb); /* sb stays: its caller tells its waiters */
}

/* a provisioning failure (activity.h) is retried by creating again */
static int retry_create(mp_server *srv, const cJSON *args, char *err,
                        size_t errlen) {
  mp_create_spec spec;
  mp_sandbox *sb;
  if (mp_failure_create_spec(args, &spec, err, errlen) < 0) return -1;
  return mp_sandbox_create(srv, &spec, &sb, NULL, err, errlen) < 0 ? -1 : 0;
}

static void on_restored(mp_waiter *w, mp_sandbox *sb, int rc,
                        const char *name, const char *message) {
  (void)w;
  (void)name;
  sb->restoring = 0;
  if (rc < 0) {
    mp_log("%s is destroyed: its checkpoint could not be restored", sb->id);
    mp_failure_record_restore(sb->srv, sb, message, retry_create);
    teardown(sb->srv, sb);
  } else {
    mp_record_save(sb->srv, sb);
    arm_idle(sb);
  }
  tell_waiters(sb, rc, name, message);
  if (rc < 0) mp_drain_start(sb, NULL, 1); /* what its init left: killed */
}

/* The live sandbox of spec's (project, environment, key), the newest if
** an older server left more than one; NULL without a key. A walk of the
** records, as the checkpoint delete's: a create costs far more. */
static mp_sandbox *live_with_key(mp_server *srv, const mp_create_spec *spec) {
  mp_sandbox *s;
  if (spec->recovery_key == NULL || spec->recovery_key[0] == '\0') return NULL;
  for (s = srv->sandboxes; s != NULL; s = s->next)
    if (!s->destroyed_ms && strcmp(s->recovery_key, spec->recovery_key) == 0
        && strcmp(s->project, spec->project) == 0
        && strcmp(s->environment, spec->environment) == 0)
      return s;
  return NULL;
}

int mp_sandbox_create(mp_server *srv, const mp_create_spec *spec,
                      mp_sandbox **out, mp_waiter *w, char *err,
                      size_t errlen) {
  mp_sandbox *sb;
  char hex[2 * 12 + 1], source[4400], name[MP_CHECKPOINT_NAME_MAX];
  int restore;
  *out = NULL;
  /* getOrCreate: a live sandbox of the key answers (docs/decisions.md) */
  if ((sb = live_with_key(srv, spec)) != NULL) {
    *out = sb;
    if (spec->key_explicit && !sb->key_explicit && !sb->destroying) {
      sb->key_explicit = 1; /* asked for by this create too */
      mp_record_save(srv, sb);
    }
    if (sb->destroying) { /* going: create again once it is gone */
      if (w == NULL) {
        snprintf(err, errlen, "sandbox %s of this id is being destroyed:"
                 " create again once it is", sb->id);
        *out = NULL;
        return -1;
      }
      add_waiter(sb, w);
      return 4;
    }
    if (sb->restoring) {
      add_waiter(sb, w);
      return 3;
    }
    return 2;
  }
  restore = mp_checkpoint_source(srv, spec->project, spec->environment,
                                 spec->recovery_key, spec->seed, source,
                                 sizeof source, name, err, errlen);
  if (restore < 0) return -2;
  sb = sandbox_alloc(srv);
  if (sb == NULL || mastra__random_hex(hex, 12) < 0) {
    free(sb);
    snprintf(err, errlen, "out of memory or randomness");
    return -1;
  }
  snprintf(sb->id, sizeof sb->id, "sbx_%s", hex);
  snprintf(sb->project, sizeof sb->project, "%s", spec->project);
  snprintf(sb->environment, sizeof sb->environment, "%s", spec->environment);
  snprintf(sb->recovery_key, sizeof sb->recovery_key, "%s",
           spec->recovery_key ? spec->recovery_key : "");
  sb->key_explicit = spec->key_explicit && sb->recovery_key[0] != '\0';
  snprintf(sb->network, sizeof sb->network, "%s",
           spec->network ? spec->network : "ISOLATED");
  sb->idle_timeout_min = spec->idle_timeout_min;
  snprintf(sb->template_key, sizeof sb->template_key, "%s",
           spec->template_key ? spec->template_key : "");
  sb->cpu_count = spec->cpu_count;
  sb->memory_mb = spec->memory_mb;
  snprintf(sb->workdir, sizeof sb->workdir, "%s",
           spec->workdir ? spec->workdir : "");
  sb->env = spec->env ? cJSON_Duplicate(spec->env, 1) : cJSON_CreateObject();
  sb->created_ms = mastra__wall_ms();
  if (set_dirs(srv, sb) < 0) {
    snprintf(err, errlen, "out of memory");
    sandbox_discard(sb);
    return -1;
  }
  sb->restoring = restore == 0; /* the driver's prepare looks */
  if (srv->driver->prepare(srv, sb, err, errlen) < 0) {
    /* its tree could not be made for the disk's room (or its inodes) */
    int full = errno == ENOSPC || errno == EDQUOT
               || strstr(err, strerror(ENOSPC)) != NULL
               || strstr(err, strerror(EDQUOT)) != NULL;
    mp_failure_record_create(srv, "create", spec->recovery_key, spec, err,
                             retry_create);
    sandbox_discard(sb);
    return full ? -3 : -1;
  }
  /* no record, no sandbox: one the platform cannot write down would be
  ** forgotten by its next start, tree and all */
  if (mp_record_save(srv, sb) < 0) {
    int e = errno;
    snprintf(err, errlen, "cannot write its record: %s", strerror(e));
    mp_failure_record_create(srv, "create", spec->recovery_key, spec, err,
                             retry_create);
    srv->driver->teardown(srv, sb);
    sandbox_discard(sb);
    return e == ENOSPC || e == EDQUOT ? -3 : -1;
  }
  if (mp_index_put(&srv->sandbox_index, sb->id, sb) < 0) {
    snprintf(err, errlen, "out of memory");
    srv->driver->teardown(srv, sb);
    mp_record_remove(srv, sb->id);
    sandbox_discard(sb);
    return -1;
  }
  list_add(srv, sb);
  *out = sb;
  if (restore == 0) {
    add_waiter(sb, w);
    sb->lifecycle.done = on_restored;
    sb->lifecycle.explicit_request = 0;
    mp_checkpoint_restore(srv, sb, source, name, &sb->lifecycle);
    return 1;
  }
  arm_idle(sb);
  return 0;
}

/* nothing of a destroyed sandbox is left (rc 0), or the deadline passed
** (-1, message says what is left): its waiters are told */
static void on_drained(mp_sandbox *sb, int rc, const char *message) {
  tell_waiters(sb, rc, NULL, message);
}

static void on_destroy_captured(mp_waiter *w, mp_sandbox *sb, int rc,
                                const char *name, const char *message) {
  char msg[1200];
  (void)w;
  (void)name;
  sb->destroying = 0;
  /* a DELETE of its checkpoint came while that capture ran (a DELETE that
  ** came after it waits here too): the failure no longer matters, since a
  ** sandbox whose checkpoint is deleted goes without one, as the message
  ** below tells the caller to do */
  if (rc < 0 && sb->checkpoint_deleted) {
    mp_log("capturing the checkpoint of %s failed (%s), but its checkpoint was"
           " deleted meanwhile: destroyed without one", sb->id,
           message ? message : "unknown error");
    rc = 0;
  }
  if (rc < 0) {
    /* the sandbox stays, tree and all: a failed capture never passes for
    ** a success, and the older checkpoint is still the key's */
    snprintf(msg, sizeof msg, "capturing the checkpoint of %s failed (%s);"
             " the sandbox is kept: free space and destroy it again, or"
             " DELETE its checkpoint first to destroy it without one",
             sb->id, message ? message : "unknown error");
    mp_log("%s", msg);
    /* A tree that the data disk has no room for fails the same way each
    ** minute, and would fill the disk each time: recorded once as a
    ** failure, and the idle reaper tries again only after its next
    ** commands (mp_sandbox_commands_ended re-arms it) */
    if (rc == MP_CHECKPOINT_NO_SPACE)
      mp_failure_record(sb->srv, sb->project, sb->environment, "checkpoint",
                        sb->id, msg, NULL, NULL);
    else if (mp_sandbox_idle_minutes(sb->srv, sb) > 0 && sb->running == 0)
      mastra__timer_start(&sb->idle_timer, REAP_RETRY_MS);
    tell_waiters(sb, rc == MP_CHECKPOINT_NO_SPACE ? rc : -1, NULL, msg);
    return;
  }
  teardown(sb->srv, sb);
  mp_drain_start(sb, on_drained, 1);
}

void mp_sandbox_destroy(mp_server *srv, mp_sandbox *sb, mp_waiter *w) {
  size_t i;
  if (sb->destroyed_ms) { /* told once nothing of it is left */
    add_waiter(sb, w);
    mp_drain_start(sb, on_drained, 1);
    return;
  }
  if (sb->restoring) {
    if (w != NULL) w->done(w, sb, -1, NULL, "the sandbox is being restored");
    return;
  }
  add_waiter(sb, w);
  if (sb->destroying) return; /* told when that ends */
  sb->destroying = 1;
  mastra__timer_stop(&sb->idle_timer);
  mastra__timer_stop(&sb->checkpoint_timer);
  /* commands end; their sessions see them finish and let go */
  for (i = 0; i < sb->nprocs; i++) mastra__proc_kill(sb->procs[i]);
  kill_strays(srv, sb);
  sb->lifecycle.done = on_destroy_captured;
  sb->lifecycle.explicit_request = 0;
  mp_checkpoint_capture(srv, sb, &sb->lifecycle);
}

/* Shutdown: end every command and capture the checkpoints, running the
** loop until every tar has finished. The records stay live: with the
** process driver a sandbox is its directory, which is still there when the
** server comes back. */
void mp_sandbox_shutdown_all(mp_server *srv) {
  mp_sandbox *sb;
  int busy = 1;
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next) {
    size_t i;
    if (sb->destroyed_ms) continue;
    for (i = 0; i < sb->nprocs; i++) mastra__proc_kill(sb->procs[i]);
    mastra__timer_stop(&sb->idle_timer);
    mastra__timer_stop(&sb->checkpoint_timer);
    if (!sb->destroying && !sb->restoring)
      mp_checkpoint_capture(srv, sb, &sb->debounced);
  }
  while (busy) {
    busy = 0;
    for (sb = srv->sandboxes; sb != NULL; sb = sb->next)
      if (mp_checkpoint_busy(sb)) busy = 1;
    if (busy) mastra__loop_run_once(srv->loop, 1000);
  }
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next)
    if (!sb->destroyed_ms) mp_record_save(srv, sb);
}

static void sandbox_free(mp_sandbox *sb) {
  mp_drain_stop(sb);
  mastra__timer_stop(&sb->idle_timer);
  mastra__timer_stop(&sb->checkpoint_timer);
  mp_lease_drop_sandbox(sb->srv, sb);
  mp_index_del(&sb->srv->sandbox_index, sb->id, sb);
  /* the server exits: the execs' files tell the next one */
  if (sb->srv->drop_execs != NULL) sb->srv->drop_execs(sb, 0);
  free(sb->procs);
  free(sb->proc_starts);
  sandbox_discard(sb);
}

void mp_sandbox_free_all(mp_server *srv) {
  mastra__timer_stop(&srv->record_sweep);
  while (srv->sandboxes != NULL) {
    mp_sandbox *sb = srv->sandboxes;
    list_unlink(srv, sb);
    sandbox_free(sb);
  }
  srv->gone = srv->gone_tail = NULL;
  srv->ngone = 0;
  mp_index_free(&srv->sandbox_index);
}

/* whether something holds the record: a command, a tar, a waiter, a
** session, a run, its drain */
static int held(mp_sandbox *sb) {
  return sb->nprocs > 0 || sb->refs > 0 || sb->waiters != NULL
         || sb->draining || mp_checkpoint_busy(sb);
}

/* a destroyed record is forgotten: its memory and its file go */
static void forget(mp_server *srv, mp_sandbox *sb) {
  list_unlink(srv, sb);
  gone_unlink(srv, sb);
  mp_record_remove(srv, sb->id);
  sandbox_free(sb);
}

/* Forget the oldest destroyed records (but keep, and those held) until
** srv->destroyed_max are left. Each call walks only the held ones at the
** head of the list: amortised, one record freed per destroy. */
static size_t trim_gone(mp_server *srv, const mp_sandbox *keep) {
  mp_sandbox *sb, *next;
  size_t n = 0;
  for (sb = srv->gone; sb != NULL && srv->ngone > srv->destroyed_max;
       sb = next) {
    next = sb->gone_next;
    if (sb != keep && !held(sb)) {
      forget(srv, sb);
      n++;
    }
  }
  return n;
}

/* Forget the destroyed records past srv->destroyed_ttl_ms that nothing
** holds, from the oldest to the first that is not expired, then those past
** srv->destroyed_max. */
size_t mp_sandbox_sweep(mp_server *srv) {
  mp_sandbox *sb, *next;
  int64_t now = mastra__wall_ms();
  size_t n = 0;
  for (sb = srv->gone; sb != NULL && mp_record_expired(srv, sb, now);
       sb = next) {
    next = sb->gone_next;
    if (!held(sb)) {
      forget(srv, sb);
      n++;
    }
  }
  return n + trim_gone(srv, NULL);
}

static void on_sweep(mastra__timer *t) {
  /* records freed: glibc gives their pages back, so that RSS stays flat */
  if (mp_sandbox_sweep(t->data) > 0) malloc_trim(0);
  mastra__timer_start(t, mp_record_sweep_ms(t->data));
}

void mp_sandbox_sweep_start(mp_server *srv) {
  mastra__timer_init(srv->loop, &srv->record_sweep, on_sweep, srv);
  mastra__timer_start(&srv->record_sweep, mp_record_sweep_ms(srv));
}

void mp_sandbox_commands_ended(mp_sandbox *sb) {
  arm_idle(sb);
  if (sb->running == 0 && sb->recovery_key[0] != '\0')
    mastra__timer_start(&sb->checkpoint_timer, CHECKPOINT_DEBOUNCE_MS);
}

/* }====== */

/* {====== orphans (orphans.c): run files, marked processes ====== */

static void mark_interrupted(mp_server *srv, const char *id);

/* What mp_orphans_kill_marked asks: a marked process of `only` (NULL:
** of any record of this server) outside the groups of only's running
** commands (mastra__proc_kill ends those, with their grace period). */
typedef struct marked_scan {
  mp_server *srv;
  const mp_sandbox *only;
} marked_scan;

/* pgrp is the group of one of sb's running commands */
static int in_command(void *data, long pgrp) {
  const mp_sandbox *sb = data;
  size_t i;
  for (i = 0; i < sb->nprocs; i++)
    if (pgrp == (long)sb->procs[i]->pid) return 1;
  return 0;
}

static int marked_wanted(void *data, const char *id, long pgrp) {
  marked_scan *m = data;
  if (m->only == NULL) return mp_sandbox_lookup(m->srv, NULL, id) != NULL;
  if (strcmp(id, m->only->id) != 0) return 0;
  return !in_command((void *)m->only, pgrp);
}

/* a previous server's process: logged; its sandbox is interrupted */
static void marked_previous(void *data, const char *id, long pid) {
  marked_scan *m = data;
  mp_log("killed process %ld of sandbox %s, left running by a previous"
         " server", pid, id);
  mark_interrupted(m->srv, id);
}

/* SIGKILL the marked processes (see marked_wanted); `previous`: they are a
** previous server's. Returns how many were alive. */
static size_t kill_marked(mp_server *srv, const mp_sandbox *only,
                          int previous) {
  marked_scan m;
  m.srv = srv;
  m.only = only;
  return mp_orphans_kill_marked(marked_wanted,
                                previous ? marked_previous : NULL, &m);
}

/* what a destroy leaves: processes of sb outside its commands' groups (a
** sandbox that never ran a command has none: no scan); the driver's own
** way to find them, or the scan of /proc */
static void kill_strays(mp_server *srv, mp_sandbox *sb) {
  size_t n;
  if (sb->last_exec_ms == 0) return;
  n = srv->driver->kill_strays != NULL
          ? srv->driver->kill_strays(sb, in_command, sb)
          : kill_marked(srv, sb, 0);
  if (n > 0) mp_log("sandbox %s: killed %zu stray process(es)", sb->id, n);
}

size_t mp_sandbox_running_count(mp_server *srv) {
  size_t n = 0;
  mp_sandbox *sb;
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next) n += sb->nprocs;
  return n;
}

void mp_sandbox_stop_all(mp_server *srv) {
  mp_sandbox *sb;
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next) {
    size_t i;
    for (i = 0; i < sb->nprocs; i++) mastra__proc_kill(sb->procs[i]);
  }
}

size_t mp_sandbox_kill_all(mp_server *srv) {
  mp_sandbox *sb;
  size_t n = 0;
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next) {
    size_t i;
    for (i = 0; i < sb->nprocs; i++) {
      mastra__proc *p = sb->procs[i];
      if (!p->done) {
        kill(-p->pid, SIGKILL);
        n++;
      }
    }
  }
  return n + kill_marked(srv, NULL, 0);
}

/* The sandbox named by a run file (or a marker) was interrupted: it stays
** live, idle from now on. */
static void mark_interrupted(mp_server *srv, const char *id) {
  mp_sandbox *sb = mp_sandbox_find(srv, id);
  if (sb == NULL) return;
  sb->last_exec_ms = mastra__wall_ms();
  arm_idle(sb);
  mp_record_save(srv, sb);
}

static void run_file_interrupted(void *data, const char *id) {
  mark_interrupted(data, id);
}

size_t mp_sandbox_kill_previous(mp_server *srv) {
  return mp_orphans_kill_run_files(srv->data_dir, run_file_interrupted, srv)
         + kill_marked(srv, NULL, 1);
}

/* }====== */
