/*
** Resumable execs of a sandbox (execs.c): the "exec-resume/1" extension
** (docs/platform.md "Resumable execs"). An exec is named by its client's
** exec_id within its sandbox, recorded with the fingerprint of its request
** before its command is spawned, and owns that command: its output goes to
** one spool file a stream (SANDBOX_ROOT/execs/, laid out by spool.h), whatever
** socket is attached, so a socket that closes detaches it and a new one
** replays from the offsets it names. The exec WebSocket (api/exec_ws.c)
** attaches and reads; the record files make a server restart answer
** "lost" for the execs that died with it.
*/
#ifndef MP_EXECS_H
#define MP_EXECS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sandbox/sandbox.h"
#include "sandbox/spool.h"

#define MP_EXEC_EXTENSION "exec-resume/1"
#define MP_EXEC_ID_MAX 128
#define MP_EXEC_DETACH_DEFAULT_MS 300000
#define MP_EXEC_DETACH_MAX_MS 3600000
#define MP_EXEC_ABANDON_KILL_MS 10000  /* TERM, then KILL this much later */
#define MP_EXEC_LOG_MAX_DEFAULT (256ull << 20)
#define MP_EXEC_LOG_MAX_MIN (64ull << 10)
#define MP_EXEC_LOG_TOTAL_DEFAULT (1ull << 30)
#define MP_EXEC_RETAIN_DEFAULT_MS (15 * 60 * 1000)
/* --exec-ping: exec_ws.c pings an attached resumable exec this often */
#define MP_EXEC_PING_DEFAULT_MS 10000

enum { MP_EXEC_STDOUT = 0, MP_EXEC_STDERR = 1 };
typedef enum { MP_EXEC_RUNNING, MP_EXEC_EXITED, MP_EXEC_LOST } mp_exec_state;

/* The one socket attached to an exec. changed: new output, the exit, or
** the command's stdin became writable; taken: the exec lets go of this
** socket (another attached: 4001 "superseded"; the exec was deleted), and
** the socket must not touch the exec again. Both run on the loop, inside
** whatever entry point changed the exec. */
typedef struct mp_exec_watcher {
  void (*changed)(void *data);
  void (*taken)(void *data, uint16_t code, const char *reason);
  void *data;
} mp_exec_watcher;

typedef struct mp_exec mp_exec;

/* A GET .../output?wait_ms= waiting for the stream to pass `off`
** (routes_exec.c): ready is called once, from the loop, when it did, the
** exec ended or went, or the server stops; `exec` is then NULL. */
typedef struct mp_exec_poll mp_exec_poll;
struct mp_exec_poll {
  mp_exec_poll *next;
  mp_exec *exec;
  int stream;
  uint64_t off;
  void (*ready)(mp_exec_poll *p);
};

struct mp_exec {
  mp_exec *next, **pprev;      /* sb->execs; pprev: what points at it */
  /* the server's execs_running while proc is set (run_pprev NULL
  ** otherwise), or its execs_ended_* while it ended and retains output
  ** (in_ended): the walks of room made and of eviction see only these */
  mp_exec *run_next, **run_pprev;
  mp_exec *ended_next, *ended_prev;
  mp_sandbox *sb;
  char id[MP_EXEC_ID_MAX + 1];
  char fingerprint[65];        /* sha256 of the canonical request */
  mp_exec_state state;
  int exit_code;
  const char *reason;          /* exited|signaled|timeout|abandoned|
                               ** output_lost (a spool could not be
                               ** written: the command was killed) */
  int64_t started_ms, ended_ms;
  mastra__proc *proc;          /* while it runs: ours */
  mp_spool spool[2];           /* stdout, stderr: the retained
                               ** [start, end) of each; fd -1: none */
  uint64_t read_to[2];         /* how far a socket was sent each stream:
                               ** Railway's "last read" (not in the record) */
  uint64_t detach_ms;          /* with nobody attached this long: TERM */
  mastra__timer detach_timer;  /* the detach timeout, then the KILL */
  mastra__timer retain_timer;  /* an ended exec's record goes */
  mastra__timer wake_timer;    /* room was made: pump it from the loop */
  int output_errno;            /* why a spool could not be written; 0 */
  uint64_t stdin_off;          /* stdin bytes written to its pipe */
  unsigned stdin_closed : 1;   /* its stdin is closed */
  unsigned abandoned : 1;      /* the detach timeout ran out */
  unsigned truncate_head : 1;  /* past its bound the oldest output goes */
  unsigned attached : 1;       /* watcher is set */
  unsigned in_ended : 1;       /* on the server's execs_ended_* list */
  mp_exec_watcher watcher;
  mp_exec_poll *polls;         /* the long polls waiting on it */
};

/* 1 if id is 1-128 characters of [A-Za-z0-9._:-] */
int mp_exec_id_valid(const char *id);
/* sha256 (hex) of the canonical JSON {command,cwd,env,stdin_mode} */
void mp_exec_fingerprint(const mp_exec_spec *spec, char out[65]);
/* sb's exec of that id: in memory, else its record file (a server that
** died left it: one that ran is now "lost"); or NULL */
mp_exec *mp_exec_find(mp_sandbox *sb, const char *id);
/* Record the exec (its file too), then spawn its command: 0 and *out, or
** -1 and why in err (nothing is recorded then). */
int mp_exec_start(mp_sandbox *sb, const char *id, const char *fingerprint,
                  const mp_exec_spec *spec, uint64_t detach_ms,
                  mp_exec **out, char *err, size_t errlen);
/* w becomes its socket; the previous one is taken (4001 "superseded"). */
void mp_exec_attach(mp_exec *e, const mp_exec_watcher *w);
/* The socket of data goes: a running exec starts its detach timeout. */
void mp_exec_detach(mp_exec *e, void *data);
/* Started with nobody attached (POST .../execs): its detach timeout runs. */
void mp_exec_unattended(mp_exec *e);
/* DELETE: the record goes (a running command is killed first). */
void mp_exec_delete(mp_exec *e);
/* p waits on e (p->stream, p->off set); cancel: it waits no more */
void mp_exec_poll_add(mp_exec *e, mp_exec_poll *p);
void mp_exec_poll_cancel(mp_exec_poll *p);
/* the server stops: every poll is ready now */
void mp_execs_release_polls(mp_server *srv);
/* Up to n bytes of stream at off (start <= off < end): how many, or -1. */
ssize_t mp_exec_read(mp_exec *e, int stream, uint64_t off, void *buf,
                     size_t n);
/* The client holds these: the spool below them may go. */
void mp_exec_ack(mp_exec *e, uint64_t out, uint64_t err);
/* SIGTERM or SIGKILL to its process group: 1 sent, 0 not running. */
int mp_exec_signal(mp_exec *e, int sig);
/* Every exec of sb goes (running ones are killed), files and all. */
void mp_execs_drop(mp_sandbox *sb, int remove_files);
const char *mp_exec_state_name(const mp_exec *e);

#endif
