/*
** Sandboxes of mastra-platform: records, the `process` driver, commands,
** checkpoints, idle reaping, exec leases and the record files.
**
** A record outlives its sandbox: a destroyed sandbox keeps its record with
** destroyedAt (GET shows it; exec-lease answers 410). Each record is
** written to <data>/state/sandboxes/<id>.json when it changes (atomically).
**
** Checkpoints are keyed by (project, environment, recovery key): a tar of
** the working tree in <data>/checkpoints/<name>.tar, captured when the
** sandbox is destroyed or reaped, on POST /checkpoint, two seconds after the
** last command of a burst, and at shutdown; restored when a sandbox is
** created with the same key.
*/
#define _GNU_SOURCE
#include "sandbox.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hash.h"

#define CHECKPOINT_DEBOUNCE_MS 2000
#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

typedef struct mp_lease {
  struct mp_lease *next;
  char token[2 * MP_TOKEN_BYTES + 1];
  char sandbox_id[MP_ID_MAX];
  int64_t expires_ms;
} mp_lease;

/* {====== the process driver ====== */

static int proc_prepare(mp_server *srv, mp_sandbox *sb, char *err,
                        size_t errlen) {
  if (mastra__mkdirs(sb->dir, 0755, NULL) < 0) {
    snprintf(err, errlen, "cannot create %s: %s", sb->dir, strerror(errno));
    return -1;
  }
  (void)srv;
  return 0;
}

/* /workspace (the conventional working directory of platform sandboxes)
** is the sandbox's own directory; other absolute paths are the host's. */
static int map_cwd(const mp_sandbox *sb, const char *cwd, char *out,
                   size_t outlen) {
  int n;
  if (cwd == NULL || cwd[0] == '\0')
    n = snprintf(out, outlen, "%s", sb->dir);
  else if (strncmp(cwd, "/workspace", 10) == 0
           && (cwd[10] == '\0' || cwd[10] == '/'))
    n = snprintf(out, outlen, "%s%s", sb->dir, cwd + 10);
  else if (cwd[0] == '/')
    n = snprintf(out, outlen, "%s", cwd);
  else
    n = snprintf(out, outlen, "%s/%s", sb->dir, cwd);
  return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

static int proc_spawn(mp_server *srv, mp_sandbox *sb, const mp_exec_spec *spec,
                      char *const *envp, mastra__proc **out, char *err,
                      size_t errlen) {
  char cwd[4096];
  mastra__proc_opts opts;
  if (map_cwd(sb, spec->cwd, cwd, sizeof cwd) < 0) {
    snprintf(err, errlen, "the working directory is too long");
    return -ENAMETOOLONG;
  }
  memset(&opts, 0, sizeof opts);
  opts.command = spec->command;
  opts.cwd = cwd;
  opts.envp = envp;
  opts.stdin_pipe = spec->stdin_pipe;
  opts.timeout_ms = spec->timeout_ms;
  return mastra__proc_spawn(srv->loop, &opts, out, err, errlen);
}

static void proc_teardown(mp_server *srv, mp_sandbox *sb) {
  (void)srv;
  mastra__remove_tree(sb->root);
}

const mp_driver mp_process_driver = {"process", proc_prepare, proc_spawn,
                                     proc_teardown};

/* }====== */

/* {====== checkpoints ====== */

static void checkpoint_name(const mp_sandbox *sb, char out[64]) {
  unsigned char digest[20];
  char material[3 * MP_NAME_MAX + 3];
  int n = snprintf(material, sizeof material, "%s\n%s\n%s", sb->project,
                   sb->environment, sb->recovery_key);
  static const char hex[] = "0123456789abcdef";
  int i;
  mastra__sha1(material, (size_t)n, digest);
  memcpy(out, "mastra-checkpoint-", 18);
  for (i = 0; i < 10; i++) {
    out[18 + 2 * i] = hex[digest[i] >> 4];
    out[18 + 2 * i + 1] = hex[digest[i] & 15];
  }
  out[38] = '\0';
}

static void checkpoint_path(mp_server *srv, const mp_sandbox *sb, char *out,
                            size_t outlen) {
  char name[64];
  checkpoint_name(sb, name);
  snprintf(out, outlen, "%s/checkpoints/%s.tar", srv->data_dir, name);
}

/* Run argv to completion (tar is quick for the trees we keep). */
static int run_sync(char *const argv[]) {
  static char *const envp[] = {"PATH=" DEFAULT_PATH, NULL};
  posix_spawn_file_actions_t fa;
  pid_t pid;
  int status, rc;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", 0, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* 1 if path is a directory with no entries (or does not exist) */
static int dir_is_empty(const char *path) {
  DIR *d = opendir(path);
  struct dirent *e;
  int empty = 1;
  if (d == NULL) return errno == ENOENT;
  while (empty && (e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = 0;
  closedir(d);
  return empty;
}

int mp_checkpoint_capture(mp_server *srv, mp_sandbox *sb, char name[64],
                          int explicit_request) {
  char path[4200], tmp[4300];
  char *argv[] = {"tar", "-C", sb->dir, "-cf", tmp, ".", NULL};
  checkpoint_name(sb, name);
  if (sb->recovery_key[0] == '\0' || sb->destroyed_ms) return 1; /* skipped */
  checkpoint_path(srv, sb, path, sizeof path);
  if (!explicit_request && dir_is_empty(sb->dir)) {
    /* nothing to keep: an empty tree is what a missing checkpoint restores
    ** too, so drop an older one instead of running tar (fleets of short
    ** sandboxes destroy empty trees all the time) */
    if (unlink(path) < 0 && errno != ENOENT) return -1;
    return 0;
  }
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  if (run_sync(argv) < 0 || rename(tmp, path) < 0) {
    mp_log("checkpoint of %s failed", sb->id);
    unlink(tmp);
    return -1;
  }
  return 0;
}

int mp_checkpoint_delete(mp_server *srv, mp_sandbox *sb) {
  char path[4200];
  checkpoint_path(srv, sb, path, sizeof path);
  return unlink(path) == 0 ? 0 : -1;
}

static int checkpoint_restore(mp_server *srv, mp_sandbox *sb) {
  char path[4200];
  char *argv[] = {"tar", "-C", sb->dir, "-xf", path, NULL};
  checkpoint_path(srv, sb, path, sizeof path);
  if (sb->recovery_key[0] == '\0' || access(path, R_OK) != 0) return 1;
  return run_sync(argv);
}

static void on_checkpoint_due(mastra__timer *t) {
  mp_sandbox *sb = t->data;
  char name[64];
  if (sb->running == 0) mp_checkpoint_capture(sb->srv, sb, name, 0);
}

/* }====== */

/* {====== records and the state file ====== */

static cJSON *record_json(const mp_sandbox *sb) {
  char ts[32];
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "id", sb->id);
  cJSON_AddStringToObject(o, "projectId", sb->project);
  cJSON_AddStringToObject(o, "environmentId", sb->environment);
  cJSON_AddStringToObject(o, "recoveryKey", sb->recovery_key);
  cJSON_AddStringToObject(o, "networkIsolation", sb->network);
  cJSON_AddNumberToObject(o, "idleTimeoutMinutes", sb->idle_timeout_min);
  cJSON_AddItemToObject(o, "env", cJSON_Duplicate(sb->env, 1));
  mp_iso8601(sb->created_ms, ts);
  cJSON_AddStringToObject(o, "createdAt", ts);
  cJSON_AddNumberToObject(o, "createdMs", (double)sb->created_ms);
  cJSON_AddNumberToObject(o, "destroyedMs", (double)sb->destroyed_ms);
  cJSON_AddNumberToObject(o, "lastExecMs", (double)sb->last_exec_ms);
  return o;
}

/* One file per record, <data>/state/sandboxes/<id>.json, written
** atomically: a change costs one small write, whatever the number of
** records the platform keeps. Not fsync'd, like the working trees and the
** checkpoints the records describe: a record survives kill -9 of the
** server (the page cache has it); a machine crash can lose the newest
** changes (a torn record is skipped at load). On ext4, a fleet of 100
** sandboxes (concurrency 16) took 177-232 ms with an fsync per change and
** 112-157 ms without, in interleaved runs. */
int mp_record_save(mp_server *srv, const mp_sandbox *sb) {
  char path[4200];
  cJSON *o = record_json(sb);
  char *text = cJSON_Print(o);
  int rc;
  cJSON_Delete(o);
  if (text == NULL) return -1;
  snprintf(path, sizeof path, "%s/state/sandboxes/%s.json", srv->data_dir,
           sb->id);
  rc = mastra__write_file_atomic(path, text, strlen(text), 0644, 0);
  free(text);
  if (rc < 0) mp_log("cannot write %s: %s", path, strerror(errno));
  return rc;
}

static void copy_field(char *dst, size_t n, const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  snprintf(dst, n, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

static double num_field(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void on_idle(mastra__timer *t);

static mp_sandbox *sandbox_alloc(mp_server *srv) {
  mp_sandbox *sb = calloc(1, sizeof *sb);
  if (sb == NULL) return NULL;
  sb->srv = srv;
  mastra__timer_init(srv->loop, &sb->idle_timer, on_idle, sb);
  mastra__timer_init(srv->loop, &sb->checkpoint_timer, on_checkpoint_due, sb);
  return sb;
}

static void set_dirs(mp_server *srv, mp_sandbox *sb) {
  snprintf(sb->root, sizeof sb->root, "%s/sandboxes/%s", srv->data_dir, sb->id);
  snprintf(sb->dir, sizeof sb->dir, "%s/workspace", sb->root);
}

static void arm_idle(mp_sandbox *sb);

static void load_record(mp_server *srv, const cJSON *o) {
  char err[256];
  mp_sandbox *sb = sandbox_alloc(srv);
  const cJSON *env = cJSON_GetObjectItemCaseSensitive(o, "env");
  if (sb == NULL) return;
  copy_field(sb->id, sizeof sb->id, o, "id");
  copy_field(sb->project, sizeof sb->project, o, "projectId");
  copy_field(sb->environment, sizeof sb->environment, o, "environmentId");
  copy_field(sb->recovery_key, sizeof sb->recovery_key, o, "recoveryKey");
  copy_field(sb->network, sizeof sb->network, o, "networkIsolation");
  sb->idle_timeout_min = num_field(o, "idleTimeoutMinutes");
  sb->created_ms = (int64_t)num_field(o, "createdMs");
  sb->destroyed_ms = (int64_t)num_field(o, "destroyedMs");
  sb->last_exec_ms = (int64_t)num_field(o, "lastExecMs");
  sb->env = cJSON_IsObject(env) ? cJSON_Duplicate(env, 1)
                                : cJSON_CreateObject();
  set_dirs(srv, sb);
  if (!sb->destroyed_ms && srv->driver->prepare(srv, sb, err, sizeof err) < 0)
    sb->destroyed_ms = mastra__wall_ms();
  sb->next = srv->sandboxes;
  srv->sandboxes = sb;
  if (!sb->destroyed_ms) arm_idle(sb);
}

int mp_state_load(mp_server *srv) {
  char dir[4200], path[4600];
  DIR *d;
  struct dirent *e;
  snprintf(dir, sizeof dir, "%s/state/sandboxes", srv->data_dir);
  if (mastra__mkdirs(dir, 0755, NULL) < 0 || (d = opendir(dir)) == NULL) {
    mp_log("cannot open %s: %s", dir, strerror(errno));
    return -1;
  }
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    char *text;
    cJSON *o;
    /* records only: leftovers of an interrupted write are not *.json */
    if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (mastra__read_file(path, &text, NULL) < 0) continue;
    o = cJSON_Parse(text);
    free(text);
    if (cJSON_IsObject(o))
      load_record(srv, o);
    else
      mp_log("%s is not a sandbox record; skipped", path);
    cJSON_Delete(o);
  }
  closedir(d);
  return 0;
}

/* }====== */

/* {====== lifecycle ====== */

mp_sandbox *mp_sandbox_lookup(mp_server *srv, const char *project,
                              const char *id) {
  mp_sandbox *sb;
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next)
    if (strcmp(sb->id, id) == 0
        && (project == NULL || strcmp(sb->project, project) == 0))
      return sb;
  return NULL;
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

static void arm_idle(mp_sandbox *sb) {
  int64_t due;
  mastra__timer_stop(&sb->idle_timer);
  if (sb->idle_timeout_min <= 0 || sb->running > 0 || sb->destroyed_ms) return;
  due = (sb->last_exec_ms ? sb->last_exec_ms : sb->created_ms)
        + (int64_t)(sb->idle_timeout_min * 60000) - mastra__wall_ms();
  mastra__timer_start(&sb->idle_timer, due > 0 ? (uint64_t)due : 0);
}

static void on_idle(mastra__timer *t) {
  mp_sandbox *sb = t->data;
  if (sb->running > 0 || sb->destroyed_ms) return;
  mp_log("sandbox %s idle for %g min: reaping it", sb->id,
         sb->idle_timeout_min);
  mp_sandbox_destroy(sb->srv, sb);
}

int mp_sandbox_create(mp_server *srv, const mp_create_spec *spec,
                      mp_sandbox **out, char *err, size_t errlen) {
  mp_sandbox *sb = sandbox_alloc(srv);
  char hex[2 * 12 + 1];
  int restored;
  *out = NULL;
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
  set_dirs(srv, sb);
  if (srv->driver->prepare(srv, sb, err, errlen) < 0) {
    cJSON_Delete(sb->env);
    free(sb);
    return -1;
  }
  restored = checkpoint_restore(srv, sb);
  if (restored < 0) mp_log("restoring the checkpoint of %s failed", sb->id);
  sb->restored = restored == 0;
  sb->next = srv->sandboxes;
  srv->sandboxes = sb;
  arm_idle(sb);
  mp_record_save(srv, sb);
  *out = sb;
  return 0;
}

void mp_sandbox_destroy(mp_server *srv, mp_sandbox *sb) {
  size_t i;
  char name[64];
  if (sb->destroyed_ms) return;
  /* commands end; their sessions see them finish and let go */
  for (i = 0; i < sb->nprocs; i++) mastra__proc_kill(sb->procs[i]);
  mp_checkpoint_capture(srv, sb, name, 0);
  sb->destroyed_ms = mastra__wall_ms();
  mastra__timer_stop(&sb->idle_timer);
  mastra__timer_stop(&sb->checkpoint_timer);
  srv->driver->teardown(srv, sb);
  mp_record_save(srv, sb);
}

/* Shutdown: end every command and capture the checkpoints. The records
** stay live: with the process driver a sandbox is its directory, which
** is still there when the server comes back. */
void mp_sandbox_shutdown_all(mp_server *srv) {
  mp_sandbox *sb;
  char name[64];
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next) {
    size_t i;
    if (sb->destroyed_ms) continue;
    for (i = 0; i < sb->nprocs; i++) mastra__proc_kill(sb->procs[i]);
    mastra__timer_stop(&sb->idle_timer);
    mastra__timer_stop(&sb->checkpoint_timer);
    mp_checkpoint_capture(srv, sb, name, 0);
    mp_record_save(srv, sb);
  }
}

void mp_sandbox_free_all(mp_server *srv) {
  while (srv->sandboxes != NULL) {
    mp_sandbox *sb = srv->sandboxes;
    srv->sandboxes = sb->next;
    mastra__timer_stop(&sb->idle_timer);
    mastra__timer_stop(&sb->checkpoint_timer);
    cJSON_Delete(sb->env);
    free(sb->procs);
    free(sb);
  }
  while (srv->leases != NULL) {
    mp_lease *l = srv->leases;
    srv->leases = l->next;
    free(l);
  }
}

/* }====== */

/* {====== commands ====== */

/* PATH, then the sandbox's creation env, then the command's env. */
static char **build_envp(const mp_sandbox *sb, const cJSON *extra) {
  const cJSON *maps[2];
  const cJSON *it;
  size_t n = 2, i = 0, m;
  char **envp;
  maps[0] = sb->env;
  maps[1] = extra;
  for (m = 0; m < 2; m++)
    if (maps[m] != NULL) cJSON_ArrayForEach(it, maps[m]) n++;
  envp = calloc(n, sizeof *envp);
  if (envp == NULL) return NULL;
  envp[i++] = strdup("PATH=" DEFAULT_PATH);
  for (m = 0; m < 2; m++) {
    if (maps[m] == NULL) continue;
    cJSON_ArrayForEach(it, maps[m]) {
      size_t k, klen;
      char *kv;
      if (!cJSON_IsString(it) || it->string == NULL) continue;
      klen = strlen(it->string);
      /* a later value for the same name replaces the earlier one */
      for (k = 0; k < i; k++)
        if (envp[k] && strncmp(envp[k], it->string, klen) == 0
            && envp[k][klen] == '=') {
          free(envp[k]);
          envp[k] = envp[--i];
          envp[i] = NULL;
          break;
        }
      kv = malloc(klen + strlen(it->valuestring) + 2);
      if (kv == NULL) continue;
      sprintf(kv, "%s=%s", it->string, it->valuestring);
      envp[i++] = kv;
    }
  }
  envp[i] = NULL;
  return envp;
}

static void free_envp(char **envp) {
  size_t i;
  if (envp == NULL) return;
  for (i = 0; envp[i] != NULL; i++) free(envp[i]);
  free(envp);
}

int mp_sandbox_exec(mp_server *srv, mp_sandbox *sb, const mp_exec_spec *spec,
                    mastra__proc_notify notify, void *data,
                    mastra__proc **out, char *err, size_t errlen) {
  char **envp;
  mastra__proc **procs;
  int rc;
  *out = NULL;
  if (sb->destroyed_ms) {
    snprintf(err, errlen, "sandbox %s was destroyed", sb->id);
    return -1;
  }
  procs = realloc(sb->procs, (sb->nprocs + 1) * sizeof *procs);
  envp = build_envp(sb, spec->env);
  if (procs == NULL || envp == NULL) {
    if (procs != NULL) sb->procs = procs;
    free_envp(envp);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  sb->procs = procs;
  rc = srv->driver->spawn(srv, sb, spec, envp, out, err, errlen);
  free_envp(envp);
  if (rc < 0) return -1;
  (*out)->notify = notify;
  (*out)->notify_data = data;
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
      sb->procs[i] = sb->procs[--sb->nprocs];
      break;
    }
  }
  mastra__proc_release(p); /* kills it if it still runs */
  if (sb->running > 0) sb->running--;
  sb->last_exec_ms = mastra__wall_ms();
  if (sb->destroyed_ms) return;
  arm_idle(sb);
  if (sb->running == 0 && sb->recovery_key[0] != '\0')
    mastra__timer_start(&sb->checkpoint_timer, CHECKPOINT_DEBOUNCE_MS);
  (void)srv;
}

/* }====== */

/* {====== leases ====== */

int mp_lease_mint(mp_server *srv, mp_sandbox *sb, char token[65],
                  int64_t *expires_ms) {
  mp_lease *l = calloc(1, sizeof *l);
  if (l == NULL || mastra__random_hex(l->token, MP_TOKEN_BYTES) < 0) {
    free(l);
    return -1;
  }
  snprintf(l->sandbox_id, sizeof l->sandbox_id, "%s", sb->id);
  l->expires_ms = mastra__wall_ms() + (int64_t)srv->lease_ttl_ms;
  l->next = srv->leases;
  srv->leases = l;
  memcpy(token, l->token, sizeof l->token);
  *expires_ms = l->expires_ms;
  return 0;
}

mp_sandbox *mp_lease_check(mp_server *srv, const char *token, size_t len) {
  mp_lease **pl = &srv->leases;
  mp_sandbox *found = NULL;
  int64_t now = mastra__wall_ms();
  while (*pl != NULL) {
    mp_lease *l = *pl;
    if (l->expires_ms <= now || mp_sandbox_find(srv, l->sandbox_id) == NULL) {
      *pl = l->next; /* expired, or its sandbox is gone */
      free(l);
      continue;
    }
    if (found == NULL
        && mastra__secure_equal(token, len, l->token, strlen(l->token)))
      found = mp_sandbox_find(srv, l->sandbox_id);
    pl = &l->next;
  }
  return found;
}

/* }====== */
