/*
** Templates of mastra-platform (docs/platform.md "Templates"): records
** keyed by the hash of their definition, and the build that runs a
** definition's operations in a build sandbox and keeps its layer,
** read-only, under DATA/templates/<key>/layer. template.c has the records
** and the build, template_def.c the definition's checks and hash,
** template_store.c the files.
*/
#ifndef MP_TEMPLATE_H
#define MP_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "server.h"

#define MP_TEMPLATE_ID_MAX 40 /* tpl_ and 32 hex digits */
/* the project of the build sandboxes (listed with the others) */
#define MP_TEMPLATE_BUILD_PROJECT ".template-builds"

typedef enum {
  MP_TEMPLATE_BUILDING,
  MP_TEMPLATE_READY,
  MP_TEMPLATE_FAILED
} mp_template_status;

typedef struct mp_template mp_template;

/* Read DATA/templates (at startup, after the sandboxes' records): a
** template whose build did not finish (the server stopped mid-build) is
** failed, its half-made layer removed; the build sandboxes left are
** destroyed. */
void mp_template_load(mp_server *srv);
/* The template of definition in (project, environment), its build started
** when it is new: 0 and *out; -2 the definition is wrong (err names the
** operation); -1 failed (err). build_envs: templateBuildEnvs, or NULL. */
int mp_template_request(mp_server *srv, const char *project,
                        const char *environment, const cJSON *definition,
                        const cJSON *build_envs, mp_template **out, char *err,
                        size_t errlen);
mp_template *mp_template_find(mp_server *srv, const char *project,
                              const char *environment, const char *id);
mp_template_status mp_template_status_of(const mp_template *t);
const char *mp_template_id(const mp_template *t);
const char *mp_template_key(const mp_template *t);
const char *mp_template_error(const mp_template *t);
/* how long a client should wait before it asks again */
int mp_template_retry_after_ms(const mp_template *t);
/* the env of its sandboxes (setEnvs), or NULL */
const cJSON *mp_template_env(const mp_template *t);
/* its sandboxes' limits (cpuCount, memoryMB; 0: none) and default cwd
** (its last setWorkdir, or NULL) */
void mp_template_runtime(const mp_template *t, int *cpu_count, int *memory_mb,
                         const char **workdir);
/* {templateId, status (legacy: queued|building|ready|failed; else
** pending|ready|failed), error, family, environmentId, ...} */
cJSON *mp_template_json(const mp_template *t, int legacy);
/* every template of (project, environment NULL: any) as a JSON array */
cJSON *mp_template_list(mp_server *srv, const char *project,
                        const char *environment);
/* The definition kept under DATA/templates/<key> (template_store.c; a
** checkpoint keeps it to rebuild its template), or NULL. */
cJSON *mp_template_stored_definition(mp_server *srv, const char *key);
/* How many live sandboxes use t's layer. */
size_t mp_template_users(mp_server *srv, const mp_template *t);
/* Cancel t's build (if it runs) and remove t and its layer: 0, or -1 when
** a sandbox uses it (err says which). */
int mp_template_remove(mp_server *srv, mp_template *t, char *err,
                       size_t errlen);
/* Build a failed template again: 0, or -1 (err). */
int mp_template_retry(mp_server *srv, mp_template *t, char *err,
                      size_t errlen);
/* After mp_template_load and the sandboxes' records: the retention sweep,
** now and on a timer (srv->template_retention_days; last used saved). */
void mp_template_start(mp_server *srv);
/* For the inspector: the templates of (project, environment; NULL: any):
** [{templateId, key, family, status, error?, operations, sizeBytes,
** createdAt, builtAt, lastUsedAt (ms), usedBy: [sandbox ids], removeAt
** (ms, or null: never, as things are), retentionDays}] */
cJSON *mp_template_inspect(mp_server *srv, const char *project,
                           const char *environment);
/* At exit: cancel the builds (their layers are removed at the next start). */
void mp_template_free_all(mp_server *srv);

#endif
