/*
** The server's log: one line per event on stderr, with an ISO 8601 time.
*/
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "util/log.h"
#include "util.h"

void mp_iso8601(int64_t ms, char out[32]) {
  time_t secs = (time_t)(ms / 1000);
  char date[24];
  struct tm tm;
  gmtime_r(&secs, &tm);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, 32, "%s.%03uZ", date, (unsigned)(ms % 1000));
}

void mp_log(const char *fmt, ...) {
  char ts[32];
  va_list ap;
  mp_iso8601(mastra__wall_ms(), ts);
  fprintf(stderr, "%s mastra-platform: ", ts);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}
