/*
** Environments for child processes: a NULL-terminated list of "NAME=value"
** strings, as posix_spawn and mastra__proc_opts.envp take it, built one
** variable at a time (a later value of a name replaces the earlier one).
*/
#ifndef MASTRA_ENVP_H
#define MASTRA_ENVP_H

#include <stddef.h>

typedef struct mastra__envp {
  char **v;       /* NULL-terminated "NAME=value" strings; NULL while empty */
  size_t n, cap;  /* n strings, room for cap (the NULL included) */
} mastra__envp;

/* NULL if name[0..len) can name an environment variable (not empty, no
** '=' and no NUL byte), else why not. */
const char *mastra__env_name_check(const char *name, size_t len);

/* Set name to value (both NUL-terminated). -1 with errno: EINVAL for a
** name that mastra__env_name_check refuses, ENOMEM. */
int mastra__envp_set(mastra__envp *e, const char *name, const char *value);

/* e->v, never NULL: an empty list when nothing was set */
char *const *mastra__envp_list(mastra__envp *e);

void mastra__envp_free(mastra__envp *e);

#endif
