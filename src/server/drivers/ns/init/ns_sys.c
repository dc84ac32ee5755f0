/*
** Namespace primitives of the `namespaces` driver that need libc alone
** (ns_sys.h): the server and mastra-ns-init (the keeper, the init and the
** commands' __ns-exec, which link no more than libc) share them.
**
** Two libcs build these sources: glibc (the server's copy, and
** mastra-ns-init where musl-gcc is missing) and musl (mastra-ns-init where
** it is there: CMakeLists.txt says why). musl 1.2.3 has no wrapper for
** close_range, open_tree, mount_setattr or move_mount, so both builds
** make those calls through syscall(2); the mount API's structure and flags
** come from glibc's <sys/mount.h>, or from the kernel's <linux/mount.h>
** (which clashes with glibc's header, so it is musl's alone).
*/
#define _GNU_SOURCE
#include "drivers/ns/init/ns_sys.h"
#include "drivers/ns/init/ns_init.h" /* MP_NS_ENV_PREFIX */

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/nsfs.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#ifndef __GLIBC__
#include <linux/mount.h>
#endif
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int mp_ns_write_at(int dir, const char *name, const char *text) {
  int fd = openat(dir, name, O_WRONLY | O_CLOEXEC);
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

int mp_ns_write_text(const char *path, const char *text) {
  return mp_ns_write_at(AT_FDCWD, path, text);
}

int mp_ns_write_maps(int procdir, unsigned base, unsigned count) {
  char map[64];
  snprintf(map, sizeof map, "0 %u %u\n", base, count);
  if (mp_ns_write_at(procdir, "uid_map", map) < 0) return -1;
  return mp_ns_write_at(procdir, "gid_map", map);
}

int mp_ns_userns_of(const char *map) {
  int p[2], dir = -1, fd = -1, e = 0, status;
  char c = 0, path[64];
  pid_t pid, parent = getpid();
  if (pipe2(p, O_CLOEXEC) < 0) return -1;
  pid = fork();
  if (pid < 0) {
    e = errno;
    close(p[0]);
    close(p[1]);
    errno = e;
    return -1;
  }
  if (pid == 0) {
    /* unshare, say so, and wait to be killed: by the parent, or with
    ** it. A fork clears the parent-death signal, and so does the
    ** unshare (a credential change): armed after it, then the parent
    ** checked, since it may have gone before. A keeper killed with its
    ** server between our fork and its kill left us in pause() forever,
    ** holding the server's stdout and stderr: so we hold nothing. */
    close(p[0]);
    if (unshare(CLONE_NEWUSER) < 0) _exit(1);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent) _exit(1);
    if (write(p[1], "u", 1) != 1) _exit(1);
    mp_ns_close_all();
    pause();
    _exit(0);
  }
  close(p[1]);
  if (read(p[0], &c, 1) != 1) {
    e = EPERM; /* the child could not unshare */
    goto out;
  }
  snprintf(path, sizeof path, "/proc/%d", (int)pid);
  dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0 || mp_ns_write_at(dir, "uid_map", map) < 0
      || mp_ns_write_at(dir, "gid_map", map) < 0) {
    e = errno;
    goto out;
  }
  fd = openat(dir, "ns/user", O_RDONLY | O_CLOEXEC);
  if (fd < 0) e = errno;
out:
  if (dir >= 0) close(dir);
  close(p[0]);
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  errno = e;
  return fd;
}

int mp_ns_map_self(unsigned uid, unsigned gid) {
  char map[64];
  if (mp_ns_write_text("/proc/self/setgroups", "deny") < 0) return -1;
  snprintf(map, sizeof map, "0 %u 1\n", uid);
  if (mp_ns_write_text("/proc/self/uid_map", map) < 0) return -1;
  snprintf(map, sizeof map, "0 %u 1\n", gid);
  return mp_ns_write_text("/proc/self/gid_map", map);
}

void mp_ns_close_all(void) { syscall(SYS_close_range, 0u, ~0u, 0); }

int mp_ns_idmap_mount(int userns_fd, const char *src, const char *dst) {
  struct mount_attr attr;
  int t = (int)syscall(SYS_open_tree, AT_FDCWD, src,
                      OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
  int rc, e;
  if (t < 0) return -1;
  memset(&attr, 0, sizeof attr);
  attr.attr_set = MOUNT_ATTR_IDMAP;
  attr.userns_fd = (unsigned long long)userns_fd;
  rc = (int)syscall(SYS_mount_setattr, t, "", AT_EMPTY_PATH, &attr, sizeof attr);
  if (rc == 0)
    rc = (int)syscall(SYS_move_mount, t, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH);
  e = errno;
  close(t);
  errno = e;
  return rc;
}

int mp_ns_is_userns(int fd) {
  return ioctl(fd, NS_GET_NSTYPE) == CLONE_NEWUSER;
}

typedef union {
  struct cmsghdr h;
  char buf[CMSG_SPACE(MP_NS_FDS_MAX * sizeof(int))];
} fd_cmsg;

int mp_ns_send_fds(int sock, const void *msg, size_t len, const int *fds, int n) {
  fd_cmsg c;
  struct iovec iov = {(void *)msg, len};
  struct msghdr mh;
  if (n < 1 || n > MP_NS_FDS_MAX) {
    errno = EINVAL;
    return -1;
  }
  memset(&mh, 0, sizeof mh);
  memset(&c, 0, sizeof c);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = c.buf;
  mh.msg_controllen = CMSG_SPACE((size_t)n * sizeof(int));
  c.h.cmsg_level = SOL_SOCKET;
  c.h.cmsg_type = SCM_RIGHTS;
  c.h.cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
  memcpy(CMSG_DATA(&c.h), fds, (size_t)n * sizeof(int));
  return sendmsg(sock, &mh, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

long mp_ns_recv_fds(int sock, void *msg, size_t len, int flags, int *fds, int n,
                    int *nfds) {
  fd_cmsg c;
  struct iovec iov = {msg, len};
  struct msghdr mh;
  struct cmsghdr *cm;
  ssize_t got;
  *nfds = 0;
  memset(&mh, 0, sizeof mh);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = c.buf;
  mh.msg_controllen = sizeof c.buf;
  do got = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC); while (got < 0 && errno == EINTR);
  if (got < 0) return -1;
  for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
    size_t i, k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    for (i = 0; i < k; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
      if (*nfds < n) fds[(*nfds)++] = fd;
      else close(fd);
    }
  }
  return (long)got;
}

char **mp_ns_env_unwrap(char **env) {
  size_t plen = strlen(MP_NS_ENV_PREFIX), i, n = 0;
  for (i = 0; env[i] != NULL; i++)
    if (strncmp(env[i], MP_NS_ENV_PREFIX, plen) == 0) env[n++] = env[i] + plen;
  env[n] = NULL;
  return env;
}

/* the filter that mp_ns_filter_load read */
static struct sock_filter filter[BPF_MAXINSNS];
static unsigned short filter_len;

int mp_ns_filter_load(const char *path) {
  char *p = (char *)filter;
  size_t n = 0;
  ssize_t r;
  int fd = open(path, O_RDONLY | O_CLOEXEC), e;
  if (fd < 0) return -1;
  do {
    r = read(fd, p + n, sizeof filter - n);
    if (r > 0) n += (size_t)r;
  } while (r > 0 || (r < 0 && errno == EINTR));
  e = r < 0 ? errno : 0;
  /* a program fills the buffer only when it is too long */
  if (r == 0 && n == sizeof filter) {
    char more;
    if (read(fd, &more, 1) > 0) e = E2BIG;
  }
  close(fd);
  if (e == 0 && (n == 0 || n % sizeof filter[0] != 0)) e = EINVAL;
  if (e != 0) {
    errno = e;
    return -1;
  }
  filter_len = (unsigned short)(n / sizeof filter[0]);
  return 0;
}

int mp_ns_filter_install(void) {
  struct sock_fprog prog;
  if (filter_len == 0) {
    errno = EINVAL;
    return -1;
  }
  prog.len = filter_len;
  prog.filter = filter;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return -1;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
}

const char *mp_ns_errno_name(int e) {
#define E_(name) {name, #name}
  static const struct {
    int e;
    const char *name;
  } all[] = {
      E_(EPERM), E_(ENOENT), E_(ESRCH), E_(EINTR), E_(EIO), E_(ENXIO),
      E_(E2BIG), E_(ENOEXEC), E_(EBADF), E_(ECHILD), E_(EAGAIN), E_(ENOMEM),
      E_(EACCES), E_(EFAULT), E_(ENOTBLK), E_(EBUSY), E_(EEXIST), E_(EXDEV),
      E_(ENODEV), E_(ENOTDIR), E_(EISDIR), E_(EINVAL), E_(ENFILE),
      E_(EMFILE), E_(ENOTTY), E_(ETXTBSY), E_(EFBIG), E_(ENOSPC),
      E_(ESPIPE), E_(EROFS), E_(EMLINK), E_(EPIPE), E_(EDOM), E_(ERANGE),
      E_(EDEADLK), E_(ENAMETOOLONG), E_(ENOLCK), E_(ENOSYS), E_(ENOTEMPTY),
      E_(ELOOP), E_(ENOMSG), E_(EIDRM), E_(ENOSTR), E_(ENODATA), E_(ETIME),
      E_(ENOSR), E_(ENOLINK), E_(EPROTO), E_(EBADMSG), E_(EOVERFLOW),
      E_(EILSEQ), E_(EUSERS), E_(ENOTSOCK), E_(EDESTADDRREQ), E_(EMSGSIZE),
      E_(EPROTOTYPE), E_(ENOPROTOOPT), E_(EPROTONOSUPPORT),
      E_(ESOCKTNOSUPPORT), E_(EOPNOTSUPP), E_(EPFNOSUPPORT),
      E_(EAFNOSUPPORT), E_(EADDRINUSE), E_(EADDRNOTAVAIL), E_(ENETDOWN),
      E_(ENETUNREACH), E_(ENETRESET), E_(ECONNABORTED), E_(ECONNRESET),
      E_(ENOBUFS), E_(EISCONN), E_(ENOTCONN), E_(ETIMEDOUT),
      E_(ECONNREFUSED), E_(EHOSTDOWN), E_(EHOSTUNREACH), E_(EALREADY),
      E_(EINPROGRESS), E_(ESTALE), E_(EDQUOT), E_(ECANCELED), E_(ENOKEY),
      E_(EKEYEXPIRED), E_(EKEYREVOKED), E_(EKEYREJECTED), E_(EOWNERDEAD),
      E_(ENOTRECOVERABLE), E_(ERFKILL), E_(EHWPOISON), E_(ENOMEDIUM),
      E_(EMEDIUMTYPE), E_(EUCLEAN),
  };
#undef E_
  static char other[32];
  size_t i;
  for (i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i].e == e) return all[i].name;
  snprintf(other, sizeof other, "errno %d", e);
  return other;
}
