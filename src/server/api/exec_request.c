/*
** The exec request (exec_request.h).
*/
#include "api/exec_request.h"

#include <stdio.h>
#include <string.h>

#include "sandbox/env.h"
#include "sandbox/execs.h"

/* a member of obj, with null as absent */
static const cJSON *field(const cJSON *obj, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
  return cJSON_IsNull(v) ? NULL : v;
}

int mp_exec_request_parse(const cJSON *obj, const char *where,
                          int with_timeout, mp_exec_spec *spec, char *why,
                          size_t n) {
  const cJSON *cmd, *cwd, *env, *tsec = NULL;
  char name[64];
  const char *dot = where != NULL ? "." : "";
  if (where == NULL) where = "";
  memset(spec, 0, sizeof *spec);
  if (!cJSON_IsObject(obj)) {
    snprintf(why, n, "field '%s' must be an object", where[0] ? where : "body");
    return -1;
  }
  cmd = field(obj, MP_EXEC_FIELD_COMMAND);
  cwd = field(obj, MP_EXEC_FIELD_CWD);
  env = field(obj, MP_EXEC_FIELD_ENV);
  if (with_timeout) tsec = field(obj, MP_EXEC_FIELD_TIMEOUT);
  if (!cJSON_IsString(cmd) || cmd->valuestring[0] == '\0') {
    snprintf(why, n, "field '%s%s" MP_EXEC_FIELD_COMMAND "' must be a"
             " non-empty string", where, dot);
    return -1;
  }
  if (cwd != NULL && !cJSON_IsString(cwd)) {
    snprintf(why, n, "field '%s%s" MP_EXEC_FIELD_CWD "' must be a string",
             where, dot);
    return -1;
  }
  if (tsec != NULL && (!cJSON_IsNumber(tsec) || !(tsec->valuedouble >= 0))) {
    snprintf(why, n, "field '%s%s" MP_EXEC_FIELD_TIMEOUT "' must be a number"
             " >= 0", where, dot);
    return -1;
  }
  snprintf(name, sizeof name, "%s%s" MP_EXEC_FIELD_ENV, where, dot);
  if (mp_env_check_max(env, name, mp_exec_env_max(), why, n) < 0)
    return -1;
  spec->command = cmd->valuestring;
  spec->cwd = cwd != NULL && cwd->valuestring[0] != '\0' ? cwd->valuestring
                                                         : NULL;
  spec->env = env;
  spec->timeout_ms = tsec != NULL ? (uint64_t)(tsec->valuedouble * 1000) : 0;
  return 0;
}

int mp_exec_resume_parse(const cJSON *obj, const char *where,
                         uint64_t *detach_ms, int *truncate_head, char *why,
                         size_t n) {
  const cJSON *dt = field(obj, MP_EXEC_FIELD_DETACH);
  const cJSON *ov = field(obj, MP_EXEC_FIELD_OVERFLOW);
  const char *dot = where != NULL ? "." : "";
  if (where == NULL) where = "";
  *detach_ms = MP_EXEC_DETACH_DEFAULT_MS;
  *truncate_head = 0;
  if (dt != NULL) {
    if (!cJSON_IsNumber(dt) || dt->valuedouble < 1
        || dt->valuedouble > MP_EXEC_DETACH_MAX_MS
        || dt->valuedouble != (double)(uint64_t)dt->valuedouble) {
      snprintf(why, n, "field '%s%s" MP_EXEC_FIELD_DETACH "' must be an"
               " integer from 1 to %d (ms; default %d)", where, dot,
               (int)MP_EXEC_DETACH_MAX_MS, (int)MP_EXEC_DETACH_DEFAULT_MS);
      return -1;
    }
    *detach_ms = (uint64_t)dt->valuedouble;
  }
  if (ov != NULL) {
    if (!cJSON_IsString(ov) || (strcmp(ov->valuestring, "block") != 0
                                && strcmp(ov->valuestring, "truncate_head")
                                       != 0)) {
      snprintf(why, n, "field '%s%s" MP_EXEC_FIELD_OVERFLOW "' must be"
               " \"block\" (the default) or \"truncate_head\"", where, dot);
      return -1;
    }
    *truncate_head = strcmp(ov->valuestring, "truncate_head") == 0;
  }
  return 0;
}
