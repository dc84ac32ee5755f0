/*
** The identity of a resumable exec's request (execs.h): the syntax of an
** exec id, and the fingerprint that tells a repeated start (the same
** request again: it attaches) from another request under the same id
** (refused). The fingerprint is the SHA-256 of the request's canonical
** JSON, hashed as it is made.
*/
#include "sandbox/execs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "sha256.h"

int mp_exec_id_valid(const char *id) {
  size_t i, n = id != NULL ? strlen(id) : 0;
  if (n == 0 || n > MP_EXEC_ID_MAX) return 0;
  for (i = 0; i < n; i++) {
    char c = id[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
          || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == ':'
          || c == '-'))
      return 0;
  }
  return 1;
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A JSON string as cJSON prints it (print_string_ptr): '"', '\\' and
** \b \f \n \r \t escaped with a backslash, the other bytes below 32 as
** \u00xx, every other byte as it is; runs of plain bytes go to the hash
** whole. */
static void hash_string(mastra__sha256_ctx *c, const char *s) {
  const unsigned char *p = (const unsigned char *)s, *run;
  mastra__sha256_update(c, "\"", 1);
  for (;;) {
    char esc[8];
    run = p;
    while (*p >= 32 && *p != '"' && *p != '\\') p++;
    if (p > run) mastra__sha256_update(c, run, (size_t)(p - run));
    if (*p == '\0') break;
    switch (*p) {
    case '"': memcpy(esc, "\\\"", 3); break;
    case '\\': memcpy(esc, "\\\\", 3); break;
    case '\b': memcpy(esc, "\\b", 3); break;
    case '\f': memcpy(esc, "\\f", 3); break;
    case '\n': memcpy(esc, "\\n", 3); break;
    case '\r': memcpy(esc, "\\r", 3); break;
    case '\t': memcpy(esc, "\\t", 3); break;
    default: snprintf(esc, sizeof esc, "\\u%04x", *p); break;
    }
    mastra__sha256_update(c, esc, strlen(esc));
    p++;
  }
  mastra__sha256_update(c, "\"", 1);
}

/* {"command":..,"cwd":..|null,"env":{sorted},"stdin_mode":"pipe"|"null"},
** the text cJSON's unformatted printing gives (one text for one request),
** fed to the hash as it is made: nothing of a request of 1 MB is copied
** (this runs on the loop, for every exec) */
void mp_exec_fingerprint(const mp_exec_spec *spec, char out[65]) {
  mastra__sha256_ctx c;
  const cJSON *it;
  const char **names = NULL;
  size_t n = 0, i;
  mastra__sha256_init(&c);
  cJSON_ArrayForEach(it, spec->env) n++;
  if (n > 0 && (names = calloc(n, sizeof *names)) == NULL) {
    memset(out, '0', 64); /* out of memory: a fingerprint no request has */
    out[64] = '\0';
    return;
  }
  if (spec->command != NULL) {
    mastra__sha256_update(&c, "{\"command\":", 11);
    hash_string(&c, spec->command);
    mastra__sha256_update(&c, ",\"cwd\":", 7);
  } else {
    mastra__sha256_update(&c, "{\"cwd\":", 7);
  }
  if (spec->cwd != NULL)
    hash_string(&c, spec->cwd);
  else
    mastra__sha256_update(&c, "null", 4);
  mastra__sha256_update(&c, ",\"env\":{", 8);
  if (names != NULL) {
    n = 0;
    cJSON_ArrayForEach(it, spec->env) names[n++] = it->string;
    qsort(names, n, sizeof *names, cmp_names);
    for (i = 0; i < n; i++) {
      it = cJSON_GetObjectItemCaseSensitive(spec->env, names[i]);
      if (i > 0) mastra__sha256_update(&c, ",", 1);
      hash_string(&c, names[i]);
      mastra__sha256_update(&c, ":", 1);
      hash_string(&c, cJSON_IsString(it) && it->valuestring != NULL
                          ? it->valuestring : "");
    }
    free(names);
  }
  mastra__sha256_update(&c, "},\"stdin_mode\":", 15);
  hash_string(&c, spec->stdin_pipe ? "pipe" : "null");
  mastra__sha256_update(&c, "}", 1);
  mastra__sha256_final_hex(&c, out);
}
