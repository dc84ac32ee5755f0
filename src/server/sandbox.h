/*
** Sandbox records, leases and checkpoints (sandbox.c), for the router.
*/
#ifndef MP_SANDBOX_H
#define MP_SANDBOX_H

#include "server.h"

typedef struct mp_create_spec {
  const char *project;
  const char *environment;
  const char *recovery_key;   /* the caller's `id`, or NULL */
  const char *network;        /* ISOLATED | PRIVATE, or NULL */
  double idle_timeout_min;   /* fractions allowed; 0: never reaped */
  const cJSON *env;           /* object of strings, or NULL */
} mp_create_spec;

int mp_sandbox_create(mp_server *srv, const mp_create_spec *spec,
                      mp_sandbox **out, char *err, size_t errlen);
/* kill its commands, capture its checkpoint, remove its tree; the record
** stays, with destroyedAt */
void mp_sandbox_destroy(mp_server *srv, mp_sandbox *sb);
/* a record (live or destroyed) of project, or NULL */
mp_sandbox *mp_sandbox_lookup(mp_server *srv, const char *project,
                              const char *id);
size_t mp_sandbox_live_count(mp_server *srv);
void mp_sandbox_shutdown_all(mp_server *srv);
void mp_sandbox_free_all(mp_server *srv);

/* 0 captured, 1 skipped (no recovery key), -1 failed; name is set. Only
** an explicit request (POST /checkpoint) archives an empty tree; otherwise
** an empty tree just removes the older checkpoint. */
int mp_checkpoint_capture(mp_server *srv, mp_sandbox *sb, char name[64],
                          int explicit_request);
int mp_checkpoint_delete(mp_server *srv, mp_sandbox *sb);

/* a fresh lease token for sb (hex of 256 random bits) */
int mp_lease_mint(mp_server *srv, mp_sandbox *sb, char token[65],
                  int64_t *expires_ms);
/* the live sandbox of a live lease token, or NULL (constant-time compare) */
mp_sandbox *mp_lease_check(mp_server *srv, const char *token, size_t len);

int mp_state_load(mp_server *srv);
/* write the record of sb (create, destroy, shutdown) */
int mp_record_save(mp_server *srv, const mp_sandbox *sb);

#endif
