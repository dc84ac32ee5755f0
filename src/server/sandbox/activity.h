/*
** What happened in each environment (activity.c), for the inspector: the
** exec sessions (the last N per environment) and the provisioning
** failures (the last MP_FAILURES_PER_ENV per environment), in memory.
** sandbox.c records both; the inspector lists them and retries failures.
*/
#ifndef MP_ACTIVITY_H
#define MP_ACTIVITY_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "proc.h"
#include "server.h"

#define MP_FAILURES_PER_ENV 50

/* Keep the last sessions_per_env sessions of each environment (>= 1). */
int mp_activity_start(mp_server *srv, size_t sessions_per_env);
void mp_activity_stop(mp_server *srv);

/* {====== exec sessions ====== */

/* A command started in sb as process p (p identifies it until it ends). */
void mp_session_begin(mp_server *srv, const mp_sandbox *sb,
                      const char *command, const mastra__proc *p);
/* The command of p was let go of: it exited (p->done: its exit code, or
** timed out by the server) or was killed before it ended (its client
** closed the exec: a client-side timeout or a cancel). */
void mp_session_end(mp_server *srv, const mp_sandbox *sb,
                    const mastra__proc *p);
/* A command that could not start; why says why. */
void mp_session_refused(mp_server *srv, const mp_sandbox *sb,
                        const char *command, const char *why);
/* [{id, sandboxId, recoveryKey, command, status, exitCode, startedAt,
** endedAt, durationMs, message}] of (project, environment), newest first. */
cJSON *mp_session_list(mp_server *srv, const char *project,
                       const char *environment);

/* }====== */

/* {====== provisioning failures ====== */

/* Try the failed operation again with args (the copy kept with the
** failure): 0 done, -1 failed (err says why; the failing path records a
** new failure itself). */
typedef int (*mp_failure_retry_fn)(mp_server *srv, const cJSON *args,
                                   char *err, size_t errlen);

/* Record a provisioning failure of (project, environment): kind names
** what failed ("create", "restore", a driver's "base" ...), subject what
** it failed on (a sandbox id, a recovery key, a base name; "" if none),
** message why. retry (or NULL: not retryable) is called with a copy of
** args (or NULL) when someone asks for a retry. Returns its id. */
uint64_t mp_failure_record(mp_server *srv, const char *project,
                           const char *environment, const char *kind,
                           const char *subject, const char *message,
                           mp_failure_retry_fn retry, const cJSON *args);
/* The failed create of spec (kind "create"), or the failed restore of sb
** (kind "restore": sb's options and seed): recorded with the create's
** options as the args of retry (see mp_failure_create_spec). */
struct mp_create_spec;
void mp_failure_record_create(mp_server *srv, const char *kind,
                              const char *subject,
                              const struct mp_create_spec *spec,
                              const char *message, mp_failure_retry_fn retry);
void mp_failure_record_restore(mp_server *srv, const mp_sandbox *sb,
                               const char *message, mp_failure_retry_fn retry);
/* The create options that args (of a create or restore failure) hold; its
** strings point into args. -1 (err says why) if args holds none. */
int mp_failure_create_spec(const cJSON *args, struct mp_create_spec *spec,
                           char *err, size_t errlen);
/* [{id, kind, subject, message, at, retryable, retries}], newest first */
cJSON *mp_failure_list(mp_server *srv, const char *project,
                       const char *environment);
/* Retry failure id: 0 it succeeded (the failure is removed), -1 it failed
** again (err says why; the failure stays, its retries counted), -2 no
** such failure, -3 it cannot be retried. */
int mp_failure_retry(mp_server *srv, uint64_t id, char *err, size_t errlen);

/* }====== */

/* Add {projectId, environmentId} to the array envs for every environment
** with a session or a failure that is not in it yet. */
void mp_activity_environments(mp_server *srv, cJSON *envs);
/* Whether envs (an array of {projectId, environmentId}) holds this one. */
int mp_env_listed(const cJSON *envs, const char *project,
                  const char *environment);

#endif
