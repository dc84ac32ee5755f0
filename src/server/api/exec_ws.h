/*
** The exec WebSocket of mastra-platform (exec_ws.c): the upgrade of a
** request to /ws/exec that the router admitted, and the sessions after it.
*/
#ifndef MP_EXEC_WS_H
#define MP_EXEC_WS_H

#include <stddef.h>

#include <microhttpd.h>

#include "server.h"

/* the subprotocol of the exec WebSocket (the lease token is offered after
** it) */
#define MP_WS_EXEC_SUBPROTOCOL "railway-shell"

/* Answer a WebSocket upgrade on /ws/exec whose lease was validated: queue
** the 101 response selecting MP_WS_EXEC_SUBPROTOCOL; after the upgrade,
** run the exec session for sb. */
enum MHD_Result mp_ws_exec_upgrade(mp_server *srv,
                                   struct MHD_Connection *conn,
                                   mp_sandbox *sb);

/* Sessions of srv still open (commands running, or closes in flight). */
size_t mp_ws_exec_count(mp_server *srv);

/* Server shutdown: close every session of srv with 1001 (best effort, one
** non-blocking send), kill their commands and hand the sockets back to
** libmicrohttpd. Synchronous: no session of srv remains afterwards, so it
** must run before MHD_stop_daemon(). */
void mp_ws_exec_shutdown_all(mp_server *srv);

#endif
