/*
** A sandbox's own disk, for the `namespaces` driver with
** --sandbox-disk-max (ns_disk.c; docs/platform.md, "Disk and inode
** quota"): a sparse ext4 image per sandbox, loop-mounted at the
** sandbox's ROOT, so its upper layer, work directory and merged mount
** point are inside it and a writer that fills it gets ENOSPC alone.
** Used by driver_ns.c (cold sandboxes, teardown, release) and ns_pool.c
** (warm members, made with theirs; a take moves it).
*/
#ifndef MP_NS_DISK_H
#define MP_NS_DISK_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "server.h"

/* the flags' checks and the empty image of this size and inode count
** (DATA/disks/empty-<bytes>-<inodes>.img, made by mkfs.ext4 when missing:
** a child the server waits for, before it serves). bytes 0: off (inodes
** must be 0 too). reserve: 1 each image is allocated whole when it is
** made (mounted without discard), 0 sparse, -1 not given (1; with bytes 0
** an error). 0, or -1 and err */
int mp_ns_disk_setup(const char *data_dir, long long bytes, long long inodes,
                     int reserve, int unpriv, char *err, size_t errlen);
/* the inspector's health: sandboxDisk, {maxBytes, inodes (0: mkfs's
** count), reserve} or null when off */
void mp_ns_disk_health(cJSON *o);
/* --sandbox-disk-max was given: new sandboxes get an image */
int mp_ns_disk_on(void);
/* DATA/disks/<id>.img */
void mp_ns_disk_path(const char *data_dir, const char *id, char *out,
                     size_t n);
/* a new image at img (a sparse copy of the empty one, then allocated
** whole where the start reserves: ENOSPC when the data disk has no room
** for SIZE), loop-attached
** (autoclear) and mounted nosuid,nodev (and discard, when sparse) at
** root (made when
** missing). On failure nothing is left (no image, mount nor loop device):
** -1, err, and errno (ENOSPC: no room for the image) */
int mp_ns_disk_make(const char *img, const char *root, char *err,
                    size_t errlen);
/* the image at img mounted at root (a sandbox loaded at start): 1 mounted
** now or already (a killed server's mount is adopted), 0 there is no
** image, -1 and err */
int mp_ns_disk_mount(const char *img, const char *root, char *err,
                     size_t errlen);
/* root unmounted (detached: what the sandbox's own mount namespace still
** holds goes with it, then the loop device); quiet when not mounted */
void mp_ns_disk_unmount(const char *root);
/* root unmounted (mp_ns_disk_unmount) and the image at img removed: a
** teardown's, a failed create's, an orphan's */
void mp_ns_disk_remove(const char *img, const char *root);
/* the image mounted at from is mounted at to instead (made when missing;
** from is left empty): a bind of it, then from detached. 0, or -1 and err */
int mp_ns_disk_move(const char *from, const char *to, char *err,
                    size_t errlen);
/* every mount at or under dir, detached (a killed server's warm pool) */
void mp_ns_disk_sweep(const char *dir);
/* at start, once the records are loaded: DATA/disks's images of no
** sandbox, and the empty images of other flags, removed */
void mp_ns_disk_sweep_orphans(mp_server *srv);

#endif
