/*
** The flags of the `namespaces` driver (ns_options.c): its table for the
** registry and --help, and the values they set, which driver_ns.c reads
** when it is set up.
*/
#ifndef MP_NS_OPTIONS_H
#define MP_NS_OPTIONS_H

#include "net/egress.h"
#include "sandbox/sandbox.h"

#define MP_DEFAULT_PIDS_MAX 1024
#define MP_DEFAULT_MEMORY_MAX (2LL << 30)
#define MP_DEFAULT_WARM_POOL 2
#define MP_WARM_POOL_MAX 64
/* --warm-pool-templates K, --warm-pool-template-max T (ns_pool.c) */
#define MP_DEFAULT_WARM_POOL_TEMPLATES 1
#define MP_DEFAULT_WARM_POOL_TEMPLATE_MAX 4
#define MP_WARM_POOL_TEMPLATE_MAX 16 /* either flag at most */
/* --sandbox-uid-ranges: host uids 100000.. in 1024 ranges of 65536 */
#define MP_DEFAULT_UID_FIRST 100000u
#define MP_DEFAULT_UID_RANGES 1024u
#define MP_UID_RANGES_MAX 65535u
/* --sandbox-disk-max, --sandbox-inodes-max (ns_disk.c) */
#define MP_DISK_MIN (16LL << 20)
#define MP_DISK_MAX (16LL << 40)
#define MP_INODES_MIN 64LL
#define MP_INODES_MAX 4294967295LL

typedef struct mp_ns_options {
  const char *base;     /* --base, else MASTRA_PLATFORM_BASE; NULL: DATA/base */
  long long pids_max;   /* per sandbox; 0: no limit */
  long long memory_max; /* bytes per sandbox; 0: no limit */
  double cpu_max;       /* CPUs per sandbox; 0: no cap; < 0: the default,
                        ** half the host's CPUs (at least one) */
  int egress;           /* --egress on|off: the way out (net.h, egress.h) */
  int warm_pool;        /* sandboxes started ahead (ns_pool.c) */
  int warm_pool_templates;     /* members per recently used template */
  int warm_pool_template_max;  /* templates with members, at most */
  mp_egress_config egress_cfg; /* --egress-allow, -deny, -open, -dns */
  int dns_given;        /* --egress-dns was given */
  int nested_ns;        /* --sandbox-nested-namespaces on (ns_seccomp.c) */
  int io_uring;         /* --sandbox-io-uring on (ns_seccomp.c) */
  unsigned uid_first;   /* --sandbox-uid-ranges FIRST:COUNT (ns_uids.c) */
  unsigned uid_ranges;
  long long disk_max;   /* --sandbox-disk-max: bytes of each sandbox's own
                        ** disk (ns_disk.c); 0: none */
  long long inodes_max; /* --sandbox-inodes-max: its inodes; 0: mkfs's */
  int disk_reserve;     /* --sandbox-disk-reserve on (1) or off (0); -1:
                        ** not given (on) */
} mp_ns_options;

extern mp_ns_options mp_ns_opts;

/* the CPUs a sandbox may use (mp_ns_opts.cpu_max, its default resolved) */
double mp_ns_cpu_max(void);
extern const mp_driver_flag mp_ns_flags[];
/* --sandbox-disk-max or --sandbox-inodes-max was given (not 0), or
** --sandbox-disk-reserve: the driver that runs must be `namespaces`, with
** root (drivers.c) */
int mp_ns_disk_asked(void);

#endif
