/*
** mastra-platform: a local server that speaks the Mastra Platform API
** (docs/platform.md).
**
** One thread, one mastra__loop: libmicrohttpd runs in external-epoll mode
** (its epoll fd is watched by the loop), sandbox processes are
** mastra__proc with a notify callback, and upgraded exec WebSockets are
** driven by wslay on the loop. Nothing here blocks on a client.
**
** This header holds the server's state, which main.c owns and passes to
** every room as an mp_server pointer. The rooms (folders) and their jobs
** are mapped in README.md ("Layout"); each part declares its functions in
** its own header, included by its path from here ("sandbox/record.h").
** Which room may use which is test/deps.lua's server_rooms.
*/
#ifndef MP_SERVER_H
#define MP_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "util/index.h"
#include "loop.h"

struct mp_httpd;
struct mp_lease;
struct mp_ws_session;
struct mp_trash_run;
struct mp_exec;

typedef struct mp_server mp_server;
typedef struct mp_sandbox mp_sandbox;
typedef struct mp_driver mp_driver;
typedef struct mp_bucket_store mp_bucket_store;

#define MP_ID_MAX 64
#define MP_NAME_MAX 256

struct mp_server {
  mastra__loop *loop;
  struct mp_httpd *api;        /* api/router.c's site (http/httpd.c) */
  char *data_dir;
  char token[256];
  size_t token_len;
  char base_url[128];  /* http://127.0.0.1:PORT */
  char ws_url[160];    /* ws://127.0.0.1:PORT/ws/exec */
  const mp_driver *driver;
  mp_bucket_store *buckets;
  mp_sandbox *sandboxes;      /* live, and destroyed until they expire */
  mp_index sandbox_index;     /* the same records by id */
  int64_t destroyed_ttl_ms;   /* how long a destroyed record is kept */
  size_t destroyed_max;       /* how many destroyed records are kept */
  int64_t destroy_wait_ms;    /* a destroy's wait for its last processes */
  mp_sandbox *gone, *gone_tail; /* sandbox.c: the destroyed records, oldest
                                ** first */
  size_t ngone;
  mastra__timer record_sweep; /* sandbox.c: frees the expired records */
  struct mp_lease *leases, *leases_tail; /* lease.c: in mint order */
  mp_index lease_index;       /* lease.c: the same leases by token */
  size_t uploads_in_flight;   /* httpd.c: bytes of bodies being read, on
                              ** every site */
  size_t max_uploads;         /* the bound of uploads_in_flight */
  unsigned header_timeout_s;  /* httpd.c: a request's head must arrive */
  struct mp_trash_run *trash_runs; /* trash.c: the rm -rf children */
  int trash_pending;               /* trash.c: moved in during a removal */
  mastra__timer trash_timer;       /* trash.c: the next removal, batched */
  struct mp_ws_session *ws_sessions; /* exec_ws.c: the open sessions */
  size_t max_body;            /* JSON bodies */
  size_t max_object;          /* bucket PUT bodies */
  uint64_t lease_ttl_ms;
  double checkpoint_retention_days; /* 0: checkpoints are kept forever */
  double checkpoint_retention_unused_days; /* those nothing asked for */
  mastra__timer checkpoint_sweep;   /* checkpoint.c: the retention sweep */
  int idle_exit_s;            /* exit when idle with no sandboxes; 0: never */
  int exec_stdin;             /* exec_ws.c streams stdin (--exec-stdin) */
  uint64_t exec_log_max;      /* execs.c: retained output an exec (--exec-log-max) */
  uint64_t exec_ping_ms;      /* exec_ws.c: pings a resumable exec's socket (--exec-ping) */
  uint64_t exec_log_total;    /* execs.c: ... of all execs (--exec-log-total) */
  uint64_t exec_spooled;      /* execs.c: what all execs retain now */
  /* execs.c: the execs whose command runs; the ended ones that retain
  ** output, the first to end first (the order of eviction) */
  struct mp_exec *execs_running;
  struct mp_exec *execs_ended_first, *execs_ended_last;
  uint64_t exec_retain_ms;    /* execs.c: an ended exec is kept (--exec-retain) */
  /* execs.c's mp_execs_drop, set by main.c: sandbox.c lets go of a
  ** sandbox's execs through it (execs.c starts commands through
  ** commands.c, which tells sandbox.c: a direct call would be a circle) */
  void (*drop_execs)(mp_sandbox *sb, int remove_files);
  double default_idle_min;    /* idle timeout of sandboxes without one; 0: never */
  struct mp_legacy_run *legacy_runs; /* exec_legacy.c: the runs in flight */
  int64_t last_request_ms;
  struct mp_activity *activity;   /* activity.c */
  struct mp_inspector *inspector; /* inspector.c; NULL: not served */
  struct mp_diskuse *diskuse;     /* diskuse.c: made on first use */
  struct mp_template *templates;  /* sandbox/template.c */
  double template_retention_days; /* unused templates go after; 0: never */
  mastra__timer template_sweep;   /* template.c: the retention sweep */
  volatile int stopping;
};

#endif
