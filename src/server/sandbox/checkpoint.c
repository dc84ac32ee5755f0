/*
** Checkpoints of mastra-platform (docs/platform.md, "Checkpoints").
**
** DATA/checkpoints/<name>.tar is the checkpoint of a key, <name> =
** mastra-checkpoint-<SHA-1 of project, environment and key, 20 hex>, and
** <name>.json its record ({projectId, environmentId, key, lastUsedMs,
** restores, lastRestoredMs, asked}).
** DATA/checkpoints/seeds/<name>-<12 hex>.tar is a named copy that POST
** /checkpoint hands out (a hard link of the capture: checkpoints are never
** changed in place), with its own record. A sweep on the loop removes what
** was not used for the retention period.
**
** tar runs as a child process on the loop (proc.c), one at a time per
** sandbox. A capture writes a temporary file (.mastra-tmp-<hex>), which the
** child fsyncs (sync FILE) before the server renames it over the
** checkpoint, only when tar succeeded: a failure or a crash leaves the
** previous checkpoint as it was; the temporaries of a crash are removed at
** start.
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

#include "hash.h"
#include "util/log.h"
#include "sandbox/record.h"
#include "sandbox/template.h"
#include "util/trash.h"
#include "util.h"

#define PATH_LEN MP_CKPT_PATH_LEN

/* one tar for one sandbox: a capture (-c) or a restore (-x) */
struct mp_tar_run {
  mastra__proc *proc;
  mp_sandbox *sb;
  int restore, explicit_request;
  int install;             /* the archive becomes the key's checkpoint */
  int empty;               /* an empty tree: the key's checkpoint goes */
  int no_space;            /* it failed for the data disk's room */
  unsigned gen;            /* sb->checkpoint_gen when it started */
  char seed[MP_CHECKPOINT_NAME_MAX]; /* the named copy it makes, or "" */
  mp_waiter *served;       /* the waiters this run answers */
  char path[PATH_LEN];     /* capture: the temporary; restore: the source */
  char name[MP_CHECKPOINT_NAME_MAX]; /* restore: what it reads */
  char err[512];           /* the end of tar's stderr */
  size_t errlen;
};

/* {====== names, paths and records ====== */

static void key_name(const char *project, const char *environment,
                     const char *key, char out[MP_CHECKPOINT_NAME_MAX]) {
  static const char hex[] = "0123456789abcdef";
  unsigned char digest[20];
  char material[3 * MP_NAME_MAX + 3];
  int n = snprintf(material, sizeof material, "%s\n%s\n%s", project,
                   environment, key);
  int i;
  mastra__sha1(material, (size_t)n, digest);
  memcpy(out, "mastra-checkpoint-", 18);
  for (i = 0; i < 10; i++) {
    out[18 + 2 * i] = hex[digest[i] >> 4];
    out[18 + 2 * i + 1] = hex[digest[i] & 15];
  }
  out[38] = '\0';
}

void mp_checkpoint_key_name(const mp_sandbox *sb,
                            char name[MP_CHECKPOINT_NAME_MAX]) {
  key_name(sb->project, sb->environment, sb->recovery_key, name);
}

void mp_ckpt_file_path(mp_server *srv, int seed, const char *name,
                       const char *ext, char *out, size_t outlen) {
  snprintf(out, outlen, "%s/checkpoints%s/%s%s", srv->data_dir,
           seed ? "/seeds" : "", name, ext);
}

/* The record of checkpoint name, written again when it is used: a
** capture (asked: an explicit one, or of a sandbox whose creator said its
** key is its own) or a restore (restored: a create booted from it). What
** the older record of the same key counted is kept: restores,
** lastRestoredMs, asked (retention.c's rule by use). */
/* template_key: the template under the tree captured ("": none), whose
** key and definition (template_store.h) the record keeps; NULL (a
** restore): what the older record said. */
static int write_record(mp_server *srv, int seed, const char *name,
                        const char *project, const char *environment,
                        const char *key, int64_t created_ms, int restored,
                        int asked, const char *template_key) {
  char path[PATH_LEN];
  cJSON *o = cJSON_CreateObject(), *old, *tdef = NULL;
  char *text, tkey[MP_TEMPLATE_KEY_MAX] = "";
  double restores = 0, last_restored = 0;
  int rc;
  int64_t now = mastra__wall_ms();
  mp_ckpt_file_path(srv, seed, name, ".json", path, sizeof path);
  if ((old = mp_ckpt_read_record(path)) != NULL) {
    if (strcmp(mp_ckpt_rec_str(old, "key"), key) == 0) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(old, "restores");
      if (cJSON_IsNumber(v) && v->valuedouble > 0) restores = v->valuedouble;
      v = cJSON_GetObjectItemCaseSensitive(old, "lastRestoredMs");
      if (cJSON_IsNumber(v)) last_restored = v->valuedouble;
      if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(old, "asked")))
        asked = 1;
    }
    if (template_key == NULL) {
      const cJSON *d = cJSON_GetObjectItemCaseSensitive(old, MP_CREATE_TEMPLATE);
      snprintf(tkey, sizeof tkey, "%s", mp_ckpt_rec_str(old, "template"));
      if (cJSON_IsObject(d)) tdef = cJSON_Duplicate(d, 1);
    }
    cJSON_Delete(old);
  }
  if (template_key != NULL && template_key[0] != '\0') {
    snprintf(tkey, sizeof tkey, "%s", template_key);
    tdef = mp_template_stored_definition(srv, tkey); /* to rebuild it */
  }
  if (restored) {
    restores += 1;
    last_restored = (double)now;
  }
  cJSON_AddStringToObject(o, "projectId", project);
  cJSON_AddStringToObject(o, "environmentId", environment);
  cJSON_AddStringToObject(o, "key", key);
  if (created_ms) cJSON_AddNumberToObject(o, "createdMs", (double)created_ms);
  cJSON_AddNumberToObject(o, "lastUsedMs", (double)now);
  /* always written: a record without it is an older server's */
  cJSON_AddNumberToObject(o, "restores", restores);
  if (last_restored > 0)
    cJSON_AddNumberToObject(o, "lastRestoredMs", last_restored);
  cJSON_AddBoolToObject(o, "asked", asked);
  if (tkey[0] != '\0') {
    cJSON_AddStringToObject(o, "template", tkey);
    if (tdef != NULL) cJSON_AddItemToObject(o, MP_CREATE_TEMPLATE, tdef);
    tdef = NULL;
  }
  cJSON_Delete(tdef);
  text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (text == NULL) {
    errno = ENOMEM;
    return -1;
  }
  rc = mastra__write_file_atomic(path, text, strlen(text), 0600, 0);
  free(text);
  return rc;
}

cJSON *mp_ckpt_read_record(const char *path) {
  char *text;
  cJSON *o;
  if (mastra__read_file(path, &text, NULL) < 0) return NULL;
  o = cJSON_Parse(text);
  free(text);
  if (!cJSON_IsObject(o)) {
    cJSON_Delete(o);
    return NULL;
  }
  return o;
}

const char *mp_ckpt_rec_str(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(v) ? v->valuestring : "";
}

/* The identity of the archive at path (a capture renames a new file over
** it, so a new inode and mtime), or "" when there is none. */
static void archive_id(const char *path, char out[MP_CHECKPOINT_BASE_MAX]) {
  struct stat st;
  out[0] = '\0';
  if (stat(path, &st) < 0) return;
  snprintf(out, MP_CHECKPOINT_BASE_MAX, "%llx:%llx:%lld.%09ld:%lld",
           (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
           (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec,
           (long long)st.st_size);
}

/* sb's tree now descends from base (its key's archive, or "") */
static void set_base(mp_server *srv, mp_sandbox *sb, const char *base) {
  if (strcmp(sb->checkpoint_base, base) == 0) return;
  snprintf(sb->checkpoint_base, sizeof sb->checkpoint_base, "%s", base);
  if (!sb->destroyed_ms) mp_record_save(srv, sb);
}

int mp_ckpt_remove(mp_server *srv, int seed, const char *name) {
  char path[PATH_LEN];
  int had;
  mp_ckpt_file_path(srv, seed, name, ".tar", path, sizeof path);
  had = mp_trash(srv, path) == 0; /* a big archive: unlinked off the loop */
  mp_ckpt_file_path(srv, seed, name, ".json", path, sizeof path);
  unlink(path);
  return had;
}

/* a seed name: mastra-checkpoint-<20 hex>-<12 hex>, nothing else */
static int seed_name_ok(const char *s) {
  size_t i, n = strlen(s);
  if (n != 51 || strncmp(s, "mastra-checkpoint-", 18) != 0 || s[38] != '-')
    return 0;
  for (i = 18; i < n; i++)
    if (i != 38
        && !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return 0;
  return 1;
}

int mp_checkpoint_source(mp_server *srv, const char *project,
                         const char *environment, const char *key,
                         const char *seed, char *path, size_t pathlen,
                         char name[MP_CHECKPOINT_NAME_MAX], char *err,
                         size_t errlen) {
  char rpath[PATH_LEN];
  cJSON *rec;
  int ok;
  if (key != NULL && key[0] != '\0') {
    key_name(project, environment, key, name);
    mp_ckpt_file_path(srv, 0, name, ".tar", path, pathlen);
    if (access(path, R_OK) == 0) {
      write_record(srv, 0, name, project, environment, key, 0, 1, 0, NULL);
      return 0;
    }
  }
  if (seed == NULL) return 1;
  rec = NULL;
  ok = seed_name_ok(seed);
  if (ok) {
    mp_ckpt_file_path(srv, 1, seed, ".json", rpath, sizeof rpath);
    rec = mp_ckpt_read_record(rpath);
    mp_ckpt_file_path(srv, 1, seed, ".tar", path, pathlen);
    ok = rec != NULL && strcmp(mp_ckpt_rec_str(rec, "projectId"), project) == 0
         && strcmp(mp_ckpt_rec_str(rec, "environmentId"), environment) == 0
         && access(path, R_OK) == 0;
  }
  if (!ok) {
    cJSON_Delete(rec);
    char expiry[64] = "";
    if (srv->checkpoint_retention_days > 0)
      snprintf(expiry, sizeof expiry, " and expire after %g days unused",
               srv->checkpoint_retention_days);
    snprintf(err, errlen, "seedCheckpointName \"%.80s\" names no checkpoint"
             " of this project and environment (names come from POST"
             " /sandbox/{id}/checkpoint%s)", seed, expiry);
    return -1;
  }
  snprintf(name, MP_CHECKPOINT_NAME_MAX, "%s", seed);
  {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(rec, "createdMs");
    write_record(srv, 1, seed, project, environment,
                 mp_ckpt_rec_str(rec, "key"),
                 cJSON_IsNumber(c) ? (int64_t)c->valuedouble : 0, 1, 0, NULL);
  }
  cJSON_Delete(rec);
  return 0;
}

int mp_checkpoint_template(mp_server *srv, const char *project,
                           const char *environment, const char *key,
                           const char *seed,
                           char template_key[MP_TEMPLATE_KEY_MAX],
                           cJSON **definition) {
  char name[MP_CHECKPOINT_NAME_MAX], path[PATH_LEN];
  cJSON *rec = NULL;
  const cJSON *d;
  template_key[0] = '\0';
  *definition = NULL;
  if (key != NULL && key[0] != '\0') {
    key_name(project, environment, key, name);
    mp_ckpt_file_path(srv, 0, name, ".tar", path, sizeof path);
    if (access(path, R_OK) == 0) {
      mp_ckpt_file_path(srv, 0, name, ".json", path, sizeof path);
      rec = mp_ckpt_read_record(path);
    }
  }
  if (rec == NULL && seed != NULL && seed_name_ok(seed)) {
    mp_ckpt_file_path(srv, 1, seed, ".json", path, sizeof path);
    rec = mp_ckpt_read_record(path);
    if (rec != NULL && (strcmp(mp_ckpt_rec_str(rec, "projectId"), project) != 0
                        || strcmp(mp_ckpt_rec_str(rec, "environmentId"),
                                  environment) != 0)) {
      cJSON_Delete(rec); /* not this project's: mp_checkpoint_source says so */
      rec = NULL;
    }
  }
  if (rec == NULL) return 0;
  snprintf(template_key, MP_TEMPLATE_KEY_MAX, "%s", mp_ckpt_rec_str(rec, "template"));
  d = cJSON_GetObjectItemCaseSensitive(rec, MP_CREATE_TEMPLATE);
  if (template_key[0] != '\0' && cJSON_IsObject(d))
    *definition = cJSON_Duplicate(d, 1);
  cJSON_Delete(rec);
  return template_key[0] != '\0';
}

/* }====== */

/* {====== running tar ====== */

/* the driver's options of tar (the namespaces driver keeps owners,
** whiteouts and overlay xattrs) */
static const char *tar_flags(const mp_server *srv) {
  return srv->driver->tar_flags != NULL ? srv->driver->tar_flags : "";
}

static int sh_quote(char *out, size_t n, const char *s) {
  size_t o = 0;
#define PUT(c) do { if (o + 2 >= n) return -1; out[o++] = (c); } while (0)
  PUT('\'');
  for (; *s != '\0'; s++) {
    if (*s == '\'') {
      PUT('\'');
      PUT('\\');
      PUT('\'');
    }
    PUT(*s);
  }
  PUT('\'');
#undef PUT
  out[o] = '\0';
  return 0;
}

static void tar_notify(mastra__proc *p, void *data);

/* Run the shell text cmd for run, on the loop. */
static int spawn_run(mp_server *srv, struct mp_tar_run *run, const char *cmd,
                     char *err, size_t errlen) {
  static char *const envp[] = {"PATH=" MP_DEFAULT_PATH, "LC_ALL=C", NULL};
  mastra__proc_opts opts;
  memset(&opts, 0, sizeof opts);
  opts.command = cmd;
  opts.envp = envp;
  if (mastra__proc_spawn(srv->loop, &opts, &run->proc, err, errlen) < 0)
    return -1;
  run->proc->notify = tar_notify;
  run->proc->notify_data = run;
  return 0;
}

/* Tell the waiters of run (which is freed), then start the next run if
** captures were asked for meanwhile. */
static void start_run(mp_server *srv, mp_sandbox *sb);

static void complete(struct mp_tar_run *run, int rc, const char *name,
                     const char *message) {
  mp_sandbox *sb = run->sb;
  mp_waiter *w = run->served, *next;
  char name_copy[MP_CHECKPOINT_NAME_MAX], message_copy[1024];
  /* name and message may point into run, which goes first */
  if (name != NULL) {
    snprintf(name_copy, sizeof name_copy, "%s", name);
    name = name_copy;
  }
  if (message != NULL) {
    snprintf(message_copy, sizeof message_copy, "%s", message);
    message = message_copy;
  }
  sb->tar = NULL;
  free(run);
  for (; w != NULL; w = next) {
    next = w->next;
    w->next = NULL;
    w->queued = 0;
    w->done(w, sb, rc, name, message);
  }
  if (sb->tar == NULL && sb->capture_queue != NULL) start_run(sb->srv, sb);
}

static void fail(struct mp_tar_run *run, const char *fmt, const char *arg) {
  char msg[1024];
  snprintf(msg, sizeof msg, fmt, arg);
  mp_log("%s %s: %s", run->restore ? "restoring a checkpoint into"
         : "capturing the checkpoint of", run->sb->id, msg);
  if (!run->restore && run->path[0] != '\0') mp_trash(run->sb->srv, run->path);
  if (run->seed[0] != '\0') mp_ckpt_remove(run->sb->srv, 1, run->seed);
  complete(run, run->no_space ? MP_CHECKPOINT_NO_SPACE : -1, NULL, msg);
}

/* The child finished a capture: the archive is the key's checkpoint (when
** it was to be installed) and the seed's. A delete that came meanwhile
** stands. An empty tree removes the key's checkpoint only when sb's tree
** descends from it (sb restored it, or captured it): another sandbox
** with the same key that wrote nothing leaves it alone. */
static void capture_done(mp_server *srv, struct mp_tar_run *run) {
  mp_sandbox *sb = run->sb;
  char seed[MP_CHECKPOINT_NAME_MAX], name[MP_CHECKPOINT_NAME_MAX];
  char path[PATH_LEN], now[MP_CHECKPOINT_BASE_MAX];
  snprintf(seed, sizeof seed, "%s", run->seed);
  mp_checkpoint_key_name(sb, name);
  mp_ckpt_file_path(srv, 0, name, ".tar", path, sizeof path);
  if (run->install && sb->checkpoint_gen != run->gen) {
    mp_ckpt_remove(srv, 0, name);
    set_base(srv, sb, "");
  } else if (run->install) {
    archive_id(path, now); /* the child renamed it into place */
    set_base(srv, sb, now);
  }
  if (run->explicit_request && sb->checkpoint_deleted
      && sb->checkpoint_gen == run->gen) {
    sb->checkpoint_deleted = 0;
    mp_record_save(srv, sb);
  }
  if (run->empty && (archive_id(path, now), now[0] != '\0')) {
    if (strcmp(now, sb->checkpoint_base) == 0) {
      mp_ckpt_remove(srv, 0, name);
      set_base(srv, sb, "");
    } else {
      mp_log("%s: an empty tree; its key's checkpoint is another's: kept", sb->id);
    }
  }
  complete(run, 0, seed[0] != '\0' ? seed : NULL, NULL);
}

/* the capture's exit status when the tree cannot fit (start_run) */
#define CAPTURE_NO_ROOM 5

static void tar_notify(mastra__proc *p, void *data) {
  struct mp_tar_run *run = data;
  size_t n = p->err.len, room = sizeof run->err - 1;
  int code;
  if (n > 0) {
    /* keep the end of stderr: tar says there why it failed */
    const char *src = p->err.data;
    if (n >= room) {
      src += n - room;
      n = room;
      run->errlen = 0;
    } else if (run->errlen + n > room) {
      size_t drop = run->errlen + n - room;
      memmove(run->err, run->err + drop, run->errlen - drop);
      run->errlen -= drop;
    }
    memcpy(run->err + run->errlen, src, n);
    run->errlen += n;
    run->err[run->errlen] = '\0';
  }
  mastra__proc_consumed(p, &p->err);
  mastra__proc_consumed(p, &p->out);
  if (!p->done) return;
  code = p->exit_code;
  mastra__proc_release(p);
  run->proc = NULL;
  while (run->errlen > 0 && run->err[run->errlen - 1] == '\n')
    run->err[--run->errlen] = '\0';
  /* GNU tar -c exits with 1 when a file changed while it was read: the
  ** archive is complete (a command was writing meanwhile) */
  if (code == 0 || (code == 1 && !run->restore)) {
    if (code == 1) mp_log("checkpoint of %s: %s", run->sb->id, run->err);
    if (run->restore) {
      run->sb->restored = 1;
      snprintf(run->sb->restored_from, sizeof run->sb->restored_from, "%s",
               run->name);
      complete(run, 0, run->name, NULL);
    } else {
      capture_done(run->sb->srv, run);
    }
    return;
  }
  /* CAPTURE_NO_ROOM: the measure said it cannot fit; tar's own ENOSPC,
  ** EDQUOT (the archive's write, or a restore's; a restore's short write,
  ** "Wrote only N of M bytes", is a full disk too) the same */
  run->no_space = code == CAPTURE_NO_ROOM
                  || strstr(run->err, "No space left on device") != NULL
                  || strstr(run->err, "Disk quota exceeded") != NULL
                  || (run->restore && strstr(run->err, ": Wrote only ") != NULL);
  if (code == CAPTURE_NO_ROOM && !run->restore) {
    char what[700];
    snprintf(what, sizeof what, "the data disk has no room for the"
             " checkpoint: %s", run->err);
    fail(run, "%s", what);
    return;
  }
  {
    char what[700];
    snprintf(what, sizeof what, "%s (status %d)%s%s", code == 3
             ? "cannot keep the named copy" : code == 4
             ? "cannot store the checkpoint" : run->restore
             ? "tar -x failed" : "tar -c failed", code,
             run->errlen ? ": " : "", run->err);
    fail(run, "%s", what);
  }
}

/* 1 if path is a directory with no entries (or does not exist) */
/* empty_dirs: an empty directory at the top counts as nothing (the
** namespaces driver's upper layer: its top directories are the base's) */
static int dir_is_empty(const char *path, int empty_dirs) {
  DIR *d = opendir(path);
  struct dirent *e;
  int empty = 1;
  if (d == NULL) return errno == ENOENT;
  while (empty && (e = readdir(d)) != NULL) {
    char sub[PATH_LEN];
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    empty = 0;
    if (empty_dirs && e->d_type == DT_DIR) {
      snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
      empty = dir_is_empty(sub, 0);
    }
  }
  closedir(d);
  return empty;
}

static void start_run(mp_server *srv, mp_sandbox *sb) {
  struct mp_tar_run *run = calloc(1, sizeof *run);
  mp_waiter *w;
  char err[512], hex[25], name[MP_CHECKPOINT_NAME_MAX];
  char key[PATH_LEN], seed[PATH_LEN] = "";
  char qdir[2 * PATH_LEN], qtmp[2 * PATH_LEN], qkey[2 * PATH_LEN];
  char qseed[2 * PATH_LEN], qckpt[2 * PATH_LEN], ckpt[PATH_LEN];
  char cmd[10 * PATH_LEN + 1024];
  int n;
  if (run == NULL) {
    mp_log("out of memory for a capture of %s", sb->id);
    return; /* the queue stays: the next request tries again */
  }
  run->sb = sb;
  run->served = sb->capture_queue;
  sb->capture_queue = NULL;
  for (w = run->served; w != NULL; w = w->next)
    if (w->explicit_request) run->explicit_request = 1;
  run->gen = sb->checkpoint_gen;
  sb->tar = run;
  if (sb->destroyed_ms) {
    complete(run, 1, NULL, "the sandbox was destroyed");
    return;
  }
  if (sb->recovery_key[0] == '\0') {
    complete(run, 1, NULL, "the sandbox has no recovery key");
    return;
  }
  if (!run->explicit_request && sb->checkpoint_deleted) {
    complete(run, 1, NULL, "its checkpoint was deleted");
    return;
  }
  mp_checkpoint_key_name(sb, name);
  mp_ckpt_file_path(srv, 0, name, ".tar", key, sizeof key);
  if (!run->explicit_request && dir_is_empty(sb->dir, srv->driver->layer_tree)) {
    /* nothing to keep: an empty tree is what a missing checkpoint restores
    ** too, so drop the older one instead of running tar (fleets of short
    ** sandboxes destroy empty trees all the time), and with no child: it
    ** goes to the trash, as freeing a large file can take a while */
    run->empty = 1;
    capture_done(srv, run);
    return;
  }
  if (mastra__random_hex(hex, 12) < 0) {
    fail(run, "%s", "no randomness for a temporary name");
    return;
  }
  snprintf(run->path, sizeof run->path, "%s/checkpoints/" MASTRA__TMP_PREFIX
           "%s", srv->data_dir, hex);
  /* the records first (small files); the archive moves in the child */
  run->install = run->explicit_request || !sb->checkpoint_deleted;
  if (run->explicit_request) {
    snprintf(run->seed, sizeof run->seed, "%.38s-%.12s", name, hex);
    mp_ckpt_file_path(srv, 1, run->seed, ".tar", seed, sizeof seed);
    if (write_record(srv, 1, run->seed, sb->project, sb->environment,
                     sb->recovery_key, mastra__wall_ms(), 0, 1,
                     sb->template_key) < 0) {
      fail(run, "cannot write the record of the named copy: %s",
           strerror(errno));
      return;
    }
  }
  if (write_record(srv, 0, name, sb->project, sb->environment,
                   sb->recovery_key, 0, 0,
                   run->explicit_request || sb->key_explicit,
                   sb->template_key) < 0) {
    fail(run, "cannot write the checkpoint's record: %s", strerror(errno));
    return;
  }
  if (sh_quote(qdir, sizeof qdir, sb->dir) < 0
      || sh_quote(qtmp, sizeof qtmp, run->path) < 0
      || sh_quote(qkey, sizeof qkey, key) < 0
      || sh_quote(qseed, sizeof qseed, seed) < 0
      || (snprintf(ckpt, sizeof ckpt, "%s/checkpoints", srv->data_dir),
          sh_quote(qckpt, sizeof qckpt, ckpt)) < 0) {
    fail(run, "%s", "a path is too long");
    return;
  }
  /* In the child: tar, then fsync (sync FILE), the named copy (a hard
  ** link), and the rename over the key's checkpoint. The server's thread
  ** does none of it: ext4 writes back a file renamed over another one in
  ** rename(2), and freeing the replaced archive takes a while too. */
  /* First the room: the tree's blocks (du counts a sparse file's data
  ** only, as tar --sparse stores it) and a margin (1% and 64 KiB: tar's
  ** headers and padding, which du's whole blocks mostly cover) against
  ** the data disk's free space, so that a tree that cannot fit fails
  ** once, before tar fills the disk that every sandbox and the server
  ** write to (CAPTURE_NO_ROOM) */
  n = snprintf(cmd, sizeof cmd, "umask 077;"
               " need=$(du -sk %s 2>/dev/null | cut -f1);"
               " free=$(df -k --output=avail %s 2>/dev/null | tail -n 1 | tr -d ' ');"
               " if [ -n \"$need\" ] && [ -n \"$free\" ]"
               " && [ $((need + need / 100 + 64)) -gt \"$free\" ]; then"
               " echo \"the tree holds $need KiB and the data disk has $free"
               " KiB free\" >&2; exit %d; fi;"
               " tar --sparse %s -C %s -cf %s .; s=$?;"
               " if [ $s -gt 1 ];"
               " then rm -f %s; exit $s; fi; sync %s || { rm -f %s; exit 2; };",
               qdir, qckpt, CAPTURE_NO_ROOM, tar_flags(srv), qdir, qtmp, qtmp,
               qtmp, qtmp);
  if (run->explicit_request)
    n += snprintf(cmd + n, sizeof cmd - (size_t)n, " ln %s %s || { rm -f %s;"
                  " exit 3; };", qtmp, qseed, qtmp);
  if (run->install)
    snprintf(cmd + n, sizeof cmd - (size_t)n, " mv -f %s %s || { rm -f %s;"
             " exit 4; }; exit $s", qtmp, qkey, qtmp);
  else
    snprintf(cmd + n, sizeof cmd - (size_t)n, " rm -f %s; exit $s", qtmp);
  if (spawn_run(srv, run, cmd, err, sizeof err) < 0) fail(run, "%s", err);
}

void mp_checkpoint_capture(mp_server *srv, mp_sandbox *sb, mp_waiter *w) {
  mp_waiter **tail = &sb->capture_queue;
  if (w->queued) return;
  while (*tail != NULL) tail = &(*tail)->next;
  w->next = NULL;
  w->queued = 1;
  *tail = w;
  if (sb->tar == NULL) start_run(srv, sb);
}

void mp_checkpoint_restore(mp_server *srv, mp_sandbox *sb, const char *path,
                           const char *name, mp_waiter *w) {
  struct mp_tar_run *run = calloc(1, sizeof *run);
  char err[512], qdir[2 * PATH_LEN], qpath[2 * PATH_LEN];
  char cmd[4 * PATH_LEN + 256], key[MP_CHECKPOINT_NAME_MAX];
  w->next = NULL;
  w->queued = 1;
  if (run == NULL) {
    w->queued = 0;
    w->done(w, sb, -1, NULL, "out of memory");
    return;
  }
  run->sb = sb;
  run->restore = 1;
  run->served = w;
  snprintf(run->path, sizeof run->path, "%s", path);
  snprintf(run->name, sizeof run->name, "%s", name);
  sb->tar = run;
  mp_checkpoint_key_name(sb, key); /* its tree descends from the key's one */
  if (sb->recovery_key[0] != '\0' && strcmp(key, name) == 0)
    archive_id(path, sb->checkpoint_base);
  else
    sb->checkpoint_base[0] = '\0';
  if (sh_quote(qdir, sizeof qdir, sb->dir) < 0
      || sh_quote(qpath, sizeof qpath, path) < 0) {
    fail(run, "%s", "a path is too long");
    return;
  }
  snprintf(cmd, sizeof cmd, "exec tar %s -C %s -xf %s", tar_flags(srv), qdir,
           qpath);
  if (spawn_run(srv, run, cmd, err, sizeof err) < 0) fail(run, "%s", err);
}

static void unlink_waiter(mp_waiter **list, mp_waiter *w) {
  for (; *list != NULL; list = &(*list)->next) {
    if (*list == w) {
      *list = w->next;
      w->next = NULL;
      w->queued = 0;
      return;
    }
  }
}

void mp_checkpoint_forget(mp_sandbox *sb, mp_waiter *w) {
  if (!w->queued) return;
  unlink_waiter(&sb->capture_queue, w);
  if (w->queued && sb->tar != NULL) unlink_waiter(&sb->tar->served, w);
}

int mp_checkpoint_busy(const mp_sandbox *sb) {
  return sb->tar != NULL || sb->capture_queue != NULL;
}

/* }====== */

/* {====== delete ====== */

int mp_ckpt_drop_key(mp_server *srv, const char *project,
                     const char *environment, const char *key) {
  char name[MP_CHECKPOINT_NAME_MAX];
  mp_sandbox *s;
  key_name(project, environment, key, name);
  for (s = srv->sandboxes; s != NULL; s = s->next) {
    if (s->destroyed_ms || strcmp(s->recovery_key, key) != 0
        || strcmp(s->project, project) != 0
        || strcmp(s->environment, environment) != 0)
      continue;
    s->checkpoint_deleted = 1;
    s->checkpoint_gen++; /* a capture running now is thrown away */
    s->checkpoint_base[0] = '\0';
    mastra__timer_stop(&s->checkpoint_timer);
    mp_record_save(srv, s);
  }
  return mp_ckpt_remove(srv, 0, name) ? 0 : 1;
}

int mp_checkpoint_drop(mp_server *srv, const mp_sandbox *sb, const char *key) {
  return mp_ckpt_drop_key(srv, sb->project, sb->environment, key);
}

/* }====== */
