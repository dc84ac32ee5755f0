/*
** A template's definition (template_def.c): its checks, its identity, the
** shell text of its operations and what its sandboxes get from it. For
** template.c; the rest of the server goes through template.h.
*/
#ifndef MP_TEMPLATE_DEF_H
#define MP_TEMPLATE_DEF_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define MP_TEMPLATE_FAMILY_MAX 200

/* Check def ({"schemaVersion":1,"family"?,"operations":[...]}) with
** upstream's limits: -2 and err (naming the operation) when it is not a
** definition, -1 out of memory; else 0 with id (tpl_ and 32 hex digits of
** the SHA-256 of the definition without its family; MP_TEMPLATE_ID_MAX),
** key (its (project, environment, id)'s folder; MP_TEMPLATE_KEY_MAX) and
** family (MP_TEMPLATE_FAMILY_MAX + 1) set. */
int mp_template_def_check(const cJSON *def, const char *project,
                          const char *environment, char *id, char *key,
                          char *family, char *err, size_t n);
/* The shell text of a checked operation o (malloc'd), or NULL with *skip
** set when it runs nothing (setEnvs: added to op_env; cpuCount, memoryMB);
** NULL without *skip: out of memory. setWorkdir sets cwd for the
** operations after it. */
char *mp_template_def_command(const cJSON *o, cJSON *op_env, char *cwd,
                              size_t cwdlen, int *skip);
/* What the sandboxes of a checked def get: setEnvs merged into env, the
** last setWorkdir in workdir, cpuCount and memoryMB (left alone when def
** has none). */
void mp_template_def_runtime(const cJSON *def, cJSON *env, char *workdir,
                             size_t workdirlen, int *cpu_count,
                             int *memory_mb);

#endif
