/*
** Exec leases of mastra-platform: POST /sandbox/{id}/exec-lease mints one
** (routes_sandbox.c), and the router admits a WebSocket to /ws/exec whose
** second offered subprotocol is a live lease of a live sandbox. Leases
** live in memory only (a restart forgets them).
**
** Bounds: a lookup is one probe of an index by token (no walk over the
** leases); leases are kept in mint order, which is their expiry order (one
** TTL for all), so the expired ones are dropped from the head as time
** passes; a sandbox holds at most MP_LEASES_PER_SANDBOX live leases (a
** mint past that drops its oldest one), and a destroy drops them all.
*/
#include "sandbox/lease.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/sandbox.h"
#include "util.h"

typedef struct mp_lease {
  struct mp_lease *prev, *next; /* srv->leases, in mint order */
  struct mp_lease *sb_next;     /* its sandbox's, newest first */
  mp_sandbox *sb;
  char token[2 * MP_LEASE_TOKEN_BYTES + 1];
  int64_t expires_ms;
} mp_lease;

static void lease_free(mp_server *srv, mp_lease *l) {
  mp_lease **p;
  for (p = &l->sb->leases; *p != NULL; p = &(*p)->sb_next) {
    if (*p == l) {
      *p = l->sb_next;
      l->sb->nleases--;
      break;
    }
  }
  if (l->prev != NULL) l->prev->next = l->next;
  else srv->leases = l->next;
  if (l->next != NULL) l->next->prev = l->prev;
  else srv->leases_tail = l->prev;
  mp_index_del(&srv->lease_index, l->token, l);
  free(l);
}

static void drop_expired(mp_server *srv) {
  int64_t now = mastra__wall_ms();
  while (srv->leases != NULL && srv->leases->expires_ms <= now)
    lease_free(srv, srv->leases);
}

int mp_lease_mint(mp_server *srv, mp_sandbox *sb,
                  char token[2 * MP_LEASE_TOKEN_BYTES + 1],
                  int64_t *expires_ms) {
  mp_lease *l;
  drop_expired(srv);
  l = calloc(1, sizeof *l);
  if (l == NULL || mastra__random_hex(l->token, MP_LEASE_TOKEN_BYTES) < 0
      || mp_index_put(&srv->lease_index, l->token, l) < 0) {
    free(l);
    return -1;
  }
  if (sb->nleases >= MP_LEASES_PER_SANDBOX) { /* its oldest goes */
    mp_lease *o = sb->leases;
    while (o->sb_next != NULL) o = o->sb_next;
    lease_free(srv, o);
  }
  l->sb = sb;
  l->expires_ms = mastra__wall_ms() + (int64_t)srv->lease_ttl_ms;
  l->prev = srv->leases_tail;
  if (l->prev != NULL) l->prev->next = l;
  else srv->leases = l;
  srv->leases_tail = l;
  l->sb_next = sb->leases;
  sb->leases = l;
  sb->nleases++;
  memcpy(token, l->token, sizeof l->token);
  *expires_ms = l->expires_ms;
  return 0;
}

mp_sandbox *mp_lease_check(mp_server *srv, const char *token, size_t len) {
  char key[2 * MP_LEASE_TOKEN_BYTES + 1];
  mp_lease *l;
  drop_expired(srv);
  if (len != sizeof key - 1) return NULL;
  memcpy(key, token, len);
  key[len] = '\0';
  l = mp_index_get(&srv->lease_index, key);
  if (l == NULL || !mastra__secure_equal(key, len, l->token, len)
      || l->sb->destroyed_ms)
    return NULL;
  return l->sb;
}

void mp_lease_drop_sandbox(mp_server *srv, mp_sandbox *sb) {
  while (sb->leases != NULL) lease_free(srv, sb->leases);
}

size_t mp_lease_count(mp_server *srv) {
  drop_expired(srv);
  return srv->lease_index.count;
}

void mp_lease_free_all(mp_server *srv) {
  while (srv->leases != NULL) lease_free(srv, srv->leases);
  mp_index_free(&srv->lease_index);
}
