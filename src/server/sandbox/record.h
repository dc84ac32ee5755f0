/*
** The record of a sandbox (record.c): the JSON file
** DATA/state/sandboxes/<id>.json that a sandbox's state survives a restart
** in. sandbox.c writes it when the state changes and reads it at start;
** checkpoint.c writes it when a checkpoint delete marks a sandbox.
*/
#ifndef MP_RECORD_H
#define MP_RECORD_H

#include <cjson/cJSON.h>

#include "sandbox/sandbox.h"

/* write the record of sb (atomically); -1 (logged) if it cannot */
int mp_record_save(mp_server *srv, const mp_sandbox *sb);
/* Fill sb's fields from the record o, checked as if they came from the
** network: the id is sbx_<hex> (it names a file and a directory), the
** project id a valid name, strings fit and hold no control character,
** numbers are in range. -1: err says which field is wrong (sb->env is
** then not set). The env's names are checked by the caller
** (mp_env_check). */
int mp_record_read(mp_sandbox *sb, const cJSON *o, char *err, size_t errlen);
/* a record file larger than this is not one */
#define MP_RECORD_MAX (2u << 20)
/* whether sb was destroyed longer than srv->destroyed_ttl_ms before now */
int mp_record_expired(const mp_server *srv, const mp_sandbox *sb,
                      int64_t now);
/* how often the expired records are swept: half the TTL, between 100 ms
** and MP_RECORD_SWEEP_MAX_MS */
#define MP_RECORD_SWEEP_MAX_MS 60000
uint64_t mp_record_sweep_ms(const mp_server *srv);
/* remove the record file of id */
void mp_record_remove(const mp_server *srv, const char *id);
/* Read every record file of DATA/state/sandboxes and hand each JSON
** object to load (a file that is not a regular file, or not a JSON
** object, is skipped with a log line). -1 if the directory cannot be
** read. */
int mp_record_load_all(mp_server *srv,
                       void (*load)(mp_server *srv, const cJSON *o,
                                    const char *file));

#endif
