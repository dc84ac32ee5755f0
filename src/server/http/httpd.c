/*
** The HTTP daemons of mastra-platform: libmicrohttpd in external-epoll
** mode on the mastra__loop (each daemon's epoll fd is one watcher of the
** loop), serving a site (httpd.h): the API (api/router.c) and the
** inspector (inspector/inspector.c) are two sites of this one pipeline.
** Here: the per-request state (mp_request) and its body, read up to the
** route's limit, admission, and the end of every request. What a request
** means is the site's business.
**
** Paths reach us undecoded (an identity unescape callback), so that a
** percent-encoded NUL or slash in a key is seen for what it is; the sites
** decode each piece (request.h).
**
** Bounds, for every site (docs/platform.md, Limits):
** - connections: libmicrohttpd takes up to the site's connection_limit,
**   or (0) 3/4 of the descriptor limit, which main raises to its hard
**   limit, at most MP_CONNECTIONS_MAX, so a few thousand slow clients
**   leave room;
** - a request's head (request line and headers) must arrive within
**   srv->header_timeout_s of the connection's start, or of the end of its
**   previous request: libmicrohttpd's timeout counts inactivity only, so
**   a client sending one byte now and then would hold its slot forever.
**   The connections waiting for a head are a list in deadline order
**   (notify-connection callbacks); a timer shuts the overdue ones down
**   (shutdown(2)), and libmicrohttpd closes them;
** - a path the site routes at its head (the API's /ws/exec) is routed as
**   soon as its head is in: its lease is checked before any body is read,
**   and it takes none;
** - the bodies being read at once, on all sites, hold at most
**   srv->max_uploads bytes (their Content-Length, reserved up front):
**   past that, 503; a body the site takes as it comes (a bucket PUT) is
**   not held: it goes where the route puts it;
** - a body over the route's limit: 413, at once for a client that waits
**   for 100-continue, after the body (up to MP_DRAIN_MAX, dropped) for
**   one that sends at once, so that it reads the 413;
** - two Content-Length headers: 400; an error answer (4xx, 5xx) closes
**   its connection (respond.c).
*/
#define _GNU_SOURCE
#include "http/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http/request.h"
#include "http/respond.h"
#include "util.h"

/* the largest body of a refused size that is read (and dropped) so that
** its 413 reaches a client that sends without waiting for 100-continue */
#define MP_DRAIN_MAX ((unsigned long long)64 << 20)

/* A connection waiting for the head of a request (h->conns, in deadline
** order); its socket context. */
typedef struct mp_conn {
  struct mp_conn *prev, *next;
  int fd;
  int waiting;  /* in h->conns */
  int no_head;  /* upgraded (or upgrading): no more heads to wait for */
  int64_t since_ms;
} mp_conn;

struct mp_httpd {
  mp_server *srv;
  const mp_site *site;
  struct MHD_Daemon *daemon;
  mastra__io io;
  mp_conn *conns, *conns_tail; /* waiting for a head: oldest (first due)
                               ** first */
  mastra__timer header_timer;  /* closes the overdue ones */
  char address[80];            /* HOST:PORT, [HOST]:PORT for IPv6 */
  int port;
};

static void conn_unwait(mp_httpd *h, mp_conn *c) {
  if (!c->waiting) return;
  if (c->prev != NULL) c->prev->next = c->next;
  else h->conns = c->next;
  if (c->next != NULL) c->next->prev = c->prev;
  else h->conns_tail = c->prev;
  c->prev = c->next = NULL;
  c->waiting = 0;
}

static void header_timer_arm(mp_httpd *h);

/* c's head is due header_timeout_s from now: the newest deadline */
static void conn_wait(mp_httpd *h, mp_conn *c) {
  conn_unwait(h, c);
  if (h->srv->header_timeout_s == 0 || c->no_head) return;
  c->since_ms = mastra__wall_ms();
  c->waiting = 1;
  c->next = NULL;
  c->prev = h->conns_tail;
  if (c->prev != NULL) c->prev->next = c;
  else h->conns = c;
  h->conns_tail = c;
  header_timer_arm(h);
}

static mp_conn *conn_of(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info != NULL ? info->socket_context : NULL;
}
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
  mp_httpd *h = cls;
  mp_server *srv = h->srv;
  const mp_site *site = h->site;
  mp_request *r = *req_cls;
  enum MHD_Result rc;
  (void)version;
  if (r == NULL) {
    unsigned long long length;
    mp_conn *c = conn_of(conn);
    r = calloc(1, sizeof *r);
    if (r == NULL) return MHD_NO;
    *req_cls = r;
    srv->last_request_ms = mastra__wall_ms();
    if (c != NULL) conn_unwait(h, c); /* the head is in */
    r->limit = site->body_limit(srv, url, method);
    if (site->at_head != NULL && site->at_head(url)) {
      /* the route decides now, before any body: an upgrade has none */
      if (c != NULL) c->no_head = 1;
      r->responded = 1;
      return site->route(srv, conn, url, method, r);
    }
    if (!site->admit(srv, conn, url, method, &rc)) {
      r->responded = 1;
      return rc;
    }
    if (!mp_request_length(conn, r, &length, &rc)) return rc;
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
    } else if (site->streams_body != NULL && site->streams_body(url, method)) {
      /* the body goes where the route puts it as it comes: no memory is
      ** reserved; the route answers at once when it cannot take it */
      r->begin = 1;
      rc = site->route(srv, conn, url, method, r);
      r->begin = 0;
      if (r->sink_write == NULL) r->responded = 1;
      return rc;
    } else if (length > 0) {
      /* the body is read into memory: reserve it now, or refuse */
      if (srv->uploads_in_flight + length > srv->max_uploads) {
        r->responded = 1;
        return mp_send_error(conn, 503, "unavailable",
                             "the platform is reading %zu bytes of other"
                             " bodies already (its bound is %zu): retry"
                             " later", srv->uploads_in_flight,
                             srv->max_uploads);
      }
      r->reserved = (size_t)length;
      r->in_flight = &srv->uploads_in_flight; /* given back at the end */
      srv->uploads_in_flight += r->reserved;
    }
    return MHD_YES;
  }
  if (mp_request_feed(conn, r, upload, upload_size, &srv->uploads_in_flight,
                      srv->max_uploads, &rc))
    return rc;
  return site->route(srv, conn, url, method, r);
}

static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **req_cls, enum MHD_RequestTerminationCode why) {
  mp_httpd *h = cls;
  mp_conn *c = conn_of(conn);
  /* kept alive: the next head has its own deadline */
  if (c != NULL && why == MHD_REQUEST_TERMINATED_COMPLETED_OK)
    conn_wait(h, c);
  mp_request_completed(h->srv, conn, req_cls, why);
}

/* }====== */

/* {====== the head deadline ====== */

static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
  mp_httpd *h = cls;
  mp_conn *c = *socket_context;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    c = calloc(1, sizeof *c);
    if (c == NULL) return; /* no deadline for this one */
    c->fd = info != NULL ? info->connect_fd : -1;
    *socket_context = c;
    conn_wait(h, c);
  } else if (c != NULL) {
    conn_unwait(h, c);
    free(c);
    *socket_context = NULL;
  }
}

static void on_header_timer(mastra__timer *t) {
  mp_httpd *h = t->data;
  int64_t now = mastra__wall_ms();
  int64_t limit = (int64_t)h->srv->header_timeout_s * 1000;
  mp_conn *c;
  while ((c = h->conns) != NULL && now - c->since_ms >= limit) {
    conn_unwait(h, c);
    /* libmicrohttpd sees the end of the stream and closes it */
    if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
  }
  header_timer_arm(h);
}

static void header_timer_arm(mp_httpd *h) {
  mp_conn *c = h->conns;
  unsigned timeout_s = h->srv->header_timeout_s;
  int64_t due;
  if (timeout_s == 0 || h->header_timer.slot != 0 || c == NULL) return;
  due = c->since_ms + (int64_t)timeout_s * 1000 - mastra__wall_ms();
  mastra__timer_start(&h->header_timer, due > 0 ? (uint64_t)due + 1 : 0);
}

/* }====== */

/* {====== the daemon on the loop ====== */

static void on_io(mastra__io *io, uint32_t revents) {
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
    snprintf(err, errlen, "wants HOST:PORT (got '%s')", listen);
    return -1;
  }
  port = strtol(colon + 1, NULL, 10);
  hlen = (size_t)(colon - listen);
  if (port < 0 || port > 65535 || hlen == 0 || hlen >= hostlen) {
    snprintf(err, errlen, "wants HOST:PORT (got '%s')", listen);
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
    snprintf(err, errlen, "'%s' is not an IP address", host);
    return -1;
  }
  return 0;
}

mp_httpd *mp_httpd_start(mp_server *srv, const mp_site *site,
                         const char *listen, char *err, size_t errlen) {
  struct sockaddr_storage ss;
  char host[64]; /* an IPv4 or IPv6 address */
  const union MHD_DaemonInfo *info;
  unsigned flags = MHD_USE_EPOLL | MHD_USE_ITC, limit = site->connection_limit;
  long port;
  mp_httpd *h;
  if (mp_parse_listen(listen, &ss, host, sizeof host, err, errlen) < 0)
    return NULL;
  h = calloc(1, sizeof *h);
  if (h == NULL) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  h->srv = srv;
  h->site = site;
  if (limit == 0) {
    struct rlimit rl;
    rlim_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 4096;
    n = n / 4 * 3;
    limit = (unsigned)(n > MP_CONNECTIONS_MAX ? MP_CONNECTIONS_MAX
                                              : n < 64 ? 64 : n);
  }
  if (srv->max_uploads == 0) srv->max_uploads = MP_UPLOADS_DEFAULT;
  mastra__timer_init(srv->loop, &h->header_timer, on_header_timer, h);
  port = ntohs(ss.ss_family == AF_INET6
                   ? ((struct sockaddr_in6 *)&ss)->sin6_port
                   : ((struct sockaddr_in *)&ss)->sin_port);
  if (ss.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  if (site->upgrades) flags |= MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE;
  /* A file's response (a bucket GET) goes out by sendfile() only when MHD
  ** is told that SIGPIPE cannot kill the process (sendfile has no
  ** MSG_NOSIGNAL); without it MHD falls back to pread() and send() of
  ** 4 KiB at a time, a loop turn each: a 4 MB GET took 9 ms, not 1.5. */
  {
    struct sigaction sa;
    if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL)
      signal(SIGPIPE, SIG_IGN);
  }
  h->daemon = MHD_start_daemon(
      flags, (uint16_t)port, NULL, NULL, on_request, h,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
      MHD_OPTION_CONNECTION_LIMIT, limit,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, h,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
      MHD_OPTION_UNESCAPE_CALLBACK, identity_unescape, NULL,
      MHD_OPTION_SIGPIPE_HANDLED_BY_APP, (int)1,
      MHD_OPTION_END);
  if (h->daemon == NULL) {
    snprintf(err, errlen, "%s: cannot listen on %s: %s", site->name, listen,
             strerror(errno));
    free(h);
    return NULL;
  }
  info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_BIND_PORT);
  h->port = info ? info->port : (int)port;
  if (ss.ss_family == AF_INET6)
    snprintf(h->address, sizeof h->address, "[%s]:%d", host, h->port);
  else
    snprintf(h->address, sizeof h->address, "%s:%d", host, h->port);
  info = MHD_get_daemon_info(h->daemon, MHD_DAEMON_INFO_EPOLL_FD);
  mastra__io_init(srv->loop, &h->io, info->epoll_fd, on_io, h->daemon);
  if (mastra__io_start(&h->io, EPOLLIN) < 0) {
    snprintf(err, errlen, "%s: cannot watch the HTTP daemon", site->name);
    MHD_stop_daemon(h->daemon);
    free(h);
    return NULL;
  }
  return h;
}

const char *mp_httpd_address(const mp_httpd *h) { return h->address; }

int mp_httpd_port(const mp_httpd *h) { return h->port; }

int mp_httpd_timeout(const mp_httpd *h) {
  MHD_UNSIGNED_LONG_LONG t;
  if (h == NULL || MHD_get_timeout(h->daemon, &t) != MHD_YES) return -1;
  return t > 60000 ? 60000 : (int)t;
}

void mp_httpd_run(mp_httpd *h) {
  if (h != NULL) MHD_run(h->daemon);
}

void mp_httpd_quiesce(mp_httpd *h) {
  MHD_socket fd;
  if (h == NULL) return;
  fd = MHD_quiesce_daemon(h->daemon);
  /* external event loop: the socket may be closed now */
  if (fd != MHD_INVALID_SOCKET) close(fd);
}

void mp_httpd_stop(mp_httpd *h) {
  mp_conn *c;
  if (h == NULL) return;
  mastra__timer_stop(&h->header_timer);
  mastra__io_stop(&h->io);
  MHD_stop_daemon(h->daemon); /* every connection's context is freed */
  while ((c = h->conns) != NULL) conn_unwait(h, c);
  free(h);
}

/* }====== */
