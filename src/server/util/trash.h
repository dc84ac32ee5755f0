/*
** Removing big trees and files off the loop (trash.c): a destroyed
** sandbox's tree, a deleted checkpoint, is renamed into DATA/trash (one
** rename, however big) and removed there by `rm -rf` in a child process.
*/
#ifndef MP_TRASH_H
#define MP_TRASH_H

#include "server.h"

/* Move path (a tree or a file) into the trash and remove it in a child;
** if it cannot be moved (another file system), it is removed here. 0 if
** it was there, -1 if not (ENOENT). */
int mp_trash(mp_server *srv, const char *path);
/* At start: empty what an interrupted removal left in the trash. */
void mp_trash_empty(mp_server *srv);
/* At the end, before the loop closes: the removals still running are
** killed (the next start empties the trash). */
void mp_trash_stop(mp_server *srv);

#endif
