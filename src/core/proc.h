/*
** Child processes: `/bin/sh -c command` in its own process group, with
** stdout and stderr read through pipes as the bytes arrive, an optional
** stdin pipe, a deadline, and a kill that escalates from SIGTERM to SIGKILL.
**
** Lifetime: a process is finished ("done") when its leader has exited and
** both output pipes reached EOF. Until then the leader is left a zombie
** (waitid WNOWAIT), so its pid, which is also the process group id, cannot
** be reused while we may still signal the group. Every state change signals
** the process's id on the loop.
*/
#ifndef MASTRA_PROC_H
#define MASTRA_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "loop.h"

#define MASTRA__PROC_KILL_GRACE_MS 2000
/* Stop reading a pipe while this much output waits for Lua. */
#define MASTRA__PROC_PENDING_MAX (1u << 20)

typedef struct mastra__proc mastra__proc;

/* Called (instead of signalling the id) when something happened to the
** process: output arrived, it exited, stdin became writable, it finished.
** Runs inside the loop's dispatch: it may read output and call the
** functions below (mastra__proc_release included), nothing that blocks. */
typedef void (*mastra__proc_notify)(mastra__proc *p, void *data);

typedef struct mastra__proc_opts {
  const char *command;   /* shell text for /bin/sh -c */
  const char *cwd;       /* NULL: inherit */
  char *const *envp;     /* NULL-terminated "K=V" list */
  int stdin_pipe;        /* 0: /dev/null */
  uint64_t timeout_ms;   /* 0: none */
  /* Linux: the signal the leader gets when the thread that started it
  ** exits (PR_SET_PDEATHSIG, set in the child before exec; kept across
  ** exec). 0: none. Its descendants are not covered. The child is then a
  ** vfork, and the calling thread waits until its exec: the child runs
  ** with the caller's credentials and namespaces until then (a process
  ** of another uid or user namespace cannot stop it and so hold the
  ** thread); whatever would make it reachable from elsewhere belongs
  ** after the exec, in the program it runs. */
  int pdeathsig;
  /* Run exe with argv (NULL-terminated) instead of /bin/sh -c command
  ** (NULL: /bin/sh); `command` is then unused. */
  const char *exe;
  char *const *argv;
  /* > 2: the child gets this descriptor as its descriptor 3 (0: none).
  ** Only without pdeathsig (the posix_spawn path). */
  int fd3;
} mastra__proc_opts;

typedef struct mastra__buf {
  char *data;
  size_t len, cap;
} mastra__buf;

struct mastra__proc {
  mastra__handle handle;
  mastra__loop *loop;
  uint64_t id;
  pid_t pid;
  int pidfd;
  mastra__io exit_io, out_io, err_io, in_io;
  mastra__buf out, err;
  mastra__timer deadline, grace;
  unsigned exited : 1, out_eof : 1, err_eof : 1, done : 1;
  unsigned timed_out : 1, kill_requested : 1, orphan : 1;
  mastra__proc_notify notify; /* NULL: signal `id` on the loop instead */
  void *notify_data;
  int exit_code;    /* 128 + signal when killed by a signal */
  int term_signal;  /* 0 unless killed by a signal */
};

/* Returns 0, or a negative errno (then *out is NULL and `err` says why). */
int mastra__proc_spawn(mastra__loop *loop, const mastra__proc_opts *opts,
                       mastra__proc **out, char *err, size_t errlen);
/* Ask the group to end: SIGTERM now, SIGKILL after the grace period.
** Returns 1 if the process was still running, 0 if it had finished. */
int mastra__proc_kill(mastra__proc *p);
/* Write to stdin without blocking: bytes written, 0 if the pipe is full,
** or a negative errno (-EPIPE once the reader is gone, -EBADF if closed). */
ssize_t mastra__proc_write(mastra__proc *p, const char *data, size_t len);
/* Signal the id once stdin is writable again. */
int mastra__proc_want_write(mastra__proc *p);
void mastra__proc_close_stdin(mastra__proc *p);
/* The caller copied stream->data[0..len): empty it and resume reading a
** pipe that was paused because too much output was waiting. */
void mastra__proc_consumed(mastra__proc *p, mastra__buf *stream);
/* The owner lets go: a running process is killed and reaped by the loop. */
void mastra__proc_release(mastra__proc *p);

#endif
