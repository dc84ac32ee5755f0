/*
** The inspector of mastra-platform (see inspector.h, docs/inspector.md):
** a second site of the HTTP pipeline (http/httpd.h), on its own loopback
** port, that serves the page (inspector_assets.h) and its JSON endpoints
** (inspector_api.c). The pipeline gives it what it gives the API: the
** head deadline, the body limits with the 100-continue drain, the
** in-flight body budget.
**
** Who may ask:
**   - GET /login?code=C with a one-time code (printed in the ready line,
**     or made by POST /api/login-links) gets a session cookie:
**     HttpOnly, SameSite=Strict, named after the port;
**   - every other request needs that cookie or the platform's bearer
**     token; without either, nothing is shown (401);
**   - a request that changes something (any method but GET and HEAD) with
**     the cookie also needs the header X-Mastra-CSRF with the session's
**     CSRF token (the page reads it from /api/session), and an Origin, if
**     sent, that is the inspector's own. The bearer token needs neither;
**   - the Host header must name the inspector's own address (a DNS
**     rebinding page cannot borrow the browser's cookie).
*/
#define _GNU_SOURCE
#include "inspector/inspector.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <microhttpd.h>

#include "http/httpd.h"
#include "inspector/inspector_api.h"
#include "inspector/inspector_assets.h"
#include "util/log.h"
#include "http/request.h"
#include "http/respond.h"
#include "util.h"

#define LOGIN_TTL_MS (15 * 60 * 1000)
#define SESSION_TTL_S (24 * 3600)
#define MAX_CODES 16
#define MAX_SESSIONS 32
#define SECRET_HEX 64 /* 256 random bits */
#define CSRF_HEADER "X-Mastra-CSRF"

typedef struct {
  char code[SECRET_HEX + 1];
  int64_t expires_ms; /* 0: an empty slot */
} login_code;

typedef struct {
  char id[SECRET_HEX + 1];
  char csrf[SECRET_HEX + 1];
  int64_t expires_ms;
} login_session;

struct mp_inspector {
  mp_httpd *http;
  char url[128];           /* http://HOST:PORT/ */
  char origin[128];        /* http://HOST:PORT */
  char host[100];          /* HOST:PORT as a Host header says it */
  char localhost[100];     /* localhost:PORT */
  char cookie[48];         /* mastra_inspector_PORT */
  char state_path[4200];   /* DATA_DIR/state/inspector.json */
  login_code codes[MAX_CODES];
  login_session sessions[MAX_SESSIONS];
};

/* {====== answers ====== */

/* Queue a response with the headers every answer of the inspector has. */
static enum MHD_Result send_data(struct MHD_Connection *conn, int status,
                                 const char *type, const void *data,
                                 size_t len, enum MHD_ResponseMemoryMode mode,
                                 const char *cookie, const char *location) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(len, (void *)data, mode);
  enum MHD_Result rc;
  if (resp == NULL) return MHD_NO;
  if (type != NULL) MHD_add_response_header(resp, "Content-Type", type);
  MHD_add_response_header(resp, "Cache-Control", "no-store");
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(resp, "X-Frame-Options", "DENY");
  MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
  MHD_add_response_header(resp, "Content-Security-Policy",
                          "default-src 'self'; img-src 'self' data:;"
                          " frame-ancestors 'none'; form-action 'self';"
                          " base-uri 'none'");
  if (cookie != NULL) MHD_add_response_header(resp, "Set-Cookie", cookie);
  if (location != NULL) MHD_add_response_header(resp, "Location", location);
  rc = MHD_queue_response(conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return rc;
}

static const char page_head[] =
    "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
    "<meta name=\"viewport\" content=\"width=device-width\">"
    "<title>mastra-platform inspector</title></head><body><main>"
    "<h1>mastra-platform inspector</h1><p>";
static const char page_tail[] = "</p></main></body></html>\n";

/* A small HTML page that says msg (static text, no markup from outside). */
static enum MHD_Result send_page(struct MHD_Connection *conn, int status,
                                 const char *msg) {
  size_t n = strlen(page_head) + strlen(msg) + strlen(page_tail) + 1;
  char *text = malloc(n);
  if (text == NULL) return MHD_NO;
  snprintf(text, n, "%s%s%s", page_head, msg, page_tail);
  return send_data(conn, status, "text/html; charset=utf-8", text,
                   strlen(text), MHD_RESPMEM_MUST_FREE, NULL, NULL);
}

static int wants_json(const char *url) {
  return strncmp(url, "/api/", 5) == 0;
}

static enum MHD_Result refuse(struct MHD_Connection *conn, const char *url,
                              int status, const char *type, const char *msg) {
  if (wants_json(url)) return mp_send_error(conn, status, type, "%s", msg);
  return send_page(conn, status, msg);
}

/* }====== */

/* {====== codes and sessions ====== */

int mp_inspector_login_link(mp_server *srv, char *out, size_t n) {
  struct mp_inspector *in = srv->inspector;
  login_code *slot;
  int64_t now = mastra__wall_ms();
  size_t i;
  if (in == NULL) return -1;
  slot = &in->codes[0];
  /* a free or expired slot, else the oldest */
  for (i = 0; i < MAX_CODES; i++) {
    if (in->codes[i].expires_ms <= now) {
      slot = &in->codes[i];
      break;
    }
    if (in->codes[i].expires_ms < slot->expires_ms) slot = &in->codes[i];
  }
  if (mastra__random_hex(slot->code, SECRET_HEX / 2) < 0) return -1;
  slot->expires_ms = now + LOGIN_TTL_MS;
  snprintf(out, n, "%slogin?code=%s", in->url, slot->code);
  return 0;
}

/* Use up a login code: 0 if it was valid. */
static int take_code(struct mp_inspector *in, const char *code) {
  int64_t now = mastra__wall_ms();
  size_t i;
  if (code == NULL || strlen(code) != SECRET_HEX) return -1;
  for (i = 0; i < MAX_CODES; i++) {
    login_code *c = &in->codes[i];
    if (c->expires_ms > now && mastra__secure_equal(c->code, SECRET_HEX,
                                                    code, SECRET_HEX)) {
      c->expires_ms = 0;
      return 0;
    }
  }
  return -1;
}

static login_session *new_session(struct mp_inspector *in) {
  login_session *s = &in->sessions[0];
  int64_t now = mastra__wall_ms();
  size_t i;
  for (i = 0; i < MAX_SESSIONS; i++) {
    if (in->sessions[i].expires_ms <= now) {
      s = &in->sessions[i];
      break;
    }
    if (in->sessions[i].expires_ms < s->expires_ms) s = &in->sessions[i];
  }
  if (mastra__random_hex(s->id, SECRET_HEX / 2) < 0
      || mastra__random_hex(s->csrf, SECRET_HEX / 2) < 0)
    return NULL;
  s->expires_ms = now + (int64_t)SESSION_TTL_S * 1000;
  return s;
}

static login_session *cookie_session(struct mp_inspector *in,
                                     struct MHD_Connection *conn) {
  const char *v = MHD_lookup_connection_value(conn, MHD_COOKIE_KIND,
                                              in->cookie);
  int64_t now = mastra__wall_ms();
  size_t i;
  if (v == NULL || strlen(v) != SECRET_HEX) return NULL;
  for (i = 0; i < MAX_SESSIONS; i++) {
    login_session *s = &in->sessions[i];
    if (s->expires_ms > now
        && mastra__secure_equal(s->id, SECRET_HEX, v, SECRET_HEX))
      return s;
  }
  return NULL;
}

static int bearer_ok(mp_server *srv, struct MHD_Connection *conn) {
  const char *h =
      MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
  if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0) return 0;
  h += 7;
  while (*h == ' ') h++;
  return mastra__secure_equal(h, strlen(h), srv->token, srv->token_len);
}

/* }====== */

/* {====== requests ====== */

static enum MHD_Result login(mp_server *srv, struct MHD_Connection *conn) {
  struct mp_inspector *in = srv->inspector;
  const char *code =
      MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "code");
  login_session *s;
  char cookie[256];
  if (take_code(in, code) < 0)
    return send_page(conn, 401,
                     "This login link is unknown, used or expired (a link"
                     " works once, for 15 minutes). Run <code>mastra-platform"
                     " inspect</code> for a new one.");
  if ((s = new_session(in)) == NULL)
    return send_page(conn, 500, "No randomness for a session; try again.");
  snprintf(cookie, sizeof cookie,
           "%s=%s; Path=/; HttpOnly; SameSite=Strict; Max-Age=%d",
           in->cookie, s->id, SESSION_TTL_S);
  mp_log("inspector: a login link was used");
  return send_data(conn, 303, NULL, NULL, 0, MHD_RESPMEM_PERSISTENT, cookie,
                   "/");
}

static enum MHD_Result session_info(mp_server *srv,
                                    struct MHD_Connection *conn,
                                    const login_session *s) {
  cJSON *o = cJSON_CreateObject();
  if (s != NULL) cJSON_AddStringToObject(o, "csrf", s->csrf);
  else cJSON_AddNullToObject(o, "csrf");
  cJSON_AddItemToObject(o, "environments", mp_inspector_environments(srv));
  cJSON_AddNumberToObject(o, "maxObject", (double)srv->max_object);
  return mp_send_json(conn, 200, o);
}

static enum MHD_Result asset(struct MHD_Connection *conn, const char *url) {
  const char *name = strcmp(url, "/") == 0 ? "index.html" : url + 1;
  const char *dot = strrchr(name, '.'), *type = "application/octet-stream";
  size_t i;
  if (dot == NULL) dot = "";
  if (strcmp(dot, ".html") == 0) type = "text/html; charset=utf-8";
  else if (strcmp(dot, ".css") == 0) type = "text/css; charset=utf-8";
  else if (strcmp(dot, ".js") == 0) type = "text/javascript; charset=utf-8";
  else if (strcmp(dot, ".svg") == 0) type = "image/svg+xml";
  for (i = 0; i < mp_inspector_nassets; i++)
    if (strcmp(mp_inspector_assets[i].name, name) == 0)
      return send_data(conn, 200, type, mp_inspector_assets[i].data,
                       mp_inspector_assets[i].len, MHD_RESPMEM_PERSISTENT,
                       NULL, NULL);
  return refuse(conn, url, 404, "not_found", "no such page");
}

/* Whether the request may go on; answers it (r->responded) if not. */
static int admit(mp_server *srv, struct MHD_Connection *conn, const char *url,
                 const char *method, enum MHD_Result *rc) {
  struct mp_inspector *in = srv->inspector;
  const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Host");
  const char *origin;
  const login_session *s;
  int safe = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
  if (host == NULL || (strcmp(host, in->host) != 0
                       && strcmp(host, in->localhost) != 0)) {
    *rc = refuse(conn, url, 421, "invalid_request",
                 "the Host header does not name the inspector's address");
    return 0;
  }
  if (strcmp(url, "/login") == 0) {
    if (safe) return 1;
    *rc = refuse(conn, url, 405, "invalid_request", "GET /login");
    return 0;
  }
  if (bearer_ok(srv, conn)) return 1;
  s = cookie_session(in, conn);
  if (s == NULL) {
    *rc = refuse(conn, url, 401, "authentication_error",
                 "Not logged in: open the login link that the platform's"
                 " ready line or <code>mastra-platform inspect</code>"
                 " prints (or send the platform's bearer token).");
    return 0;
  }
  if (!safe) {
    const char *csrf =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, CSRF_HEADER);
    origin = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin");
    if (origin != NULL && strcmp(origin, in->origin) != 0
        && !(strncmp(origin, "http://localhost:", 17) == 0
             && strcmp(origin + 7, in->localhost) == 0)) {
      *rc = refuse(conn, url, 403, "authentication_error",
                   "a change from another origin is refused");
      return 0;
    }
    if (csrf == NULL || !mastra__secure_equal(csrf, strlen(csrf), s->csrf,
                                              SECRET_HEX)) {
      *rc = refuse(conn, url, 403, "authentication_error",
                   "a change needs the " CSRF_HEADER " header that the"
                   " page sends");
      return 0;
    }
  }
  return 1;
}

static enum MHD_Result dispatch(mp_server *srv, struct MHD_Connection *conn,
                                const char *url, const char *method,
                                mp_request *r) {
  if (strcmp(url, "/login") == 0) return login(srv, conn);
  if (strcmp(url, "/api/session") == 0)
    return session_info(srv, conn, bearer_ok(srv, conn)
                                       ? NULL
                                       : cookie_session(srv->inspector, conn));
  if (strcmp(url, "/api/login-links") == 0) {
    char link[256];
    cJSON *o;
    if (strcmp(method, "POST") != 0)
      return mp_send_error(conn, 405, "invalid_request",
                           "POST /api/login-links");
    if (!bearer_ok(srv, conn))
      return mp_send_error(conn, 403, "authentication_error",
                           "login links need the platform's bearer token");
    if (mp_inspector_login_link(srv, link, sizeof link) < 0)
      return mp_send_error(conn, 500, "internal_error", "no randomness");
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "url", link);
    return mp_send_json(conn, 201, o);
  }
  if (wants_json(url)) return mp_inspector_api(srv, conn, url, method, r);
  if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
    return refuse(conn, url, 405, "invalid_request", "pages are read with GET");
  return asset(conn, url);
}

static const mp_site inspector_site = {
    .name = "inspector",
    .body_limit = mp_inspector_api_limit,
    .admit = admit,
    .route = dispatch,
    .connection_limit = 256,
};

/* }====== */

/* {====== the daemon ====== */

const char *mp_inspector_url(const mp_server *srv) {
  return srv->inspector != NULL ? srv->inspector->url : NULL;
}

int mp_inspector_start(mp_server *srv, const char *listen,
                       const char *token_file, char *err, size_t errlen) {
  struct mp_inspector *in = calloc(1, sizeof *in);
  cJSON *state;
  char *text;
  int port;
  if (in == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  in->http = mp_httpd_start(srv, &inspector_site, listen, err, errlen);
  if (in->http == NULL) {
    free(in);
    return -1;
  }
  port = mp_httpd_port(in->http);
  snprintf(in->host, sizeof in->host, "%s", mp_httpd_address(in->http));
  snprintf(in->localhost, sizeof in->localhost, "localhost:%d", port);
  snprintf(in->origin, sizeof in->origin, "http://%s", in->host);
  snprintf(in->url, sizeof in->url, "http://%s/", in->host);
  snprintf(in->cookie, sizeof in->cookie, "mastra_inspector_%d", port);
  snprintf(in->state_path, sizeof in->state_path, "%s/state/inspector.json",
           srv->data_dir);
  srv->inspector = in;
  state = cJSON_CreateObject();
  cJSON_AddStringToObject(state, "url", in->url);
  cJSON_AddNumberToObject(state, "pid", (double)getpid());
  cJSON_AddStringToObject(state, "tokenFile", token_file);
  text = cJSON_PrintUnformatted(state);
  cJSON_Delete(state);
  if (text == NULL
      || mastra__write_file_atomic(in->state_path, text, strlen(text), 0600,
                                   0) < 0)
    mp_log("inspector: cannot write %s: %s", in->state_path, strerror(errno));
  free(text);
  return 0;
}

int mp_inspector_timeout(mp_server *srv) {
  return srv->inspector ? mp_httpd_timeout(srv->inspector->http) : -1;
}

void mp_inspector_run(mp_server *srv) {
  if (srv->inspector != NULL) mp_httpd_run(srv->inspector->http);
}

void mp_inspector_stop(mp_server *srv) {
  struct mp_inspector *in = srv->inspector;
  if (in == NULL) return;
  mp_httpd_stop(in->http);
  unlink(in->state_path);
  srv->inspector = NULL;
  free(in);
}

/* }====== */
