/*
** A string-keyed chained hash table (index.h). The hash is FNV-1a over
** the key, started from a random seed and finished with a 64-bit mixer;
** the table doubles when it holds more keys than buckets, so a lookup
** costs one short chain whatever the number of records.
*/
#include "util/index.h"

#include <stdlib.h>
#include <string.h>

#include "util.h"

struct mp_index_entry {
  mp_index_entry *next;
  uint64_t hash;
  void *value;
  char key[];
};

static uint64_t hash_key(const mp_index *ix, const char *key) {
  uint64_t h = 0xcbf29ce484222325ull ^ ix->seed;
  const unsigned char *p = (const unsigned char *)key;
  for (; *p; p++) {
    h ^= *p;
    h *= 0x100000001b3ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

static int grow(mp_index *ix) {
  size_t n = ix->nbuckets ? ix->nbuckets * 2 : 64, i;
  mp_index_entry **b = calloc(n, sizeof *b);
  if (b == NULL) return -1;
  if (ix->nbuckets == 0) {
    char hex[17];
    if (mastra__random_hex(hex, 8) == 0) ix->seed = strtoull(hex, NULL, 16);
  }
  for (i = 0; i < ix->nbuckets; i++) {
    mp_index_entry *e = ix->buckets[i], *next;
    for (; e != NULL; e = next) {
      next = e->next;
      e->next = b[e->hash & (n - 1)];
      b[e->hash & (n - 1)] = e;
    }
  }
  free(ix->buckets);
  ix->buckets = b;
  ix->nbuckets = n;
  return 0;
}

static mp_index_entry **find(const mp_index *ix, const char *key,
                             uint64_t h) {
  mp_index_entry **p = &ix->buckets[h & (ix->nbuckets - 1)];
  for (; *p != NULL; p = &(*p)->next)
    if ((*p)->hash == h && strcmp((*p)->key, key) == 0) return p;
  return p;
}

int mp_index_put(mp_index *ix, const char *key, void *value) {
  mp_index_entry **p, *e;
  uint64_t h;
  size_t len = strlen(key);
  if ((ix->nbuckets == 0 || ix->count >= ix->nbuckets) && grow(ix) < 0
      && ix->nbuckets == 0)
    return -1;
  h = hash_key(ix, key);
  p = find(ix, key, h);
  if (*p != NULL) {
    (*p)->value = value;
    return 0;
  }
  e = malloc(sizeof *e + len + 1);
  if (e == NULL) return -1;
  e->next = NULL;
  e->hash = h;
  e->value = value;
  memcpy(e->key, key, len + 1);
  *p = e;
  ix->count++;
  return 0;
}

void *mp_index_get(const mp_index *ix, const char *key) {
  mp_index_entry **p;
  if (ix->nbuckets == 0) return NULL;
  p = find(ix, key, hash_key(ix, key));
  return *p != NULL ? (*p)->value : NULL;
}

void mp_index_del(mp_index *ix, const char *key, const void *value) {
  mp_index_entry **p, *e;
  if (ix->nbuckets == 0) return;
  p = find(ix, key, hash_key(ix, key));
  e = *p;
  if (e == NULL || (value != NULL && e->value != value)) return;
  *p = e->next;
  free(e);
  ix->count--;
}

void mp_index_free(mp_index *ix) {
  size_t i;
  for (i = 0; i < ix->nbuckets; i++) {
    mp_index_entry *e = ix->buckets[i], *next;
    for (; e != NULL; e = next) {
      next = e->next;
      free(e);
    }
  }
  free(ix->buckets);
  memset(ix, 0, sizeof *ix);
}
