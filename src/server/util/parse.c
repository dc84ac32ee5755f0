/*
** Values of the command line (parse.h).
*/
#include "util/parse.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

long long mp_parse_size(const char *v) {
  char *end;
  long long n;
  int shift = 0;
  if (v == NULL || *v < '0' || *v > '9') return -1;
  errno = 0;
  n = strtoll(v, &end, 10);
  if (errno == ERANGE) return -1;
  if (*end == 'k' || *end == 'K') shift = 10, end++;
  else if (*end == 'm' || *end == 'M') shift = 20, end++;
  else if (*end == 'g' || *end == 'G') shift = 30, end++;
  /* a size whose suffix would overflow is none */
  if (*end != '\0' || n < 0 || n > (LLONG_MAX >> shift)) return -1;
  return n << shift;
}
