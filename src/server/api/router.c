/*
** The router of mastra-platform, the API's site of the HTTP pipeline
** (http/httpd.h): who may ask (the bearer token, compared in constant
** time; /ws/exec is admitted by its lease instead, checked as soon as the
** request's head is in: the pipeline routes it then), which paths exist,
** and which part answers them:
**
**   /ws/exec                                   exec_ws.c (after the lease)
**   /v1/{railway|e2b}/projects/{p}/sandbox...  routes_sandbox.c
**   /v1/projects/{p}/sandbox...                (the same)
**   /v1/.../projects/{p}/fs/{bucket}/{key}     routes_bucket.c
**
** Paths arrive undecoded: the project id and the sandbox path segments are
** percent-decoded here, the bucket and key by routes_bucket.c.
*/
#define _GNU_SOURCE
#include "api/router.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bucket/bucket.h"
#include "api/exec_ws.h"
#include "http_tokens.h"
#include "sandbox/lease.h"
#include "http/httpd.h"
#include "http/respond.h"
#include "api/routes_bucket.h"
#include "api/routes_sandbox.h"
#include "api/routes_template.h"
#include "util.h"

#define MAX_SEGMENTS 8

static int at_head(const char *url) { return strcmp(url, "/ws/exec") == 0; }

static int admit(mp_server *srv, struct MHD_Connection *conn, const char *url,
                 const char *method, enum MHD_Result *rc) {
  const char *h =
      MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
  (void)url, (void)method;
  if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0) {
    h += 7;
    while (*h == ' ') h++;
    if (mastra__secure_equal(h, strlen(h), srv->token, srv->token_len))
      return 1;
  }
  *rc = mp_send_error(conn, 401, "authentication_error",
                      "missing or wrong 'Authorization: Bearer <token>' (the"
                      " client's MASTRA_PLATFORM_ACCESS_TOKEN; this platform's"
                      " token is its --token-file)");
  return 0;
}

static int streams_body(const char *url, const char *method) {
  return strcmp(method, "PUT") == 0 && strstr(url, "/fs/") != NULL;
}

static size_t body_limit(mp_server *srv, const char *url,
                         const char *method) {
  if (strcmp(url, "/ws/exec") == 0) return 0; /* an upgrade has no body */
  if (streams_body(url, method)) return srv->max_object;
  return srv->max_body;
}

/* /ws/exec: the subprotocols offered are 'railway-shell' and the lease
** token. */
static enum MHD_Result ws_exec(mp_server *srv, struct MHD_Connection *conn) {
  const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                              "Sec-WebSocket-Protocol");
  const char *pos, *end, *tok;
  size_t len;
  mp_sandbox *sb;
  if (h == NULL)
    return mp_send_error(conn, 401, "authentication_error",
                         "offer the subprotocols 'railway-shell, <lease jwt>'");
  pos = h;
  end = h + strlen(h);
  if (!mastra__list_next(&pos, end, &tok, &len)
      || len != sizeof MP_WS_EXEC_SUBPROTOCOL - 1
      || strncmp(tok, MP_WS_EXEC_SUBPROTOCOL, len) != 0
      || !mastra__list_next(&pos, end, &tok, &len))
    return mp_send_error(conn, 401, "authentication_error",
                         "the first subprotocol must be 'railway-shell',"
                         " followed by the lease jwt");
  sb = mp_lease_check(srv, tok, len);
  if (sb == NULL)
    return mp_send_error(conn, 401, "authentication_error",
                         "the lease is unknown or expired, or its sandbox was"
                         " destroyed: mint a new one with POST"
                         " /sandbox/{id}/exec-lease");
  return mp_ws_exec_upgrade(srv, conn, sb);
}

static enum MHD_Result route(mp_server *srv, struct MHD_Connection *conn,
                             const char *url, const char *method,
                             mp_request *r) {
  char path[8192];
  char *seg[MAX_SEGMENTS + 1];
  const char *project, *rest;
  int nseg = 0, i;
  size_t plen;
  char *p, *pdec;
  if (strcmp(url, "/ws/exec") == 0) return ws_exec(srv, conn);
  /* /v1/{railway|e2b}/projects/{pid}/... or /v1/projects/{pid}/... */
  if (strncmp(url, "/v1/railway/projects/", 21) == 0) rest = url + 21;
  else if (strncmp(url, "/v1/e2b/projects/", 17) == 0) rest = url + 17;
  else if (strncmp(url, "/v1/projects/", 13) == 0) rest = url + 13;
  else
    return mp_send_error(conn, 404, "not_found", "no route for %s %.200s",
                         method, url);
  plen = strcspn(rest, "/");
  if (plen == 0)
    return mp_send_error(conn, 404, "not_found", "missing project id");
  if (plen >= 3 * MP_NAME_MAX) /* longer than any escaped valid id */
    return mp_send_error(conn, 400, "invalid_request",
                         "bad project id: longer than %d bytes",
                         MP_NAME_MAX - 1);
  pdec = mp_pct_decode(rest, plen, 0, &plen);
  if (pdec == NULL || strlen(pdec) != plen || mp_bucket_name_check(pdec)) {
    const char *why = pdec == NULL ? "bad percent-escape"
                      : strlen(pdec) != plen ? "NUL byte"
                                             : mp_bucket_name_check(pdec);
    free(pdec);
    return mp_send_error(conn, 400, "invalid_request", "bad project id: %s",
                         why);
  }
  project = pdec;
  rest += strcspn(rest, "/");
  if (strncmp(rest, "/fs/", 4) == 0) {
    const char *b = rest + 4;
    size_t blen = strcspn(b, "/");
    char bucket[MP_NAME_MAX * 3];
    enum MHD_Result out;
    if (blen == 0 || blen >= sizeof bucket) {
      free(pdec);
      return mp_send_error(conn, 400, "invalid_request",
                           "missing or too long bucket name");
    }
    memcpy(bucket, b, blen);
    bucket[blen] = '\0';
    b += blen;
    if (*b == '/') b++;
    out = mp_routes_bucket(srv, conn, method, project, bucket, b, r);
    free(pdec);
    return out;
  }
  if (strlen(rest) >= sizeof path) {
    free(pdec);
    return mp_send_error(conn, 414, "invalid_request", "path too long");
  }
  strcpy(path, rest);
  for (p = strtok(path, "/"); p != NULL && nseg < MAX_SEGMENTS;
       p = strtok(NULL, "/"))
    seg[nseg++] = p;
  for (i = 0; i < nseg; i++) {
    size_t n;
    char *d = mp_pct_decode(seg[i], strlen(seg[i]), 0, &n);
    if (d == NULL || strlen(d) != n) {
      free(d);
      free(pdec);
      return mp_send_error(conn, 400, "invalid_request",
                           "bad escape in the path");
    }
    strcpy(seg[i], d); /* decoding never lengthens */
    free(d);
  }
  if ((nseg >= 2 && strcmp(seg[0], "sandbox") == 0
       && strcmp(seg[1], "templates") == 0)
      || (nseg >= 1 && strcmp(seg[0], "templates") == 0)) {
    enum MHD_Result out =
        mp_routes_template(srv, conn, method, project, seg, nseg, r);
    free(pdec);
    return out;
  }
  if (nseg >= 1 && strcmp(seg[0], "sandbox") == 0) {
    enum MHD_Result out =
        mp_routes_sandbox(srv, conn, method, project, seg, nseg, r);
    free(pdec);
    return out;
  }
  free(pdec);
  return mp_send_error(conn, 404, "not_found", "no route for %s %.200s",
                       method, url);
}

static const mp_site api_site = {
    .name = "API",
    .body_limit = body_limit,
    .admit = admit,
    .at_head = at_head,
    .streams_body = streams_body,
    .route = route,
    .upgrades = 1,
};

int mp_api_start(mp_server *srv, const char *listen, char *err,
                 size_t errlen) {
  const char *address;
  srv->api = mp_httpd_start(srv, &api_site, listen, err, errlen);
  if (srv->api == NULL) return -1;
  address = mp_httpd_address(srv->api);
  snprintf(srv->base_url, sizeof srv->base_url, "http://%s", address);
  snprintf(srv->ws_url, sizeof srv->ws_url, "ws://%s/ws/exec", address);
  return 0;
}
