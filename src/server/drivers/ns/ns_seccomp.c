/*
** The syscall filter of a `namespaces` sandbox (ns_seccomp.h;
** docs/platform.md, "The syscall filter"), built once at setup with
** Debian's libseccomp and written as a classic BPF program to a file of
** the data directory, which mastra-ns-init (libc alone) loads and installs
** in every way into a sandbox: the init, `__ns-exec` and `__ns-enter`
** (ns_init.h, MP_NS_FILTER; init/ns_sys.c, mp_ns_filter_*).
**
** Everything is allowed but the list below, which answers an errno (EPERM,
** as Docker's and Podman's default profiles do; never a kill):
**
**   socket(AF_VSOCK), socketpair(AF_VSOCK): EAFNOSUPPORT. vsock is not
**     namespaced: a sandbox would bind and connect in the host's (a VM's)
**     port space.
**   add_key, request_key, keyctl, where every sandbox has the same host
**     uids (ns_uids.h: without root, or without idmapped mounts; 100000, or
**     the server's own): the kernel's keyrings are keyed by uid, and one
**     sandbox would read another's keys. Allowed where each sandbox has a
**     range of its own.
**   bpf, userfaultfd, perf_event_open: kernel attack surface that no
**     sandbox work needs (eBPF's verifier, userfaultfd's use in races,
**     perf's counters of the host).
**   init_module, finit_module, delete_module, kexec_load,
**     kexec_file_load: the kernel itself (they fail without the host's
**     capabilities anyway; the filter says so before the kernel looks).
**   unshare and clone with a namespace flag, and clone3 (ENOSYS: its flags
**     are out of a filter's reach; libc falls back to clone): root in a
**     sandbox holds every capability of its user namespace, so it could
**     make namespaces of its own, a user namespace or a network namespace
**     whose nf_tables and more it would own. --sandbox-nested-namespaces
**     on allows them (containers in a sandbox).
**   io_uring_setup, io_uring_enter, io_uring_register: a large part of
**     the kernel's recent bugs; --sandbox-io-uring on allows them.
**
** The rules hold for the native architecture and, on x86-64, for the
** 32-bit and x32 ABIs too (a program could make its calls through int
** 0x80), whose socketcall(2) carries socket's domain out of the filter's
** reach: socketcall(SYS_SOCKET) and SYS_SOCKETPAIR answer EAFNOSUPPORT for
** every domain there (a 32-bit program makes its sockets with socket(2),
** which the filter reads).
*/
#define _GNU_SOURCE
#include "drivers/ns/ns_seccomp.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

/* socketcall(2)'s call numbers (linux/net.h) */
#define SYS_SOCKET_CALL 1
#define SYS_SOCKETPAIR_CALL 8

/* the calls that answer EPERM whatever the flags */
static const char *const denied[] = {
    "bpf", "userfaultfd",
    "perf_event_open", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", NULL};

/* where every sandbox has the same host uids (ns_uids.h) */
static const char *const keyring_calls[] = {
    "add_key", "request_key", "keyctl", NULL};

static const char *const io_uring_calls[] = {
    "io_uring_setup", "io_uring_enter", "io_uring_register", NULL};

/* the flags that make a namespace; clone's low byte is its exit signal,
** so CLONE_NEWTIME (0x80) is unshare's and clone3's alone */
static const unsigned long ns_flags[] = {
    CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
    CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWTIME};

/* which argument of clone(2) holds the flags */
#if defined(__s390__) || defined(__CRIS__)
#define CLONE_FLAGS_ARG 1
#else
#define CLONE_FLAGS_ARG 0
#endif

/* rule_add's failure, in err: -1 */
static int rule_failed(const char *what, int rc, char *err, size_t errlen) {
  snprintf(err, errlen, "the syscall filter: %s: %s", what, strerror(-rc));
  return -1;
}

/* name answers errno e (a call this architecture lacks is skipped) */
static int deny(scmp_filter_ctx ctx, const char *name, int e, char *err,
                size_t errlen) {
  int nr = seccomp_syscall_resolve_name(name), rc;
  if (nr == __NR_SCMP_ERROR) return 0;
  rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO((unsigned)e), nr, 0);
  return rc < 0 && rc != -EDOM ? rule_failed(name, rc, err, errlen) : 0;
}

static int add_rules(scmp_filter_ctx ctx, const mp_ns_seccomp_opts *o,
                     char *err, size_t errlen) {
  int i, rc;
  for (i = 0; denied[i] != NULL; i++)
    if (deny(ctx, denied[i], EPERM, err, errlen) < 0) return -1;
  if (!o->keyrings)
    for (i = 0; keyring_calls[i] != NULL; i++)
      if (deny(ctx, keyring_calls[i], EPERM, err, errlen) < 0) return -1;
  if (!o->io_uring)
    for (i = 0; io_uring_calls[i] != NULL; i++)
      if (deny(ctx, io_uring_calls[i], EPERM, err, errlen) < 0) return -1;
  /* socket(2) and socketpair(2) of AF_VSOCK, on the low 32 bits alone (the
  ** kernel reads an int: 0x100000028 is AF_VSOCK too); on x86's 32-bit ABI
  ** libseccomp also writes the socketcall(2) forms, whose domain it cannot
  ** read: those answer for every domain (the header's note) */
  rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                        SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, AF_VSOCK));
  if (rc < 0) return rule_failed("socket", rc, err, errlen);
  rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT),
                        SCMP_SYS(socketpair), 1,
                        SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, AF_VSOCK));
  if (rc < 0) return rule_failed("socketpair", rc, err, errlen);
  if (o->nested_ns) return 0;
  for (i = 0; i < (int)(sizeof ns_flags / sizeof ns_flags[0]); i++) {
    unsigned long f = ns_flags[i];
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
                          SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
    if (rc < 0) return rule_failed("unshare", rc, err, errlen);
    if (f == CLONE_NEWTIME) continue;
    rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                          SCMP_CMP(CLONE_FLAGS_ARG, SCMP_CMP_MASKED_EQ, f, f));
    if (rc < 0) return rule_failed("clone", rc, err, errlen);
  }
  return deny(ctx, "clone3", ENOSYS, err, errlen);
}

int mp_ns_seccomp_write(const char *path, const mp_ns_seccomp_opts *o,
                        char *err, size_t errlen) {
  char tmp[4300];
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  int fd, rc = -1;
  if (ctx == NULL) {
    snprintf(err, errlen, "the syscall filter: seccomp_init failed");
    return -1;
  }
  /* a call of an ABI the filter does not know is killed, never allowed */
  if (seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0)
    seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL);
#if defined(__x86_64__)
  if ((rc = seccomp_arch_add(ctx, SCMP_ARCH_X86)) < 0 && rc != -EEXIST) {
    rule_failed("the x86 ABI", rc, err, errlen);
    goto out;
  }
  if ((rc = seccomp_arch_add(ctx, SCMP_ARCH_X32)) < 0 && rc != -EEXIST) {
    rule_failed("the x32 ABI", rc, err, errlen);
    goto out;
  }
#endif
  rc = -1;
  if (add_rules(ctx, o, err, errlen) < 0) goto out;
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(err, errlen, "the syscall filter: %s: %s", tmp, strerror(errno));
    goto out;
  }
  {
    int e = seccomp_export_bpf(ctx, fd);
    if (e == 0 && fsync(fd) < 0) e = -errno;
    if (close(fd) < 0 && e == 0) e = -errno;
    if (e == 0 && rename(tmp, path) < 0) e = -errno;
    if (e < 0) {
      unlink(tmp);
      snprintf(err, errlen, "the syscall filter: %s: %s", path, strerror(-e));
      goto out;
    }
  }
  rc = 0;
out:
  seccomp_release(ctx);
  return rc;
}
