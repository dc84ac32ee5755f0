/*
** Parsing JSON text from outside (request bodies, WebSocket messages, API
** answers, records on disk): cJSON, plus the checks cJSON leaves to its
** caller.
*/
#ifndef MASTRA_JSON_H
#define MASTRA_JSON_H

#include <stddef.h>

#include <cjson/cJSON.h>

typedef enum mastra__json_error {
  MASTRA__JSON_OK,
  MASTRA__JSON_SYNTAX,   /* not JSON (cJSON refused it) */
  MASTRA__JSON_TRAILING, /* something other than white space after the value */
  MASTRA__JSON_RANGE     /* a number with no double (1e999 parses as inf) */
} mastra__json_error;

/* Parse text[0..len) as exactly one JSON value. NULL on failure, with *why
** (if not NULL) saying which, and *where (if not NULL) the byte offset of
** the problem (0 for a range error). */
cJSON *mastra__json_parse(const char *text, size_t len, mastra__json_error *why,
                          size_t *where);

#endif
