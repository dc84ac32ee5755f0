/*
** Sandboxes of mastra-platform (sandbox.c): the records, their lifecycle
** (create, destroy, idle reaping, shutdown), the record files, and the
** commands run in them through a driver.
*/
#ifndef MP_SANDBOX_H
#define MP_SANDBOX_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "sandbox/env.h"
#include "proc.h"
#include "server.h"

/* how long a destroyed record is kept by default (GET shows destroyedAt) */
#define MP_DESTROYED_TTL_DEFAULT_S 600
/* how many destroyed records are kept at most by default (the oldest is
** freed when a destroy would pass it) */
#define MP_DESTROYED_MAX_DEFAULT 1000
#define MP_DESTROYED_MAX_LIMIT 10000000
/* how long a destroy waits by default for its sandbox's last processes
** after their SIGKILL (drain.c) */
#define MP_DESTROY_WAIT_DEFAULT_S 10

typedef struct mp_exec_spec {
  const char *command; /* shell text */
  const char *cwd;     /* NULL: the sandbox's working directory */
  const cJSON *env;    /* object of strings, or NULL */
  int stdin_pipe;
  uint64_t timeout_ms; /* 0: none */
} mp_exec_spec;

/* the options of a command's process for a driver: spec's command, stdin
** and timeout, envp, cwd (a host path), SIGKILL when the server dies */
void mp_proc_opts(mastra__proc_opts *o, const mp_exec_spec *spec,
                  char *const *envp, const char *cwd);

/* Someone waiting for a sandbox's capture, restore or destroy (see
** checkpoint.h and mp_sandbox_destroy): done is called once, with rc 0
** (done), 1 (skipped: nothing to capture) or -1 (failed: message says
** why); name is the checkpoint an explicit capture named, or the one a
** restore read (NULL otherwise). */
typedef struct mp_waiter mp_waiter;
struct mp_waiter {
  mp_waiter *next;
  void (*done)(mp_waiter *w, mp_sandbox *sb, int rc, const char *name,
               const char *message);
  void *data;
  int explicit_request; /* a capture: POST /checkpoint asked for it */
  int queued;           /* checkpoint.c: in a queue or served by a run */
};

/* A command-line flag of `mastra-platform serve` that a driver owns:
** main.c parses every driver's flags through the registry
** (drivers/drivers.h), and --help lists them from the same table. */
typedef struct mp_driver_flag {
  const char *name;  /* "--warm-pool" */
  const char *arg;   /* its value in --help ("N"), or NULL: a switch */
  const char *help;  /* what it does and its default; '\n' between lines */
  /* keep the value (NULL for a switch): 0, or -1 after writing in err
  ** what was wrong with it */
  int (*set)(const char *value, char *err, size_t errlen);
} mp_driver_flag;

/* A driver makes sandboxes real: drivers/process/ keeps a directory and
** process groups on the host; drivers/ns/ an overlay root and namespaces.
** It owns its lifecycle and its flags: nothing outside its folder asks
** which driver runs (drivers/drivers.c holds the registry). */
struct mp_driver {
  const char *name;
  /* said beside its name when a default start falls back to it ("no
  ** isolation"), or NULL */
  const char *note;
  /* its flags of `serve`, ended by an entry with a NULL name; or NULL */
  const mp_driver_flag *flags;
  /* can it run on this host? 1, or 0 and why (NULL: always) */
  int (*available)(char *why, size_t n);
  /* it was chosen (its flags are parsed), before the records are loaded:
  ** 0, or -1 and why in err (NULL: nothing to set up) */
  int (*setup)(mp_server *srv, char *err, size_t errlen);
  /* once the loop runs and the trash is emptied (NULL: nothing) */
  void (*start)(mp_server *srv);
  /* the server stops: every sandbox was released and the loop is about
  ** to be freed; stop what the driver watches on it (NULL: nothing) */
  void (*stop)(mp_server *srv);
  /* at exit, after the loop was freed, or on the way out after a failed
  ** start once setup succeeded (NULL: nothing) */
  void (*finish)(mp_server *srv);
  /* what limits a sandbox's processes, for its JSON's `limits` ("cgroup
  ** v1", ...), or NULL: the JSON has no `limits` */
  const char *(*limits)(const mp_server *srv);
  /* create the working tree (empty, or restored by the caller) */
  int (*prepare)(mp_server *srv, mp_sandbox *sb, char *err, size_t errlen);
  /* start a command; the caller sets notify and tracks the process */
  int (*spawn)(mp_server *srv, mp_sandbox *sb, const mp_exec_spec *spec,
               char *const *envp, mastra__proc **out, char *err,
               size_t errlen);
  /* after every process of the sandbox has been killed */
  void (*teardown)(mp_server *srv, mp_sandbox *sb);
  /* the server exits: end what the driver keeps for a live sandbox (its
  ** tree stays); NULL: nothing to end */
  void (*release)(mp_server *srv, mp_sandbox *sb);
  /* more options of the checkpoint's tar (of sb->dir), or NULL */
  const char *tar_flags;
  /* sb->dir is an overlay's upper layer: a capture of nothing but empty
  ** top directories is a capture of nothing */
  int layer_tree;
  /* every process of a sandbox dies with the server (a kill -9 too): its
  ** commands need no run files (orphans.c) for the next start to find */
  int no_run_files;
  /* a destroy's strays: SIGKILL the processes of sb outside the process
  ** groups that in_command(data, pgrp) names, and return how many (NULL:
  ** a scan of /proc for the processes marked with sb's id) */
  size_t (*kill_strays)(mp_sandbox *sb, int (*in_command)(void *data,
                                                          long pgrp),
                        void *data);
  /* after teardown, until it says 0: SIGKILL what is still on the host
  ** of sb (again: what a fork storm started after the last kill) and
  ** return how many processes that was; 0: nothing of sb is left, the
  ** destroy answers (docs/platform.md, "Destroy"). It never waits. An
  ** event that may have emptied sb (an init's exit) is the driver's to
  ** report with mp_sandbox_recheck. NULL: the scan of /proc for the
  ** processes marked with sb's id. */
  size_t (*left)(mp_server *srv, mp_sandbox *sb);
  /* it runs sandboxes of templates (sandbox/template.c): their roots have
  ** the template's read-only layer between the base and their own layer,
  ** and it keeps a build sandbox's layer at sb->keep_layer on teardown */
  int templates;
  /* optional: sb's outbound connections into o (counts; with entries > 0
  ** the newest `entries` of its log too); 0, or -1 when the driver has no
  ** egress for it */
  int (*egress)(mp_sandbox *sb, cJSON *o, int entries);
  /* optional: sb's own egress rules, within the server's policy (allow
  ** NULL: no allow list; "" an empty one, which allows nothing): checked,
  ** kept in sb and applied to its live egress; 0, or -1 and why (a bad
  ** rule). NULL: the driver has no egress, and the lease does not list
  ** "egressRules" */
  int (*egress_narrow)(mp_sandbox *sb, const char *allow, const char *deny,
                       char *err, size_t errlen);
  /* optional: what the driver adds to the inspector's health (the warm
  ** pool of the namespaces driver) */
  void (*health)(const mp_server *srv, cJSON *o);
  /* optional: the template of key is about to be removed (its layer goes
  ** to the trash): end what the driver runs over its layer outside the
  ** sandboxes (the namespaces driver's warm members of it), before */
  void (*template_gone)(mp_server *srv, const char *key);
};

#define MP_CHECKPOINT_BASE_MAX 80
#define MP_TEMPLATE_KEY_MAX 40 /* 32 hex digits and a NUL */

struct mp_sandbox {
  mp_sandbox *next, *prev;        /* srv->sandboxes */
  mp_sandbox *gone_next, *gone_prev; /* srv->gone: destroyed, in order */
  int gone;                       /* in srv->gone */
  char id[MP_ID_MAX];             /* ours: sbx_<hex> */
  char project[MP_NAME_MAX];
  char environment[MP_NAME_MAX];
  char recovery_key[MP_NAME_MAX]; /* the caller's `id`; "" if none */
  char network[16];               /* ISOLATED | PRIVATE */
  /* its own egress rules (PUT /sandbox/{id}/egress, set once): comma-
  ** separated; egress_allow_given: an allow list was given ("" allows
  ** nothing); egress_rules: they are set */
  char egress_allow[512], egress_deny[512];
  int egress_allow_given, egress_rules;
  double idle_timeout_min;        /* the caller's; 0: the server's default */
  cJSON *env;                     /* creation env: object of strings */
  int64_t created_ms, destroyed_ms, last_exec_ms;
  int running;                    /* commands running now */
  int sockets;                    /* exec sockets open on it (exec_ws.c) */
  int restored;                   /* created from a checkpoint */
  char restored_from[MP_NAME_MAX]; /* that checkpoint's name, or "" */
  int checkpoint_deleted;         /* DELETE /checkpoint: no implicit capture */
  int key_explicit;               /* its create said the key is the caller's
                                  ** own (MP_CREATE_KEY_HEADER): its
                                  ** checkpoint counts as asked for */
  unsigned checkpoint_gen;        /* bumped by DELETE /checkpoint */
  /* the key's archive that its tree descends from (restored, or captured
  ** by it): "<dev>:<inode>:<mtime ns>:<size>", or "" (checkpoint.c) */
  char checkpoint_base[MP_CHECKPOINT_BASE_MAX];
  int restoring, destroying;      /* waiting for tar (checkpoint.c) */
  struct mp_tar_run *tar;         /* checkpoint.c: the tar running now */
  mp_waiter *capture_queue;       /* captures asked for while it runs */
  mp_waiter *waiters;             /* of the restore or the destroy */
  mp_waiter lifecycle;            /* the restore or destroy's own capture */
  mp_waiter debounced;            /* the capture after commands, shutdown */
  mastra__proc **procs;           /* its running commands */
  unsigned long long *proc_starts; /* their start times (/proc/PID/stat) */
  size_t nprocs;
  char *root;                     /* <data>/sandboxes/<id> */
  char *dir;                      /* working tree on the host */
  void *driver_data;              /* the driver's, or NULL */
  mastra__timer idle_timer;
  mastra__timer checkpoint_timer; /* debounced capture after commands */
  /* drain.c: after its teardown, until nothing of it is left on the
  ** host; the destroy's waiters are told then (or at the deadline,
  ** --destroy-wait) */
  int draining, drain_late;       /* drain_late: past the deadline */
  int64_t drain_since_ms, drain_deadline_ms;
  unsigned drain_delay_ms;        /* the next check's, doubling */
  size_t drain_left;              /* what the last check found */
  mastra__timer drain_timer;
  void (*drain_done)(mp_sandbox *sb, int rc, const char *message);
  struct mp_lease *leases;        /* lease.c: its live leases, newest first */
  unsigned nleases;
  unsigned refs;                  /* exec sessions and legacy runs holding it */
  struct mp_exec *execs;          /* execs.c: its resumable execs */
  mp_index exec_index;            /* the same by exec id */
  /* template.c: the template whose layer is under its own ("": none), its
  ** folder's name under DATA/templates; and for a build sandbox, where its
  ** teardown moves its layer (NULL: removed with its tree) */
  char template_key[MP_TEMPLATE_KEY_MAX];
  char *keep_layer;
  /* the host uid of its root, set by its driver (the namespaces driver's
  ** uid range, ns_uids.h) and kept in its record; 0: none */
  unsigned uid_base;
  /* its template's cpuCount and memoryMB (0: the driver's defaults), the
  ** namespaces driver's cgroup limits; its setWorkdir, the default cwd of
  ** its commands ("": the driver's) */
  int cpu_count, memory_mb;
  char workdir[1024];
  mp_server *srv;
};

/* The fields of a create, as the route reads them (routes_sandbox.c), the
** record keeps them (record.c) and the activity log shows them
** (activity.c): named once, here. */
#define MP_CREATE_ID "id"                   /* the caller's recovery key */
#define MP_CREATE_ENVIRONMENT "environmentId"
#define MP_CREATE_NETWORK "networkIsolation" /* ISOLATED | PRIVATE */
#define MP_CREATE_IDLE "idleTimeoutMinutes"
#define MP_CREATE_ENV "env"
#define MP_CREATE_SEED "seedCheckpointName"
#define MP_CREATE_TEMPLATE "templateDefinition" /* a template's recipe */
#define MP_CREATE_TEMPLATE_ENVS "templateBuildEnvs" /* its build's env */
/* ours: a create header "explicit" says that `id` is the caller's own, not
** one made up for it (retention, docs/platform.md "Checkpoints"); the
** record and the activity log keep it as MP_CREATE_KEY_EXPLICIT */
#define MP_CREATE_KEY_HEADER "x-mastra-recovery-key"
#define MP_CREATE_KEY_EXPLICIT "recoveryKeyExplicit"

typedef struct mp_create_spec {
  const char *project;
  const char *environment;
  const char *recovery_key;   /* the caller's `id`, or NULL */
  const char *network;        /* ISOLATED | PRIVATE, or NULL */
  double idle_timeout_min;   /* fractions allowed; 0: the server's default */
  const cJSON *env;           /* object of strings, or NULL */
  const char *seed;           /* seedCheckpointName, or NULL */
  int key_explicit;           /* MP_CREATE_KEY_HEADER said "explicit" */
  const char *template_key;   /* a ready template's key (template.h), or NULL */
  int cpu_count, memory_mb;   /* the template's limits; 0: the driver's */
  const char *workdir;        /* the template's setWorkdir, or NULL */
} mp_create_spec;

/* -1 failed (err says why), -2 the request is wrong (an unknown seed: err
** says why), -3 the disk is full (err says why), 0 created, 1 created and restoring a checkpoint: w->done is
** called (maybe before this returns) when it is ready (rc 0) or failed
** (rc -1: the sandbox is then destroyed).
** getOrCreate: when a live sandbox of the same (project, environment,
** recovery key) exists, *out is that one and nothing is created: 2 it is
** ready; 3 it is being restored (w->done is called as for 1); 4 it is
** being destroyed (w->done is called when it is gone, or kept: create
** again then; without w, -1). */
int mp_sandbox_create(mp_server *srv, const mp_create_spec *spec,
                      mp_sandbox **out, mp_waiter *w, char *err,
                      size_t errlen);
/* Kill its commands, capture its checkpoint (unless an explicit DELETE
** /checkpoint said not to), then remove its tree and kill what is left
** of it until no process of it is on the host; the record stays, with
** destroyedAt. w (or NULL) is told once, maybe before this returns: rc 0
** destroyed and nothing of it left, -1 the capture failed and the sandbox
** is kept (live, tree and all), or it is being restored, or (destroyed)
** some of its processes were still there at the deadline,
** srv->destroy_wait_ms after their SIGKILL (message says so). A destroyed
** sandbox: w waits for what is left of it, if anything. */
void mp_sandbox_destroy(mp_server *srv, mp_sandbox *sb, mp_waiter *w);
/* A driver's event (an init's exit, a keeper reaped) may have emptied sb:
** if it is draining, check now rather than at its next poll. */
void mp_sandbox_recheck(mp_sandbox *sb);
/* w's request went away: it is told nothing more */
void mp_sandbox_forget(mp_sandbox *sb, mp_waiter *w);
/* a record (live or destroyed) of project (NULL: any), or NULL */
mp_sandbox *mp_sandbox_lookup(mp_server *srv, const char *project,
                              const char *id);
/* A live (not destroyed) sandbox by our id, or NULL. */
mp_sandbox *mp_sandbox_find(mp_server *srv, const char *id);
size_t mp_sandbox_live_count(mp_server *srv);
/* shutdown: end every command, capture the checkpoints (running the loop
** until every capture has finished), save the records */
void mp_sandbox_shutdown_all(mp_server *srv);
/* The idle timeout of sb in minutes: its own, else the server's default
** (srv->default_idle_min); 0: never reaped. */
double mp_sandbox_idle_minutes(const mp_server *srv, const mp_sandbox *sb);
/* Commands started and not yet let go of (mp_sandbox_exec_done). */
size_t mp_sandbox_running_count(mp_server *srv);
/* Shutdown, first step: ask every command to end (SIGTERM, then SIGKILL
** after the grace period, on the loop). */
void mp_sandbox_stop_all(mp_server *srv);
/* Shutdown, last step: SIGKILL every process of every sandbox, the groups
** of its commands and the processes marked with MP_MARKER_VAR. Returns how
** many were still alive (call again, running the loop, until 0). */
size_t mp_sandbox_kill_all(mp_server *srv);
/* At startup, before serving: SIGKILL the commands a previous instance
** started (its run files, DATA_DIR/state/run, and the marked processes);
** their sandboxes stay live, stopped: idle from now on. Returns how many
** processes were still alive (call again until 0). */
size_t mp_sandbox_kill_previous(mp_server *srv);
void mp_sandbox_free_all(mp_server *srv);
/* Free the destroyed records older than srv->destroyed_ttl_ms, then the
** oldest ones past srv->destroyed_max (nothing holds them any more);
** returns how many. A timer started by mp_sandbox_sweep_start
** (mp_state_load does) calls it. */
size_t mp_sandbox_sweep(mp_server *srv);
void mp_sandbox_sweep_start(mp_server *srv);

/* Load the records of <data>/state/sandboxes (at startup): a record whose
** fields are not valid is skipped (logged), one destroyed longer ago than
** srv->destroyed_ttl_ms is removed, and so are the oldest destroyed ones
** past srv->destroyed_max. */
int mp_state_load(mp_server *srv);


/* Start a command in sb (marks activity, counts it as running). notify is
** called for every event of the process; the caller must call
** mp_sandbox_exec_done() once, when it lets go of the process. */
int mp_sandbox_exec(mp_server *srv, mp_sandbox *sb, const mp_exec_spec *spec,
                    mastra__proc_notify notify, void *data,
                    mastra__proc **out, char *err, size_t errlen);
void mp_sandbox_exec_done(mp_server *srv, mp_sandbox *sb, mastra__proc *p);
/* commands.c, when a command of sb is let go of: the idle timer, and the
** debounced capture once none runs (sandbox.c) */
void mp_sandbox_commands_ended(mp_sandbox *sb);

#endif
