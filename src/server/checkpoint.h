/*
** Checkpoints of mastra-platform (checkpoint.c): a tar of a sandbox's
** working tree, keyed by (project, environment, recovery key).
*/
#ifndef MP_CHECKPOINT_H
#define MP_CHECKPOINT_H

#include "sandbox.h"

/* 0 captured, 1 skipped (no recovery key), -1 failed; name is set. Only
** an explicit request (POST /checkpoint) archives an empty tree; otherwise
** an empty tree just removes the older checkpoint. */
int mp_checkpoint_capture(mp_server *srv, mp_sandbox *sb, char name[64],
                          int explicit_request);
/* 0 removed, -1 there was none */
int mp_checkpoint_delete(mp_server *srv, mp_sandbox *sb);
/* into sb's (prepared) working tree: 0 restored, 1 none to restore, -1
** failed */
int mp_checkpoint_restore(mp_server *srv, mp_sandbox *sb);

#endif
