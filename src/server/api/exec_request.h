/*
** The exec request (exec_request.c): the one parser of the fields of a
** command to run, for the exec WebSocket's init_exec and the legacy exec
** route alike, with one wording of its errors.
*/
#ifndef MP_EXEC_REQUEST_H
#define MP_EXEC_REQUEST_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "sandbox/sandbox.h"

/* the request's fields (names as on the wire) */
#define MP_EXEC_FIELD_COMMAND "command"    /* shell text, not empty */
#define MP_EXEC_FIELD_CWD "cwd"            /* a string, or null */
#define MP_EXEC_FIELD_ENV "env"            /* names to strings, or null */
#define MP_EXEC_FIELD_TIMEOUT "timeoutSec" /* seconds >= 0, or null */
/* a resumable start's own (exec-resume/1; not part of the fingerprint) */
#define MP_EXEC_FIELD_DETACH "detach_timeout_ms" /* 1..3600000, or null */
#define MP_EXEC_FIELD_OVERFLOW "overflow" /* "block"|"truncate_head"|null */

/* Parse obj into spec (whose strings point into obj; stdin_pipe is left
** 0). where names obj in messages ("data" for init_exec's, NULL for a
** body); with_timeout: whether timeoutSec is read (the legacy route).
** 0, or -1 and why ("field 'data.cwd' must be a string"). */
int mp_exec_request_parse(const cJSON *obj, const char *where,
                          int with_timeout, mp_exec_spec *spec, char *why,
                          size_t n);

/* The resumable start's fields of obj (init_exec's data, the POST
** .../execs body): *detach_ms (default MP_EXEC_DETACH_DEFAULT_MS) and
** *truncate_head (overflow "truncate_head"; default "block"). where as
** for mp_exec_request_parse. 0, or -1 and why. */
int mp_exec_resume_parse(const cJSON *obj, const char *where,
                         uint64_t *detach_ms, int *truncate_head, char *why,
                         size_t n);

#endif
