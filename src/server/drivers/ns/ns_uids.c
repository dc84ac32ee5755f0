/*
** The host uid ranges of the sandboxes (ns_uids.h): a byte a range the
** server owns, on the loop's thread alone, and the ranges of the boxes.
*/
#include "drivers/ns/ns_uids.h"

#include <stdio.h>
#include <stdlib.h>

#include "drivers/ns/ns_box.h"

#include "drivers/ns/init/ns_init.h" /* MP_NS_UID_BASE, MP_NS_UID_COUNT */

static struct {
  unsigned first, count, taken, next;
  int shared;
  unsigned shared_uid;
  unsigned char *used; /* one byte a range */
} uids = {MP_NS_UID_BASE, 1, 0, 0, 1, MP_NS_UID_BASE, NULL};

void mp_ns_uids_setup(unsigned first, unsigned count, int shared,
                      unsigned shared_uid) {
  free(uids.used);
  uids.used = NULL;
  uids.first = first;
  uids.count = count;
  uids.taken = uids.next = 0;
  uids.shared = shared || count == 0;
  uids.shared_uid = shared_uid;
  if (!uids.shared) {
    uids.used = calloc(count, 1);
    if (uids.used == NULL) uids.shared = 1; /* as without idmapped mounts */
  }
  if (uids.shared) {
    uids.first = MP_NS_UID_BASE;
    uids.count = 1;
  }
}

int mp_ns_uids_own(void) { return !uids.shared; }

unsigned mp_ns_uids_count(void) { return uids.count; }

void mp_ns_uids_health(cJSON *o) {
  cJSON *h = cJSON_AddObjectToObject(o, "hostUids");
  if (h == NULL) return;
  cJSON_AddBoolToObject(h, "own", !uids.shared);
  cJSON_AddNumberToObject(h, "first", uids.shared ? uids.shared_uid : uids.first);
  cJSON_AddNumberToObject(h, "ranges", uids.count);
  cJSON_AddNumberToObject(h, "taken", uids.taken);
}

static unsigned base_of(unsigned i) { return uids.first + i * MP_NS_UID_COUNT; }

unsigned mp_ns_uids_take(unsigned want) {
  unsigned i, k;
  if (uids.shared) return MP_NS_UID_BASE;
  if (want >= uids.first && (want - uids.first) % MP_NS_UID_COUNT == 0) {
    i = (want - uids.first) / MP_NS_UID_COUNT;
    if (i < uids.count && !uids.used[i]) goto take;
  }
  for (k = 0; k < uids.count; k++) {
    i = (uids.next + k) % uids.count;
    if (!uids.used[i]) goto take;
  }
  return 0;
take:
  uids.used[i] = 1;
  uids.taken++;
  uids.next = (i + 1) % uids.count;
  return base_of(i);
}

void mp_ns_uids_put(unsigned base) {
  unsigned i;
  if (uids.shared || base < uids.first
      || (base - uids.first) % MP_NS_UID_COUNT != 0)
    return;
  i = (base - uids.first) / MP_NS_UID_COUNT;
  if (i >= uids.count || !uids.used[i]) return;
  uids.used[i] = 0;
  uids.taken--;
}

unsigned mp_ns_uids_recorded(unsigned base) {
  return uids.shared ? uids.shared_uid : base;
}

int mp_ns_uids_take_box(ns_box *b, char *err, size_t errlen) {
  if (b->uid_base == 0) {
    b->uid_base = mp_ns_uids_take(b->sb != NULL ? b->sb->uid_base : 0);
    if (b->uid_base == 0) {
      snprintf(err, errlen, "no free host uid range: the server has %u, one"
               " a sandbox (--sandbox-uid-ranges)", uids.count);
      return -1;
    }
  }
  if (b->sb != NULL) b->sb->uid_base = mp_ns_uids_recorded(b->uid_base);
  return 0;
}

void mp_ns_uids_put_box(ns_box *b) {
  if (!b->uid_kept) mp_ns_uids_put(b->uid_base);
  b->uid_base = 0;
}

void mp_ns_uids_put_if_gone(ns_box *b) {
  if (b->torn && b->keeper_fd < 0 && !b->cg_made) mp_ns_uids_put_box(b);
}
