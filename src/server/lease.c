/*
** Exec leases of mastra-platform: POST /sandbox/{id}/exec-lease mints one
** (routes_sandbox.c), and the router admits a WebSocket to /ws/exec whose
** second offered subprotocol is a live lease of a live sandbox. Leases
** live in memory only (a restart forgets them) and are dropped when they
** expire or their sandbox is destroyed.
*/
#include "lease.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox.h"
#include "util.h"

typedef struct mp_lease {
  struct mp_lease *next;
  char token[2 * MP_LEASE_TOKEN_BYTES + 1];
  char sandbox_id[MP_ID_MAX];
  int64_t expires_ms;
} mp_lease;

int mp_lease_mint(mp_server *srv, mp_sandbox *sb,
                  char token[2 * MP_LEASE_TOKEN_BYTES + 1],
                  int64_t *expires_ms) {
  mp_lease *l = calloc(1, sizeof *l);
  if (l == NULL || mastra__random_hex(l->token, MP_LEASE_TOKEN_BYTES) < 0) {
    free(l);
    return -1;
  }
  snprintf(l->sandbox_id, sizeof l->sandbox_id, "%s", sb->id);
  l->expires_ms = mastra__wall_ms() + (int64_t)srv->lease_ttl_ms;
  l->next = srv->leases;
  srv->leases = l;
  memcpy(token, l->token, sizeof l->token);
  *expires_ms = l->expires_ms;
  return 0;
}

mp_sandbox *mp_lease_check(mp_server *srv, const char *token, size_t len) {
  mp_lease **pl = &srv->leases;
  mp_sandbox *found = NULL;
  int64_t now = mastra__wall_ms();
  while (*pl != NULL) {
    mp_lease *l = *pl;
    if (l->expires_ms <= now || mp_sandbox_find(srv, l->sandbox_id) == NULL) {
      *pl = l->next; /* expired, or its sandbox is gone */
      free(l);
      continue;
    }
    if (found == NULL
        && mastra__secure_equal(token, len, l->token, strlen(l->token)))
      found = mp_sandbox_find(srv, l->sandbox_id);
    pl = &l->next;
  }
  return found;
}

void mp_lease_free_all(mp_server *srv) {
  while (srv->leases != NULL) {
    mp_lease *l = srv->leases;
    srv->leases = l->next;
    free(l);
  }
}
