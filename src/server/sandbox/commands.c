/*
** The commands run in a sandbox (sandbox.h): started through its driver
** (srv->driver), counted as running, with their run files (orphans.c) and
** their exec sessions (activity.c), and let go of.
*/
#define _GNU_SOURCE
#include "sandbox/sandbox.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/activity.h"
#include "sandbox/env.h"
#include "sandbox/orphans.h"
#include "util.h"

void mp_proc_opts(mastra__proc_opts *o, const mp_exec_spec *spec,
                  char *const *envp, const char *cwd) {
  memset(o, 0, sizeof *o);
  o->command = spec->command;
  o->cwd = cwd;
  o->envp = envp;
  o->stdin_pipe = spec->stdin_pipe;
  o->timeout_ms = spec->timeout_ms;
  o->pdeathsig = SIGKILL;
}

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
  sb->proc_starts[sb->nprocs] =
      srv->driver->no_run_files
          ? 0 : mp_orphans_run_file_add(srv->data_dir, sb->id, (*out)->pid);
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
      mp_orphans_run_file_remove(srv->data_dir, p->pid, sb->proc_starts[i]);
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
  mp_sandbox_commands_ended(sb);
}
