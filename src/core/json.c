/*
** Parsing JSON text from outside (see json.h).
*/
#include "json.h"

#include <math.h>

/* whether every number in j and its siblings is finite (cJSON stops at
** CJSON_NESTING_LIMIT levels, so the recursion is bounded) */
static int all_finite(const cJSON *j) {
  for (; j != NULL; j = j->next) {
    if (cJSON_IsNumber(j) && !isfinite(j->valuedouble)) return 0;
    if (j->child != NULL && !all_finite(j->child)) return 0;
  }
  return 1;
}

cJSON *mastra__json_parse(const char *text, size_t len, mastra__json_error *why,
                          size_t *where) {
  const char *end = NULL;
  mastra__json_error e = MASTRA__JSON_OK;
  size_t at = 0;
  cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
  if (j == NULL) {
    const char *p = cJSON_GetErrorPtr();
    e = MASTRA__JSON_SYNTAX;
    at = p != NULL && p >= text && p <= text + len ? (size_t)(p - text) : 0;
  } else {
    while (end < text + len
           && (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r'))
      end++;
    if (end < text + len) {
      e = MASTRA__JSON_TRAILING;
      at = (size_t)(end - text);
    } else if (!all_finite(j)) {
      e = MASTRA__JSON_RANGE;
    }
    if (e != MASTRA__JSON_OK) {
      cJSON_Delete(j);
      j = NULL;
    }
  }
  if (why) *why = e;
  if (where) *where = at;
  return j;
}
