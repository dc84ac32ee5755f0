/*
** The environment of a sandbox command (env.c): the bounds of an env
** object, and the merge of the creation env and the exec env.
*/
#ifndef MP_ENV_H
#define MP_ENV_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "envp.h"

/* an env object (a create's, an exec's) holds at most this many names and
** this many bytes of NAME=value strings, NULs included (docs/platform.md,
** Limits): both together stay far below what execve takes */
#define MP_ENV_MAX_NAMES 4096
#define MP_ENV_MAX_BYTES (256 * 1024)
/* an exec's env (init_exec, POST /exec) may be bigger: a client without
** stdin moves bytes in it (uploadDir's part commands), and fewer, bigger
** commands cost less. With a creation env and a command line of 128 KiB
** the merge stays under execve's 2 MiB (a stack limit of 8 MiB). The
** exec lease says the bound ("limits": {"execEnvBytes": N}); a client
** message (1 MiB) holds it with its JSON. */
#define MP_EXEC_ENV_MAX_BYTES (960 * 1024)
/* Every command's environment has MP_MARKER_VAR=<sandbox id>: the
** processes it leaves behind are found by it (destroy, shutdown, restart). */
#define MP_MARKER_VAR "MASTRA_SANDBOX_ID"
/* the PATH of sandbox commands (before their env) and of tar */
#define MP_DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

/* 0 if env (the body's field `field`) is NULL, JSON null, or an object
** that maps variable names (mastra__env_name_check) to strings, within
** MP_ENV_MAX_NAMES and MP_ENV_MAX_BYTES; else -1 and why says what is
** wrong. */
int mp_env_check(const cJSON *env, const char *field, char *why, size_t n);
/* The same within max_bytes (mp_exec_env_max() for an exec's). */
int mp_env_check_max(const cJSON *env, const char *field, size_t max_bytes,
                     char *why, size_t n);

/* The bound of an exec's env: MP_EXEC_ENV_MAX_BYTES, or less where the
** server's stack limit (which its commands inherit) leaves execve less
** than that beside a command line, a creation env and the pointers (it
** takes a quarter of the stack limit); never less than
** MP_ENV_MAX_BYTES, the bound before exec envs grew. */
size_t mp_exec_env_max(void);

/* Into e (empty): MP_MARKER_VAR=marker first (where a scan of
** /proc/PID/environ looks; no env replaces it), PATH, then base's names,
** then extra's (either may be NULL): a later value of a name replaces the
** earlier one. Linear: an index by name says which item of a name wins.
** -1 out of memory. */
int mp_env_build(mastra__envp *e, const char *marker, const cJSON *base,
                 const cJSON *extra);

#endif
