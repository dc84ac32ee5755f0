/*
** Checkpoints of mastra-platform. A checkpoint is a tar of a sandbox's
** working tree in <data>/checkpoints/<name>.tar, where name comes from
** (project, environment, recovery key): captured when the sandbox is
** destroyed or reaped, on POST /checkpoint, two seconds after the last
** command of a burst and at shutdown (sandbox.c decides when); restored
** when a sandbox is created with the same key.
*/
#define _GNU_SOURCE
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hash.h"
#include "log.h"

static void checkpoint_name(const mp_sandbox *sb, char out[64]) {
  unsigned char digest[20];
  char material[3 * MP_NAME_MAX + 3];
  int n = snprintf(material, sizeof material, "%s\n%s\n%s", sb->project,
                   sb->environment, sb->recovery_key);
  static const char hex[] = "0123456789abcdef";
  int i;
  mastra__sha1(material, (size_t)n, digest);
  memcpy(out, "mastra-checkpoint-", 18);
  for (i = 0; i < 10; i++) {
    out[18 + 2 * i] = hex[digest[i] >> 4];
    out[18 + 2 * i + 1] = hex[digest[i] & 15];
  }
  out[38] = '\0';
}

static void checkpoint_path(mp_server *srv, const mp_sandbox *sb, char *out,
                            size_t outlen) {
  char name[64];
  checkpoint_name(sb, name);
  snprintf(out, outlen, "%s/checkpoints/%s.tar", srv->data_dir, name);
}

/* Run argv to completion (tar is quick for the trees we keep). */
static int run_sync(char *const argv[]) {
  static char *const envp[] = {"PATH=" MP_DEFAULT_PATH, NULL};
  posix_spawn_file_actions_t fa;
  pid_t pid;
  int status, rc;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", 0, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* 1 if path is a directory with no entries (or does not exist) */
static int dir_is_empty(const char *path) {
  DIR *d = opendir(path);
  struct dirent *e;
  int empty = 1;
  if (d == NULL) return errno == ENOENT;
  while (empty && (e = readdir(d)) != NULL)
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) empty = 0;
  closedir(d);
  return empty;
}

int mp_checkpoint_capture(mp_server *srv, mp_sandbox *sb, char name[64],
                          int explicit_request) {
  char path[4200], tmp[4300];
  char *argv[] = {"tar", "-C", sb->dir, "-cf", tmp, ".", NULL};
  checkpoint_name(sb, name);
  if (sb->recovery_key[0] == '\0' || sb->destroyed_ms) return 1; /* skipped */
  checkpoint_path(srv, sb, path, sizeof path);
  if (!explicit_request && dir_is_empty(sb->dir)) {
    /* nothing to keep: an empty tree is what a missing checkpoint restores
    ** too, so drop an older one instead of running tar (fleets of short
    ** sandboxes destroy empty trees all the time) */
    if (unlink(path) < 0 && errno != ENOENT) return -1;
    return 0;
  }
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  if (run_sync(argv) < 0 || rename(tmp, path) < 0) {
    mp_log("checkpoint of %s failed", sb->id);
    unlink(tmp);
    return -1;
  }
  return 0;
}

int mp_checkpoint_delete(mp_server *srv, mp_sandbox *sb) {
  char path[4200];
  checkpoint_path(srv, sb, path, sizeof path);
  return unlink(path) == 0 ? 0 : -1;
}

int mp_checkpoint_restore(mp_server *srv, mp_sandbox *sb) {
  char path[4200];
  char *argv[] = {"tar", "-C", sb->dir, "-xf", path, NULL};
  checkpoint_path(srv, sb, path, sizeof path);
  if (sb->recovery_key[0] == '\0' || access(path, R_OK) != 0) return 1;
  return run_sync(argv);
}
