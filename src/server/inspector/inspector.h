/*
** The inspector of mastra-platform (inspector.c): a web page that shows
** each environment's bucket, sandboxes, exec sessions, checkpoints,
** provisioning failures and health (docs/inspector.md). A second
** libmicrohttpd daemon on the loop, on its own loopback port, behind the
** platform token: a one-time login link sets a session cookie.
*/
#ifndef MP_INSPECTOR_H
#define MP_INSPECTOR_H

#include <stddef.h>

#include "server.h"

/* Listen on HOST:PORT (port 0: a free one) and write
** DATA_DIR/state/inspector.json ({url, pid, tokenFile}) for
** `mastra-platform inspect`. */
int mp_inspector_start(mp_server *srv, const char *listen,
                       const char *token_file, char *err, size_t errlen);
/* the page's address, http://HOST:PORT/ */
const char *mp_inspector_url(const mp_server *srv);
/* A new one-time login link into out (valid for 15 minutes); -1 if none
** can be made. */
int mp_inspector_login_link(mp_server *srv, char *out, size_t n);
/* Milliseconds until the daemon needs mp_inspector_run, -1: none. */
int mp_inspector_timeout(mp_server *srv);
void mp_inspector_run(mp_server *srv);
/* Stop listening, close every connection, remove inspector.json. */
void mp_inspector_stop(mp_server *srv);

/* The platform from the shell (shell.c): `mastra-platform inspect`,
** `ps`, `destroy ID...` and `logs` (argv[1]) against the running platform
** of a data directory, through its inspector; the exit status. */
int mp_shell_main(int argc, char **argv, const char *default_data_dir);

#endif
