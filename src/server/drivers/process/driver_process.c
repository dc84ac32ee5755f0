/*
** The `process` driver of mastra-platform: a sandbox is a directory on the
** host, <data>/sandboxes/<id>/workspace, and each command is a process
** group started there by proc.c (/bin/sh -c). No isolation: a driver with
** namespaces is a sibling of this file behind the same mp_driver.
**
** Each command's leader gets SIGKILL when the server dies
** (PR_SET_PDEATHSIG): a `kill -9` of the server ends the commands that
** did not fork; what they forked is killed when a server starts again on
** the same data directory (sandbox.c, mp_sandbox_kill_previous).
*/
#define _GNU_SOURCE
#include "drivers/process/driver_process.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "util/trash.h"
#include "util.h"

static int proc_prepare(mp_server *srv, mp_sandbox *sb, char *err,
                        size_t errlen) {
  if (mastra__mkdirs(sb->dir, 0755, NULL) < 0) {
    snprintf(err, errlen, "cannot create %s: %s", sb->dir, strerror(errno));
    return -1;
  }
  (void)srv;
  return 0;
}

/* /workspace (the conventional working directory of platform sandboxes)
** is the sandbox's own directory; other absolute paths are the host's. */
static int map_cwd(const mp_sandbox *sb, const char *cwd, char *out,
                   size_t outlen) {
  int n;
  if (cwd == NULL || cwd[0] == '\0')
    n = snprintf(out, outlen, "%s", sb->dir);
  else if (strncmp(cwd, "/workspace", 10) == 0
           && (cwd[10] == '\0' || cwd[10] == '/'))
    n = snprintf(out, outlen, "%s%s", sb->dir, cwd + 10);
  else if (cwd[0] == '/')
    n = snprintf(out, outlen, "%s", cwd);
  else
    n = snprintf(out, outlen, "%s/%s", sb->dir, cwd);
  return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

static int proc_spawn(mp_server *srv, mp_sandbox *sb, const mp_exec_spec *spec,
                      char *const *envp, mastra__proc **out, char *err,
                      size_t errlen) {
  char cwd[4096];
  mastra__proc_opts opts;
  if (map_cwd(sb, spec->cwd, cwd, sizeof cwd) < 0) {
    snprintf(err, errlen, "the working directory is too long");
    return -ENAMETOOLONG;
  }
  mp_proc_opts(&opts, spec, envp, cwd);
  return mastra__proc_spawn(srv->loop, &opts, out, err, errlen);
}

static void proc_teardown(mp_server *srv, mp_sandbox *sb) {
  mp_trash(srv, sb->root); /* removed off the loop */
}

const mp_driver mp_process_driver = {
    .name = "process",
    .note = "no isolation",
    .prepare = proc_prepare,
    .spawn = proc_spawn,
    .teardown = proc_teardown,
};
