/*
** Comma-separated header values (see http_tokens.h).
*/
#include "http_tokens.h"

#include <string.h>
#include <strings.h>

static int blank(char c) { return c == ' ' || c == '\t'; }

int mastra__list_next(const char **pos, const char *end, const char **tok,
                      size_t *len) {
  const char *v = *pos;
  while (v < end) {
    const char *comma = memchr(v, ',', (size_t)(end - v));
    const char *e = comma ? comma : end;
    while (v < e && blank(*v)) v++;
    while (e > v && blank(e[-1])) e--;
    if (e > v) {
      *tok = v;
      *len = (size_t)(e - v);
      *pos = comma ? comma + 1 : end;
      return 1;
    }
    v = comma ? comma + 1 : end;
  }
  *pos = end;
  return 0;
}

int mastra__list_has(const char *v, size_t vlen, const char *token) {
  size_t tlen = strlen(token), n;
  const char *end = v + vlen, *t;
  while (mastra__list_next(&v, end, &t, &n))
    if (n == tlen && strncasecmp(t, token, tlen) == 0) return 1;
  return 0;
}
