/*
** The trash of mastra-platform (trash.h). Removing a tree is one unlink
** per file: a tree of a GiB took seconds on the server's only thread, and
** the unlink of one 1 GiB file took 490 ms on ext4 (the extents are freed
** then). It is renamed to DATA/trash/<name>-<random> instead, and `rm -rf` runs in
** a child (a mastra__proc on the loop, released when it ends; the loop's
** close kills it at shutdown, and the next start empties the trash).
**
** One child at a time empties the whole trash, and a removal starts
** TRASH_BATCH_MS after the first entry that waits: a burst of destroys
** costs a few children (an exec costs milliseconds on a small VM, more than
** removing a sandbox's tree), not three processes per sandbox.
*/
#define _GNU_SOURCE
#include "util/trash.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"
#include "proc.h"
#include "server.h"
#include "util.h"

#define TRASH_BATCH_MS 250

/* a removal running: srv->trash_runs */
typedef struct mp_trash_run {
  struct mp_trash_run *next;
  mp_server *srv;
  mastra__proc *proc;
} trash_run;

static void run_end(trash_run *run) {
  trash_run **p;
  for (p = &run->srv->trash_runs; *p != NULL; p = &(*p)->next) {
    if (*p == run) {
      *p = run->next;
      break;
    }
  }
  mastra__proc_release(run->proc); /* kills it if it still runs */
  free(run);
}

static int empty_trash(mp_server *srv);

static void on_rm(mastra__proc *p, void *data) {
  trash_run *run = data;
  mp_server *srv = run->srv;
  mastra__proc_consumed(p, &p->out);
  mastra__proc_consumed(p, &p->err);
  if (!p->done) return;
  if (p->exit_code != 0) mp_log("rm -rf in the trash exited %d", p->exit_code);
  run_end(run);
  if (srv->trash_pending) empty_trash(srv);
}

void mp_trash_stop(mp_server *srv) {
  if (srv->trash_timer.loop != NULL) mastra__timer_stop(&srv->trash_timer);
  while (srv->trash_runs != NULL) run_end(srv->trash_runs);
}

/* rm -rf in a child (command: its shell text, with $MP_TRASH = path);
** -1 if it cannot start */
static int rm_child(mp_server *srv, const char *command, const char *path) {
  char var[4300], err[256];
  char *envp[3];
  mastra__proc_opts opts;
  trash_run *run = calloc(1, sizeof *run);
  if (run == NULL) return -1;
  snprintf(var, sizeof var, "MP_TRASH=%s", path);
  envp[0] = var;
  envp[1] = "PATH=/usr/local/bin:/usr/bin:/bin"; /* util/ is below sandbox/env.h */
  envp[2] = NULL;
  memset(&opts, 0, sizeof opts);
  opts.command = command;
  opts.envp = envp;
  if (mastra__proc_spawn(srv->loop, &opts, &run->proc, err, sizeof err) < 0) {
    mp_log("cannot start rm -rf for %s: %s", path, err);
    free(run);
    return -1;
  }
  run->srv = srv;
  run->next = srv->trash_runs;
  srv->trash_runs = run;
  run->proc->notify = on_rm;
  run->proc->notify_data = run;
  return 0;
}

/* a child that removes every entry of the trash (dot files too), or a
** note that one runs: 0; -1 if none can start */
static int empty_trash(mp_server *srv) {
  char dir[4200];
  if (srv->trash_runs != NULL) {
    srv->trash_pending = 1;
    return 0;
  }
  srv->trash_pending = 0;
  mastra__timer_stop(&srv->trash_timer);
  snprintf(dir, sizeof dir, "%s/trash", srv->data_dir);
  return rm_child(srv, "exec find \"$MP_TRASH\" -mindepth 1 -maxdepth 1"
                  " -exec rm -rf -- {} +", dir);
}

static void on_batch(mastra__timer *t) { empty_trash(t->data); }

/* a removal soon (the entries that come meanwhile go with it): 0, or -1
** if the loop cannot take a timer */
static int empty_trash_soon(mp_server *srv) {
  if (srv->trash_runs != NULL) {
    srv->trash_pending = 1;
    return 0;
  }
  if (srv->trash_timer.loop == NULL)
    mastra__timer_init(srv->loop, &srv->trash_timer, on_batch, srv);
  if (srv->trash_timer.slot != 0) return 0;
  return mastra__timer_start(&srv->trash_timer, TRASH_BATCH_MS) < 0 ? -1 : 0;
}

int mp_trash(mp_server *srv, const char *path) {
  char dir[4200], to[4300], hex[17];
  const char *base = strrchr(path, '/');
  base = base != NULL ? base + 1 : path;
  snprintf(dir, sizeof dir, "%s/trash", srv->data_dir);
  if (mastra__random_hex(hex, 8) < 0) snprintf(hex, sizeof hex, "0");
  snprintf(to, sizeof to, "%s/%s-%s", dir, base, hex);
  if (mastra__mkdirs(dir, 0755, NULL) == 0 && rename(path, to) == 0) {
    if (empty_trash_soon(srv) < 0) mastra__remove_tree(to); /* here */
    return 0;
  }
  if (errno == ENOENT) return -1;
  /* not moved: here, as before */
  return mastra__remove_tree(path) == 0 ? 0 : -1;
}

void mp_trash_empty(mp_server *srv) {
  char dir[4200];
  snprintf(dir, sizeof dir, "%s/trash", srv->data_dir);
  if (access(dir, F_OK) == 0) empty_trash(srv);
}
