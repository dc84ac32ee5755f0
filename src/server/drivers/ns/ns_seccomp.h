/*
** The syscall filter of a `namespaces` sandbox (ns_seccomp.c): built by
** the server with libseccomp, installed by mastra-ns-init in every
** sandbox process (init/ns_sys.h, mp_ns_filter_install).
*/
#ifndef MP_NS_SECCOMP_H
#define MP_NS_SECCOMP_H

#include <stddef.h>

typedef struct mp_ns_seccomp_opts {
  int nested_ns; /* --sandbox-nested-namespaces on: namespaces allowed */
  int io_uring;  /* --sandbox-io-uring on: io_uring allowed */
  int keyrings;  /* each sandbox has host uids of its own (ns_uids.h):
                 ** the keyring calls are allowed */
} mp_ns_seccomp_opts;

/* The filter as a classic BPF program (struct sock_filter[]) in the file
** path (written to path.tmp, then renamed): 0, or -1 and err. */
int mp_ns_seccomp_write(const char *path, const mp_ns_seccomp_opts *o,
                        char *err, size_t errlen);

#endif
