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
/* fill sb's fields from the record o; -1 if o names no sandbox */
int mp_record_read(mp_sandbox *sb, const cJSON *o);

#endif
