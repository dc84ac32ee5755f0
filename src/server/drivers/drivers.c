/*
** The choice of the driver at startup (drivers.h, docs/platform.md
** "Drivers"), and `mastra-platform base build`.
*/
#define _GNU_SOURCE
#include "drivers/drivers.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drivers/ns/base.h"
#include "drivers/ns/driver_ns.h"
#include "drivers/process/driver_process.h"
#include "util/log.h"

long long mp_parse_size(const char *v) {
  char *end;
  long long n;
  if (v == NULL || *v < '0' || *v > '9') return -1;
  n = strtoll(v, &end, 10);
  if (*end == 'k' || *end == 'K') n <<= 10, end++;
  else if (*end == 'm' || *end == 'M') n <<= 20, end++;
  else if (*end == 'g' || *end == 'G') n <<= 30, end++;
  return *end == '\0' && n >= 0 ? n : -1;
}

static void base_path(const char *data_dir, const char *base, char *out,
                      size_t n) {
  if (base != NULL)
    snprintf(out, n, "%s", base);
  else
    snprintf(out, n, "%s/base", data_dir);
}

int mp_driver_pick(mp_server *srv, const mp_driver_opts *o) {
  char why[4400], base[4096], real[PATH_MAX], err[1024];
  int forced = o->requested != NULL;
  if (forced && strcmp(o->requested, "process") == 0) {
    srv->driver = &mp_process_driver;
    return 0;
  }
  if (forced && strcmp(o->requested, "namespaces") != 0) {
    fprintf(stderr, "mastra-platform: unknown driver '%s' (available:"
            " process, namespaces)\n", o->requested);
    return -1;
  }
  if (!mp_ns_available(why, sizeof why)) {
    if (forced) {
      fprintf(stderr, "mastra-platform: the namespaces driver cannot run"
              " here: %s\n", why);
      return -1;
    }
    fprintf(stderr, "mastra-platform: driver process (no isolation): the"
            " namespaces driver cannot run here: %s\n", why);
    srv->driver = &mp_process_driver;
    return 0;
  }
  base_path(srv->data_dir, o->base, base, sizeof base);
  if (!mp_base_ready(base)) {
    /* a skeleton over the host's /usr (a moment, without root), then
    ** TypeScript and tsx from the npm registry (about 10 s; bounded in
    ** base.c, and the base is built without them where it cannot be
    ** reached) */
    mp_log("building the base of the sandboxes in %s (once): the host's"
           " tools, then TypeScript and tsx from the npm registry", base);
    if (mp_base_build(base, 0, err, sizeof err) < 0) {
      if (forced) {
        fprintf(stderr, "mastra-platform: %s\n", err);
        return -1;
      }
      fprintf(stderr, "mastra-platform: driver process (no isolation): %s\n",
              err);
      srv->driver = &mp_process_driver;
      return 0;
    }
  }
  /* mounts name it without following a symlink (move_mount's target) */
  if (realpath(base, real) == NULL) {
    fprintf(stderr, "mastra-platform: the base %s: %s\n", base,
            strerror(errno));
    return -1;
  }
  if (mp_ns_setup(srv, real, o->pids_max, o->memory_max, o->egress,
                  o->warm_pool) < 0)
    return -1;
  srv->driver = &mp_ns_driver;
  return 0;
}

void mp_driver_start(mp_server *srv) {
  if (srv->driver == &mp_ns_driver) mp_ns_start(srv);
}

void mp_driver_finish(mp_server *srv) {
  if (srv->driver == &mp_ns_driver) mp_ns_finish();
}

int mp_base_command(int argc, char **argv) {
  const char *data_dir = NULL, *base = NULL;
  char dir[4096], err[1024];
  int i, minimal = 0;
  if (argc < 3 || strcmp(argv[2], "build") != 0) goto usage;
  for (i = 3; i < argc; i++) {
    if (strcmp(argv[i], "--minimal") == 0) minimal = 1;
    else if (strcmp(argv[i], "--data-dir") == 0 && i + 1 < argc)
      data_dir = argv[++i];
    else if (strcmp(argv[i], "--base") == 0 && i + 1 < argc)
      base = argv[++i];
    else goto usage;
  }
  if (base == NULL && data_dir == NULL) {
    fprintf(stderr, "mastra-platform base build: give --data-dir DIR (the"
            " base goes to DIR/base) or --base DIR\n");
    return 2;
  }
  base_path(data_dir, base, dir, sizeof dir);
  if (mp_base_build(dir, minimal, err, sizeof err) < 0) {
    fprintf(stderr, "mastra-platform base build: %s\n", err);
    return 1;
  }
  printf("%s\n", dir);
  return 0;
usage:
  fprintf(stderr, "usage: mastra-platform base build [--data-dir DIR |"
          " --base DIR] [--minimal]\n");
  return 2;
}
