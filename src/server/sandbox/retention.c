/*
** The retention of checkpoints (checkpoint.h; docs/platform.md,
** "Checkpoints"): a sweep on a timer removes the checkpoints (and named
** ones) unused for their retention, never one whose key a live sandbox
** holds, and the temporary files a crash left; the inspector's listing and
** removal. The captures and restores are checkpoint.c's.
**
** The retention goes by use: a key's checkpoint that was asked for (a
** create restored it, an explicit POST /checkpoint captured it, or its
** sandbox's create said the key is the caller's own) is kept for
** --checkpoint-retention after its last use; one that nothing asked for
** (upstream's auto-generated ids, which nobody looks up again) only for
** --checkpoint-retention-unused. Named checkpoints are made by explicit
** requests: asked for. A record of an older server (no "restores") and an
** archive without a record keep the longer retention: a checkpoint that
** somebody wanted is never taken for one nobody did.
*/
#define _GNU_SOURCE
#include "sandbox/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "util.h"

#define PATH_LEN MP_CKPT_PATH_LEN
#define SWEEP_MIN_MS 1000
#define SWEEP_MAX_MS 3600000

static int has_suffix(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n > m && strcmp(s + n - m, suffix) == 0;
}

/* whether a live sandbox uses the key of a record */
static int key_in_use(mp_server *srv, const cJSON *rec) {
  mp_sandbox *s;
  for (s = srv->sandboxes; s != NULL; s = s->next)
    if (!s->destroyed_ms && s->recovery_key[0] != '\0'
        && strcmp(s->recovery_key, mp_ckpt_rec_str(rec, "key")) == 0
        && strcmp(s->project, mp_ckpt_rec_str(rec, "projectId")) == 0
        && strcmp(s->environment, mp_ckpt_rec_str(rec, "environmentId")) == 0)
      return 1;
  return 0;
}

static int64_t days_ms(double days) { return (int64_t)(days * 86400000.0); }

static int64_t retention_ms(const mp_server *srv) {
  return days_ms(srv->checkpoint_retention_days);
}

/* --checkpoint-retention-unused, never longer than --checkpoint-retention
** (0: forever) */
static int64_t unused_ms(const mp_server *srv) {
  int64_t keep = retention_ms(srv);
  int64_t unused = days_ms(srv->checkpoint_retention_unused_days);
  if (keep > 0 && (unused <= 0 || unused > keep)) return keep;
  return unused;
}

double mp_checkpoint_unused_days(const mp_server *srv) {
  return (double)unused_ms(srv) / 86400000.0;
}

/* whether the checkpoint of rec was asked for (the longer retention) */
static int rec_asked(const cJSON *rec, int seed) {
  const cJSON *n = cJSON_GetObjectItemCaseSensitive(rec, "restores");
  if (seed || !cJSON_IsNumber(n)) return 1; /* named, or an older record */
  return n->valuedouble > 0
         || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(rec, "asked"));
}

/* how long after its last use the checkpoint of rec is kept (0: forever) */
static int64_t rec_keep_ms(const mp_server *srv, const cJSON *rec, int seed) {
  return rec_asked(rec, seed) ? retention_ms(srv) : unused_ms(srv);
}

/* Remove from DATA/checkpoints[/seeds] what was last used longer ago than
** its retention (an archive without a record counts from its mtime, with
** the longer one). With temporaries_too (at start, when no tar runs), the
** temporaries of interrupted captures go as well. */
static size_t sweep_dir(mp_server *srv, int seed, int temporaries_too) {
  char dir[PATH_LEN], path[PATH_LEN + 320], name[300];
  DIR *d;
  struct dirent *e;
  size_t removed = 0;
  int64_t now = mastra__wall_ms();
  snprintf(dir, sizeof dir, "%s/checkpoints%s", srv->data_dir,
           seed ? "/seeds" : "");
  if ((d = opendir(dir)) == NULL) return 0;
  while ((e = readdir(d)) != NULL) {
    int64_t last = -1, keep;
    size_t n = strlen(e->d_name);
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (strncmp(e->d_name, MASTRA__TMP_PREFIX, strlen(MASTRA__TMP_PREFIX)) ==
        0) {
      if (temporaries_too) unlink(path);
      continue;
    }
    if (n >= sizeof name) continue;
    if (has_suffix(e->d_name, ".json")) {
      cJSON *rec = mp_ckpt_read_record(path);
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(rec, "lastUsedMs");
      if (rec == NULL || !cJSON_IsNumber(v)) {
        cJSON_Delete(rec);
        continue; /* torn or foreign: the archive's mtime decides */
      }
      keep = rec_keep_ms(srv, rec, seed);
      if (!seed && key_in_use(srv, rec)) last = INT64_MAX;
      else last = (int64_t)v->valuedouble;
      cJSON_Delete(rec);
      memcpy(name, e->d_name, n - 5);
      name[n - 5] = '\0';
    } else if (has_suffix(e->d_name, ".tar")) {
      struct stat st;
      memcpy(name, e->d_name, n - 4);
      name[n - 4] = '\0';
      snprintf(path, sizeof path, "%s/%s.json", dir, name);
      if (access(path, F_OK) == 0) continue; /* its record decides */
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      if (stat(path, &st) < 0) continue;
      last = (int64_t)st.st_mtime * 1000;
      keep = retention_ms(srv);
    } else {
      continue;
    }
    if (keep > 0 && last != INT64_MAX && last < now - keep) {
      mp_ckpt_remove(srv, seed, name);
      removed++;
    }
  }
  closedir(d);
  return removed;
}

/* {------ the inspector's view ------ */

static void list_dir(mp_server *srv, int seed, const char *project,
                     const char *environment, cJSON *out) {
  char dir[PATH_LEN], path[PATH_LEN + 320], name[MP_CHECKPOINT_NAME_MAX];
  DIR *d;
  struct dirent *e;
  snprintf(dir, sizeof dir, "%s/checkpoints%s", srv->data_dir,
           seed ? "/seeds" : "");
  if ((d = opendir(dir)) == NULL) return;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    const cJSON *used;
    cJSON *rec, *o;
    struct stat st;
    if (!has_suffix(e->d_name, ".json") || n - 5 >= MP_CHECKPOINT_NAME_MAX)
      continue;
    snprintf(path, sizeof path, "%s/%.*s.tar", dir, (int)(n - 5), e->d_name);
    if (stat(path, &st) < 0) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if ((rec = mp_ckpt_read_record(path)) == NULL) continue;
    if (project != NULL &&
        (strcmp(mp_ckpt_rec_str(rec, "projectId"), project) != 0 ||
         strcmp(mp_ckpt_rec_str(rec, "environmentId"), environment) != 0)) {
      cJSON_Delete(rec);
      continue;
    }
    used = cJSON_GetObjectItemCaseSensitive(rec, "lastUsedMs");
    o = cJSON_CreateObject();
    memcpy(name, e->d_name, n - 5);
    name[n - 5] = '\0';
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddStringToObject(o, "key", mp_ckpt_rec_str(rec, "key"));
    cJSON_AddBoolToObject(o, "named", seed);
    cJSON_AddStringToObject(o, "projectId", mp_ckpt_rec_str(rec, "projectId"));
    cJSON_AddStringToObject(o, "environmentId",
                            mp_ckpt_rec_str(rec, "environmentId"));
    cJSON_AddNumberToObject(o, "size", (double)st.st_size);
    cJSON_AddNumberToObject(o, "capturedAt", (double)st.st_mtime * 1000);
    {
      const cJSON *rs = cJSON_GetObjectItemCaseSensitive(rec, "restores");
      const cJSON *at = cJSON_GetObjectItemCaseSensitive(rec, "lastRestoredMs");
      int64_t keep = rec_keep_ms(srv, rec, seed);
      cJSON_AddNumberToObject(o, "restores",
                              cJSON_IsNumber(rs) ? rs->valuedouble : 0);
      if (cJSON_IsNumber(at))
        cJSON_AddNumberToObject(o, "lastRestoredAt", at->valuedouble);
      else
        cJSON_AddNullToObject(o, "lastRestoredAt");
      cJSON_AddBoolToObject(o, "asked", rec_asked(rec, seed));
      /* the retention that applies to it, in days (0: forever) */
      cJSON_AddNumberToObject(o, "retentionDays", (double)keep / 86400000.0);
      if (cJSON_IsNumber(used) && keep > 0 && (seed || !key_in_use(srv, rec)))
        cJSON_AddNumberToObject(o, "removeAt",
                                used->valuedouble + (double)keep);
      else
        cJSON_AddNullToObject(o, "removeAt");
    }
    if (cJSON_IsNumber(used)) {
      cJSON_AddNumberToObject(o, "lastUsedAt", used->valuedouble);
    } else {
      cJSON_AddNullToObject(o, "lastUsedAt");
    }
    cJSON_Delete(rec);
    cJSON_AddItemToArray(out, o);
  }
  closedir(d);
}

cJSON *mp_checkpoint_list(mp_server *srv, const char *project,
                          const char *environment) {
  cJSON *out = cJSON_CreateArray();
  list_dir(srv, 0, project, environment, out);
  list_dir(srv, 1, project, environment, out);
  return out;
}

int mp_checkpoint_remove(mp_server *srv, const char *project,
                         const char *environment, const char *name) {
  char path[PATH_LEN];
  cJSON *rec;
  int seed, rc = 1;
  if (strchr(name, '/') != NULL || name[0] == '.') return 1;
  for (seed = 0; seed <= 1 && rc == 1; seed++) {
    mp_ckpt_file_path(srv, seed, name, ".json", path, sizeof path);
    if ((rec = mp_ckpt_read_record(path)) == NULL) continue;
    if (strcmp(mp_ckpt_rec_str(rec, "projectId"), project) == 0
        && strcmp(mp_ckpt_rec_str(rec, "environmentId"), environment) == 0) {
      if (seed)
        rc = mp_ckpt_remove(srv, 1, name) ? 0 : 1;
      else
        rc = mp_ckpt_drop_key(srv, project, environment,
                              mp_ckpt_rec_str(rec, "key"));
    }
    cJSON_Delete(rec);
  }
  return rc;
}

/* }------ */

static void sweep(mp_server *srv, int temporaries_too) {
  size_t n = sweep_dir(srv, 0, temporaries_too)
             + sweep_dir(srv, 1, temporaries_too);
  if (n > 0)
    mp_log("retention: removed %zu checkpoint%s (kept %g days after the last"
           " use, %g if nothing asked for it)", n, n == 1 ? "" : "s",
           srv->checkpoint_retention_days, mp_checkpoint_unused_days(srv));
}

/* a quarter of the shorter retention, within [1 s, 1 h] */
static void arm_sweep(mp_server *srv) {
  int64_t keep = retention_ms(srv), unused = unused_ms(srv);
  int64_t every;
  if (keep <= 0 || (unused > 0 && unused < keep)) keep = unused;
  if (keep <= 0) return;
  every = keep / 4;
  if (every < SWEEP_MIN_MS) every = SWEEP_MIN_MS;
  if (every > SWEEP_MAX_MS) every = SWEEP_MAX_MS;
  mastra__timer_start(&srv->checkpoint_sweep, (uint64_t)every);
}

static void on_sweep(mastra__timer *t) {
  mp_server *srv = t->data;
  sweep(srv, 0);
  arm_sweep(srv);
}

int mp_checkpoint_start(mp_server *srv) {
  char path[PATH_LEN];
  snprintf(path, sizeof path, "%s/checkpoints/seeds", srv->data_dir);
  if (mastra__mkdirs(path, 0700, NULL) < 0) {
    mp_log("cannot create %s: %s", path, strerror(errno));
    return -1;
  }
  mastra__timer_init(srv->loop, &srv->checkpoint_sweep, on_sweep, srv);
  sweep(srv, 1);
  arm_sweep(srv);
  return 0;
}

void mp_checkpoint_stop(mp_server *srv) {
  mastra__timer_stop(&srv->checkpoint_sweep);
}
