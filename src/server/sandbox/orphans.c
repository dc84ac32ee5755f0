/*
** Orphans of mastra-platform (orphans.h): every command runs with
** MP_MARKER_VAR=<sandbox id> in its environment and has a run file,
** DATA_DIR/state/run/<boot id>/<pid>-<start time> (its process group and
** the start time of its leader in /proc/PID/stat), from its start until it
** is let go of. sandbox.c uses them: a destroy kills the sandbox's marked
** processes that left its commands' groups; shutdown kills every group and
** every marked process; a server that starts after a crash kills the
** groups of the run files left behind (when the leader is gone or is still
** the same process: a pid that was reused is never signalled) and the
** marked processes, before it serves. This file knows no sandbox: what to
** kill and what to mark is its callers' (callbacks), so that the two files
** do not call each other.
*/
#define _GNU_SOURCE
#include "sandbox/orphans.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/env.h"
#include "util/log.h"
#include "server.h"
#include "util.h"

int mp_orphans_proc_stat(long pid, char *state, long *pgrp,
                         unsigned long long *start) {
  char path[64], buf[1024], *p;
  int fd, i;
  ssize_t n;
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
  if (p == NULL || p[1] != ' ') return -1;
  p += 2;
  *state = *p;
  /* fields 3 (state) .. 22 (starttime); pgrp is field 5 */
  for (i = 3; i < 22 && p != NULL; i++) {
    p = strchr(p, ' ');
    if (p != NULL) p++;
    if (p != NULL && i + 1 == 5) *pgrp = strtol(p, NULL, 10);
  }
  if (p == NULL) return -1;
  *start = strtoull(p, NULL, 10);
  return 0;
}

/* The kernel's id of this boot: pids and start times mean something only
** within one boot. */
static const char *boot_id(void) {
  static char id[64];
  char *text;
  size_t len, i;
  if (id[0] != '\0') return id;
  snprintf(id, sizeof id, "boot");
  if (mastra__read_file("/proc/sys/kernel/random/boot_id", &text, &len) < 0)
    return id;
  for (i = 0; i < len && i + 1 < sizeof id
       && (text[i] == '-' || (text[i] >= '0' && text[i] <= '9')
           || (text[i] >= 'a' && text[i] <= 'f'));
       i++)
    id[i] = text[i];
  if (i > 0) id[i] = '\0';
  free(text);
  return id;
}

static void run_dir_path(const char *data_dir, char *out, size_t n) {
  snprintf(out, n, "%s/state/run/%s", data_dir, boot_id());
}

static void run_file_path(const char *data_dir, char *out, size_t n,
                          long pid, unsigned long long start) {
  snprintf(out, n, "%s/state/run/%s/%ld-%llu", data_dir, boot_id(), pid,
           start);
}

unsigned long long mp_orphans_run_file_add(const char *data_dir,
                                           const char *id, pid_t pid) {
  char path[4200], state;
  long pgrp;
  unsigned long long start = 0;
  int fd;
  if (mp_orphans_proc_stat((long)pid, &state, &pgrp, &start) < 0) return 0;
  run_file_path(data_dir, path, sizeof path, (long)pid, start);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ENOENT) {
    char dir[4200];
    run_dir_path(data_dir, dir, sizeof dir);
    if (mastra__mkdirs(dir, 0700, NULL) == 0)
      fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  }
  if (fd < 0) {
    mp_log("cannot write %s: %s", path, strerror(errno));
    return start;
  }
  if (mastra__write_all(fd, id, strlen(id)) < 0)
    mp_log("cannot write %s: %s", path, strerror(errno));
  close(fd);
  return start;
}

void mp_orphans_run_file_remove(const char *data_dir, pid_t pid,
                                unsigned long long start) {
  char path[4200];
  if (start == 0) return;
  run_file_path(data_dir, path, sizeof path, (long)pid, start);
  unlink(path);
}

/* The value of MP_MARKER_VAR in the first 64 KiB of the environment of
** pid (where mp_env_build puts it first), into id; -1 when absent. */
static int read_marker(long pid, char *id, size_t n) {
  static const char var[] = MP_MARKER_VAR "=";
  char path[64], buf[65536];
  size_t len = 0, i;
  int fd;
  snprintf(path, sizeof path, "/proc/%ld/environ", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  while (len < sizeof buf - 1) {
    ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  close(fd);
  buf[len] = '\0';
  for (i = 0; i < len; i += strlen(buf + i) + 1) {
    if (strncmp(buf + i, var, sizeof var - 1) == 0) {
      snprintf(id, n, "%s", buf + i + sizeof var - 1);
      return 0;
    }
  }
  return -1;
}

size_t mp_orphans_kill_marked(int (*wanted)(void *data, const char *id,
                                            long pgrp),
                              void (*killed)(void *data, const char *id,
                                             long pid),
                              void *data) {
  DIR *d = opendir("/proc");
  struct dirent *e;
  size_t n = 0;
  long self = (long)getpid();
  if (d == NULL) return 0;
  while ((e = readdir(d)) != NULL) {
    char *end, state, id[MP_ID_MAX];
    long pid = strtol(e->d_name, &end, 10), pgrp;
    unsigned long long start;
    if (*end != '\0' || pid <= 1 || pid == self) continue;
    if (read_marker(pid, id, sizeof id) < 0) continue;
    if (mp_orphans_proc_stat(pid, &state, &pgrp, &start) < 0
        || state == 'Z')
      continue;
    if (!wanted(data, id, pgrp)) continue;
    kill((pid_t)pid, SIGKILL);
    n++;
    if (killed != NULL) killed(data, id, pid);
  }
  closedir(d);
  return n;
}

/* The run files of earlier boots name processes that are gone. */
static void remove_other_boots(const char *data_dir) {
  char dir[4200], path[4600];
  DIR *d;
  struct dirent *e;
  snprintf(dir, sizeof dir, "%s/state/run", data_dir);
  d = opendir(dir);
  if (d == NULL) return;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0
        || strcmp(e->d_name, boot_id()) == 0)
      continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    mastra__remove_tree(path);
  }
  closedir(d);
}

/* a group id is not reused while the group has members: a group whose
** leader is gone, or is still the process started, is the command's */
size_t mp_orphans_kill_run_files(const char *data_dir,
                                 void (*interrupted)(void *data,
                                                     const char *id),
                                 void *data) {
  char dir[4200], path[4600];
  DIR *d;
  struct dirent *e;
  size_t n = 0;
  remove_other_boots(data_dir);
  run_dir_path(data_dir, dir, sizeof dir);
  d = opendir(dir);
  if (d == NULL) return 0;
  while ((e = readdir(d)) != NULL) {
    char *end, *text, state;
    long pid = strtol(e->d_name, &end, 10), pgrp;
    unsigned long long start, now_start;
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    start = *end == '-' ? strtoull(end + 1, &end, 10) : 0;
    if (pid > 1 && start > 0 && *end == '\0'
        && (mp_orphans_proc_stat(pid, &state, &pgrp, &now_start) < 0
            || now_start == start)) {
      if (kill((pid_t)-pid, SIGKILL) == 0) {
        mp_log("killed the process group %ld left running by a previous"
               " server", pid);
        n++;
      }
      if (mastra__read_file(path, &text, NULL) == 0) {
        interrupted(data, text);
        free(text);
      }
    }
    unlink(path);
  }
  closedir(d);
  return n;
}
