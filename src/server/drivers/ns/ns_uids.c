/*
** The host uid ranges of the sandboxes (ns_uids.h): a bitmap of the
** ranges the server owns, on the loop's thread alone.
*/
#include "drivers/ns/ns_uids.h"

#include <stdlib.h>

#include "drivers/ns/init/ns_init.h" /* MP_NS_UID_BASE, MP_NS_UID_COUNT */

static struct {
  unsigned first, count, taken, next;
  int shared;
  unsigned char *used; /* one byte a range */
} uids = {MP_NS_UID_BASE, 1, 0, 0, 1, NULL};

void mp_ns_uids_setup(unsigned first, unsigned count, int shared) {
  free(uids.used);
  uids.used = NULL;
  uids.first = first;
  uids.count = count;
  uids.taken = uids.next = 0;
  uids.shared = shared || count == 0;
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

unsigned mp_ns_uids_taken(void) { return uids.taken; }

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
