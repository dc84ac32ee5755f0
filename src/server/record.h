/*
** The record of a sandbox (record.c): the JSON file
** DATA/state/sandboxes/<id>.json that a sandbox's state survives a restart
** in. sandbox.c writes it when the state changes and reads it at start;
** checkpoint.c writes it when a checkpoint delete marks a sandbox.
*/
#ifndef MP_RECORD_H
#define MP_RECORD_H

#include <cjson/cJSON.h>

#include "sandbox.h"

/* write the record of sb (atomically); -1 (logged) if it cannot */
int mp_record_save(mp_server *srv, const mp_sandbox *sb);
/* Fill sb's fields from the record o, checked as if they came from the
** network: the id is sbx_<hex> (it names a file and a directory), the
** project id a valid name, strings fit and hold no control character,
** numbers are in range. -1: err says which field is wrong (sb->env is
** then not set). The env's names are checked by the caller
** (mp_env_check). */
int mp_record_read(mp_sandbox *sb, const cJSON *o, char *err, size_t errlen);

#endif
