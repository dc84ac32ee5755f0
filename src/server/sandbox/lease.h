/*
** Exec leases of mastra-platform (lease.c): short-lived tokens that admit
** one WebSocket to /ws/exec for one sandbox.
*/
#ifndef MP_LEASE_H
#define MP_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "server.h"

#define MP_LEASE_TOKEN_BYTES 32 /* 256 random bits, hex encoded */
/* live leases a sandbox holds at most: a mint past it drops the oldest */
#define MP_LEASES_PER_SANDBOX 64

/* a fresh lease token for sb (hex of 256 random bits) */
int mp_lease_mint(mp_server *srv, mp_sandbox *sb,
                  char token[2 * MP_LEASE_TOKEN_BYTES + 1],
                  int64_t *expires_ms);
/* the live sandbox of a live lease token, or NULL (constant-time compare) */
mp_sandbox *mp_lease_check(mp_server *srv, const char *token, size_t len);
/* a destroy: the sandbox's leases go */
void mp_lease_drop_sandbox(mp_server *srv, mp_sandbox *sb);
/* the live leases of the server */
size_t mp_lease_count(mp_server *srv);
void mp_lease_free_all(mp_server *srv);

#endif
