/*
** The exec WebSocket sessions of mastra-platform (exec_ws.c); the upgrade
** itself is mp_ws_exec_upgrade() in server.h.
*/
#ifndef MP_EXEC_WS_H
#define MP_EXEC_WS_H

#include <stddef.h>

#include "server.h"

/* Sessions of srv still open (commands running, or closes in flight). */
size_t mp_ws_exec_count(mp_server *srv);

/* Server shutdown: close every session of srv with 1001 (best effort, one
** non-blocking send), kill their commands and hand the sockets back to
** libmicrohttpd. Synchronous: no session of srv remains afterwards, so it
** must run before MHD_stop_daemon(). */
void mp_ws_exec_shutdown_all(mp_server *srv);

#endif
