/*
** A sandbox's tree on the host (ns_tree.h).
*/
#define _GNU_SOURCE
#include "drivers/ns/ns_tree.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "drivers/ns/init/ns_init.h" /* MP_NS_UID_BASE, MP_NS_TEMPLATE_LINK */
#include "drivers/ns/ns_host.h"
#include "util.h"

static int make_owned(const char *path, int mode) {
  if (mkdir(path, (mode_t)mode) < 0 && errno != EEXIST) return -1;
  /* without root, the server's uid is root in the sandbox already */
  if (!mp_ns_host.unpriv && chown(path, MP_NS_UID_BASE, MP_NS_UID_BASE) < 0)
    return -1;
  return chmod(path, (mode_t)mode);
}

int mp_ns_tree_make(const char *root, char *err, size_t errlen) {
  static const char *const parts[] = {"upper", "work", "merged"};
  char path[4400];
  size_t i;
  for (i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", root, parts[i]);
    if (mastra__mkdirs(path, 0755, NULL) < 0) goto fail;
  }
  snprintf(path, sizeof path, "%s/upper/workspace", root);
  if (make_owned(path, 0755) < 0) goto fail;
  snprintf(path, sizeof path, "%s/upper/root", root);
  if (make_owned(path, 0700) < 0) goto fail;
  return 0;
fail:
  snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
  return -1;
}

int mp_ns_tree_link(const char *data_dir, const char *root, const char *key,
                    char *err, size_t errlen) {
  char link[4400], layer[4400];
  snprintf(link, sizeof link, "%s/" MP_NS_TEMPLATE_LINK, root);
  snprintf(layer, sizeof layer, "%s/templates/%s/layer", data_dir, key);
  if (access(layer, F_OK) < 0) {
    int e = errno;
    snprintf(err, errlen, "the layer of its template (%s) is gone", layer);
    errno = e;
    return -1;
  }
  if (symlink(layer, link) < 0 && errno != EEXIST) {
    snprintf(err, errlen, "cannot link %s: %s", link, strerror(errno));
    return -1;
  }
  return 0;
}
