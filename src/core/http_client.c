/*
** libcurl multi_socket on the loop, and HTTP requests (see http_client.h).
*/
#define _GNU_SOURCE
#include "http_client.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>

#define BODY_CHUNK 16384
#define BODY_PREALLOC_MAX (64 * 1024 * 1024)

/* {====== the multi ====== */

/* A socket libcurl asked us to watch. Freed through the loop's deferred
** list: the epoll batch being dispatched may still point at its watcher. */
struct mastra__multi_sock {
  mastra__handle handle;
  mastra__io io;
  mastra__multi *m;
  mastra__multi_sock *prev, *next;
};

static void global_init(void) {
  static int done;
  if (!done) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    done = 1;
  }
}

static void sock_free_cb(mastra__handle *h) {
  free(h); /* handle is the first member */
}

static void sock_release(mastra__multi *m, mastra__multi_sock *ms) {
  mastra__io_stop(&ms->io);
  if (ms->prev) ms->prev->next = ms->next; else m->socks = ms->next;
  if (ms->next) ms->next->prev = ms->prev;
  ms->prev = ms->next = NULL;
  mastra__loop_defer_free(m->loop, &ms->handle);
}

static void do_close(mastra__multi *m);

static void drain(mastra__multi *m) {
  CURLMsg *msg;
  int left;
  while (m->multi != NULL
         && (msg = curl_multi_info_read(m->multi, &left)) != NULL) {
    CURL *easy = msg->easy_handle;
    CURLcode rc = msg->data.result;
    mastra__xfer *x = NULL;
    if (msg->msg != CURLMSG_DONE) continue;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&x);
    if (x != NULL && x->done != NULL) x->done(x, rc);
  }
}

/* socket_action, then hand over what finished; a close asked for by a
** `done` function happens once nothing of ours is on the stack. */
static void action(mastra__multi *m, curl_socket_t s, int flags) {
  int running;
  if (m->multi == NULL) return;
  m->depth++;
  curl_multi_socket_action(m->multi, s, flags, &running);
  drain(m);
  if (--m->depth == 0 && m->close_pending) do_close(m);
}

static void on_sock_io(mastra__io *io, uint32_t revents) {
  mastra__multi_sock *ms = io->data;
  int flags = 0;
  if (revents & (EPOLLIN | EPOLLHUP)) flags |= CURL_CSELECT_IN;
  if (revents & EPOLLOUT) flags |= CURL_CSELECT_OUT;
  if (revents & EPOLLERR) flags |= CURL_CSELECT_ERR;
  action(ms->m, io->fd, flags);
}

static void on_timeout(mastra__timer *t) {
  mastra__multi *m = t->data;
  long ms = -1;
  action(m, CURL_SOCKET_TIMEOUT, 0);
  /* libcurl calls CURLMOPT_TIMERFUNCTION only when its next expiry
  ** changes: had the timer fired before libcurl's clock reached that
  ** expiry, none would be armed, and its transfers (their timeouts too)
  ** would wait forever. Ask it what remains. */
  if (m->multi != NULL && m->timer.slot == 0
      && curl_multi_timeout(m->multi, &ms) == CURLM_OK && ms >= 0)
    mastra__timer_start(&m->timer, (uint64_t)ms);
}

/* CURLMOPT_SOCKETFUNCTION: watch, re-watch or forget one socket. */
static int on_curl_socket(CURL *easy, curl_socket_t s, int what, void *userp,
                          void *socketp) {
  mastra__multi *m = userp;
  mastra__multi_sock *ms = socketp;
  uint32_t events = 0;
  (void)easy;
  if (what == CURL_POLL_REMOVE) {
    if (ms != NULL) {
      sock_release(m, ms);
      curl_multi_assign(m->multi, s, NULL);
    }
    return 0;
  }
  if (ms == NULL) {
    ms = calloc(1, sizeof *ms);
    if (ms == NULL) return -1;
    ms->handle.free = sock_free_cb;
    ms->m = m;
    mastra__io_init(m->loop, &ms->io, s, on_sock_io, ms);
    ms->next = m->socks;
    if (m->socks) m->socks->prev = ms;
    m->socks = ms;
    curl_multi_assign(m->multi, s, ms);
  }
  if (what == CURL_POLL_IN || what == CURL_POLL_INOUT) events |= EPOLLIN;
  if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT) events |= EPOLLOUT;
  if (mastra__io_start(&ms->io, events) < 0) return -1;
  return 0;
}

/* CURLMOPT_TIMERFUNCTION: arm the one timer (-1: delete it). libcurl is
** never called from here; the timer fires from the loop. */
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp) {
  mastra__multi *m = userp;
  (void)multi;
  if (timeout_ms < 0) {
    mastra__timer_stop(&m->timer);
    return 0;
  }
  return mastra__timer_start(&m->timer, (uint64_t)timeout_ms) < 0 ? -1 : 0;
}

int mastra__multi_init(mastra__multi *m, mastra__loop *loop) {
  memset(m, 0, sizeof *m);
  global_init();
  m->loop = loop;
  mastra__timer_init(loop, &m->timer, on_timeout, m);
  m->multi = curl_multi_init();
  if (m->multi == NULL) return -1;
  curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
  curl_multi_setopt(m->multi, CURLMOPT_SOCKETDATA, m);
  curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
  curl_multi_setopt(m->multi, CURLMOPT_TIMERDATA, m);
  return 0;
}

CURLMcode mastra__multi_add(mastra__multi *m, mastra__xfer *x) {
  CURLMcode rc;
  if (m->multi == NULL || m->close_pending) return CURLM_BAD_HANDLE;
  curl_easy_setopt(x->easy, CURLOPT_PRIVATE, (char *)x);
  rc = curl_multi_add_handle(m->multi, x->easy);
  if (rc != CURLM_OK) return rc;
  x->multi = m;
  x->prev = NULL;
  x->next = m->xfers;
  if (m->xfers) m->xfers->prev = x;
  m->xfers = x;
  return CURLM_OK;
}

void mastra__multi_remove(mastra__xfer *x) {
  mastra__multi *m = x->multi;
  if (m == NULL) return;
  curl_multi_remove_handle(m->multi, x->easy);
  if (x->prev) x->prev->next = x->next; else m->xfers = x->next;
  if (x->next) x->next->prev = x->prev;
  x->prev = x->next = NULL;
  x->multi = NULL;
}

static void do_close(mastra__multi *m) {
  m->close_pending = 0;
  while (m->xfers != NULL) mastra__multi_remove(m->xfers);
  /* stop watching before libcurl closes what is left (the connection
  ** cache): no callback runs from here on */
  while (m->socks != NULL) sock_release(m, m->socks);
  curl_multi_setopt(m->multi, CURLMOPT_SOCKETFUNCTION, NULL);
  curl_multi_setopt(m->multi, CURLMOPT_TIMERFUNCTION, NULL);
  curl_multi_cleanup(m->multi);
  m->multi = NULL;
  mastra__timer_stop(&m->timer);
}

void mastra__multi_close(mastra__multi *m) {
  if (m->multi == NULL) return;
  if (m->depth > 0)
    m->close_pending = 1;
  else
    do_close(m);
}

#define N(x) [x] = #x
static const char *const code_names[] = {
  N(CURLE_OK), N(CURLE_UNSUPPORTED_PROTOCOL), N(CURLE_FAILED_INIT),
  N(CURLE_URL_MALFORMAT), N(CURLE_NOT_BUILT_IN),
  N(CURLE_COULDNT_RESOLVE_PROXY), N(CURLE_COULDNT_RESOLVE_HOST),
  N(CURLE_COULDNT_CONNECT), N(CURLE_WEIRD_SERVER_REPLY),
  N(CURLE_REMOTE_ACCESS_DENIED), N(CURLE_FTP_ACCEPT_FAILED),
  N(CURLE_FTP_WEIRD_PASS_REPLY), N(CURLE_FTP_ACCEPT_TIMEOUT),
  N(CURLE_FTP_WEIRD_PASV_REPLY), N(CURLE_FTP_WEIRD_227_FORMAT),
  N(CURLE_FTP_CANT_GET_HOST), N(CURLE_HTTP2), N(CURLE_FTP_COULDNT_SET_TYPE),
  N(CURLE_PARTIAL_FILE), N(CURLE_FTP_COULDNT_RETR_FILE), N(CURLE_QUOTE_ERROR),
  N(CURLE_HTTP_RETURNED_ERROR), N(CURLE_WRITE_ERROR), N(CURLE_UPLOAD_FAILED),
  N(CURLE_READ_ERROR), N(CURLE_OUT_OF_MEMORY), N(CURLE_OPERATION_TIMEDOUT),
  N(CURLE_FTP_PORT_FAILED), N(CURLE_FTP_COULDNT_USE_REST),
  N(CURLE_RANGE_ERROR), N(CURLE_HTTP_POST_ERROR), N(CURLE_SSL_CONNECT_ERROR),
  N(CURLE_BAD_DOWNLOAD_RESUME), N(CURLE_FILE_COULDNT_READ_FILE),
  N(CURLE_LDAP_CANNOT_BIND), N(CURLE_LDAP_SEARCH_FAILED),
  N(CURLE_FUNCTION_NOT_FOUND), N(CURLE_ABORTED_BY_CALLBACK),
  N(CURLE_BAD_FUNCTION_ARGUMENT), N(CURLE_INTERFACE_FAILED),
  N(CURLE_TOO_MANY_REDIRECTS), N(CURLE_UNKNOWN_OPTION),
  N(CURLE_SETOPT_OPTION_SYNTAX), N(CURLE_GOT_NOTHING),
  N(CURLE_SSL_ENGINE_NOTFOUND), N(CURLE_SSL_ENGINE_SETFAILED),
  N(CURLE_SEND_ERROR), N(CURLE_RECV_ERROR), N(CURLE_SSL_CERTPROBLEM),
  N(CURLE_SSL_CIPHER), N(CURLE_PEER_FAILED_VERIFICATION),
  N(CURLE_BAD_CONTENT_ENCODING), N(CURLE_FILESIZE_EXCEEDED),
  N(CURLE_USE_SSL_FAILED), N(CURLE_SEND_FAIL_REWIND),
  N(CURLE_SSL_ENGINE_INITFAILED), N(CURLE_LOGIN_DENIED),
  N(CURLE_TFTP_NOTFOUND), N(CURLE_TFTP_PERM), N(CURLE_REMOTE_DISK_FULL),
  N(CURLE_TFTP_ILLEGAL), N(CURLE_TFTP_UNKNOWNID), N(CURLE_REMOTE_FILE_EXISTS),
  N(CURLE_TFTP_NOSUCHUSER), N(CURLE_SSL_CACERT_BADFILE),
  N(CURLE_REMOTE_FILE_NOT_FOUND), N(CURLE_SSH), N(CURLE_SSL_SHUTDOWN_FAILED),
  N(CURLE_AGAIN), N(CURLE_SSL_CRL_BADFILE), N(CURLE_SSL_ISSUER_ERROR),
  N(CURLE_FTP_PRET_FAILED), N(CURLE_RTSP_CSEQ_ERROR),
  N(CURLE_RTSP_SESSION_ERROR), N(CURLE_FTP_BAD_FILE_LIST),
  N(CURLE_CHUNK_FAILED), N(CURLE_NO_CONNECTION_AVAILABLE),
  N(CURLE_SSL_PINNEDPUBKEYNOTMATCH), N(CURLE_SSL_INVALIDCERTSTATUS),
  N(CURLE_HTTP2_STREAM), N(CURLE_RECURSIVE_API_CALL), N(CURLE_AUTH_ERROR),
  N(CURLE_HTTP3), N(CURLE_QUIC_CONNECT_ERROR), N(CURLE_PROXY),
  N(CURLE_SSL_CLIENTCERT), N(CURLE_UNRECOVERABLE_POLL),
};
#undef N

const char *mastra__curl_code_name(CURLcode rc) {
  if ((size_t)rc < sizeof code_names / sizeof code_names[0]
      && code_names[rc] != NULL)
    return code_names[rc];
  return "CURLE_UNKNOWN";
}

/* }====== */

/* {====== the shared multi of a loop ====== */

typedef struct http_ctx {
  mastra__handle handle; /* first: the handle is the context */
  mastra__multi m;
} http_ctx;

static void http_ctx_shutdown(mastra__handle *h) {
  http_ctx *c = (http_ctx *)h;
  mastra__loop *loop = c->m.loop;
  mastra__multi_close(&c->m);
  mastra__loop_set_http(loop, NULL);
  free(c);
}

static void http_ctx_free(mastra__handle *h) {
  http_ctx_shutdown(h);
}

static mastra__multi *shared_multi(mastra__loop *loop) {
  http_ctx *c = mastra__loop_http(loop);
  if (c != NULL) return &c->m;
  c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  if (mastra__multi_init(&c->m, loop) < 0) {
    free(c);
    return NULL;
  }
  /* keep idle connections for reuse, as a browser does */
  curl_multi_setopt(c->m.multi, CURLMOPT_MAXCONNECTS, 64L);
  c->handle.shutdown = http_ctx_shutdown;
  c->handle.free = http_ctx_free;
  mastra__loop_add_handle(loop, &c->handle);
  mastra__loop_set_http(loop, c);
  return &c->m;
}

/* }====== */

/* {====== requests ====== */

static void clear_headers(mastra__http_req *r) {
  size_t i;
  for (i = 0; i < r->nheaders; i++) {
    free(r->headers[i].name);
    free(r->headers[i].value);
  }
  r->nheaders = 0;
}

static char *dup_trimmed(const char *s, size_t len) {
  char *out;
  while (len > 0 && (*s == ' ' || *s == '\t')) s++, len--;
  while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'
                     || s[len - 1] == '\r' || s[len - 1] == '\n'))
    len--;
  out = malloc(len + 1);
  if (out == NULL) return NULL;
  memcpy(out, s, len);
  out[len] = '\0';
  return out;
}

/* CURLOPT_HEADERFUNCTION: one complete header line per call. A status
** line starts a new response (redirects, 100 Continue): its headers
** replace the earlier ones. */
static size_t on_header(char *buf, size_t size, size_t n, void *ud) {
  mastra__http_req *r = ud;
  size_t len = size * n, i;
  const char *colon;
  mastra__http_header *h;
  if (len >= 5 && memcmp(buf, "HTTP/", 5) == 0) {
    clear_headers(r);
    return len;
  }
  if (len == 0 || buf[0] == '\r' || buf[0] == '\n') return len;
  if ((buf[0] == ' ' || buf[0] == '\t') && r->nheaders > 0) {
    /* obsolete line folding: continue the last value */
    mastra__http_header *last = &r->headers[r->nheaders - 1];
    char *more = dup_trimmed(buf, len);
    char *v;
    if (more == NULL) goto oom;
    v = malloc(strlen(last->value) + strlen(more) + 2);
    if (v == NULL) {
      free(more);
      goto oom;
    }
    sprintf(v, "%s%s%s", last->value, last->value[0] ? " " : "", more);
    free(more);
    free(last->value);
    last->value = v;
    return len;
  }
  colon = memchr(buf, ':', len);
  if (colon == NULL) return len;
  if (r->nheaders == r->capheaders) {
    size_t cap = r->capheaders ? r->capheaders * 2 : 16;
    mastra__http_header *p = realloc(r->headers, cap * sizeof *p);
    if (p == NULL) goto oom;
    r->headers = p;
    r->capheaders = cap;
  }
  h = &r->headers[r->nheaders];
  h->name = dup_trimmed(buf, (size_t)(colon - buf));
  h->value = dup_trimmed(colon + 1, len - (size_t)(colon - buf) - 1);
  if (h->name == NULL || h->value == NULL) {
    free(h->name);
    free(h->value);
    goto oom;
  }
  for (i = 0; h->name[i]; i++)
    h->name[i] = (char)tolower((unsigned char)h->name[i]);
  r->nheaders++;
  return len;
oom:
  r->oom = 1;
  return 0; /* fails the transfer with CURLE_WRITE_ERROR */
}

/* Room for `more` bytes after `used` in *buf (capacity *cap: `first`
** when there is none yet, doubled until it fits). 0, or -1 when out of
** memory. */
static int grow(char **buf, size_t *cap, size_t used, size_t more,
                size_t first) {
  size_t c = *cap ? *cap : first;
  char *p;
  if (*cap - used >= more) return 0;
  while (c - used < more) {
    if (c > ((size_t)-1) / 2) return -1;
    c *= 2;
  }
  p = realloc(*buf, c);
  if (p == NULL) return -1;
  *buf = p;
  *cap = c;
  return 0;
}

/* A streamed response: queue the bytes, and pause while the caller has
** not taken what waits (libcurl keeps buf and hands it over again once
** unpaused). */
static size_t on_stream_body(mastra__http_req *r, char *buf, size_t len) {
  if (!r->head) {
    curl_easy_getinfo(r->xfer.easy, CURLINFO_RESPONSE_CODE, &r->status);
    r->head = 1;
    if (!r->orphan) mastra__loop_signal(r->loop, r->id);
  }
  if (len == 0) return 0;
  if (r->body_len >= MASTRA__HTTP_RECV_HIGH) {
    r->recv_paused = 1;
    return CURL_WRITEFUNC_PAUSE;
  }
  if (grow(&r->body, &r->body_cap, r->body_len, len, BODY_CHUNK) < 0) {
    r->oom = 1;
    return 0;
  }
  memcpy(r->body + r->body_len, buf, len);
  if (r->body_len == 0 && !r->orphan) mastra__loop_signal(r->loop, r->id);
  r->body_len += len;
  return len;
}

static size_t on_body(char *buf, size_t size, size_t n, void *ud) {
  mastra__http_req *r = ud;
  size_t len = size * n;
  if (r->stream_response) return on_stream_body(r, buf, len);
  if (r->body_cap - r->body_len < len) {
    size_t first = BODY_CHUNK;
    curl_off_t announced = -1;
    /* the first bytes: make room for the announced length at once (up to
    ** BODY_PREALLOC_MAX, so that a lying header costs little) */
    if (r->body_cap == 0
        && curl_easy_getinfo(r->xfer.easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T,
                             &announced) == CURLE_OK
        && announced > (curl_off_t)first && announced <= BODY_PREALLOC_MAX)
      first = (size_t)announced;
    if (grow(&r->body, &r->body_cap, r->body_len, len, first) < 0) goto oom;
  }
  memcpy(r->body + r->body_len, buf, len);
  r->body_len += len;
  return len;
oom:
  r->oom = 1;
  return 0;
}

/* CURLOPT_READFUNCTION of a streamed request body: what is queued, the
** end once finished, else pause until the owner writes more. */
static size_t on_read(char *buf, size_t size, size_t n, void *ud) {
  mastra__http_req *r = ud;
  size_t room = size * n, avail = r->out_len - r->out_off;
  size_t before = avail;
  if (avail == 0) {
    if (r->out_eof) return 0;
    r->send_paused = 1;
    return CURL_READFUNC_PAUSE;
  }
  if (avail > room) avail = room;
  memcpy(buf, r->out + r->out_off, avail);
  r->out_off += avail;
  if (r->out_off == r->out_len) r->out_off = r->out_len = 0;
  if (((before >= MASTRA__HTTP_SEND_LOW && before - avail < MASTRA__HTTP_SEND_LOW)
       || r->out_len == 0)
      && !r->orphan)
    mastra__loop_signal(r->loop, r->id);
  return avail;
}

/* Free what only the transfer needed. */
static void req_finish_transfer(mastra__http_req *r) {
  mastra__multi_remove(&r->xfer);
  if (r->xfer.easy != NULL) {
    curl_easy_cleanup(r->xfer.easy);
    r->xfer.easy = NULL;
  }
  curl_slist_free_all(r->req_headers);
  r->req_headers = NULL;
  free(r->req_body);
  r->req_body = NULL;
  free(r->out);
  r->out = NULL;
  r->out_off = r->out_len = r->out_cap = 0;
}

static void req_done(mastra__xfer *x, CURLcode rc) {
  mastra__http_req *r =
      (mastra__http_req *)((char *)x - offsetof(mastra__http_req, xfer));
  r->result = r->oom ? CURLE_OUT_OF_MEMORY : rc;
  curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &r->status);
  req_finish_transfer(r);
  r->done = 1;
  r->head = 1;
  if (r->orphan)
    mastra__loop_defer_free(r->loop, &r->handle);
  else
    mastra__loop_signal(r->loop, r->id);
}

static void req_free(mastra__handle *h) {
  mastra__http_req *r = (mastra__http_req *)h;
  mastra__loop *loop = r->loop;
  mastra__loop_remove_handle(loop, h);
  req_finish_transfer(r);
  clear_headers(r);
  free(r->headers);
  free(r->body);
  free(r);
  mastra__loop_unref(loop);
}

/* The loop is going away: stop the transfer; the owner still frees. */
static void req_shutdown(mastra__handle *h) {
  mastra__http_req *r = (mastra__http_req *)h;
  if (!r->done) {
    req_finish_transfer(r);
    r->done = 1;
    r->closed = 1;
    r->result = CURLE_ABORTED_BY_CALLBACK;
    snprintf(r->errbuf, sizeof r->errbuf, "the event loop was closed");
  }
  if (r->orphan) req_free(h);
}

static int has_header(const mastra__http_opts *o, const char *name) {
  size_t i, n = strlen(name);
  for (i = 0; i < o->nheaders; i++)
    if (strncasecmp(o->headers[i], name, n) == 0
        && (o->headers[i][n] == ':' || o->headers[i][n] == ';'))
      return 1;
  return 0;
}

static CURLcode set_method(mastra__http_req *r, const mastra__http_opts *o) {
  CURL *e = r->xfer.easy;
  const char *method = o->method ? o->method : "GET";
  int body = o->body != NULL;
  if (strcmp(method, "HEAD") == 0)
    return curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  if (o->stream_body) {
    /* an upload: Content-Length when the size is known, else chunked */
    curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)o->body_size);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(e, CURLOPT_READDATA, r);
    if (strcmp(method, "PUT") == 0) return CURLE_OK;
    return curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
  }
  /* POST, PUT and PATCH without a body send Content-Length: 0, as fetch */
  if (!body && (strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0
                || strcmp(method, "PATCH") == 0))
    body = 1;
  if (body) {
    r->req_body = malloc(o->body_len ? o->body_len : 1);
    if (r->req_body == NULL) return CURLE_OUT_OF_MEMORY;
    if (o->body_len) memcpy(r->req_body, o->body, o->body_len);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->req_body);
  } else if (strcmp(method, "GET") == 0) {
    return curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
  }
  /* a body makes a POST: any other method is named */
  if (strcmp(method, "POST") == 0) return CURLE_OK;
  return curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
}

static int add_header(struct curl_slist **list, const char *line) {
  struct curl_slist *l = curl_slist_append(*list, line);
  if (l == NULL) return -1;
  *list = l;
  return 0;
}

int mastra__http_start(mastra__loop *loop, const mastra__http_opts *o,
                       mastra__http_req **out, char *err, size_t errlen) {
  mastra__multi *m;
  mastra__http_req *r;
  CURL *e;
  size_t i;
  int rc = 0;
  *out = NULL;
  if (mastra__loop_closed(loop)) {
    snprintf(err, errlen, "the event loop is closed");
    return -1;
  }
  m = shared_multi(loop);
  r = calloc(1, sizeof *r);
  if (m == NULL || r == NULL) {
    free(r);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  e = r->xfer.easy = curl_easy_init();
  if (e == NULL) goto oom;
  r->xfer.done = req_done;
  r->stream_body = o->stream_body != 0;
  r->stream_response = o->stream_response != 0;
  r->out_size = o->stream_body && o->body_size >= 0 ? o->body_size : -1;
  for (i = 0; i < o->nheaders && rc == 0; i++)
    rc = add_header(&r->req_headers, o->headers[i]);
  /* what fetch does not send: curl's form content type for a body with
  ** none given, and Expect: 100-continue for large bodies */
  if (rc == 0 && !has_header(o, "Content-Type"))
    rc = add_header(&r->req_headers, "Content-Type:");
  if (rc == 0 && !has_header(o, "Expect"))
    rc = add_header(&r->req_headers, "Expect:");
  if (rc < 0) goto oom;
  curl_easy_setopt(e, CURLOPT_URL, o->url);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->req_headers);
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
  if (o->ca_file != NULL) curl_easy_setopt(e, CURLOPT_CAINFO, o->ca_file);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)o->timeout_ms);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, o->no_follow ? 0L : 1L);
  if (o->fresh_connection) {
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, 1L);
  }
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, (long)MASTRA__HTTP_MAX_REDIRECTS);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
  if (set_method(r, o) != CURLE_OK) goto oom;
  if (mastra__multi_add(m, &r->xfer) != CURLM_OK) goto oom;
  mastra__loop_ref(loop);
  r->loop = loop;
  r->id = mastra__loop_newid(loop);
  r->handle.shutdown = req_shutdown;
  r->handle.free = req_free;
  mastra__loop_add_handle(loop, &r->handle);
  *out = r;
  return 0;
oom:
  if (r->xfer.easy) curl_easy_cleanup(r->xfer.easy);
  curl_slist_free_all(r->req_headers);
  free(r->req_body);
  free(r);
  snprintf(err, errlen, "cannot start the request: out of memory");
  return -1;
}

const char *mastra__http_error_name(const mastra__http_req *r) {
  if (r->closed) return "closed";
  return mastra__curl_code_name(r->result);
}

void mastra__http_error_message(const mastra__http_req *r, char *out,
                                size_t outlen) {
  const char *what = curl_easy_strerror(r->result);
  if (r->closed)
    snprintf(out, outlen, "%s", r->errbuf);
  else if (r->errbuf[0] != '\0' && strcmp(r->errbuf, what) != 0)
    snprintf(out, outlen, "%s: %s", what, r->errbuf);
  else
    snprintf(out, outlen, "%s", what);
}

/* Let a paused direction go on (from the owner's calls only). */
static void resume(mastra__http_req *r, int send) {
  int mask;
  if (r->done || r->xfer.easy == NULL) return;
  if (send) {
    if (!r->send_paused) return;
    r->send_paused = 0;
  } else {
    if (!r->recv_paused) return;
    r->recv_paused = 0;
  }
  mask = (r->send_paused ? CURLPAUSE_SEND : 0)
         | (r->recv_paused ? CURLPAUSE_RECV : 0);
  /* may call on_body or on_read at once: they only queue and signal */
  curl_easy_pause(r->xfer.easy, mask);
}

int mastra__http_write(mastra__http_req *r, const char *data, size_t len,
                       const char **why) {
  if (r->done) {
    *why = "ENOTCONN";
    return -1;
  }
  if (!r->stream_body || r->out_eof) {
    *why = "EPIPE";
    return -1;
  }
  if (r->out_size >= 0 && (uint64_t)r->out_size - r->out_total < len) {
    *why = "EFBIG";
    return -1;
  }
  if (len == 0) return 0;
  if (r->out_off > 0) { /* what was sent goes */
    memmove(r->out, r->out + r->out_off, r->out_len - r->out_off);
    r->out_len -= r->out_off;
    r->out_off = 0;
  }
  if (grow(&r->out, &r->out_cap, r->out_len, len, BODY_CHUNK) < 0) goto oom;
  memcpy(r->out + r->out_len, data, len);
  r->out_len += len;
  r->out_total += len;
  resume(r, 1);
  return 0;
oom:
  *why = "ENOMEM";
  return -1;
}

int mastra__http_finish(mastra__http_req *r, const char **why) {
  if (r->done) {
    *why = "ENOTCONN";
    return -1;
  }
  if (!r->stream_body || r->out_eof) {
    *why = "EPIPE";
    return -1;
  }
  if (r->out_size >= 0 && r->out_total != (uint64_t)r->out_size) {
    *why = "EINVAL";
    return -1;
  }
  r->out_eof = 1;
  resume(r, 1);
  return 0;
}

size_t mastra__http_buffered(const mastra__http_req *r) {
  return r->out_len - r->out_off;
}

const char *mastra__http_take(mastra__http_req *r, size_t *len) {
  *len = r->stream_response ? r->body_len : 0;
  return r->body;
}

void mastra__http_taken(mastra__http_req *r) {
  if (!r->stream_response) return;
  r->body_len = 0;
  /* a large queue of an earlier burst is given back */
  if (r->body_cap > 2 * MASTRA__HTTP_RECV_HIGH) {
    free(r->body);
    r->body = NULL;
    r->body_cap = 0;
  }
  resume(r, 0);
}

void mastra__http_release(mastra__http_req *r) {
  r->orphan = 1;
  /* outside the dispatch (Lua calls this): cancel and free at once */
  mastra__loop_defer_free(r->loop, &r->handle);
}

/* }====== */
