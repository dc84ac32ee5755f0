/*
** Removing big trees off the loop (trash.c): a destroyed sandbox's tree is
** renamed into DATA/trash (one rename, however big the tree) and removed
** there by `rm -rf` in a child process.
*/
#ifndef MP_TRASH_H
#define MP_TRASH_H

#include "server.h"

/* Move path into the trash and remove it in a child; if it cannot be
** moved (another file system), it is removed here. */
void mp_trash(mp_server *srv, const char *path);
/* At start: empty what an interrupted removal left in the trash. */
void mp_trash_empty(mp_server *srv);

#endif
