/*
** A template's definition (template_def.h): upstream's limits and one
** check per method, each error naming its operation; the identity (tpl_ and
** the SHA-256 of the definition without its family, and the key of its
** folder); the shell text each operation runs in the build sandbox; and
** what a template's sandboxes get from it (env, workdir, limits). Pure
** functions of the JSON: template.c runs the build with them.
*/
#define _GNU_SOURCE
#include "sandbox/template_def.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/sandbox.h"
#include "sandbox/template.h"
#include "sha256.h"

#define MAX_OPERATIONS 256
#define MAX_STRING (32 * 1024)
#define MAX_ITEMS 512
#define MAX_SERIALIZED (256 * 1024)

/* {====== the definition ====== */

static int bad(char *err, size_t n, int op, const char *method,
               const char *fmt, const char *what) {
  if (op >= 0)
    snprintf(err, n, "templateDefinition: operation #%d (%s): ", op + 1,
             method ? method : "?");
  else
    snprintf(err, n, "templateDefinition: ");
  snprintf(err + strlen(err), n - strlen(err), fmt, what);
  return -2;
}

static int check_str(const cJSON *v, int op, const char *m, const char *what,
                     char *err, size_t n) {
  if (!cJSON_IsString(v)) return bad(err, n, op, m, "%s must be a string", what);
  if (strlen(v->valuestring) > MAX_STRING)
    return bad(err, n, op, m, "%s is longer than 32 KiB", what);
  return 0;
}

/* a list of strings (1 to 512) */
static int check_list(const cJSON *v, int op, const char *m, const char *what,
                      char *err, size_t n) {
  const cJSON *x;
  int k = 0;
  if (!cJSON_IsArray(v))
    return bad(err, n, op, m, "%s must be a list of strings", what);
  cJSON_ArrayForEach(x, v) {
    if (++k > MAX_ITEMS)
      return bad(err, n, op, m, "%s has more than 512 items", what);
    if (check_str(x, op, m, what, err, n) < 0) return -2;
  }
  if (k == 0) return bad(err, n, op, m, "%s is empty", what);
  return 0;
}

static int name_ok(const char *s) {
  size_t i;
  if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
    return 0;
  for (i = 1; s[i]; i++)
    if (!((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z')
          || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
      return 0;
  return 1;
}

static int check_env(const cJSON *v, int op, const char *m, char *err,
                     size_t n) {
  const cJSON *x;
  int k = 0;
  if (!cJSON_IsObject(v)) return bad(err, n, op, m, "%s must be an object", "envs");
  cJSON_ArrayForEach(x, v) {
    if (++k > MAX_ITEMS) return bad(err, n, op, m, "%s has more than 512 names", "envs");
    if (!name_ok(x->string))
      return bad(err, n, op, m, "envs: '%.64s' is not a variable name", x->string);
    if (check_str(x, op, m, "an env value", err, n) < 0) return -2;
  }
  return 0;
}

static int check_flags(const cJSON *v, const char *const *known, int op,
                       const char *m, char *err, size_t n) {
  const cJSON *x;
  if (v == NULL || cJSON_IsNull(v)) return 0;
  if (!cJSON_IsObject(v)) return bad(err, n, op, m, "%s must be an object", "options");
  cJSON_ArrayForEach(x, v) {
    int i, ok = 0;
    for (i = 0; known[i]; i++) ok |= strcmp(known[i], x->string) == 0;
    if (!ok) return bad(err, n, op, m, "unknown option '%.64s'", x->string);
    if (!cJSON_IsBool(x))
      return bad(err, n, op, m, "option '%.64s' must be a boolean", x->string);
  }
  return 0;
}

static const char *const apt_flags[] = {"noInstallRecommends", "fixMissing", NULL};
static const char *const pip_flags[] = {"g", NULL};
static const char *const npm_flags[] = {"g", "dev", NULL};

static int check_op(const cJSON *o, int i, char *err, size_t n) {
  const cJSON *mv = cJSON_GetObjectItemCaseSensitive(o, "method");
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "args");
  const cJSON *a0, *a1;
  const char *m;
  if (!cJSON_IsObject(o) || !cJSON_IsString(mv))
    return bad(err, n, i, NULL, "%s", "must be {\"method\", \"args\"}");
  m = mv->valuestring;
  if (args != NULL && !cJSON_IsArray(args))
    return bad(err, n, i, m, "%s must be an array", "args");
  if (cJSON_GetArraySize(args) > 2) return bad(err, n, i, m, "%s", "too many args");
  a0 = cJSON_GetArrayItem(args, 0);
  a1 = cJSON_GetArrayItem(args, 1);
  if (strcmp(m, "runCmd") == 0) {
    if (cJSON_IsArray(a0)) return check_list(a0, i, m, "command", err, n);
    if (check_str(a0, i, m, "command", err, n) < 0) return -2;
    if (a0->valuestring[0] == '\0') return bad(err, n, i, m, "%s is empty", "command");
    return 0;
  }
  if (strcmp(m, "setWorkdir") == 0) {
    if (check_str(a0, i, m, "path", err, n) < 0) return -2;
    if (a0->valuestring[0] != '/' || strlen(a0->valuestring) >= 1000)
      return bad(err, n, i, m, "%s must be absolute (under 1000 bytes)", "path");
    return 0;
  }
  if (strcmp(m, "setEnvs") == 0) return check_env(a0, i, m, err, n);
  if (strcmp(m, "aptInstall") == 0)
    return check_list(a0, i, m, "packages", err, n) < 0 ? -2
           : check_flags(a1, apt_flags, i, m, err, n);
  if (strcmp(m, "pipInstall") == 0 || strcmp(m, "npmInstall") == 0) {
    if (a0 != NULL && !cJSON_IsNull(a0)
        && check_list(a0, i, m, "packages", err, n) < 0)
      return -2;
    return check_flags(a1, m[0] == 'p' ? pip_flags : npm_flags, i, m, err, n);
  }
  if (strcmp(m, "cpuCount") == 0 || strcmp(m, "memoryMB") == 0) {
    double max = m[0] == 'c' ? 64 : 1048576;
    if (!cJSON_IsNumber(a0) || a0->valuedouble < 1 || a0->valuedouble > max
        || a0->valuedouble != (double)(long)a0->valuedouble)
      return bad(err, n, i, m, "%s must be a positive integer within its bound",
                 m[0] == 'c' ? "count" : "megabytes");
    return 0;
  }
  return bad(err, n, i, m, "unknown method '%.64s'", m);
}

int mp_template_def_check(const cJSON *def, const char *project,
                          const char *environment, char *id, char *key,
                          char *family, char *err, size_t n) {
  const cJSON *sv, *ops, *fam, *o;
  cJSON *ident;
  char *text, hex[65];
  int i = 0;
  size_t len;
  if (!cJSON_IsObject(def))
    return bad(err, n, -1, NULL, "%s", "must be an object");
  sv = cJSON_GetObjectItemCaseSensitive(def, "schemaVersion");
  if (!cJSON_IsNumber(sv) || sv->valuedouble != 1)
    return bad(err, n, -1, NULL, "%s", "schemaVersion must be 1");
  fam = cJSON_GetObjectItemCaseSensitive(def, "family");
  family[0] = '\0';
  if (fam != NULL && !cJSON_IsNull(fam)) {
    if (!cJSON_IsString(fam) || strlen(fam->valuestring) > MP_TEMPLATE_FAMILY_MAX)
      return bad(err, n, -1, NULL, "%s", "family must be a string of at most 200 characters");
    snprintf(family, MP_TEMPLATE_FAMILY_MAX + 1, "%s", fam->valuestring);
  }
  ops = cJSON_GetObjectItemCaseSensitive(def, "operations");
  if (!cJSON_IsArray(ops) || cJSON_GetArraySize(ops) == 0)
    return bad(err, n, -1, NULL, "%s", "operations must be a non-empty array");
  if (cJSON_GetArraySize(ops) > MAX_OPERATIONS)
    return bad(err, n, -1, NULL, "%s", "more than 256 operations");
  cJSON_ArrayForEach(o, ops) {
    if (check_op(o, i, err, n) < 0) return -2;
    i++;
  }
  /* identity: the definition without its family */
  ident = cJSON_CreateObject();
  cJSON_AddNumberToObject(ident, "schemaVersion", 1);
  cJSON_AddItemToObject(ident, "operations", cJSON_Duplicate(ops, 1));
  text = cJSON_PrintUnformatted(ident);
  cJSON_Delete(ident);
  if (text == NULL) {
    snprintf(err, n, "out of memory");
    return -1;
  }
  len = strlen(text);
  if (len > MAX_SERIALIZED) {
    free(text);
    return bad(err, n, -1, NULL, "%s", "more than 256 KiB serialized");
  }
  mastra__sha256_hex(text, len, hex);
  free(text);
  snprintf(id, MP_TEMPLATE_ID_MAX, "tpl_%.32s", hex);
  {
    size_t kl = strlen(project) + strlen(environment) + strlen(id) + 3;
    char *k = malloc(kl);
    if (k == NULL) {
      snprintf(err, n, "out of memory");
      return -1;
    }
    snprintf(k, kl, "%s\n%s\n%s", project, environment, id);
    mastra__sha256_hex(k, strlen(k), hex);
    free(k);
  }
  snprintf(key, MP_TEMPLATE_KEY_MAX, "%.32s", hex);
  return 0;
}

/* }====== */

/* {====== what the operations do ====== */

/* 'text' quoted for sh, appended to b */
static void put_quoted(char **b, size_t *len, size_t *cap, const char *s) {
  size_t need = *len + strlen(s) * 4 + 4;
  char *o;
  if (need > *cap) {
    char *nb = realloc(*b, need * 2);
    if (nb == NULL) return;
    *b = nb;
    *cap = need * 2;
  }
  o = *b + *len;
  *o++ = ' ';
  *o++ = '\'';
  for (; *s; s++) {
    if (*s == '\'') {
      memcpy(o, "'\\''", 4);
      o += 4;
    } else {
      *o++ = *s;
    }
  }
  *o++ = '\'';
  *o = '\0';
  *len = (size_t)(o - *b);
}

static char *packages_cmd(const char *head, const cJSON *list,
                          const char *none) {
  size_t cap = strlen(head) + 256, len;
  char *b = malloc(cap);
  const cJSON *x;
  if (b == NULL) return NULL;
  snprintf(b, cap, "%s", head);
  len = strlen(b);
  if (!cJSON_IsArray(list)) {
    char *nb = realloc(b, len + strlen(none) + 1);
    if (nb == NULL) {
      free(b);
      return NULL;
    }
    strcpy(nb + len, none);
    return nb;
  }
  cJSON_ArrayForEach(x, list) put_quoted(&b, &len, &cap, x->valuestring);
  return b;
}

static int flag(const cJSON *opts, const char *name) {
  return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(opts, name));
}

char *mp_template_def_command(const cJSON *o, cJSON *op_env, char *cwd,
                              size_t cwdlen, int *skip) {
  const char *m = cJSON_GetObjectItemCaseSensitive(o, "method")->valuestring;
  const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "args");
  const cJSON *a0 = cJSON_GetArrayItem(args, 0), *a1 = cJSON_GetArrayItem(args, 1);
  char head[256];
  *skip = 0;
  if (strcmp(m, "runCmd") == 0) {
    if (cJSON_IsString(a0)) return strdup(a0->valuestring);
    {
      size_t cap = 64, len = 0;
      char *b = malloc(cap);
      const cJSON *x;
      if (b == NULL) return NULL;
      len = (size_t)snprintf(b, cap, "set -e");
      cJSON_ArrayForEach(x, a0) {
        size_t need = len + strlen(x->valuestring) + 2;
        if (need > cap) {
          char *nb = realloc(b, need * 2);
          if (nb == NULL) {
            free(b);
            return NULL;
          }
          b = nb;
          cap = need * 2;
        }
        len += (size_t)snprintf(b + len, cap - len, "\n%s", x->valuestring);
      }
      return b;
    }
  }
  if (strcmp(m, "setWorkdir") == 0) {
    size_t len = 0, cap = 16;
    char *b = malloc(cap);
    if (b == NULL) return NULL;
    strcpy(b, "mkdir -p");
    len = strlen(b);
    cap = len + 1;
    put_quoted(&b, &len, &cap, a0->valuestring);
    snprintf(cwd, cwdlen, "%s", a0->valuestring);
    return b;
  }
  if (strcmp(m, "setEnvs") == 0) {
    const cJSON *x;
    cJSON_ArrayForEach(x, a0) {
      cJSON_DeleteItemFromObjectCaseSensitive(op_env, x->string);
      cJSON_AddStringToObject(op_env, x->string, x->valuestring);
    }
    *skip = 1;
    return NULL;
  }
  if (strcmp(m, "aptInstall") == 0) {
    snprintf(head, sizeof head, "apt-get update -q && DEBIAN_FRONTEND=noninteractive"
             " apt-get install -y -q%s%s", flag(a1, "noInstallRecommends")
             ? " --no-install-recommends" : "", flag(a1, "fixMissing")
             ? " --fix-missing" : "");
    return packages_cmd(head, a0, "");
  }
  if (strcmp(m, "pipInstall") == 0) {
    /* PEP 668's "externally managed" is the build's to override */
    snprintf(head, sizeof head, "PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install"
             " --no-input --disable-pip-version-check%s",
             flag(a1, "g") ? "" : " --root-user-action=ignore");
    return packages_cmd(head, a0, " -r requirements.txt");
  }
  if (strcmp(m, "npmInstall") == 0) {
    snprintf(head, sizeof head, "npm install --no-audit --no-fund%s%s",
             flag(a1, "g") ? " -g" : "", flag(a1, "dev") ? " --save-dev" : "");
    return packages_cmd(head, a0, "");
  }
  *skip = 1; /* cpuCount, memoryMB: the sandboxes' limits */
  return NULL;
}

void mp_template_def_runtime(const cJSON *def, cJSON *env, char *workdir,
                             size_t workdirlen, int *cpu_count,
                             int *memory_mb) {
  const cJSON *o, *ops = cJSON_GetObjectItemCaseSensitive(def, "operations");
  cJSON_ArrayForEach(o, ops) {
    const char *m = cJSON_GetObjectItemCaseSensitive(o, "method")->valuestring;
    const cJSON *a0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "args"), 0);
    if (strcmp(m, "setEnvs") == 0) {
      const cJSON *x;
      cJSON_ArrayForEach(x, a0) {
        cJSON_DeleteItemFromObjectCaseSensitive(env, x->string);
        cJSON_AddStringToObject(env, x->string, x->valuestring);
      }
    } else if (strcmp(m, "setWorkdir") == 0) {
      snprintf(workdir, workdirlen, "%s", a0->valuestring);
    } else if (strcmp(m, "cpuCount") == 0) {
      *cpu_count = (int)a0->valuedouble;
    } else if (strcmp(m, "memoryMB") == 0) {
      *memory_mb = (int)a0->valuedouble;
    }
  }
}

/* }====== */
