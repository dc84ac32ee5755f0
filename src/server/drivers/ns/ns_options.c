/*
** The flags of the `namespaces` driver (ns_options.h). Each is checked
** when the command line is read, before the server does any work.
*/
#include "drivers/ns/ns_options.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drivers/ns/init/ns_init.h" /* MP_NS_UID_COUNT */
#include "util/parse.h"

mp_ns_options mp_ns_opts = {.pids_max = MP_DEFAULT_PIDS_MAX,
                            .memory_max = MP_DEFAULT_MEMORY_MAX,
                            .cpu_max = -1, .egress = 1, .disk_reserve = -1,
                            .warm_pool = MP_DEFAULT_WARM_POOL,
                            .warm_pool_templates = MP_DEFAULT_WARM_POOL_TEMPLATES,
                            .warm_pool_template_max = MP_DEFAULT_WARM_POOL_TEMPLATE_MAX,
                            .uid_first = MP_DEFAULT_UID_FIRST,
                            .uid_ranges = MP_DEFAULT_UID_RANGES};

static int set_base(const char *v, char *err, size_t n) {
  (void)err, (void)n;
  mp_ns_opts.base = v[0] != '\0' ? v : NULL;
  return 0;
}

static int set_on_off(const char *flag, int *out, const char *v, char *err,
                      size_t n) {
  if (strcmp(v, "on") == 0) *out = 1;
  else if (strcmp(v, "off") == 0) *out = 0;
  else {
    snprintf(err, n, "%s wants on or off (got '%s')", flag, v);
    return -1;
  }
  return 0;
}

static int set_egress(const char *v, char *err, size_t n) {
  return set_on_off("--egress", &mp_ns_opts.egress, v, err, n);
}

static int set_nested_ns(const char *v, char *err, size_t n) {
  return set_on_off("--sandbox-nested-namespaces", &mp_ns_opts.nested_ns, v,
                    err, n);
}

static int set_io_uring(const char *v, char *err, size_t n) {
  return set_on_off("--sandbox-io-uring", &mp_ns_opts.io_uring, v, err, n);
}

static int set_rules(const char *flag, mp_egress_rules *r, const char *v, char *err,
                     size_t n) {
  char why[300];
  if (mp_egress_rules_add(r, v, why, sizeof why) < 0) {
    snprintf(err, n, "%s: %s", flag, why);
    return -1;
  }
  return 0;
}

static int set_allow(const char *v, char *err, size_t n) {
  return set_rules("--egress-allow", &mp_ns_opts.egress_cfg.allow, v, err, n);
}

static int set_deny(const char *v, char *err, size_t n) {
  return set_rules("--egress-deny", &mp_ns_opts.egress_cfg.deny, v, err, n);
}

static int set_open(const char *v, char *err, size_t n) {
  mp_egress_rules *r = &mp_ns_opts.egress_cfg.open;
  if (set_rules("--egress-open", r, v, err, n) < 0) return -1;
  if (r->nnames > 0) {
    snprintf(err, n, "--egress-open takes address ranges (CIDRs), not names");
    return -1;
  }
  return 0;
}

/* ADDR or ADDR:PORT (53) */
static int set_dns(const char *v, char *err, size_t n) {
  struct sockaddr_in *sin = &mp_ns_opts.egress_cfg.dns;
  char host[64];
  const char *colon = strchr(v, ':');
  long port = 53;
  size_t len = colon ? (size_t)(colon - v) : strlen(v);
  if (colon) {
    char *end;
    port = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || port < 1 || port > 65535) len = sizeof host;
  }
  if (len >= sizeof host) goto bad;
  memcpy(host, v, len);
  host[len] = '\0';
  memset(sin, 0, sizeof *sin);
  sin->sin_family = AF_INET;
  if (inet_pton(AF_INET, host, &sin->sin_addr) != 1) goto bad;
  sin->sin_port = htons((unsigned short)port);
  mp_ns_opts.dns_given = 1;
  return 0;
bad:
  snprintf(err, n, "--egress-dns wants an IPv4 address, with :PORT or not (got '%s')", v);
  return -1;
}

static int set_size(const char *flag, const char *v, long long *out,
                    char *err, size_t n) {
  long long size = mp_parse_size(v);
  if (size < 0) {
    snprintf(err, n, "%s wants a number (got '%s')", flag, v);
    return -1;
  }
  *out = size;
  return 0;
}

static int set_pids(const char *v, char *err, size_t n) {
  return set_size("--sandbox-pids-max", v, &mp_ns_opts.pids_max, err, n);
}

static int set_memory(const char *v, char *err, size_t n) {
  return set_size("--sandbox-memory-max", v, &mp_ns_opts.memory_max, err, n);
}

static int set_cpu(const char *v, char *err, size_t n) {
  char *end;
  double cpus = strtod(v, &end);
  if (*v == '\0' || *end != '\0' || !(cpus >= 0 && cpus <= 4096)
      || (cpus > 0 && cpus < 0.01)) {
    snprintf(err, n, "--sandbox-cpu-max wants a number of CPUs, 0.01 to 4096,"
             " or 0 for no cap (got '%s')", v);
    return -1;
  }
  mp_ns_opts.cpu_max = cpus;
  return 0;
}

double mp_ns_cpu_max(void) {
  long host;
  if (mp_ns_opts.cpu_max >= 0) return mp_ns_opts.cpu_max;
  host = sysconf(_SC_NPROCESSORS_ONLN);
  return host >= 4 ? (double)(host / 2) : 1.0;
}

/* SIZE with k/m/g suffixes, MP_DISK_MIN..MP_DISK_MAX, or 0 */
static int set_disk(const char *v, char *err, size_t n) {
  long long size = mp_parse_size(v);
  if (size < 0 || size > MP_DISK_MAX || (size > 0 && size < MP_DISK_MIN)) {
    snprintf(err, n, "--sandbox-disk-max wants a size from 16M to 16384G,"
             " K/M/G suffixes, or 0 for none (got '%s')", v);
    return -1;
  }
  mp_ns_opts.disk_max = size;
  return 0;
}

static int set_inodes(const char *v, char *err, size_t n) {
  char *end;
  long long count;
  errno = 0;
  count = (*v >= '0' && *v <= '9') ? strtoll(v, &end, 10) : -1;
  if (count < 0 || *end != '\0' || errno == ERANGE
      || (count > 0 && count < MP_INODES_MIN) || count > MP_INODES_MAX) {
    snprintf(err, n, "--sandbox-inodes-max wants a number of files from %lld"
             " to %lld, or 0 for mkfs.ext4's own count (got '%s')",
             MP_INODES_MIN, MP_INODES_MAX, v);
    return -1;
  }
  mp_ns_opts.inodes_max = count;
  return 0;
}

static int set_disk_reserve(const char *v, char *err, size_t n) {
  return set_on_off("--sandbox-disk-reserve", &mp_ns_opts.disk_reserve, v,
                    err, n);
}

int mp_ns_disk_asked(void) {
  return mp_ns_opts.disk_max > 0 || mp_ns_opts.inodes_max > 0
         || mp_ns_opts.disk_reserve >= 0;
}

static int set_warm_pool(const char *v, char *err, size_t n) {
  char *end;
  long count = strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || count < 0 || count > MP_WARM_POOL_MAX) {
    snprintf(err, n, "--warm-pool wants a number of sandboxes from 0 to %d"
             " (got '%s')", MP_WARM_POOL_MAX, v);
    return -1;
  }
  mp_ns_opts.warm_pool = (int)count;
  return 0;
}

static int set_count(const char *flag, const char *what, int max,
                     const char *v, int *out, char *err, size_t n) {
  char *end;
  long count = strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || count < 0 || count > max) {
    snprintf(err, n, "%s wants a number of %s from 0 to %d (got '%s')", flag,
             what, max, v);
    return -1;
  }
  *out = (int)count;
  return 0;
}

static int set_pool_templates(const char *v, char *err, size_t n) {
  return set_count("--warm-pool-templates", "sandboxes", MP_WARM_POOL_TEMPLATE_MAX, v,
                   &mp_ns_opts.warm_pool_templates, err, n);
}

static int set_pool_template_max(const char *v, char *err, size_t n) {
  return set_count("--warm-pool-template-max", "templates",
                   MP_WARM_POOL_TEMPLATE_MAX, v,
                   &mp_ns_opts.warm_pool_template_max, err, n);
}

/* FIRST:COUNT: COUNT ranges of MP_NS_UID_COUNT host uids from FIRST, all
** of them below 2^32 - 1 (the kernel's invalid uid) */
static int set_uid_ranges(const char *v, char *err, size_t n) {
  unsigned long long first, count;
  char *end;
  const char *colon = strchr(v, ':');
  if (colon == NULL || colon == v || colon[1] == '\0') goto bad;
  first = strtoull(v, &end, 10);
  if (end != colon || v[0] == '-') goto bad;
  count = strtoull(colon + 1, &end, 10);
  if (*end != '\0' || colon[1] == '-') goto bad;
  if (first < MP_NS_UID_COUNT || count < 1 || count > MP_UID_RANGES_MAX
      || first + count * MP_NS_UID_COUNT > 0xffffffffull)
    goto bad;
  mp_ns_opts.uid_first = (unsigned)first;
  mp_ns_opts.uid_ranges = (unsigned)count;
  return 0;
bad:
  snprintf(err, n, "--sandbox-uid-ranges wants FIRST:COUNT, COUNT ranges of"
           " 65536 host uids from uid FIRST (at least 65536; COUNT 1 to %u,"
           " all below 4294967295), e.g. 100000:1024 (got '%s')",
           MP_UID_RANGES_MAX, v);
  return -1;
}

const mp_driver_flag mp_ns_flags[] = {
    {"--base", "DIR", "the sandboxes' base (namespaces; default DATA_DIR/base,\n"
     "built at the first start; env MASTRA_PLATFORM_BASE)", set_base},
    {"--egress", "on|off", "sandboxes reach the internet through the server's\n"
     "egress proxy, never the host or private ranges (namespaces;\ndefault on)",
     set_egress},
    {"--egress-allow", "RULES", "only these destinations: CIDRs, names, *.names,\n"
     "comma-separated, repeatable (namespaces; default: all)", set_allow},
    {"--egress-deny", "RULES", "never these destinations (as --egress-allow;\n"
     "deny wins over allow)", set_deny},
    {"--egress-open", "CIDRS", "private or special ranges that sandboxes may reach\n"
     "(namespaces; default none; the host's own addresses never)", set_open},
    {"--egress-dns", "ADDR[:PORT]", "the resolver behind the sandboxes' DNS\n"
     "(namespaces; default the first nameserver of /etc/resolv.conf)", set_dns},
    {"--sandbox-pids-max", "N", "processes per sandbox (namespaces; default"
     " 1024; 0: no limit)", set_pids},
    {"--sandbox-memory-max", "SIZE", "memory per sandbox, k/m/g suffixes"
     " (namespaces; default 2g;\n0: no limit)", set_memory},
    {"--sandbox-cpu-max", "N", "CPUs per sandbox, fractions allowed"
     " (namespaces; default half\nthe host's, at least 1; 0: no cap)", set_cpu},
    {"--sandbox-disk-max", "SIZE", "each sandbox's own disk, K/M/G suffixes:"
     " an ext4 image\nloop-mounted under its layer; a writer past it"
     " gets ENOSPC\n(namespaces, with root; default 0: none)", set_disk},
    {"--sandbox-inodes-max", "N", "files (inodes) of each sandbox's own disk"
     " (with\n--sandbox-disk-max; default 0: mkfs.ext4's count for its size)",
     set_inodes},
    {"--sandbox-disk-reserve", "on|off", "each sandbox's disk is allocated on"
     " the data disk when it\nis made (a create without room for it: 507);"
     " off: sparse, so the\nlimits may add up to more than the data disk"
     " (with\n--sandbox-disk-max; default on)", set_disk_reserve},
    {"--sandbox-nested-namespaces", "on|off", "sandboxes may make namespaces"
     " of their own (user, net,\nmount...: containers in a sandbox; namespaces;"
     " default off)", set_nested_ns},
    {"--sandbox-io-uring", "on|off", "sandboxes may use io_uring (namespaces;"
     " default off)", set_io_uring},
    {"--sandbox-uid-ranges", "FIRST:COUNT", "host uids of the sandboxes: COUNT"
     " ranges of 65536 from\nuid FIRST, one a sandbox (namespaces, with root;"
     " default\n100000:1024)", set_uid_ranges},
    {"--warm-pool", "N", "ISOLATED sandboxes kept started ahead, for a fast"
     " create\n(namespaces; default 2; 0: none, of templates too)", set_warm_pool},
    {"--warm-pool-templates", "K", "sandboxes kept started ahead per recently"
     " used template\n(namespaces; default 1; 0: none)", set_pool_templates},
    {"--warm-pool-template-max", "T", "templates whose sandboxes are kept"
     " started ahead, the most\nrecently used (namespaces; default 4; 0: none)",
     set_pool_template_max},
    {NULL, NULL, NULL, NULL},
};
