/*
** A sandbox's tree on the host, for the `namespaces` driver (ns_tree.c):
** ROOT/{upper,work,merged}, and for a sandbox of a template (or a warm
** member of one) ROOT/template, the link to the template's layer that its
** keeper puts between the base and ROOT's own layer (MP_NS_TEMPLATE_LINK,
** ns_init.c). Used by driver_ns.c, for cold sandboxes and, through
** mp_ns_box_ops, for the warm pool's members.
*/
#ifndef MP_NS_TREE_H
#define MP_NS_TREE_H

#include <stddef.h>

/* root/{upper,work,merged}, with upper's workspace and root's home owned
** by the sandbox's root: 0, or -1 and err */
int mp_ns_tree_make(const char *root, char *err, size_t errlen);
/* root/template -> DATA_DIR/templates/<key>/layer: 0, or -1 and err
** (errno ENOENT: the layer is gone) */
int mp_ns_tree_link(const char *data_dir, const char *root, const char *key,
                    char *err, size_t errlen);

#endif
