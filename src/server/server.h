/*
** mastra-platform: a local server that speaks the Mastra Platform API
** (reference/platform-protocol.md sections 1, 2, 4 and 9).
**
** One thread, one mastra__loop: libmicrohttpd runs in external-epoll mode
** (its epoll fd is watched by the loop), sandbox processes are
** mastra__proc with a notify callback, and upgraded exec WebSockets are
** driven by wslay on the loop. Nothing here blocks on a client.
*/
#ifndef MP_SERVER_H
#define MP_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "loop.h"
#include "proc.h"
#include "util.h"

struct MHD_Daemon;
struct MHD_Connection;

typedef struct mp_server mp_server;
typedef struct mp_sandbox mp_sandbox;
typedef struct mp_bucket_store mp_bucket_store;

#define MP_ID_MAX 64
#define MP_NAME_MAX 256
#define MP_TOKEN_BYTES 32 /* 256 random bits, hex encoded */

/* {====== sandboxes ====== */

typedef struct mp_exec_spec {
  const char *command; /* shell text */
  const char *cwd;     /* NULL: the sandbox's working directory */
  const cJSON *env;    /* object of strings, or NULL */
  int stdin_pipe;
  uint64_t timeout_ms; /* 0: none */
} mp_exec_spec;

/* A driver makes sandboxes real. `process`: a directory and process groups
** on the host; `namespaces` comes later. */
typedef struct mp_driver {
  const char *name;
  /* create the working tree (empty, or restored by the caller) */
  int (*prepare)(mp_server *srv, mp_sandbox *sb, char *err, size_t errlen);
  /* start a command; the caller sets notify and tracks the process */
  int (*spawn)(mp_server *srv, mp_sandbox *sb, const mp_exec_spec *spec,
               char *const *envp, mastra__proc **out, char *err,
               size_t errlen);
  /* after every process of the sandbox has been killed */
  void (*teardown)(mp_server *srv, mp_sandbox *sb);
} mp_driver;

extern const mp_driver mp_process_driver;

struct mp_sandbox {
  mp_sandbox *next;
  char id[MP_ID_MAX];             /* ours: sbx_<hex> */
  char project[MP_NAME_MAX];
  char environment[MP_NAME_MAX];
  char recovery_key[MP_NAME_MAX]; /* the caller's `id`; "" if none */
  char network[16];               /* ISOLATED | PRIVATE */
  double idle_timeout_min;        /* 0: never reaped; fractions allowed */
  cJSON *env;                     /* creation env: object of strings */
  int64_t created_ms, destroyed_ms, last_exec_ms;
  int running;                    /* commands running now */
  int restored;                   /* created from a checkpoint */
  mastra__proc **procs;           /* its running commands */
  size_t nprocs;
  char root[4096];                /* <data>/sandboxes/<id> */
  char dir[4200];                 /* working tree on the host */
  mastra__timer idle_timer;
  mastra__timer checkpoint_timer; /* debounced capture after commands */
  mp_server *srv;
};

/* Start a command in sb (marks activity, counts it as running). notify is
** called for every event of the process; the caller must call
** mp_sandbox_exec_done() once, when it lets go of the process. */
int mp_sandbox_exec(mp_server *srv, mp_sandbox *sb, const mp_exec_spec *spec,
                    mastra__proc_notify notify, void *data,
                    mastra__proc **out, char *err, size_t errlen);
void mp_sandbox_exec_done(mp_server *srv, mp_sandbox *sb, mastra__proc *p);

/* A live (not destroyed) sandbox by our id, or NULL. */
mp_sandbox *mp_sandbox_find(mp_server *srv, const char *id);

/* }====== */

/* {====== the data plane ====== */

/* Answer a WebSocket upgrade on /ws/exec whose lease was validated: queue
** the 101 response selecting `railway-shell`; after the upgrade, run the
** exec session for sb. Returns an MHD_Result. */
int mp_ws_exec_upgrade(mp_server *srv, struct MHD_Connection *conn,
                       mp_sandbox *sb);

/* }====== */

struct mp_server {
  mastra__loop *loop;
  struct MHD_Daemon *httpd;
  mastra__io httpd_io;
  char *data_dir;
  char token[256];
  size_t token_len;
  char base_url[128];  /* http://127.0.0.1:PORT */
  char ws_url[160];    /* ws://127.0.0.1:PORT/ws/exec */
  const mp_driver *driver;
  mp_bucket_store *buckets;
  mp_sandbox *sandboxes;      /* live and destroyed (records are kept) */
  struct mp_lease *leases;
  size_t max_body;            /* JSON bodies */
  size_t max_object;          /* bucket PUT bodies */
  uint64_t lease_ttl_ms;
  int idle_exit_s;            /* exit when idle with no sandboxes; 0: never */
  int64_t last_request_ms;
  volatile int stopping;
};

/* Queue {"error":{"message":...,"type":...}} with status; an MHD_Result
** (httpd.c). */
int mp_send_error(struct MHD_Connection *conn, int status, const char *type,
                  const char *fmt, ...);

/* {====== logging (log.c) ====== */

void mp_iso8601(int64_t ms, char out[32]);
/* one line on stderr: an ISO 8601 time, "mastra-platform: ", the text */
void mp_log(const char *fmt, ...);

/* }====== */

#endif
