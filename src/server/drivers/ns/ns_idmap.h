/*
** Idmapped lower layers of the namespaces driver with root (ns_idmap.c,
** docs/platform.md "The base"): the base and the host's /usr mounted with
** the sandboxes' id map, so that the host's root owns them inside too.
*/
#ifndef MP_NS_IDMAP_H
#define MP_NS_IDMAP_H
#include <stddef.h>

#include "drivers/ns/init/ns_init.h" /* MP_NS_IDMAP_FD */

/* A user namespace whose map is 0 -> base, count ids (uid and gid): an
** open descriptor, or -1 and why. */
int mp_ns_idmap_userns(unsigned base, unsigned count, char *why, size_t n);

/* Can dir be mounted idmapped here? Tried in a child with a mount
** namespace of its own. 1, or 0 and why. */
int mp_ns_idmap_probe(int userns_fd, const char *dir, char *why, size_t n);

/* Can the sandboxes' layers under data_dir be mounted idmapped from
** MP_NS_UID_BASE to another range (ns_uids.h)? 1, or 0 and why. */
int mp_ns_idmap_layers_probe(const char *data_dir, char *why, size_t n);

/* At the server's start, with root: the user namespace of the sandboxes'
** id map, where the base and /usr can be mounted idmapped; else -1 after
** saying so in the log (their files are nobody's in the sandboxes) */
int mp_ns_idmap_open(const char *base);

#endif
