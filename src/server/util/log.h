/*
** The log of mastra-platform (log.c): one line per event on stderr.
*/
#ifndef MP_LOG_H
#define MP_LOG_H

#include <stdint.h>

/* ms since the epoch as 2026-01-02T03:04:05.678Z */
void mp_iso8601(int64_t ms, char out[32]);
/* one line on stderr: an ISO 8601 time, "mastra-platform: ", the text */
void mp_log(const char *fmt, ...);

#endif
