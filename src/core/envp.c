/*
** Environments for child processes (see envp.h).
*/
#include "envp.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *mastra__env_name_check(const char *name, size_t len) {
  if (len == 0) return "the name is empty";
  if (memchr(name, '=', len) != NULL) return "the name contains '='";
  if (memchr(name, '\0', len) != NULL) return "the name contains a NUL byte";
  return NULL;
}

int mastra__envp_set(mastra__envp *e, const char *name, const char *value) {
  size_t klen = strlen(name), vlen = strlen(value), i;
  char *kv;
  if (mastra__env_name_check(name, klen) != NULL) {
    errno = EINVAL;
    return -1;
  }
  kv = malloc(klen + vlen + 2);
  if (kv == NULL) return -1;
  memcpy(kv, name, klen);
  kv[klen] = '=';
  memcpy(kv + klen + 1, value, vlen + 1);
  for (i = 0; i < e->n; i++) {
    if (strncmp(e->v[i], name, klen) == 0 && e->v[i][klen] == '=') {
      free(e->v[i]);
      e->v[i] = kv;
      return 0;
    }
  }
  if (e->n + 1 >= e->cap) {
    size_t cap = e->cap ? e->cap * 2 : 16;
    char **v = realloc(e->v, cap * sizeof *v);
    if (v == NULL) {
      free(kv);
      return -1;
    }
    e->v = v;
    e->cap = cap;
  }
  e->v[e->n++] = kv;
  e->v[e->n] = NULL;
  return 0;
}

char *const *mastra__envp_list(mastra__envp *e) {
  static char *const empty[] = {NULL};
  return e->v != NULL ? e->v : empty;
}

void mastra__envp_free(mastra__envp *e) {
  size_t i;
  for (i = 0; i < e->n; i++) free(e->v[i]);
  free(e->v);
  e->v = NULL;
  e->n = e->cap = 0;
}
