/*
** The registry of sandbox drivers (drivers.h, docs/platform.md "Drivers"):
** which drivers there are, the default order, the choice at startup, and
** their flags on the command line. Each driver owns the rest in its own
** folder; a new driver is one line of the list below.
*/
#include "drivers/drivers.h"

#include <stdio.h>
#include <string.h>

#include "drivers/ns/ns_options.h" /* mp_ns_disk_asked */

extern const mp_driver mp_ns_driver, mp_process_driver;

/* the default start takes the first that can run here */
static const mp_driver *const drivers[] = {&mp_ns_driver, &mp_process_driver};

#define NDRIVERS (sizeof drivers / sizeof drivers[0])

static void list_names(char *out, size_t n) {
  size_t i, len = 0;
  out[0] = '\0';
  for (i = 0; i < NDRIVERS && len < n; i++)
    len += (size_t)snprintf(out + len, n - len, "%s%s", i ? ", " : "",
                            drivers[i]->name);
}

/* 0 chosen; -1 it cannot (err says why: a flag asks for what it cannot
** do); -2 it cannot run here (err says why) */
static int try_driver(mp_server *srv, const mp_driver *d, char *err,
                      size_t n) {
  char why[4400];
  if (d->available != NULL && !d->available(why, sizeof why)) {
    snprintf(err, n, "the %s driver cannot run here: %s", d->name, why);
    return -2;
  }
  if (d != &mp_ns_driver && mp_ns_disk_asked()) {
    snprintf(err, n, "the %s driver has no disk of a sandbox's own:"
             " --sandbox-disk-max, --sandbox-inodes-max and"
             " --sandbox-disk-reserve need the namespaces driver, run as"
             " root", d->name);
    return -1;
  }
  if (d->setup != NULL) {
    int rc = d->setup(srv, err, n);
    if (rc < 0) return rc;
  }
  srv->driver = d;
  return 0;
}

int mp_driver_pick(mp_server *srv, const char *requested) {
  char err[4600], names[256];
  size_t i;
  if (requested != NULL && requested[0] != '\0') {
    for (i = 0; i < NDRIVERS; i++)
      if (strcmp(drivers[i]->name, requested) == 0) break;
    if (i == NDRIVERS) {
      list_names(names, sizeof names);
      fprintf(stderr, "mastra-platform: unknown driver '%s' (available: %s)\n",
              requested, names);
      return -1;
    }
    if (try_driver(srv, drivers[i], err, sizeof err) < 0) {
      fprintf(stderr, "mastra-platform: %s\n", err);
      return -1;
    }
    return 0;
  }
  for (i = 0; i < NDRIVERS; i++) {
    int rc = try_driver(srv, drivers[i], err, sizeof err);
    if (rc == 0) return 0;
    if (rc == -1 || i + 1 == NDRIVERS) {
      fprintf(stderr, "mastra-platform: %s\n", err);
      return -1;
    }
    /* the next one runs: say why this one does not */
    fprintf(stderr, "mastra-platform: driver %s%s%s%s: %s\n",
            drivers[i + 1]->name, drivers[i + 1]->note ? " (" : "",
            drivers[i + 1]->note ? drivers[i + 1]->note : "",
            drivers[i + 1]->note ? ")" : "", err);
  }
  return -1;
}

void mp_driver_start(mp_server *srv) {
  if (srv->driver != NULL && srv->driver->start != NULL)
    srv->driver->start(srv);
}

void mp_driver_finish(mp_server *srv) {
  if (srv->driver != NULL && srv->driver->finish != NULL)
    srv->driver->finish(srv);
  srv->driver = NULL;
}

const mp_driver_flag *mp_driver_flag_find(const char *name) {
  size_t i;
  const mp_driver_flag *f;
  for (i = 0; i < NDRIVERS; i++)
    for (f = drivers[i]->flags; f != NULL && f->name != NULL; f++)
      if (strcmp(f->name, name) == 0) return f;
  return NULL;
}

void mp_driver_usage(FILE *out) {
  size_t i;
  const mp_driver_flag *f;
  for (i = 0; i < NDRIVERS; i++)
    for (f = drivers[i]->flags; f != NULL && f->name != NULL; f++) {
      char head[64];
      const char *h = f->help;
      int len = snprintf(head, sizeof head, "%s%s%s", f->name,
                         f->arg ? " " : "", f->arg ? f->arg : "");
      if (len > 20) fprintf(out, "  %s\n  %-20s ", head, "");
      else fprintf(out, "  %-20s ", head);
      for (; *h != '\0'; h++) {
        fputc(*h, out);
        if (*h == '\n') fprintf(out, "  %-20s ", "");
      }
      fputc('\n', out);
    }
}
