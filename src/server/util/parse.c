/*
** Values of the command line (parse.h).
*/
#include "util/parse.h"

#include <stdlib.h>

long long mp_parse_size(const char *v) {
  char *end;
  long long n;
  if (v == NULL || *v < '0' || *v > '9') return -1;
  n = strtoll(v, &end, 10);
  if (*end == 'k' || *end == 'K') n <<= 10, end++;
  else if (*end == 'm' || *end == 'M') n <<= 20, end++;
  else if (*end == 'g' || *end == 'G') n <<= 30, end++;
  return *end == '\0' && n >= 0 ? n : -1;
}
