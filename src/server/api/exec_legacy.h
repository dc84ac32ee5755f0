/*
** The legacy exec of mastra-platform (exec_legacy.c):
** POST /v1/.../projects/{p}/sandbox/{id}/exec runs one command and answers
** with its whole output.
*/
#ifndef MP_EXEC_LEGACY_H
#define MP_EXEC_LEGACY_H

#include <microhttpd.h>

#include "http/request.h"
#include "server.h"

/* Start the command and suspend the connection; called again when the
** command finished (the connection resumed), it answers. */
enum MHD_Result mp_exec_legacy(mp_server *srv, struct MHD_Connection *conn,
                               mp_sandbox *sb, mp_request *r);
/* Shutdown: every run still waiting for its command lets go of it (it is
** killed) and its connection is resumed (answered 503), so that the daemon
** can stop. */
void mp_exec_legacy_shutdown_all(mp_server *srv);

#endif
