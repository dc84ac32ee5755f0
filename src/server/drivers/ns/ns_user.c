/*
** The namespaces driver without root (ns_user.h). A server that is not
** root makes each sandbox's keeper unshare a user namespace of its own
** first, map root in it to the server's uid and gid (a single id each,
** written by the keeper itself), and unshare the other namespaces there:
** the owner of a user namespace holds its capabilities, so the mounts,
** pivot_root, hostname and loopback work as with root. PRIVATE networks
** without root: net.h (mp_net_open_user), the way out included.
*/
#define _GNU_SOURCE
#include "drivers/ns/ns_user.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "drivers/ns/init/ns_sys.h"

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

/* arg: NULL, or the user namespace (an int descriptor) to make it under */
static int user_probe(void *arg, char *msg, size_t n) {
  const char *step = "unshare(CLONE_NEWUSER)";
  unsigned uid, gid;
  if (arg != NULL && setns(*(int *)arg, CLONE_NEWUSER) < 0) {
    snprintf(msg, n, "setns into the user namespace: %s", strerror(errno));
    return -1;
  }
  uid = (unsigned)geteuid();
  gid = (unsigned)getegid();
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

int mp_ns_user_probe_under(int userns, char *why, size_t n) {
  return mp_ns_try(user_probe, &userns, why, n);
}
