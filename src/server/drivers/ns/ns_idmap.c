/*
** Idmapped lower layers (ns_idmap.h). With root, a sandbox's ids 0..65535
** are host ids MP_NS_UID_BASE.. (ns_init.h): the base's and /usr's files,
** owned by host uid 0, would be nobody's inside, and root in a sandbox
** could not write /etc or /usr/local. The keeper mounts them idmapped
** (open_tree(OPEN_TREE_CLONE), mount_setattr(MOUNT_ATTR_IDMAP) with a
** user namespace of the same map, move_mount) and gives the mounts to
** overlayfs as its lower layers: host 0 shows as 0 inside, and a copy-up
** belongs to the sandbox's root (host MP_NS_UID_BASE). The server makes
** that user namespace once (it needs no process: its descriptor keeps it)
** and hands it to each keeper as descriptor MP_NS_IDMAP_FD.
*/
#define _GNU_SOURCE
#include "drivers/ns/ns_idmap.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/log.h"
#include "drivers/ns/init/ns_init.h"
#include "drivers/ns/init/ns_sys.h"
#include "drivers/ns/ns_user.h"

int mp_ns_idmap_userns(unsigned base, unsigned count, char *why, size_t n) {
  char map[64];
  int fd;
  snprintf(map, sizeof map, "0 %u %u\n", base, count);
  fd = mp_ns_userns_of(map);
  if (fd < 0) snprintf(why, n, "a user namespace of the id map: %s",
                       strerror(errno));
  return fd;
}

typedef struct probe {
  int userns_fd;
  const char *dir;
} probe;

/* over dir itself, in a mount namespace that dies with the child */
static int idmap_probe(void *arg, char *msg, size_t n) {
  probe *p = arg;
  if (unshare(CLONE_NEWNS) == 0
      && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0
      && mp_ns_idmap_mount(p->userns_fd, p->dir, p->dir) == 0)
    return 0;
  snprintf(msg, n, "%s", strerror(errno));
  return -1;
}

int mp_ns_idmap_probe(int userns_fd, const char *dir, char *why, size_t n) {
  probe p;
  char msg[400];
  p.userns_fd = userns_fd;
  p.dir = dir;
  if (mp_ns_try(idmap_probe, &p, msg, sizeof msg)) return 1;
  snprintf(why, n, "an idmapped mount of %s: %s", dir, msg);
  return 0;
}

int mp_ns_idmap_layers_probe(const char *data_dir, char *why, size_t n) {
  char map[96], msg[600];
  int fd, ok;
  /* a range that is not MP_NS_UID_BASE's, as the keeper's (ns_init.c) */
  snprintf(map, sizeof map, "0 0 1\n%u %u %u\n", MP_NS_UID_BASE,
           MP_NS_UID_BASE + MP_NS_UID_COUNT, MP_NS_UID_COUNT);
  fd = mp_ns_userns_of(map);
  if (fd < 0) {
    snprintf(why, n, "a user namespace of the layers' id map: %s",
             strerror(errno));
    return 0;
  }
  ok = mp_ns_idmap_probe(fd, data_dir, msg, sizeof msg);
  close(fd);
  if (!ok) snprintf(why, n, "the sandboxes' layers cannot be idmapped: %s", msg);
  return ok;
}

int mp_ns_idmap_open(const char *base) {
  char why[600];
  int fd = mp_ns_idmap_userns(MP_NS_UID_BASE, MP_NS_UID_COUNT, why,
                              sizeof why);
  if (fd >= 0 && mp_ns_idmap_probe(fd, base, why, sizeof why)
      && mp_ns_idmap_probe(fd, "/usr", why, sizeof why))
    return fd;
  if (fd >= 0) close(fd);
  mp_log("the base's files belong to nobody in the sandboxes (root there"
         " cannot write /etc or /usr): %s", why);
  return -1;
}
