/*
** The HTTP daemon of mastra-platform (httpd.c).
*/
#ifndef MP_HTTPD_H
#define MP_HTTPD_H

#include <stddef.h>

#include "server.h"

/* the most connections libmicrohttpd takes, whatever the fd limit */
#define MP_CONNECTIONS_MAX 60000u
/* the default bound of the bodies read at once (srv->max_uploads) */
#define MP_UPLOADS_DEFAULT ((size_t)512 << 20)
/* the default deadline of a request's head (srv->header_timeout_s) */
#define MP_HEADER_TIMEOUT_DEFAULT_S 30u

struct sockaddr_storage;
/* Parse a --listen value, HOST:PORT (an IPv4 address, or an IPv6 one in
** brackets), into ss; host gets the address without brackets. -1: err
** says what is wrong. */
int mp_parse_listen(const char *listen, struct sockaddr_storage *ss,
                    char *host, size_t hostlen, char *err, size_t errlen);
/* Listen on HOST:PORT (port 0: a free one); sets srv->base_url, ws_url. */
int mp_http_start(mp_server *srv, const char *listen, char *err,
                  size_t errlen);
/* The watcher of a daemon's epoll fd (io->data: the MHD_Daemon). */
void mp_http_on_io(mastra__io *io, uint32_t revents);
/* Milliseconds until daemon d (or NULL) needs MHD_run, -1: none. */
int mp_http_daemon_timeout(struct MHD_Daemon *d);
/* Milliseconds until the daemon needs mp_http_run, -1: none. */
int mp_http_timeout(mp_server *srv);
void mp_http_run(mp_server *srv);
/* Stop accepting connections (those open are still served). */
void mp_http_quiesce(mp_server *srv);
void mp_http_stop(mp_server *srv);

#endif
