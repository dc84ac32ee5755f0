/*
** A string-keyed index of mastra-platform (index.c): a chained hash table
** that maps a key to one value, used for the sandboxes by id and the exec
** leases by token, so that no request walks every record.
*/
#ifndef MP_INDEX_H
#define MP_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct mp_index_entry mp_index_entry;

typedef struct mp_index {
  mp_index_entry **buckets;
  size_t nbuckets, count;
  uint64_t seed; /* random: keys chosen by a client cannot be aimed at one
                 ** bucket without knowing it */
} mp_index;

/* key is copied; value is the caller's. -1 out of memory. A key already
** present gets the new value. */
int mp_index_put(mp_index *ix, const char *key, void *value);
void *mp_index_get(const mp_index *ix, const char *key);
/* remove key if it maps to value (NULL: whatever it maps to) */
void mp_index_del(mp_index *ix, const char *key, const void *value);
void mp_index_free(mp_index *ix);

#endif
