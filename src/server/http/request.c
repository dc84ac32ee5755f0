/*
** A request to mastra-platform (see request.h): the JSON body and the
** pieces of the URL. Paths and query strings reach us undecoded (httpd.c
** installs an identity unescape callback), so that a percent-encoded NUL
** or slash is seen for what it is: the routes decode each piece here.
*/
#include "http/request.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json.h"
#include "http/respond.h"

static enum MHD_Result count_content_length(void *cls,
                                           enum MHD_ValueKind kind,
                                           const char *key,
                                           const char *value) {
  int *n = cls;
  (void)kind;
  (void)value;
  if (strcasecmp(key, "Content-Length") == 0) (*n)++;
  return MHD_YES;
}

int mp_request_length(struct MHD_Connection *conn, mp_request *r,
                      unsigned long long *length, enum MHD_Result *result) {
  const char *cl;
  int n = 0;
  MHD_get_connection_values(conn, MHD_HEADER_KIND, count_content_length, &n);
  if (n > 1) {
    r->responded = 1;
    *result = mp_send_error(conn, 400, "invalid_request",
                            "the request has %d Content-Length headers: send"
                            " one", n);
    return 0;
  }
  cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
  *length = cl != NULL ? strtoull(cl, NULL, 10) : 0;
  return 1;
}

int mp_request_feed(struct MHD_Connection *conn, mp_request *r,
                    const char *upload, size_t *upload_size,
                    size_t *in_flight, size_t max_in_flight,
                    enum MHD_Result *result) {
  *result = MHD_YES;
  if (r->responded) {
    *upload_size = 0;
    return 1;
  }
  if (*upload_size > 0) {
    size_t n = *upload_size;
    *upload_size = 0;
    if (r->too_large || r->len + n > r->limit) {
      r->too_large = 1;
      return 1;
    }
    if (r->sink_write != NULL) { /* nothing is kept here */
      if (!r->sink_failed && r->sink_write(r->state, upload, n) < 0)
        r->sink_failed = 1;
      r->len += n;
      return 1;
    }
    if (r->len + n > r->reserved && !r->busy) {
      /* a body longer than announced, or chunked: reserve as it comes */
      size_t more = r->len + n - r->reserved;
      if (*in_flight + more > max_in_flight) {
        r->busy = 1;
        return 1;
      }
      r->reserved += more;
      r->in_flight = in_flight;
      *in_flight += more;
    }
    if (r->busy) return 1;
    if (r->len + n > r->cap) {
      size_t cap = r->cap ? r->cap : 4096;
      char *b;
      if (cap < r->reserved) cap = r->reserved; /* one allocation */
      while (cap < r->len + n) cap *= 2;
      b = realloc(r->body, cap);
      if (b == NULL) {
        *result = MHD_NO;
        return 1;
      }
      r->body = b;
      r->cap = cap;
    }
    memcpy(r->body + r->len, upload, n);
    r->len += n;
    return 1;
  }
  if (r->too_large) {
    *result = mp_send_error(conn, 413, "invalid_request",
                            "the body is larger than %zu bytes", r->limit);
    return 1;
  }
  if (r->busy) {
    *result = mp_send_error(conn, 503, "unavailable",
                            "the platform is reading too many bodies at once"
                            " (its bound is %zu bytes): retry later",
                            max_in_flight);
    return 1;
  }
  return 0;
}

void mp_request_completed(void *cls, struct MHD_Connection *conn,
                          void **req_cls,
                          enum MHD_RequestTerminationCode why) {
  mp_request *r = *req_cls;
  (void)cls;
  (void)conn;
  (void)why;
  if (r == NULL) return;
  if (r->in_flight != NULL) *r->in_flight -= r->reserved;
  if (r->state_free != NULL) r->state_free(r->state);
  free(r->body);
  free(r);
  *req_cls = NULL;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

size_t mp_pct_encode(const char *s, char *out, size_t n) {
  static const char hex[] = "0123456789ABCDEF";
  size_t o = 0;
  if (n == 0) return 0;
  for (; *s != '\0' && o + 4 < n; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
        || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'
        || c == '~') {
      out[o++] = (char)c;
    } else {
      out[o++] = '%';
      out[o++] = hex[c >> 4];
      out[o++] = hex[c & 15];
    }
  }
  out[o] = '\0';
  return o;
}

char *mp_pct_decode(const char *s, size_t n, int plus_space,
                    size_t *out_len) {
  char *out = malloc(n + 1);
  size_t i, j = 0;
  if (out == NULL) return NULL;
  for (i = 0; i < n; i++) {
    if (s[i] == '%') {
      int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
      int lo = i + 2 < n ? hexval(s[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        free(out);
        return NULL;
      }
      out[j++] = (char)(hi * 16 + lo);
      i += 2;
    } else if (plus_space && s[i] == '+') {
      out[j++] = ' ';
    } else {
      out[j++] = s[i];
    }
  }
  out[j] = '\0';
  *out_len = j;
  return out;
}

char *mp_query_arg(struct MHD_Connection *conn, const char *name, int *bad) {
  const char *raw =
      MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
  size_t len;
  char *v;
  if (raw == NULL) return NULL;
  v = mp_pct_decode(raw, strlen(raw), 1, &len);
  if (v == NULL || strlen(v) != len) {
    free(v);
    *bad = 1;
    return NULL;
  }
  return v;
}

int mp_query_true(struct MHD_Connection *conn, const char *name) {
  const char *raw =
      MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
  return raw != NULL && strcmp(raw, "true") == 0;
}

/* In valid JSON every backslash is in a string, so the escapes are found
** by memchr, not by a walk of every byte (an exec's text and env can be
** hundreds of KiB a message). An escaped backslash is skipped with its
** escape: "\\u0000" is a backslash and "u0000". Invalid JSON with a
** \u0000 outside any string is refused as NUL rather than as not JSON. */
int mp_json_has_nul(const char *s, size_t n) {
  const char *p = s, *end = s + n;
  while (p < end && (p = memchr(p, '\\', (size_t)(end - p))) != NULL) {
    if (end - p >= 6 && memcmp(p + 1, "u0000", 5) == 0) return 1;
    p += 2; /* the backslash and the character it escapes */
  }
  return 0;
}

cJSON *mp_request_json(struct MHD_Connection *conn, mp_request *r,
                       int required) {
  cJSON *json;
  if (r->len == 0 && !required) return cJSON_CreateObject();
  if (r->body != NULL && mp_json_has_nul(r->body, r->len)) {
    mp_send_error(conn, 400, "invalid_request",
                  "strings in the body may not contain NUL (\\u0000)");
    return NULL;
  }
  json = mastra__json_parse(r->body ? r->body : "", r->len, NULL, NULL);
  if (!cJSON_IsObject(json)) {
    cJSON_Delete(json);
    mp_send_error(conn, 400, "invalid_request",
                  "the request body must be a JSON object (malformed JSON?)");
    return NULL;
  }
  return json;
}
