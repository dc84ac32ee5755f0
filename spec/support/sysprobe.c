/*
** sysprobe: tries the calls that a namespaces sandbox's syscall filter
** denies (spec/namespaces_seccomp_spec.lua; docs/platform.md, "The syscall
** filter"), from inside a sandbox, copied in through stdin. For each name
** on its command line (or every one with none) it makes the call with
** harmless arguments and prints "NAME RESULT", RESULT "ok" or the errno's
** name (EPERM, EAFNOSUPPORT, ...). Whatever a call makes is undone at
** once (a socket closed, a child of clone reaped). libc alone, static where
** the build allows, as it runs in the sandbox's root.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x80
#endif
#define KEYCTL_GET_KEYRING_ID 0
#define KEY_SPEC_SESSION_KEYRING (-3)
#define KEY_SPEC_PROCESS_KEYRING (-2)

static const char *errname(int e) {
  static const struct { int e; const char *name; } all[] = {
      {EPERM, "EPERM"},   {ENOENT, "ENOENT"}, {EINTR, "EINTR"},
      {EBADF, "EBADF"},   {EAGAIN, "EAGAIN"}, {ENOMEM, "ENOMEM"},
      {EACCES, "EACCES"}, {EFAULT, "EFAULT"}, {EBUSY, "EBUSY"},
      {EEXIST, "EEXIST"}, {ENODEV, "ENODEV"}, {EINVAL, "EINVAL"},
      {ENOSPC, "ENOSPC"}, {ENOSYS, "ENOSYS"}, {EUSERS, "EUSERS"},
      {ENOKEY, "ENOKEY"}, {EOPNOTSUPP, "EOPNOTSUPP"},
      {EAFNOSUPPORT, "EAFNOSUPPORT"}, {EPROTONOSUPPORT, "EPROTONOSUPPORT"},
      {ESOCKTNOSUPPORT, "ESOCKTNOSUPPORT"}, {ENOEXEC, "ENOEXEC"},
      {E2BIG, "E2BIG"}, {ESRCH, "ESRCH"},
  };
  static char other[32];
  size_t i;
  for (i = 0; i < sizeof all / sizeof all[0]; i++)
    if (all[i].e == e) return all[i].name;
  snprintf(other, sizeof other, "errno %d", e);
  return other;
}

/* a result: r >= 0 is "ok" (r a descriptor to close when fd) */
static int done(long r, int fd) {
  int e = errno;
  if (r < 0) return e;
  if (fd) close((int)r);
  return 0;
}

/* a clone(2) with flags in a child that exits at once */
static int try_clone(unsigned long flags) {
  long pid;
  int status;
#if defined(__s390__)
  pid = syscall(SYS_clone, 0, flags | SIGCHLD, 0, 0, 0);
#else
  pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
#endif
  if (pid < 0) return errno;
  if (pid == 0) _exit(0);
  waitpid((pid_t)pid, &status, 0);
  return 0;
}

/* unshare in a child (this process keeps its namespaces) */
static int try_unshare(int flags) {
  int p[2], e = 0, status;
  pid_t pid;
  if (pipe(p) < 0) return errno;
  pid = fork();
  if (pid < 0) return errno;
  if (pid == 0) {
    e = unshare(flags) < 0 ? errno : 0;
    if (write(p[1], &e, sizeof e) < 0) _exit(1);
    _exit(0);
  }
  close(p[1]);
  if (read(p[0], &e, sizeof e) != (ssize_t)sizeof e) e = EIO;
  close(p[0]);
  waitpid(pid, &status, 0);
  return e;
}

static int probe(const char *name) {
  if (strcmp(name, "vsock") == 0)
    return done(socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0), 1);
  /* the kernel reads the domain as an int: the high bits do not count */
  if (strcmp(name, "vsock-high") == 0)
    return done(syscall(SYS_socket, 0x100000000L | AF_VSOCK,
                        SOCK_STREAM | SOCK_CLOEXEC, 0), 1);
  if (strcmp(name, "vsock-dgram") == 0)
    return done(socket(AF_VSOCK, SOCK_DGRAM | SOCK_CLOEXEC, 0), 1);
  if (strcmp(name, "keyctl") == 0)
    return done(syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID,
                        KEY_SPEC_SESSION_KEYRING, 0), 0);
  if (strcmp(name, "add_key") == 0)
    return done(syscall(SYS_add_key, "user", "mastra-probe", "x", 1,
                        KEY_SPEC_PROCESS_KEYRING), 0);
  if (strcmp(name, "request_key") == 0)
    return done(syscall(SYS_request_key, "user", "mastra-probe-none", NULL,
                        KEY_SPEC_PROCESS_KEYRING), 0);
  if (strcmp(name, "bpf") == 0) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    return done(syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr), 1);
  }
  if (strcmp(name, "userfaultfd") == 0)
    /* 1: UFFD_USER_MODE_ONLY, open to every user since Linux 5.11 */
    return done(syscall(SYS_userfaultfd, O_CLOEXEC | 1), 1);
  if (strcmp(name, "perf_event_open") == 0) {
    struct perf_event_attr pa;
    memset(&pa, 0, sizeof pa);
    pa.size = sizeof pa;
    pa.type = PERF_TYPE_SOFTWARE;
    pa.config = PERF_COUNT_SW_TASK_CLOCK;
    pa.exclude_kernel = 1;
    pa.exclude_hv = 1;
    return done(syscall(SYS_perf_event_open, &pa, 0, -1, -1, 0), 1);
  }
  if (strcmp(name, "init_module") == 0)
    return done(syscall(SYS_init_module, NULL, 0, ""), 0);
  if (strcmp(name, "finit_module") == 0)
    return done(syscall(SYS_finit_module, -1, "", 0), 0);
  if (strcmp(name, "delete_module") == 0)
    return done(syscall(SYS_delete_module, "mastra_probe_none", O_NONBLOCK), 0);
  if (strcmp(name, "kexec_load") == 0)
    return done(syscall(SYS_kexec_load, 0, 0, NULL, 0), 0);
#ifdef SYS_kexec_file_load
  if (strcmp(name, "kexec_file_load") == 0)
    return done(syscall(SYS_kexec_file_load, -1, -1, 0, "", 0), 0);
#endif
  if (strcmp(name, "io_uring") == 0) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    return done(syscall(SYS_io_uring_setup, 1, &p), 1);
  }
  if (strcmp(name, "unshare-user") == 0) return try_unshare(CLONE_NEWUSER);
  if (strcmp(name, "unshare-net") == 0) return try_unshare(CLONE_NEWNET);
  if (strcmp(name, "unshare-mount") == 0) return try_unshare(CLONE_NEWNS);
  if (strcmp(name, "clone-user") == 0) return try_clone(CLONE_NEWUSER);
  if (strcmp(name, "clone3") == 0) {
    /* struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal,
    ** stack, stack_size, tls (the size of version 0) */
    unsigned long long args[8];
    long pid;
    int status;
    memset(args, 0, sizeof args);
    args[4] = SIGCHLD;
    pid = syscall(SYS_clone3, args, sizeof args);
    if (pid < 0) return errno;
    if (pid == 0) _exit(0);
    waitpid((pid_t)pid, &status, 0);
    return 0;
  }
  /* ordinary work: a fork, an INET socket, a unix socket pair */
  if (strcmp(name, "fork") == 0) return try_clone(0);
  if (strcmp(name, "inet") == 0)
    return done(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), 1);
  if (strcmp(name, "unix") == 0) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) return errno;
    close(sv[0]);
    close(sv[1]);
    return 0;
  }
  return -1;
}

static const char *const every[] = {
    "vsock", "vsock-high", "vsock-dgram", "keyctl", "add_key", "request_key", "bpf",
    "userfaultfd", "perf_event_open", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "io_uring",
    "unshare-user", "unshare-net", "unshare-mount", "clone-user", "clone3",
    "fork", "inet", "unix", NULL};

int main(int argc, char **argv) {
  int i, rc = 0;
  const char *const *names = argc > 1 ? (const char *const *)argv + 1 : every;
  for (i = 0; names[i] != NULL; i++) {
    int e = probe(names[i]);
    if (e < 0) {
      printf("%s unknown\n", names[i]);
      rc = 2;
    } else {
      printf("%s %s\n", names[i], e == 0 ? "ok" : errname(e));
    }
    fflush(stdout);
  }
  return rc;
}
