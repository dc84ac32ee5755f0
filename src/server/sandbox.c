/*
** Sandboxes of mastra-platform: records, lifecycle (create, destroy, idle
** reaping, shutdown), the record files, and the commands run in a sandbox
** through its driver (srv->driver: driver_process.c).
**
** A record outlives its sandbox by --destroyed-ttl (GET shows destroyedAt,
** exec-lease answers 410), then mp_sandbox_sweep frees it. Each record is
** written to <data>/state/sandboxes/<id>.json when it changes (atomically).
** Checkpoints (checkpoint.c) are captured when a sandbox is destroyed or
** reaped, two seconds after the last command of a burst and at shutdown
** (unless an explicit DELETE /checkpoint marked the sandbox), and restored
** when a sandbox is created with the same recovery key (or a seed). tar
** runs on the loop: a create that restores and a destroy that captures
** finish when it does, and a destroy whose capture failed keeps the
** sandbox.
**
** Orphans: every command runs with MP_MARKER_VAR=<sandbox id> in its
** environment and has a run file, DATA_DIR/state/run/<boot id>/<pid>-<start
** time> (its process group and the start time of its leader in
** /proc/PID/stat), from its start until it is let go of. A destroy kills the sandbox's
** marked processes that left its commands' groups; shutdown kills every
** group and every marked process; a server that starts after a crash
** kills the groups of the run files left behind (when the leader is gone
** or is still the same process: a pid that was reused is never signalled)
** and the marked processes, before it serves.
**
** Over 800 lines for now: the records, their lifecycle, the orphan run
** files and the command bookkeeping all work on the sandbox's private
** fields (its waiters, idle timer and command list). The run files and the
** /proc scan are the part to move out next, behind callbacks, so that the
** two files do not call each other.
*/
#define _GNU_SOURCE
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "activity.h"
#include "checkpoint.h"
#include "env.h"
#include "lease.h"
#include "log.h"
#include "record.h"
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

/* A record that never made it into the list: its memory goes. */
static void sandbox_discard(mp_sandbox *sb) {
  if (sb->driver_data != NULL && sb->srv->driver->release != NULL)
    sb->srv->driver->release(sb->srv, sb);
  cJSON_Delete(sb->env);
  free(sb->root);
  free(sb->dir);
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
  sb->next = srv->sandboxes;
  srv->sandboxes = sb;
  if (!sb->destroyed_ms) arm_idle(sb);
}

int mp_state_load(mp_server *srv) {
  mp_sandbox_sweep_start(srv);
  return mp_record_load_all(srv, load_record);
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
  srv->driver->teardown(srv, sb);
  mp_record_save(srv, sb);
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
}

int mp_sandbox_create(mp_server *srv, const mp_create_spec *spec,
                      mp_sandbox **out, mp_waiter *w, char *err,
                      size_t errlen) {
  mp_sandbox *sb;
  char hex[2 * 12 + 1], source[4400], name[MP_CHECKPOINT_NAME_MAX];
  int restore;
  *out = NULL;
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
  snprintf(sb->network, sizeof sb->network, "%s",
           spec->network ? spec->network : "ISOLATED");
  sb->idle_timeout_min = spec->idle_timeout_min;
  sb->env = spec->env ? cJSON_Duplicate(spec->env, 1) : cJSON_CreateObject();
  sb->created_ms = mastra__wall_ms();
  if (set_dirs(srv, sb) < 0) {
    snprintf(err, errlen, "out of memory");
    sandbox_discard(sb);
    return -1;
  }
  sb->restoring = restore == 0; /* the driver's prepare looks */
  if (srv->driver->prepare(srv, sb, err, errlen) < 0) {
    mp_failure_record_create(srv, "create", spec->recovery_key, spec, err,
                             retry_create);
    sandbox_discard(sb);
    return -1;
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
  sb->next = srv->sandboxes;
  srv->sandboxes = sb;
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

static void on_destroy_captured(mp_waiter *w, mp_sandbox *sb, int rc,
                                const char *name, const char *message) {
  char msg[1200];
  (void)w;
  (void)name;
  sb->destroying = 0;
  if (rc < 0) {
    /* the sandbox stays, tree and all: a failed capture never passes for
    ** a success, and the older checkpoint is still the key's */
    snprintf(msg, sizeof msg, "capturing the checkpoint of %s failed (%s);"
             " the sandbox is kept: free space and destroy it again, or"
             " DELETE its checkpoint first to destroy it without one",
             sb->id, message ? message : "unknown error");
    mp_log("%s", msg);
    if (mp_sandbox_idle_minutes(sb->srv, sb) > 0 && sb->running == 0)
      mastra__timer_start(&sb->idle_timer, REAP_RETRY_MS);
    tell_waiters(sb, -1, NULL, msg);
    return;
  }
  teardown(sb->srv, sb);
  tell_waiters(sb, 0, NULL, NULL);
}

void mp_sandbox_destroy(mp_server *srv, mp_sandbox *sb, mp_waiter *w) {
  size_t i;
  if (sb->destroyed_ms) {
    if (w != NULL) w->done(w, sb, 0, NULL, NULL);
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
  mastra__timer_stop(&sb->idle_timer);
  mastra__timer_stop(&sb->checkpoint_timer);
  mp_lease_drop_sandbox(sb->srv, sb);
  mp_index_del(&sb->srv->sandbox_index, sb->id, sb);
  free(sb->procs);
  free(sb->proc_starts);
  sandbox_discard(sb);
}

void mp_sandbox_free_all(mp_server *srv) {
  mastra__timer_stop(&srv->record_sweep);
  while (srv->sandboxes != NULL) {
    mp_sandbox *sb = srv->sandboxes;
    srv->sandboxes = sb->next;
    sandbox_free(sb);
  }
  mp_index_free(&srv->sandbox_index);
}

/* Free the destroyed records past srv->destroyed_ttl_ms (and their files)
** that nothing holds (a command, a tar, a waiter, a session, a run). */
size_t mp_sandbox_sweep(mp_server *srv) {
  mp_sandbox **p = &srv->sandboxes;
  int64_t now = mastra__wall_ms();
  size_t n = 0;
  while (*p != NULL) {
    mp_sandbox *sb = *p;
    if (mp_record_expired(srv, sb, now) && sb->nprocs == 0 && sb->refs == 0
        && sb->waiters == NULL && !mp_checkpoint_busy(sb)) {
      *p = sb->next;
      mp_record_remove(srv, sb->id);
      sandbox_free(sb);
      n++;
    } else {
      p = &sb->next;
    }
  }
  return n;
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

/* }====== */

/* {====== orphans: run files, marked processes ====== */

/* What /proc/PID/stat says of pid: state, process group, start time (in
** clock ticks since boot). -1 when there is no such process. */
static int proc_stat(long pid, char *state, long *pgrp,
                     unsigned long long *start) {
  char path[64], buf[1024], *p;
  int fd, i;
  ssize_t n;
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
  if (p == NULL || p[1] != ' ') return -1;
  p += 2;
  *state = *p;
  /* fields 3 (state) .. 22 (starttime); pgrp is field 5 */
  for (i = 3; i < 22 && p != NULL; i++) {
    p = strchr(p, ' ');
    if (p != NULL) p++;
    if (p != NULL && i + 1 == 5) *pgrp = strtol(p, NULL, 10);
  }
  if (p == NULL) return -1;
  *start = strtoull(p, NULL, 10);
  return 0;
}

/* The kernel's id of this boot: pids and start times mean something only
** within one boot. */
static const char *boot_id(void) {
  static char id[64];
  char *text;
  size_t len, i;
  if (id[0] != '\0') return id;
  snprintf(id, sizeof id, "boot");
  if (mastra__read_file("/proc/sys/kernel/random/boot_id", &text, &len) < 0)
    return id;
  for (i = 0; i < len && i + 1 < sizeof id
       && (text[i] == '-' || (text[i] >= '0' && text[i] <= '9')
           || (text[i] >= 'a' && text[i] <= 'f'));
       i++)
    id[i] = text[i];
  if (i > 0) id[i] = '\0';
  free(text);
  return id;
}

static void run_dir_path(const mp_server *srv, char *out, size_t n) {
  snprintf(out, n, "%s/state/run/%s", srv->data_dir, boot_id());
}

static void run_file_path(const mp_server *srv, char *out, size_t n,
                          long pid, unsigned long long start) {
  snprintf(out, n, "%s/state/run/%s/%ld-%llu", srv->data_dir, boot_id(), pid,
           start);
}

/* The run file of a command just started (it holds the sandbox id);
** returns the leader's start time (0 if /proc could not tell). Not
** fsync'd: it only has to outlive the server, not the machine. */
static unsigned long long run_file_add(mp_server *srv, const mp_sandbox *sb,
                                       pid_t pid) {
  char path[4200], state;
  long pgrp;
  unsigned long long start = 0;
  int fd;
  if (proc_stat((long)pid, &state, &pgrp, &start) < 0) return 0;
  run_file_path(srv, path, sizeof path, (long)pid, start);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0 && errno == ENOENT) {
    char dir[4200];
    run_dir_path(srv, dir, sizeof dir);
    if (mastra__mkdirs(dir, 0755, NULL) == 0)
      fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  if (fd < 0) {
    mp_log("cannot write %s: %s", path, strerror(errno));
    return start;
  }
  if (mastra__write_all(fd, sb->id, strlen(sb->id)) < 0)
    mp_log("cannot write %s: %s", path, strerror(errno));
  close(fd);
  return start;
}

static void run_file_remove(mp_server *srv, pid_t pid,
                            unsigned long long start) {
  char path[4200];
  if (start == 0) return;
  run_file_path(srv, path, sizeof path, (long)pid, start);
  unlink(path);
}

/* The value of MP_MARKER_VAR in the first 64 KiB of the environment of
** pid (where build_envp puts it first), into id; -1 when absent. */
static int read_marker(long pid, char *id, size_t n) {
  static const char var[] = MP_MARKER_VAR "=";
  char path[64], buf[65536];
  size_t len = 0, i;
  int fd;
  snprintf(path, sizeof path, "/proc/%ld/environ", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  while (len < sizeof buf - 1) {
    ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  close(fd);
  buf[len] = '\0';
  for (i = 0; i < len; i += strlen(buf + i) + 1) {
    if (strncmp(buf + i, var, sizeof var - 1) == 0) {
      snprintf(id, n, "%s", buf + i + sizeof var - 1);
      return 0;
    }
  }
  return -1;
}

static void mark_interrupted(mp_server *srv, const char *id);

/* SIGKILL every live process whose marker names `only` (NULL: any sandbox
** of this data directory), except the groups of only's running commands
** (mastra__proc_kill ends those, with their grace period). `previous`:
** they are a previous server's (logged; their sandbox is interrupted).
** Returns how many were alive. */
static size_t kill_marked(mp_server *srv, const mp_sandbox *only,
                          int previous) {
  DIR *d = opendir("/proc");
  struct dirent *e;
  size_t killed = 0;
  long self = (long)getpid();
  if (d == NULL) return 0;
  while ((e = readdir(d)) != NULL) {
    char *end, state, id[MP_ID_MAX];
    long pid = strtol(e->d_name, &end, 10), pgrp;
    unsigned long long start;
    size_t i;
    int tracked = 0;
    if (*end != '\0' || pid <= 1 || pid == self) continue;
    if (read_marker(pid, id, sizeof id) < 0) continue;
    if (only != NULL ? strcmp(id, only->id) != 0
                     : mp_sandbox_lookup(srv, NULL, id) == NULL)
      continue;
    if (proc_stat(pid, &state, &pgrp, &start) < 0 || state == 'Z') continue;
    for (i = 0; only != NULL && i < only->nprocs; i++)
      if (pgrp == (long)only->procs[i]->pid) tracked = 1;
    if (tracked) continue;
    kill((pid_t)pid, SIGKILL);
    killed++;
    if (previous) {
      mp_log("killed process %ld of sandbox %s, left running by a previous"
             " server", pid, id);
      mark_interrupted(srv, id);
    }
  }
  closedir(d);
  return killed;
}

/* what a destroy leaves: processes of sb outside its commands' groups (a
** sandbox that never ran a command has none: no scan) */
static void kill_strays(mp_server *srv, mp_sandbox *sb) {
  size_t n;
  if (sb->last_exec_ms == 0) return;
  n = kill_marked(srv, sb, 0);
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

/* The run files of earlier boots name processes that are gone. */
static void remove_other_boots(mp_server *srv) {
  char dir[4200], path[4600];
  DIR *d;
  struct dirent *e;
  snprintf(dir, sizeof dir, "%s/state/run", srv->data_dir);
  d = opendir(dir);
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0
        || strcmp(e->d_name, boot_id()) == 0)
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    mastra__remove_tree(path);
  }
  closedir(d);
}

/* The run files of this boot: SIGKILL each group whose leader is gone (a
** group id is not reused while the group has members) or is still the
** process that was started (same start time); a reused pid is left
** alone. */
static size_t kill_run_files(mp_server *srv) {
  char dir[4200], path[4600];
  DIR *d;
  struct dirent *e;
  size_t n = 0;
  remove_other_boots(srv);
  run_dir_path(srv, dir, sizeof dir);
  d = opendir(dir);
  if (d == NULL) return 0;
  while ((e = readdir(d)) != NULL) {
    char *end, *text, state;
    long pid = strtol(e->d_name, &end, 10), pgrp;
    unsigned long long start, now_start;
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    start = *end == '-' ? strtoull(end + 1, &end, 10) : 0;
    if (pid > 1 && start > 0 && *end == '\0'
        && (proc_stat(pid, &state, &pgrp, &now_start) < 0
            || now_start == start)) {
      if (kill((pid_t)-pid, SIGKILL) == 0) {
        mp_log("killed the process group %ld left running by a previous"
               " server", pid);
        n++;
      }
      if (mastra__read_file(path, &text, NULL) == 0) {
        mark_interrupted(srv, text);
        free(text);
      }
    }
    unlink(path);
  }
  closedir(d);
  return n;
}

size_t mp_sandbox_kill_previous(mp_server *srv) {
  return kill_run_files(srv) + kill_marked(srv, NULL, 1);
}

/* }====== */

/* {====== commands ====== */

int mp_sandbox_exec(mp_server *srv, mp_sandbox *sb, const mp_exec_spec *spec,
                    mastra__proc_notify notify, void *data,
                    mastra__proc **out, char *err, size_t errlen) {
  mastra__envp envp = {NULL, 0, 0};
  mastra__proc **procs;
  unsigned long long *starts;
  int rc;
  *out = NULL;
  if (sb->destroyed_ms || sb->destroying || sb->restoring) {
    snprintf(err, errlen, "sandbox %s %s", sb->id, sb->destroyed_ms
             ? "was destroyed" : sb->destroying ? "is being destroyed"
             : "is being restored");
    return -1;
  }
  if (srv->stopping) {
    snprintf(err, errlen, "the server is shutting down");
    return -1;
  }
  procs = realloc(sb->procs, (sb->nprocs + 1) * sizeof *procs);
  if (procs != NULL) sb->procs = procs;
  starts = realloc(sb->proc_starts, (sb->nprocs + 1) * sizeof *starts);
  if (starts != NULL) sb->proc_starts = starts;
  if (procs == NULL || starts == NULL
      || mp_env_build(&envp, sb->id, sb->env, spec->env) < 0) {
    mastra__envp_free(&envp);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  rc = srv->driver->spawn(srv, sb, spec, mastra__envp_list(&envp), out, err,
                         errlen);
  mastra__envp_free(&envp);
  if (rc < 0) {
    mp_session_refused(srv, sb, spec->command, err);
    return -1;
  }
  mp_session_begin(srv, sb, spec->command, *out);
  (*out)->notify = notify;
  (*out)->notify_data = data;
  sb->proc_starts[sb->nprocs] = run_file_add(srv, sb, (*out)->pid);
  sb->procs[sb->nprocs++] = *out;
  sb->running++;
  sb->last_exec_ms = mastra__wall_ms();
  mastra__timer_stop(&sb->idle_timer);
  mastra__timer_stop(&sb->checkpoint_timer);
  return 0;
}

void mp_sandbox_exec_done(mp_server *srv, mp_sandbox *sb, mastra__proc *p) {
  size_t i;
  for (i = 0; i < sb->nprocs; i++) {
    if (sb->procs[i] == p) {
      run_file_remove(srv, p->pid, sb->proc_starts[i]);
      sb->procs[i] = sb->procs[--sb->nprocs];
      sb->proc_starts[i] = sb->proc_starts[sb->nprocs];
      break;
    }
  }
  mp_session_end(srv, sb, p);
  mastra__proc_release(p); /* kills it if it still runs */
  if (sb->running > 0) sb->running--;
  sb->last_exec_ms = mastra__wall_ms();
  if (sb->destroyed_ms || sb->destroying) return;
  arm_idle(sb);
  if (sb->running == 0 && sb->recovery_key[0] != '\0')
    mastra__timer_start(&sb->checkpoint_timer, CHECKPOINT_DEBOUNCE_MS);
}

/* }====== */
