/*
** The HTTP daemon of mastra-platform: libmicrohttpd in external-epoll mode
** on the mastra__loop (its epoll fd is one watcher of the loop), the
** per-request state (mp_request) and its body, read up to the route's
** limit, and the end of every request. What a request means is the
** router's business (router.c).
**
** Paths reach us undecoded (an identity unescape callback), so that a
** percent-encoded NUL or slash in a key is seen for what it is.
*/
#define _GNU_SOURCE
#include "httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <microhttpd.h>

#include "request.h"
#include "respond.h"
#include "router.h"
#include "util.h"

/* the largest body of a refused size that is read (and dropped) so that
** its 413 reaches a client that sends without waiting for 100-continue */
#define MP_DRAIN_MAX ((unsigned long long)64 << 20)

/* {====== requests ====== */

static size_t identity_unescape(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls;
  (void)c;
  return strlen(s);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls) {
  mp_server *srv = cls;
  mp_request *r = *req_cls;
  enum MHD_Result rc;
  (void)version;
  if (r == NULL) {
    const char *cl;
    unsigned long long length;
    r = calloc(1, sizeof *r);
    if (r == NULL) return MHD_NO;
    *req_cls = r;
    srv->last_request_ms = mastra__wall_ms();
    r->limit = mp_router_body_limit(srv, url, method);
    if (!mp_router_authorized(srv, conn, url)) {
      r->responded = 1;
      return mp_send_error(conn, 401, "authentication_error",
                           "missing or wrong 'Authorization: Bearer <token>'");
    }
    cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    length = cl != NULL ? strtoull(cl, NULL, 10) : 0;
    if (length > r->limit) {
      const char *expect =
          MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Expect");
      /* A client that waits for 100-continue reads an early 413 before it
      ** sends the body. One that sends at once would see its connection
      ** reset under a 413 it has not read yet, so a body of up to
      ** MP_DRAIN_MAX is read and dropped first, and the 413 follows it. */
      if ((expect != NULL && strcasecmp(expect, "100-continue") == 0)
          || length > MP_DRAIN_MAX) {
        r->responded = 1;
        return mp_send_error(conn, 413, "invalid_request",
                             "the body is larger than %zu bytes", r->limit);
      }
      r->too_large = 1;
    }
    return MHD_YES;
  }
  if (mp_request_feed(conn, r, upload, upload_size, &rc)) return rc;
  return mp_route(srv, conn, url, method, r);
}

/* }====== */

/* {====== the daemon on the loop ====== */

void mp_http_on_io(mastra__io *io, uint32_t revents) {
  (void)revents;
  MHD_run(io->data);
}

int mp_parse_listen(const char *listen, struct sockaddr_storage *ss,
                    char *host, size_t hostlen, char *err, size_t errlen) {
  struct sockaddr_in *in4 = (struct sockaddr_in *)ss;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
  const char *colon = strrchr(listen, ':');
  long port;
  size_t hlen;
  memset(ss, 0, sizeof *ss);
  if (colon == NULL) {
    snprintf(err, errlen, "--listen wants HOST:PORT (got '%s')", listen);
    return -1;
  }
  port = strtol(colon + 1, NULL, 10);
  hlen = (size_t)(colon - listen);
  if (port < 0 || port > 65535 || hlen == 0 || hlen >= hostlen) {
    snprintf(err, errlen, "--listen wants HOST:PORT (got '%s')", listen);
    return -1;
  }
  memcpy(host, listen, hlen);
  host[hlen] = '\0';
  if (host[0] == '[' && host[hlen - 1] == ']') {
    memmove(host, host + 1, hlen - 2);
    host[hlen - 2] = '\0';
  }
  if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons((uint16_t)port);
  } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)port);
  } else {
    snprintf(err, errlen, "--listen: '%s' is not an IP address", host);
    return -1;
  }
  return 0;
}

int mp_http_start(mp_server *srv, const char *listen, char *err,
                  size_t errlen) {
  struct sockaddr_storage ss;
  char host[64]; /* an IPv4 or IPv6 address */
  const union MHD_DaemonInfo *info;
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE
                   | MHD_USE_ITC;
  long port;
  if (mp_parse_listen(listen, &ss, host, sizeof host, err, errlen) < 0)
    return -1;
  port = ntohs(ss.ss_family == AF_INET6
                   ? ((struct sockaddr_in6 *)&ss)->sin6_port
                   : ((struct sockaddr_in *)&ss)->sin_port);
  if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  srv->httpd = MHD_start_daemon(
      flags, (uint16_t)port, NULL, NULL, on_request, srv,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)4000,
      MHD_OPTION_NOTIFY_COMPLETED, mp_request_completed, srv,
      MHD_OPTION_UNESCAPE_CALLBACK, identity_unescape, NULL,
      MHD_OPTION_END);
  if (srv->httpd == NULL) {
    snprintf(err, errlen, "cannot listen on %s: %s", listen, strerror(errno));
    return -1;
  }
  info = MHD_get_daemon_info(srv->httpd, MHD_DAEMON_INFO_BIND_PORT);
  port = info ? info->port : port;
  if (ss.ss_family == AF_INET6) {
    snprintf(srv->base_url, sizeof srv->base_url, "http://[%s]:%ld", host, port);
    snprintf(srv->ws_url, sizeof srv->ws_url, "ws://[%s]:%ld/ws/exec", host, port);
  } else {
    snprintf(srv->base_url, sizeof srv->base_url, "http://%s:%ld", host, port);
    snprintf(srv->ws_url, sizeof srv->ws_url, "ws://%s:%ld/ws/exec", host, port);
  }
  info = MHD_get_daemon_info(srv->httpd, MHD_DAEMON_INFO_EPOLL_FD);
  mastra__io_init(srv->loop, &srv->httpd_io, info->epoll_fd, mp_http_on_io,
                  srv->httpd);
  if (mastra__io_start(&srv->httpd_io, EPOLLIN) < 0) {
    snprintf(err, errlen, "cannot watch the HTTP daemon");
    return -1;
  }
  return 0;
}

/* Milliseconds until MHD needs a call, -1: none. */
int mp_http_daemon_timeout(struct MHD_Daemon *d) {
  MHD_UNSIGNED_LONG_LONG t;
  if (d == NULL || MHD_get_timeout(d, &t) != MHD_YES) return -1;
  return t > 60000 ? 60000 : (int)t;
}

int mp_http_timeout(mp_server *srv) { return mp_http_daemon_timeout(srv->httpd); }

void mp_http_run(mp_server *srv) { MHD_run(srv->httpd); }

void mp_http_quiesce(mp_server *srv) {
  MHD_socket fd;
  if (srv->httpd == NULL) return;
  fd = MHD_quiesce_daemon(srv->httpd);
  /* external event loop: the socket may be closed now */
  if (fd != MHD_INVALID_SOCKET) close(fd);
}

void mp_http_stop(mp_server *srv) {
  if (srv->httpd == NULL) return;
  mastra__io_stop(&srv->httpd_io);
  MHD_stop_daemon(srv->httpd);
  srv->httpd = NULL;
}

/* }====== */
