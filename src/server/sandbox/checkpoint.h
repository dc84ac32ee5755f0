/*
** Checkpoints of mastra-platform (checkpoint.c): a tar of a sandbox's
** working tree, keyed by (project, environment, recovery key), the named
** copies that POST /checkpoint hands out (seeds), and their retention.
** tar runs as a child process on the loop: nothing here waits for it.
*/
#ifndef MP_CHECKPOINT_H
#define MP_CHECKPOINT_H

#include "sandbox/sandbox.h"

/* checkpoint names: mastra-checkpoint-<20 hex>[-<12 hex>] */
#define MP_CHECKPOINT_NAME_MAX 64

/* At start: create the directories, remove the temporaries of captures a
** crash interrupted, sweep once and arm the periodic sweep. */
int mp_checkpoint_start(mp_server *srv);
void mp_checkpoint_stop(mp_server *srv);
/* the retention of checkpoints that nothing asked for, in days, as it
** applies (never longer than --checkpoint-retention; 0: forever) */
double mp_checkpoint_unused_days(const mp_server *srv);

/* What a new sandbox starts from: the checkpoint of its key, else the
** seed (seedCheckpointName, may be NULL). 0: found (path and name are
** set, and the checkpoint counts as used), 1: nothing to restore, -1: the
** seed names no checkpoint of (project, environment) (err says so). */
int mp_checkpoint_source(mp_server *srv, const char *project,
                         const char *environment, const char *key,
                         const char *seed, char *path, size_t pathlen,
                         char name[MP_CHECKPOINT_NAME_MAX], char *err,
                         size_t errlen);
/* The template under the checkpoint that a create of (key, seed) would
** restore (mp_checkpoint_source's choice, counting nothing): 1 with
** template_key set and *definition its kept definition (the caller
** deletes it; NULL when the record kept none), 0 when that checkpoint was
** of no template or there is none. */
int mp_checkpoint_template(mp_server *srv, const char *project,
                           const char *environment, const char *key,
                           const char *seed,
                           char template_key[MP_TEMPLATE_KEY_MAX],
                           cJSON **definition);
/* Extract path into sb's prepared (empty) tree; w is told (rc 0 with the
** name, or -1). */
void mp_checkpoint_restore(mp_server *srv, mp_sandbox *sb, const char *path,
                           const char *name, mp_waiter *w);

/* Ask for a capture of sb; w is told when it is done. Captures asked for
** while one runs are served together by the next run. An implicit capture
** (w->explicit_request 0) is skipped for a sandbox without a key or whose
** checkpoint was deleted, and an empty tree removes the checkpoint instead
** of archiving nothing. An explicit one also makes a named copy (the name
** w gets) and clears the deleted mark. A waiter already queued is left
** where it is. A capture that the data disk has no room for fails with
** rc MP_CHECKPOINT_NO_SPACE (its message says how much it needed): the
** tree is measured first (du) and tar never starts when it cannot fit,
** and a tar that hits ENOSPC or EDQUOT all the same fails so too. Sparse
** files are stored sparse (tar --sparse) and restored so. */
#define MP_CHECKPOINT_NO_SPACE (-2)
void mp_checkpoint_capture(mp_server *srv, mp_sandbox *sb, mp_waiter *w);
/* w's request went away: it is told nothing more */
void mp_checkpoint_forget(mp_sandbox *sb, mp_waiter *w);
/* whether a tar runs or waits for sb */
int mp_checkpoint_busy(const mp_sandbox *sb);

/* DELETE /checkpoint: remove the checkpoint of (sb's project and
** environment, key), and mark every live sandbox with that key so that no
** implicit capture brings it back (the mark is in its record). 0: removed,
** 1: there was none (the sandboxes are marked all the same). */
int mp_checkpoint_drop(mp_server *srv, const mp_sandbox *sb, const char *key);

/* For the inspector: the checkpoints (key and named ones) of (project,
** environment), or of all when project is NULL: [{name, key, named,
** projectId, environmentId, size, capturedAt, restores, lastRestoredAt,
** asked, retentionDays, removeAt, lastUsedAt}] (asked: the longer
** retention applies; removeAt null: kept while a live sandbox has the key,
** or forever). */
cJSON *mp_checkpoint_list(mp_server *srv, const char *project,
                          const char *environment);
/* Remove checkpoint name of (project, environment): a key's checkpoint as
** DELETE /checkpoint does (mp_checkpoint_drop), a named one on its own. 0:
** removed, 1: no such checkpoint. */
int mp_checkpoint_remove(mp_server *srv, const char *project,
                         const char *environment, const char *name);

/* the name of sb's key checkpoint */
void mp_checkpoint_key_name(const mp_sandbox *sb,
                            char name[MP_CHECKPOINT_NAME_MAX]);

/* {====== the checkpoint files, shared by checkpoint.c (capture, restore)
** and retention.c (the sweep, listing, removal) ====== */

/* the longest path of a checkpoint's file */
#define MP_CKPT_PATH_LEN 4400
/* DATA/checkpoints[/seeds]/<name><ext> */
void mp_ckpt_file_path(mp_server *srv, int seed, const char *name,
                       const char *ext, char *out, size_t outlen);
/* the record of a checkpoint as an object, or NULL */
cJSON *mp_ckpt_read_record(const char *path);
/* a string field of a record, or "" */
const char *mp_ckpt_rec_str(const cJSON *o, const char *k);
/* remove a checkpoint and its record; 1 if the archive was there */
int mp_ckpt_remove(mp_server *srv, int seed, const char *name);
/* the explicit delete of a key's checkpoint (mp_checkpoint_drop's), for a
** key of project and environment: 0 removed, 1 there was none */
int mp_ckpt_drop_key(mp_server *srv, const char *project,
                     const char *environment, const char *key);

/* }====== */

#endif
