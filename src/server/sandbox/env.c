/*
** The environment of a sandbox command (env.h): checking an env object
** against its bounds, and merging the creation env with the exec env. A
** merge of 110,000 names once took 12.7 s on the server's thread (each
** name searched the list so far); it is one pass now, with an index.
*/
#include "sandbox/env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "util/index.h"

int mp_env_check(const cJSON *env, const char *field, char *why,
                 size_t n) {
  return mp_env_check_max(env, field, MP_ENV_MAX_BYTES, why, n);
}

int mp_env_check_max(const cJSON *env, const char *field, size_t max_bytes,
                     char *why, size_t n) {
  const cJSON *it;
  size_t names = 0, bytes = 0;
  if (env == NULL || cJSON_IsNull(env)) return 0;
  if (!cJSON_IsObject(env)) {
    snprintf(why, n, "field '%s' must be an object of strings", field);
    return -1;
  }
  cJSON_ArrayForEach(it, env) {
    if (!cJSON_IsString(it)
        || mastra__env_name_check(it->string, strlen(it->string)) != NULL) {
      snprintf(why, n, "field '%s.%s' must be a string (and the name must"
               " be non-empty without '=')", field, it->string);
      return -1;
    }
    if (++names > MP_ENV_MAX_NAMES) {
      snprintf(why, n, "field '%s' has more than %d variables", field,
               MP_ENV_MAX_NAMES);
      return -1;
    }
    bytes += strlen(it->string) + strlen(it->valuestring) + 2;
    if (bytes > max_bytes) {
      snprintf(why, n, "field '%s' is larger than %zu bytes (NAME=value"
               " strings, each with its NUL)", field, max_bytes);
      return -1;
    }
  }
  return 0;
}

size_t mp_exec_env_max(void) {
  /* the command line, a creation env, the pointers and some slack */
  const size_t beside = 128 * 1024 + MP_ENV_MAX_BYTES + 64 * 1024;
  size_t max = MP_EXEC_ENV_MAX_BYTES;
  struct rlimit rl;
  if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    size_t room = (size_t)(rl.rlim_cur / 4);
    room = room > beside ? room - beside : 0;
    if (room < max) max = room;
  }
  return max < MP_ENV_MAX_BYTES ? MP_ENV_MAX_BYTES : max;
}

static char *env_string(const char *name, const char *value) {
  size_t k = strlen(name), v = strlen(value);
  char *kv = malloc(k + v + 2);
  if (kv == NULL) return NULL;
  memcpy(kv, name, k);
  kv[k] = '=';
  memcpy(kv + k + 1, value, v + 1);
  return kv;
}

static int env_append(mastra__envp *e, const char *name, const char *value) {
  char *kv = env_string(name, value);
  if (kv == NULL) return -1;
  e->v[e->n++] = kv;
  e->v[e->n] = NULL;
  return 0;
}

int mp_env_build(mastra__envp *e, const char *marker, const cJSON *base,
                 const cJSON *extra) {
  const cJSON *maps[2];
  const cJSON *it, *path;
  mp_index last = {NULL, 0, 0, 0};
  size_t m, count = 2;
  int rc = -1;
  maps[0] = base;
  maps[1] = extra;
  for (m = 0; m < 2; m++) {
    if (maps[m] == NULL) continue;
    cJSON_ArrayForEach(it, maps[m]) {
      if (!cJSON_IsString(it) || it->string == NULL
          || mastra__env_name_check(it->string, strlen(it->string)) != NULL
          || strcmp(it->string, MP_MARKER_VAR) == 0)
        continue;
      if (mp_index_put(&last, it->string, (void *)it) < 0) goto out;
      count++;
    }
  }
  e->v = calloc(count + 1, sizeof *e->v);
  if (e->v == NULL) goto out;
  e->cap = count + 1;
  path = mp_index_get(&last, "PATH");
  if (env_append(e, MP_MARKER_VAR, marker) < 0
      || env_append(e, "PATH", path ? path->valuestring : MP_DEFAULT_PATH) < 0)
    goto out;
  for (m = 0; m < 2; m++) {
    if (maps[m] == NULL) continue;
    cJSON_ArrayForEach(it, maps[m]) {
      if (!cJSON_IsString(it) || it->string == NULL
          || strcmp(it->string, "PATH") == 0
          || mp_index_get(&last, it->string) != it)
        continue;
      if (env_append(e, it->string, it->valuestring) < 0) goto out;
    }
  }
  rc = 0;
out:
  mp_index_free(&last);
  return rc;
}
