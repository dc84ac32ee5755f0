/*
** The namespaces driver without root (ns_user.h). A server that is not
** root makes each sandbox's keeper unshare a user namespace of its own
** first, map root in it to the server's uid and gid (a single id each,
** written by the keeper itself), and unshare the other namespaces there:
** the owner of a user namespace holds its capabilities, so the mounts,
** pivot_root, hostname and loopback work as with root.
*/
#define _GNU_SOURCE
#include "ns_user.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "ns_sys.h"

int mp_ns_try(int (*fn)(void *arg, char *msg, size_t n), void *arg,
              char *why, size_t n) {
  int p[2], status;
  char msg[300];
  ssize_t got;
  pid_t pid;
  if (pipe2(p, O_CLOEXEC) < 0) {
    snprintf(why, n, "pipe: %s", strerror(errno));
    return 0;
  }
  pid = fork();
  if (pid < 0) {
    snprintf(why, n, "fork: %s", strerror(errno));
    close(p[0]);
    close(p[1]);
    return 0;
  }
  if (pid == 0) {
    close(p[0]);
    msg[0] = '\0';
    if (fn(arg, msg, sizeof msg) == 0) _exit(0);
    if (write(p[1], msg, strlen(msg)) < 0) _exit(2);
    _exit(1);
  }
  close(p[1]);
  do got = read(p[0], msg, sizeof msg - 1); while (got < 0 && errno == EINTR);
  close(p[0]);
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) break;
  if (got <= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return 1;
  msg[got > 0 ? got : 0] = '\0';
  snprintf(why, n, "%s", got > 0 ? msg : "the child failed");
  return 0;
}

static int user_probe(void *arg, char *msg, size_t n) {
  const char *step = "unshare(CLONE_NEWUSER)";
  unsigned uid = (unsigned)geteuid(), gid = (unsigned)getegid();
  (void)arg;
  if (unshare(CLONE_NEWUSER) == 0) {
    step = "the user namespace's id maps";
    if (mp_ns_map_self(uid, gid) == 0) {
      step = "unshare of the mount, pid, uts, ipc and net namespaces";
      if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC
                  | CLONE_NEWNET) == 0) {
        step = "a private mount";
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0) return 0;
      }
    }
  }
  snprintf(msg, n, "%s: %s", step, strerror(errno));
  return -1;
}

int mp_ns_user_probe(char *why, size_t n) {
  char msg[400];
  if (mp_ns_try(user_probe, NULL, msg, sizeof msg)) return 1;
  snprintf(why, n, "it is not root and cannot use unprivileged user"
           " namespaces (%s)", msg);
  return 0;
}

int mp_ns_own_cgroup(const char *controller, char *out, size_t n) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  char line[4200];
  int found = -1;
  if (f == NULL) return -1;
  while (found < 0 && fgets(line, sizeof line, f) != NULL) {
    char *ctl = strchr(line, ':'), *path;
    if (ctl == NULL || (path = strchr(++ctl, ':')) == NULL) continue;
    *path++ = '\0';
    path[strcspn(path, "\n")] = '\0';
    if (controller == NULL) {
      if (strcmp(line, "0:") != 0 || *ctl != '\0') continue;
      snprintf(out, n, "/sys/fs/cgroup%s", strcmp(path, "/") ? path : "");
      found = 0;
    } else {
      /* "cpu,cpuacct": one of a comma-joined list */
      char *tok, *save = NULL;
      for (tok = strtok_r(ctl, ",", &save); tok != NULL;
           tok = strtok_r(NULL, ",", &save))
        if (strcmp(tok, controller) == 0) break;
      if (tok == NULL) continue;
      snprintf(out, n, "/sys/fs/cgroup/%s%s", controller,
               strcmp(path, "/") ? path : "");
      found = 0;
    }
  }
  fclose(f);
  return found;
}

static int mkdir_enable(int v2, const char *dir) {
  char path[4400];
  if (mkdir(dir, 0755) < 0 && errno != EEXIST) return -1;
  if (v2) {
    snprintf(path, sizeof path, "%s/cgroup.subtree_control", dir);
    mp_ns_write_text(path, "+pids +memory +cpu");
  }
  return 0;
}

int mp_ns_user_cgroups(int v2, const char *hex, char (*out)[4300], int max) {
  static const char *const v1[] = {"pids", "memory", "cpu"};
  char own[4096], top[4200], path[4400];
  int i, n = 0;
  if (v2) {
    if (mp_ns_own_cgroup(NULL, own, sizeof own) < 0 || access(own, W_OK) < 0)
      return 0;
    snprintf(path, sizeof path, "%s/mastra-server", own);
    if (mkdir(path, 0755) < 0 && errno != EEXIST) return 0;
    snprintf(path, sizeof path, "%s/mastra-server/cgroup.procs", own);
    if (mp_ns_write_text(path, "0") < 0) return 0;
    snprintf(path, sizeof path, "%s/cgroup.subtree_control", own);
    mp_ns_write_text(path, "+pids +memory +cpu");
    snprintf(top, sizeof top, "%s/mastra-platform", own);
    snprintf(out[0], sizeof out[0], "%s/%s", top, hex);
    return mkdir_enable(1, top) == 0 && mkdir_enable(1, out[0]) == 0;
  }
  for (i = 0; i < 3 && n < max; i++) {
    if (mp_ns_own_cgroup(v1[i], own, sizeof own) < 0 || access(own, W_OK) < 0)
      continue;
    snprintf(top, sizeof top, "%s/mastra-platform", own);
    snprintf(out[n], sizeof out[n], "%s/%s", top, hex);
    if (mkdir_enable(0, top) == 0 && mkdir_enable(0, out[n]) == 0) n++;
  }
  return n;
}

void mp_ns_limits_say(int ncg, int v2, int unpriv, char *out, size_t n) {
  if (ncg > 0) {
    snprintf(out, n, "cgroup v%d%s", v2 ? 2 : 1, unpriv ? " (delegated)" : "");
    return;
  }
  snprintf(out, n, "none: %s", unpriv ? "cgroups not delegated"
           : "no writable cgroups");
  if (unpriv)
    mp_log("no limits: the cgroups of this server (uid %d) are not"
           " delegated to it: sandboxes run without pids, memory and cpu"
           " limits", (int)geteuid());
  else
    mp_log("no writable cgroups: sandboxes run without pids and memory"
           " limits");
}

void mp_ns_user_no_net(char *err, size_t n) {
  /* the switch namespace and the veths need root on the host */
  snprintf(err, n, "the server runs without root (uid %d, in unprivileged"
           " user namespaces), and a PRIVATE network (or --egress) needs a"
           " server run as root: use ISOLATED, or run mastra-platform as"
           " root", (int)geteuid());
}
