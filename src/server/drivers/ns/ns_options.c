/*
** The flags of the `namespaces` driver (ns_options.h). Each is checked
** when the command line is read, before the server does any work.
*/
#include "drivers/ns/ns_options.h"

#include <stdio.h>
#include <stdlib.h>

#include "util/parse.h"

mp_ns_options mp_ns_opts = {NULL, MP_DEFAULT_PIDS_MAX, MP_DEFAULT_MEMORY_MAX,
                            0, MP_DEFAULT_WARM_POOL};

static int set_base(const char *v, char *err, size_t n) {
  (void)err, (void)n;
  mp_ns_opts.base = v[0] != '\0' ? v : NULL;
  return 0;
}

static int set_egress(const char *v, char *err, size_t n) {
  (void)v, (void)err, (void)n;
  mp_ns_opts.egress = 1;
  return 0;
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

const mp_driver_flag mp_ns_flags[] = {
    {"--base", "DIR", "the sandboxes' base (namespaces; default DATA_DIR/base,\n"
     "built at the first start; env MASTRA_PLATFORM_BASE)", set_base},
    {"--egress", NULL, "PRIVATE sandboxes reach out through NAT (namespaces;\n"
     "default off: no traffic leaves the platform's namespaces)", set_egress},
    {"--sandbox-pids-max", "N", "processes per sandbox (namespaces; default"
     " 1024; 0: no limit)", set_pids},
    {"--sandbox-memory-max", "SIZE", "memory per sandbox, k/m/g suffixes"
     " (namespaces; default 2g;\n0: no limit)", set_memory},
    {"--warm-pool", "N", "ISOLATED sandboxes kept started ahead, for a fast"
     " create\n(namespaces; default 2; 0: none)", set_warm_pool},
    {NULL, NULL, NULL, NULL},
};
