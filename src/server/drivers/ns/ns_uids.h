/*
** The host uid ranges of the `namespaces` driver's sandboxes (ns_uids.c;
** docs/platform.md, "Host uids"): each sandbox's ids 0..MP_NS_UID_COUNT-1
** are host ids base.., one range a sandbox, from the ranges the server owns
** (--sandbox-uid-ranges FIRST:COUNT), so that what the kernel keeps per uid
** (keyrings, inotify's and every other per-user budget) is the sandbox's
** own. Where the ranges cannot be told apart (without root, or without
** idmapped mounts), every sandbox has the one range MP_NS_UID_BASE.
*/
#ifndef MP_NS_UIDS_H
#define MP_NS_UIDS_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* count ranges from host uid first (shared: every take answers
** MP_NS_UID_BASE, nothing is counted, and a sandbox's record says
** shared_uid, the host uid of every sandbox's root: MP_NS_UID_BASE with
** root, the server's own without) */
void mp_ns_uids_setup(unsigned first, unsigned count, int shared,
                      unsigned shared_uid);

/* 1 if each sandbox has a range of its own */
int mp_ns_uids_own(void);

/* A free range's base: want (a sandbox's recorded one) if it is free, else
** the next free one after the last taken (a range freed is taken again as
** late as possible); 0 when none is free. */
unsigned mp_ns_uids_take(unsigned want);

/* base's range is free again (0: nothing): its sandbox is gone, every
** process of it reaped */
void mp_ns_uids_put(unsigned base);

/* what a sandbox of range base records as the host uid of its root */
unsigned mp_ns_uids_recorded(unsigned base);

/* the ranges owned */
unsigned mp_ns_uids_count(void);

/* into the inspector's health: hostUids {own, first, ranges, taken} */
void mp_ns_uids_health(cJSON *o);

/* {====== a box's range (ns_box.h) ====== */
struct ns_box;

/* b's range, taken at its first keeper (a recorded one if it is free), and
** its sandbox's uid_base (its record's): 0, or -1 and err */
int mp_ns_uids_take_box(struct ns_box *b, char *err, size_t errlen);

/* b is freed: its range is free again, unless its processes may outlive
** it (b->uid_kept) */
void mp_ns_uids_put_box(struct ns_box *b);

/* a destroyed sandbox's range, free again once its keeper is reaped and
** its cgroups are removed (every process of it is gone); its record keeps
** saying which it was */
void mp_ns_uids_put_if_gone(struct ns_box *b);

/* }====== */

#endif
