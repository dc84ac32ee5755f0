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
#include <sys/wait.h>
#include <unistd.h>

static int write_text(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  ssize_t n;
  size_t len = strlen(text);
  if (fd < 0) return -1;
  n = write(fd, text, len);
  if (n != (ssize_t)len) {
    int e = n < 0 ? errno : EIO;
    close(fd);
    errno = e;
    return -1;
  }
  return close(fd);
}

int mp_ns_map_self(unsigned uid, unsigned gid) {
  char map[64];
  if (write_text("/proc/self/setgroups", "deny") < 0) return -1;
  snprintf(map, sizeof map, "0 %u 1\n", uid);
  if (write_text("/proc/self/uid_map", map) < 0) return -1;
  snprintf(map, sizeof map, "0 %u 1\n", gid);
  return write_text("/proc/self/gid_map", map);
}

int mp_ns_user_probe(char *why, size_t n) {
  int p[2], status;
  char msg[256];
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
    const char *step = "unshare(CLONE_NEWUSER)";
    unsigned uid = (unsigned)geteuid(), gid = (unsigned)getegid();
    close(p[0]);
    if (unshare(CLONE_NEWUSER) == 0) {
      step = "the user namespace's id maps";
      if (mp_ns_map_self(uid, gid) == 0) {
        step = "unshare of the mount, pid, uts, ipc and net namespaces";
        if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC
                    | CLONE_NEWNET) == 0) {
          step = "a private mount";
          if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0) _exit(0);
        }
      }
    }
    snprintf(msg, sizeof msg, "%s: %s", step, strerror(errno));
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
  snprintf(why, n, "it is not root and cannot use unprivileged user"
           " namespaces (%s)", got > 0 ? msg : "the probe failed");
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
