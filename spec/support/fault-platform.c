/*
** fault-platform: a scripted HTTP + WebSocket server for the specs of the
** PlatformSandbox client. It answers what a script says (statuses in
** order, delays, raw bodies, WebSocket frames, close codes, dropped and
** stalled connections) and records every request, so that a spec can
** assert the exact bytes the client sent. spec/support/fault.lua drives
** it; the real server (src/server/, mastra-platform) is the model for the
** plumbing: libmicrohttpd in external-epoll mode on a mastra__loop, an
** identity unescape, and a wslay server context on the upgraded socket.
**
**   fault-platform [--log FILE] [--watch-stdin] SCRIPT.json
**
** It listens on 127.0.0.1 (a free port), then prints one line on stdout
**   {"url":"http://127.0.0.1:PORT","ws":"ws://127.0.0.1:PORT","pid":N}
** and flushes. SIGTERM or SIGINT (or, with --watch-stdin, the end of
** stdin) ends every session (logged with "end":"shutdown") and exits 0.
** A bad script or bad arguments: a message on stderr and exit status 2.
**
** ---- the script ----
**
**   {"routes":[ROUTE, ...]}
**
** ROUTE: {"method":"POST","path":"/v1/...","responses":[RESPONSE, ...]}
**     or {"method":"GET","path":"/ws/exec","ws":[ENTRY, ...]}
**   method   exact, upper case; missing or "*": any method
**   path     the path as sent (nothing is decoded); the query is not
**            compared unless path contains '?', in which case path and
**            query must both match exactly
**   The first matching route answers. Each request uses the route's next
**   RESPONSE (or ENTRY); once they are used up the last one repeats.
**   Anything else: 404 {"error":{"message":"no route","type":"not_found"}}.
**
** RESPONSE (every key optional):
**   status       default 200
**   json         any JSON value: the body, Content-Type application/json
**   body         the body, as a string; bodyHex: the body in hex (for NUL
**                and bytes that are not UTF-8); at most one of json, body,
**                bodyHex (none: an empty body)
**   contentType  the Content-Type (default: application/json with json,
**                none otherwise)
**   headers      {"Name":"value",...}: more response headers
**   delayMs      wait this long before answering
**   stall        true: never answer (the connection stays open)
**   drop         true: close the connection without an answer
**   times        N: this response counts as N responses in the list
**   chunks       [CHUNK, ...]: a streamed body (chunked transfer encoding,
**                Content-Type text/event-stream unless contentType says
**                otherwise): the status and headers go out at once, then
**                each CHUNK in order, one write each (a model server's
**                SSE, split where the script says). Not with json, body,
**                bodyHex, stall or drop.
**
** CHUNK (every key optional):
**   data         the bytes of this piece; dataHex: the same in hex (for a
**                split inside a UTF-8 character)
**   delayMs      wait this long before the piece
**   drop         true: close the connection here, without the final
**                chunk (the client sees the body cut short)
**   reset        true: reset the connection here (RST)
**   stall        true: send nothing more (the connection stays open)
**   A streamed response is logged once more when it is over:
**   {"type":"http-end","seq":N,"t":..,"request":SEQ,"chunksSent":K,
**    "how":"completed"}  (how: completed, dropped, reset, aborted: the
**                         client went away, shutdown, error)
**
** ENTRY, one WebSocket handshake (every key optional):
**   refuse       an HTTP status: answer the upgrade with it (the body as
**                in RESPONSE: json, body, bodyHex, contentType, headers;
**                default {"error":{"message":"upgrade refused by the
**                script","type":...}} with a type that fits the status)
**   stall        true: never answer the upgrade (TCP stays open)
**   delayMs      wait this long before answering the upgrade
**   protocol     the Sec-WebSocket-Protocol to select (default: the first
**                one offered; "" or false: send none)
**   headers      more headers on the 101 answer
**   afterMessages N: wait until the client has sent N messages (text or
**                binary, counted from the start of the session) before the
**                first frame. The real server answers once init_exec is in:
**                use 1 (or 2, with stdin_close) to be sure the log holds
**                them; with 0 a client may see the exit and close before
**                its init_exec goes out
**   frames       [FRAME, ...], sent in order once the socket is open
**   close        after the frames: a close frame with this code (true: a
**                close frame without a code); reason: its reason (ASCII,
**                at most 123 bytes). The session ends when the client
**                answers (or after 5 s)
**   drop         true: after the frames, close the TCP connection without
**                a close frame (the client sees 1006)
**   reset        true: after the frames, reset the TCP connection (RST)
**   times        N: this entry counts as N entries in the list
**   With none of close, drop and reset the session stays open until the
**   client closes it (its close is echoed).
**
** FRAME (one of the frame keys, or none for a pure wait or an ending):
**   text         a text frame of these bytes (may be malformed JSON)
**   textHex      a text frame of these bytes, in hex
**   binary       a binary frame of these bytes ("\u0001hello")
**   binaryHex    a binary frame of these bytes, in hex ("01ff00"; a frame
**                of only the tag byte is "01")
**   json         a text frame holding this JSON value
**   afterMessages N: first wait until the client has sent N messages
**   delayMs      then wait this long before the frame
**   close/reason, drop, reset: as in ENTRY, ending the session there
**
** Every string of the script may hold $WS (replaced with
** ws://127.0.0.1:PORT) and $URL (http://127.0.0.1:PORT). Unknown keys
** and values of the wrong type are errors. An empty object counts as an
** empty list (an empty Lua table encodes as {}).
**
** ---- the log (--log FILE, truncated at start) ----
**
** One JSON object a line, written with a single write(2) as soon as it is
** known, so the file can be read at any time. Byte strings are given
** twice: as a JSON string ("body", "data"; lossy when they hold NUL) and
** in hex ("bodyHex", "hex"; exact). "seq" numbers the requests in arrival
** order (HTTP and WebSocket together); "t" is ms since the start.
**
**   HTTP, when the request (with its body) is in, before the answer:
**   {"type":"http","seq":1,"t":12,"method":"POST","path":"/a/b?x=1",
**    "headers":[["host","127.0.0.1:4242"],...],   (lower-cased names,
**                                                  arrival order)
**    "body":"...","bodyHex":"...","route":1,"response":2,
**                (1-based positions in the script, `times` not counted;
**                 absent: no route)
**    "status":503,"outcome":"answered"}   (outcome: answered, dropped,
**                                          stalled; status when answered)
**
**   WebSocket, when the session is over (refused, stalled and malformed
**   handshakes right away):
**   {"type":"ws","seq":2,"t":20,"tEnd":35,"method":"GET","path":"/ws/exec",
**    "headers":[...],"protocol":"railway-shell, jwt-1",  (the offered
**    Sec-WebSocket-Protocol value; several headers joined with ", ")
**    "route":3,"entry":1,"status":101,"selected":"railway-shell",
**    "outcome":"upgraded",      (upgraded, refused, stalled, bad-handshake)
**    "messages":[{"opcode":1,"data":"{...}","hex":"7b..."},...],
**               (every message the client sent: 1 text, 2 binary,
**                9 ping, 10 pong)
**    "closeCode":1000,"closeReason":"",  (the client's close frame: 1005
**                                         when it had no code; absent when
**                                         none came)
**    "end":"closed"}  (closed: the closing handshake ended; eof: the
**                      client went away without one; dropped, reset:
**                      the script did it; timeout: no answer to our
**                      close within 5 s; shutdown; error)
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <microhttpd.h>
#include <wslay/wslay.h>

#include "loop.h"
#include "hash.h"

#define BODY_MAX ((size_t)64 << 20)     /* a request body */
#define WS_MAX_RECV_MSG ((size_t)16 << 20)
#define CLOSE_WAIT_MS 5000              /* for the client's close, or EOF */
#define EXIT_USAGE 2

typedef struct route {
  const char *method; /* NULL: any */
  const char *path;
  int with_query;     /* path holds '?': compare the query too */
  int is_ws;
  const cJSON **items; /* responses or entries, `times` expanded */
  int *pos;            /* the 1-based position of each in the script */
  size_t nitems, next;
} route;

typedef struct request request;
typedef struct session session;

/* the process */
static struct {
  cJSON *script;
  route *routes;
  size_t nroutes;
  mastra__loop *loop;
  struct MHD_Daemon *httpd;
  mastra__io httpd_io;
  int log_fd;
  long seq;
  uint64_t t0;
  char base_url[64], ws_url[64];
  int stopping;
  request *waiting;   /* suspended requests (delay, stall) */
  session *sessions;  /* 101 queued or upgraded */
} g;

/* One HTTP request, from its first line (the URI log callback) to the
** completion notice. */
struct request {
  request *prev, *next; /* in g.waiting while suspended */
  struct MHD_Connection *conn;
  char *uri;            /* as sent: path and query */
  char *body;
  size_t len, cap;
  int too_large;
  int decided;          /* the answer is chosen (and logged) */
  int seen;             /* the first call (the head) is over */
  int suspended;
  int stalled;
  const cJSON *answer;  /* the RESPONSE or ENTRY; NULL: 404 */
  int is_ws;
  cJSON *event;         /* a WebSocket event until a session takes it */
  mastra__timer timer;
  /* a streamed response (RESPONSE chunks) */
  long seq;             /* of the request's log line */
  int streaming;
  int chunk;            /* the CHUNK being sent (0-based) */
  int chunk_waited;     /* its delayMs has passed */
  char *cur;            /* its bytes */
  size_t cur_len, cur_off;
  const char *stream_how; /* how it ended, for the http-end line */
};

/* One WebSocket session. */
struct session {
  mastra__handle handle;  /* first: freed by the loop after a dispatch */
  session *prev, *next;   /* in g.sessions */
  struct MHD_UpgradeResponseHandle *urh; /* NULL until upgraded */
  int fd;                 /* owned by libmicrohttpd */
  int upgraded;
  mastra__io io;
  mastra__timer step_timer; /* a frame's delayMs */
  mastra__timer wait_timer; /* the closing handshake, or the drain */
  mastra__timer kick;       /* the first pump, out of MHD's callback */
  wslay_event_context_ptr ctx;
  char *extra;
  size_t extra_len, extra_off;
  const cJSON *entry, *frames;
  int nframes, step;
  int entry_waited;       /* the entry's afterMessages is met */
  int step_waited;        /* the step's afterMessages is met */
  int delaying;           /* step_timer runs */
  int script_done;
  int close_pending;      /* a close waits for the queue to drain */
  int close_has_code;
  uint16_t close_code;
  char close_reason[124];
  int drop_pending, reset_pending;
  int dropped;            /* SHUT_WR done: only reading (to EOF) now */
  int depth;
  int ending, ended;
  const char *end_how;
  long nmsgs;             /* text and binary messages received */
  cJSON *event;           /* the log line */
  cJSON *messages;
};

static void session_end(session *s);
static void pump(session *s, int readable);
static void log_stream_end(request *r, enum MHD_RequestTerminationCode why);

/* {====== small helpers ====== */

static uint64_t since_start(void) { return mastra__now_ms() - g.t0; }

static void fail_oom(void) {
  fprintf(stderr, "fault-platform: out of memory\n");
  exit(1);
}

static char *xstrdup(const char *s) {
  char *p = strdup(s);
  if (p == NULL) fail_oom();
  return p;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int hex_ok(const char *s) {
  size_t i, n = strlen(s);
  if (n % 2 != 0) return 0;
  for (i = 0; i < n; i++)
    if (hexval((unsigned char)s[i]) < 0) return 0;
  return 1;
}

/* Decode hex (already checked) into a new buffer. */
static char *hex_decode(const char *s, size_t *len) {
  size_t i, n = strlen(s) / 2;
  char *out = malloc(n + 1);
  if (out == NULL) fail_oom();
  for (i = 0; i < n; i++)
    out[i] = (char)(hexval((unsigned char)s[2 * i]) * 16
                    + hexval((unsigned char)s[2 * i + 1]));
  out[n] = '\0';
  *len = n;
  return out;
}

/* A JSON string of arbitrary bytes (cJSON strings stop at NUL). */
static cJSON *bytes_item(const char *data, size_t len) {
  static const char hex[] = "0123456789abcdef";
  char *out = malloc(len * 6 + 3), *o = out;
  size_t i;
  cJSON *item;
  if (out == NULL) fail_oom();
  *o++ = '"';
  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)data[i];
    if (c == '"' || c == '\\') {
      *o++ = '\\';
      *o++ = (char)c;
    } else if (c < 0x20 || c == 0x7f) {
      memcpy(o, "\\u00", 4);
      o[4] = hex[c >> 4];
      o[5] = hex[c & 15];
      o += 6;
    } else {
      *o++ = (char)c;
    }
  }
  *o++ = '"';
  *o = '\0';
  item = cJSON_CreateRaw(out);
  free(out);
  if (item == NULL) fail_oom();
  return item;
}

static cJSON *hex_item(const char *data, size_t len) {
  static const char hex[] = "0123456789abcdef";
  char *out = malloc(len * 2 + 1);
  size_t i;
  cJSON *item;
  if (out == NULL) fail_oom();
  for (i = 0; i < len; i++) {
    out[2 * i] = hex[(unsigned char)data[i] >> 4];
    out[2 * i + 1] = hex[(unsigned char)data[i] & 15];
  }
  out[2 * len] = '\0';
  item = cJSON_CreateString(out);
  free(out);
  if (item == NULL) fail_oom();
  return item;
}

/* obj[name] = the bytes, and obj[name_hex] = them in hex */
static void add_bytes(cJSON *obj, const char *name, const char *name_hex,
                      const char *data, size_t len) {
  cJSON_AddItemToObject(obj, name, bytes_item(data, len));
  cJSON_AddItemToObject(obj, name_hex, hex_item(data, len));
}

/* Append the event as one line of the log (one write). */
static void log_event(const cJSON *event) {
  char *text;
  size_t len, off = 0;
  if (g.log_fd < 0) return;
  text = cJSON_PrintUnformatted(event);
  if (text == NULL) fail_oom();
  len = strlen(text);
  text[len] = '\n'; /* over the NUL: the length is known */
  len++;
  while (off < len) {
    ssize_t n = write(g.log_fd, text + off, len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      fprintf(stderr, "fault-platform: cannot write the log: %s\n",
              strerror(errno));
      break;
    }
    off += (size_t)n;
  }
  free(text);
}

/* }====== */

/* {====== the script ====== */

typedef struct check {
  char *err;
  size_t errlen;
} check;

static int bad(check *c, const char *where, const char *fmt, const char *a) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a);
  snprintf(c->err, c->errlen, "%s: %s", where, msg);
  return -1;
}

/* Every key of obj is in allowed (a NULL-terminated list). */
static int check_keys(check *c, const cJSON *obj, const char *where,
                      const char *const *allowed) {
  const cJSON *it;
  cJSON_ArrayForEach(it, obj) {
    const char *const *a;
    int ok = 0;
    for (a = allowed; *a != NULL; a++)
      if (strcmp(*a, it->string) == 0) ok = 1;
    if (!ok) {
      char list[512] = "";
      for (a = allowed; *a != NULL; a++) {
        if (list[0] != '\0')
          strncat(list, ", ", sizeof list - strlen(list) - 1);
        strncat(list, *a, sizeof list - strlen(list) - 1);
      }
      snprintf(c->err, c->errlen, "%s: unknown key \"%s\" (allowed: %s)",
               where, it->string, list);
      return -1;
    }
  }
  return 0;
}

/* A list: an array, or an empty object (an empty Lua table). */
static int is_list(const cJSON *v) {
  return cJSON_IsArray(v) || (cJSON_IsObject(v) && v->child == NULL);
}

static int list_size(const cJSON *v) {
  return cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
}

/* An optional integer field in [lo, hi]; *out keeps its default when the
** field is absent. */
static int int_field(check *c, const cJSON *obj, const char *key,
                     const char *where, double lo, double hi, long *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  char w[300];
  if (v == NULL) return 0;
  snprintf(w, sizeof w, "%s.%s", where, key);
  if (!cJSON_IsNumber(v) || v->valuedouble != (double)(long)v->valuedouble
      || v->valuedouble < lo || v->valuedouble > hi) {
    char range[64];
    snprintf(range, sizeof range, "%.0f to %.0f", lo, hi);
    return bad(c, w, "must be an integer from %s", range);
  }
  *out = (long)v->valuedouble;
  return 0;
}

static int bool_field(check *c, const cJSON *obj, const char *key,
                      const char *where) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  char w[300];
  if (v == NULL || cJSON_IsBool(v)) return 0;
  snprintf(w, sizeof w, "%s.%s", where, key);
  return bad(c, w, "must be true or false%s", "");
}

static int is_true(const cJSON *obj, const char *key) {
  return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(obj, key));
}

static long get_int(const cJSON *obj, const char *key, long dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsNumber(v) ? (long)v->valuedouble : dflt;
}

static const char *get_string(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int string_field(check *c, const cJSON *obj, const char *key,
                        const char *where) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  char w[300];
  if (v == NULL || cJSON_IsString(v)) return 0;
  snprintf(w, sizeof w, "%s.%s", where, key);
  return bad(c, w, "must be a string%s", "");
}

static int hex_field(check *c, const cJSON *obj, const char *key,
                     const char *where) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  char w[300];
  if (v == NULL) return 0;
  snprintf(w, sizeof w, "%s.%s", where, key);
  if (!cJSON_IsString(v) || !hex_ok(v->valuestring))
    return bad(c, w, "must be a string of hex digit pairs%s", "");
  return 0;
}

/* At most one of the keys is present. */
static int one_of(check *c, const cJSON *obj, const char *where,
                  const char *const *keys) {
  const char *seen = NULL;
  const char *const *k;
  for (k = keys; *k != NULL; k++) {
    if (cJSON_GetObjectItemCaseSensitive(obj, *k) == NULL) continue;
    if (seen != NULL) {
      snprintf(c->err, c->errlen, "%s: \"%s\" and \"%s\" exclude each other",
               where, seen, *k);
      return -1;
    }
    seen = *k;
  }
  return 0;
}

/* json / body / bodyHex / contentType / headers */
static int check_body(check *c, const cJSON *obj, const char *where) {
  static const char *const bodies[] = {"json", "body", "bodyHex", NULL};
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(obj, "headers"), *it;
  char w[300];
  if (one_of(c, obj, where, bodies) < 0
      || string_field(c, obj, "body", where) < 0
      || hex_field(c, obj, "bodyHex", where) < 0
      || string_field(c, obj, "contentType", where) < 0)
    return -1;
  if (h == NULL) return 0;
  snprintf(w, sizeof w, "%s.headers", where);
  if (!cJSON_IsObject(h))
    return bad(c, w, "must be an object of strings%s", "");
  cJSON_ArrayForEach(it, h) {
    if (!cJSON_IsString(it) || it->string[0] == '\0'
        || strpbrk(it->string, ":\r\n") != NULL
        || strpbrk(it->valuestring, "\r\n") != NULL)
      return bad(c, w, "\"%s\" must be a header name with a string value",
                 it->string);
  }
  return 0;
}

static int check_chunks(check *c, const cJSON *list, const char *where) {
  static const char *const keys[] = {"data", "dataHex", "delayMs", "drop",
                                     "reset", "stall", NULL};
  static const char *const datas[] = {"data", "dataHex", NULL};
  static const char *const ends[] = {"drop", "reset", "stall", NULL};
  int i;
  long n = 0;
  if (!is_list(list)) return bad(c, where, "chunks must be a list%s", "");
  for (i = 0; i < list_size(list); i++) {
    const cJSON *ch = cJSON_GetArrayItem(list, i);
    char w[160];
    snprintf(w, sizeof w, "%.120s.chunks[%d]", where, i + 1);
    if (!cJSON_IsObject(ch)) return bad(c, w, "must be an object%s", "");
    if (check_keys(c, ch, w, keys) < 0 || one_of(c, ch, w, datas) < 0
        || one_of(c, ch, w, ends) < 0 || string_field(c, ch, "data", w) < 0
        || hex_field(c, ch, "dataHex", w) < 0
        || int_field(c, ch, "delayMs", w, 0, 86400000, &n) < 0
        || bool_field(c, ch, "drop", w) < 0 || bool_field(c, ch, "reset", w) < 0
        || bool_field(c, ch, "stall", w) < 0)
      return -1;
  }
  return 0;
}

static int check_response(check *c, const cJSON *r, const char *where) {
  static const char *const keys[] = {"status", "json", "body", "bodyHex",
      "contentType", "headers", "delayMs", "stall", "drop", "times", "chunks",
      NULL};
  static const char *const modes[] = {"stall", "drop", "chunks", NULL};
  static const char *const bodies[] = {"json", "body", "bodyHex", "chunks",
                                       NULL};
  const cJSON *chunks = cJSON_GetObjectItemCaseSensitive(r, "chunks");
  long n = 0;
  if (!cJSON_IsObject(r)) return bad(c, where, "must be an object%s", "");
  if (chunks != NULL && (one_of(c, r, where, bodies) < 0
                         || check_chunks(c, chunks, where) < 0))
    return -1;
  if (check_keys(c, r, where, keys) < 0
      || int_field(c, r, "status", where, 100, 999, &n) < 0
      || int_field(c, r, "delayMs", where, 0, 86400000, &n) < 0
      || int_field(c, r, "times", where, 1, 100000, &n) < 0
      || bool_field(c, r, "stall", where) < 0
      || bool_field(c, r, "drop", where) < 0 || one_of(c, r, where, modes) < 0)
    return -1;
  return check_body(c, r, where);
}

/* close / reason / drop / reset, shared by ENTRY and FRAME */
static int check_ending(check *c, const cJSON *o, const char *where) {
  static const char *const ends[] = {"close", "drop", "reset", NULL};
  const cJSON *cl = cJSON_GetObjectItemCaseSensitive(o, "close");
  const char *reason = get_string(o, "reason");
  char w[300];
  if (one_of(c, o, where, ends) < 0 || bool_field(c, o, "drop", where) < 0
      || bool_field(c, o, "reset", where) < 0
      || string_field(c, o, "reason", where) < 0)
    return -1;
  snprintf(w, sizeof w, "%s.close", where);
  if (cl != NULL && !cJSON_IsTrue(cl)
      && (!cJSON_IsNumber(cl) || cl->valuedouble < 1000
          || cl->valuedouble > 4999
          || cl->valuedouble != (double)(int)cl->valuedouble))
    return bad(c, w, "must be a close code (1000 to 4999) or true%s", "");
  if (reason != NULL && strlen(reason) > 123)
    return bad(c, where, "reason is longer than 123 bytes%s", "");
  if (reason != NULL && !cJSON_IsNumber(cl))
    return bad(c, where, "reason needs a numeric close code%s", "");
  return 0;
}

static int check_frame(check *c, const cJSON *f, const char *where) {
  static const char *const keys[] = {"text", "textHex", "binary",
      "binaryHex", "json", "afterMessages", "delayMs", "close", "reason",
      "drop", "reset", NULL};
  static const char *const kinds[] = {"text", "textHex", "binary",
      "binaryHex", "json", NULL};
  long n = 0;
  if (!cJSON_IsObject(f)) return bad(c, where, "must be an object%s", "");
  if (check_keys(c, f, where, keys) < 0 || one_of(c, f, where, kinds) < 0
      || string_field(c, f, "text", where) < 0
      || string_field(c, f, "binary", where) < 0
      || hex_field(c, f, "textHex", where) < 0
      || hex_field(c, f, "binaryHex", where) < 0
      || int_field(c, f, "afterMessages", where, 0, 1e9, &n) < 0
      || int_field(c, f, "delayMs", where, 0, 86400000, &n) < 0)
    return -1;
  return check_ending(c, f, where);
}

static int check_entry(check *c, const cJSON *e, const char *where) {
  static const char *const keys[] = {"refuse", "stall", "delayMs",
      "protocol", "headers", "afterMessages", "frames", "close", "reason",
      "drop", "reset", "times", "json", "body", "bodyHex", "contentType",
      NULL};
  static const char *const modes[] = {"refuse", "stall", NULL};
  const cJSON *frames = cJSON_GetObjectItemCaseSensitive(e, "frames");
  const cJSON *proto = cJSON_GetObjectItemCaseSensitive(e, "protocol");
  long n = 0, refuse = 0;
  int i;
  char w[300];
  if (!cJSON_IsObject(e)) return bad(c, where, "must be an object%s", "");
  if (check_keys(c, e, where, keys) < 0 || one_of(c, e, where, modes) < 0
      || int_field(c, e, "refuse", where, 100, 999, &refuse) < 0
      || bool_field(c, e, "stall", where) < 0
      || int_field(c, e, "delayMs", where, 0, 86400000, &n) < 0
      || int_field(c, e, "afterMessages", where, 0, 1e9, &n) < 0
      || int_field(c, e, "times", where, 1, 100000, &n) < 0
      || check_body(c, e, where) < 0 || check_ending(c, e, where) < 0)
    return -1;
  if (refuse == 101) return bad(c, where, "refuse: 101 is not a refusal%s", "");
  if (proto != NULL && !cJSON_IsString(proto) && !cJSON_IsFalse(proto))
    return bad(c, where, "protocol must be a string or false%s", "");
  if (proto != NULL && cJSON_IsString(proto)
      && strpbrk(proto->valuestring, "\r\n") != NULL)
    return bad(c, where, "protocol must be one line%s", "");
  if (frames == NULL) return 0;
  snprintf(w, sizeof w, "%s.frames", where);
  if (!is_list(frames)) return bad(c, w, "must be a list%s", "");
  for (i = 0; i < list_size(frames); i++) {
    char fw[340];
    snprintf(fw, sizeof fw, "%s[%d]", w, i + 1);
    if (check_frame(c, cJSON_GetArrayItem(frames, i), fw) < 0) return -1;
  }
  return 0;
}

static int load_routes(check *c) {
  static const char *const top[] = {"routes", NULL};
  static const char *const rkeys[] = {"method", "path", "responses", "ws",
                                      NULL};
  const cJSON *routes = cJSON_GetObjectItemCaseSensitive(g.script, "routes");
  int i, j;
  if (!cJSON_IsObject(g.script))
    return bad(c, "script", "must be a JSON object {\"routes\":[...]}%s", "");
  if (check_keys(c, g.script, "script", top) < 0) return -1;
  if (routes != NULL && !is_list(routes))
    return bad(c, "script.routes", "must be a list%s", "");
  g.nroutes = (size_t)list_size(routes);
  g.routes = calloc(g.nroutes + 1, sizeof *g.routes);
  if (g.routes == NULL) fail_oom();
  for (i = 0; i < (int)g.nroutes; i++) {
    const cJSON *r = cJSON_GetArrayItem(routes, i), *list;
    route *rt = &g.routes[i];
    const char *method;
    char w[64];
    size_t total = 0, k;
    snprintf(w, sizeof w, "routes[%d]", i + 1);
    if (!cJSON_IsObject(r)) return bad(c, w, "must be an object%s", "");
    if (check_keys(c, r, w, rkeys) < 0 || string_field(c, r, "method", w) < 0
        || string_field(c, r, "path", w) < 0)
      return -1;
    rt->path = get_string(r, "path");
    if (rt->path == NULL || rt->path[0] != '/')
      return bad(c, w, "path must be a string that starts with '/'%s", "");
    rt->with_query = strchr(rt->path, '?') != NULL;
    method = get_string(r, "method");
    rt->method = method != NULL && strcmp(method, "*") != 0 ? method : NULL;
    list = cJSON_GetObjectItemCaseSensitive(r, "responses");
    rt->is_ws = list == NULL;
    if (rt->is_ws) list = cJSON_GetObjectItemCaseSensitive(r, "ws");
    if (list == NULL || (cJSON_GetObjectItemCaseSensitive(r, "responses")
                         && cJSON_GetObjectItemCaseSensitive(r, "ws")))
      return bad(c, w, "needs either \"responses\" or \"ws\"%s", "");
    if (!is_list(list) || list_size(list) == 0)
      return bad(c, w, "%s must be a non-empty list",
                 rt->is_ws ? "ws" : "responses");
    for (j = 0; j < list_size(list); j++) {
      const cJSON *item = cJSON_GetArrayItem(list, j);
      char iw[128];
      snprintf(iw, sizeof iw, "%s.%s[%d]", w, rt->is_ws ? "ws" : "responses",
               j + 1);
      if ((rt->is_ws ? check_entry(c, item, iw) : check_response(c, item, iw))
          < 0)
        return -1;
      total += (size_t)get_int(item, "times", 1);
    }
    rt->items = calloc(total, sizeof *rt->items);
    rt->pos = calloc(total, sizeof *rt->pos);
    if (rt->items == NULL || rt->pos == NULL) fail_oom();
    for (j = 0; j < list_size(list); j++) {
      const cJSON *item = cJSON_GetArrayItem(list, j);
      long t = get_int(item, "times", 1);
      for (k = 0; k < (size_t)t; k++) {
        rt->pos[rt->nitems] = j + 1;
        rt->items[rt->nitems++] = item;
      }
    }
  }
  return 0;
}

static void free_routes(void) {
  size_t i;
  for (i = 0; i < g.nroutes; i++) {
    free(g.routes[i].items);
    free(g.routes[i].pos);
  }
  free(g.routes);
  g.routes = NULL;
  g.nroutes = 0;
}

/* Replace $WS and $URL in every string value of the tree. */
static void substitute(cJSON *node) {
  cJSON *it;
  for (it = node; it != NULL; it = it->next) {
    if (cJSON_IsString(it) && strchr(it->valuestring, '$') != NULL) {
      const char *s = it->valuestring;
      size_t cap = strlen(s) + 1, n = 0;
      char *out;
      const char *p;
      for (p = s; (p = strchr(p, '$')) != NULL; p++) cap += 64;
      out = cJSON_malloc(cap);
      if (out == NULL) fail_oom();
      for (p = s; *p != '\0';) {
        if (strncmp(p, "$WS", 3) == 0) {
          n += (size_t)sprintf(out + n, "%s", g.ws_url);
          p += 3;
        } else if (strncmp(p, "$URL", 4) == 0) {
          n += (size_t)sprintf(out + n, "%s", g.base_url);
          p += 4;
        } else {
          out[n++] = *p++;
        }
      }
      out[n] = '\0';
      cJSON_free(it->valuestring);
      it->valuestring = out;
    }
    if (it->child != NULL) substitute(it->child);
  }
}

/* }====== */

/* {====== answers ====== */

/* The body of a RESPONSE (or refusal); malloc'd, *type: the default
** Content-Type. */
static char *body_of(const cJSON *r, size_t *len, const char **type) {
  const cJSON *json = cJSON_GetObjectItemCaseSensitive(r, "json");
  const char *body = get_string(r, "body"), *hex = get_string(r, "bodyHex");
  char *out;
  *type = NULL;
  if (json != NULL) {
    out = cJSON_PrintUnformatted(json);
    if (out == NULL) fail_oom();
    *len = strlen(out);
    *type = "application/json";
    return out;
  }
  if (hex != NULL) return hex_decode(hex, len);
  out = xstrdup(body != NULL ? body : "");
  *len = strlen(out);
  return out;
}

static void add_headers(struct MHD_Response *resp, const cJSON *r) {
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(r, "headers"), *it;
  cJSON_ArrayForEach(it, h) {
    MHD_add_response_header(resp, it->string, it->valuestring);
  }
}

static enum MHD_Result queue_buffer(struct MHD_Connection *conn, int status,
                                    const char *type, char *data,
                                    size_t len, const cJSON *extra) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
  enum MHD_Result rc;
  if (resp == NULL) {
    free(data);
    return MHD_NO;
  }
  if (type != NULL) MHD_add_response_header(resp, "Content-Type", type);
  if (extra != NULL) add_headers(resp, extra);
  rc = MHD_queue_response(conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return rc;
}

static enum MHD_Result send_error(struct MHD_Connection *conn, int status,
                                  const char *type, const char *message) {
  cJSON *root = cJSON_CreateObject(), *e = cJSON_CreateObject();
  char *text;
  cJSON_AddStringToObject(e, "message", message);
  cJSON_AddStringToObject(e, "type", type);
  cJSON_AddItemToObject(root, "error", e);
  text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (text == NULL) fail_oom();
  return queue_buffer(conn, status, "application/json", text, strlen(text),
                      NULL);
}

static const char *error_type(int status) {
  switch (status) {
  case 401:
  case 403: return "authentication_error";
  case 404: return "not_found";
  case 410: return "sandbox_destroyed"; /* upstream-2026-12.md A.1.2 */
  default: return status >= 500 ? "internal_error" : "invalid_request";
  }
}

/* A RESPONSE, or a refusal (an ENTRY with refuse). */
static enum MHD_Result send_scripted(struct MHD_Connection *conn,
                                     const cJSON *r, int status) {
  const char *type, *ct = get_string(r, "contentType");
  size_t len;
  char *body;
  if (cJSON_GetObjectItemCaseSensitive(r, "refuse") != NULL
      && cJSON_GetObjectItemCaseSensitive(r, "json") == NULL
      && cJSON_GetObjectItemCaseSensitive(r, "body") == NULL
      && cJSON_GetObjectItemCaseSensitive(r, "bodyHex") == NULL) {
    cJSON *root = cJSON_CreateObject(), *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "message", "upgrade refused by the script");
    cJSON_AddStringToObject(e, "type", error_type(status));
    cJSON_AddItemToObject(root, "error", e);
    body = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (body == NULL) fail_oom();
    len = strlen(body);
    type = "application/json";
  } else {
    body = body_of(r, &len, &type);
  }
  return queue_buffer(conn, status, ct != NULL ? ct : type, body, len, r);
}

/* }====== */

/* {====== WebSocket sessions ====== */

static void link_session(session *s) {
  s->prev = NULL;
  s->next = g.sessions;
  if (g.sessions != NULL) g.sessions->prev = s;
  g.sessions = s;
}

static void unlink_session(session *s) {
  if (s->prev != NULL)
    s->prev->next = s->next;
  else if (g.sessions == s)
    g.sessions = s->next;
  if (s->next != NULL) s->next->prev = s->prev;
  s->prev = s->next = NULL;
}

static void enter(session *s) { s->depth++; }

static void leave(session *s) {
  if (--s->depth == 0 && s->ending && !s->ended) session_end(s);
}

static void finish(session *s, const char *how) {
  if (s->end_how == NULL) s->end_how = how;
  s->ending = 1;
}

static void session_free(mastra__handle *h) {
  session *s = (session *)h;
  mastra__loop *loop = g.loop;
  if (s->ctx != NULL) wslay_event_context_free(s->ctx);
  cJSON_Delete(s->event);
  free(s->extra);
  free(s);
  mastra__loop_unref(loop);
}

/* Write the log line and give everything back. */
static void session_end(session *s) {
  s->ended = 1;
  mastra__timer_stop(&s->step_timer);
  mastra__timer_stop(&s->wait_timer);
  mastra__timer_stop(&s->kick);
  if (s->upgraded) mastra__io_stop(&s->io); /* before MHD closes the fd */
  if (s->event != NULL) {
    cJSON_AddNumberToObject(s->event, "tEnd", (double)since_start());
    cJSON_AddStringToObject(s->event, "end",
                            s->end_how != NULL ? s->end_how : "error");
    log_event(s->event);
  }
  if (s->urh != NULL) {
    struct MHD_UpgradeResponseHandle *urh = s->urh;
    s->urh = NULL;
    MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
  }
  unlink_session(s);
  mastra__loop_defer_free(g.loop, &s->handle);
}

/* The loop closes under a live session: should not happen (every session
** ends before), but let go of what is ours. */
static void session_shutdown(mastra__handle *h) {
  session *s = (session *)h;
  s->ended = 1;
  mastra__timer_stop(&s->step_timer);
  mastra__timer_stop(&s->wait_timer);
  mastra__timer_stop(&s->kick);
  if (s->upgraded) mastra__io_stop(&s->io);
  unlink_session(s);
  session_free(h);
}

static void queue_frame(session *s, uint8_t opcode, const char *data,
                        size_t len) {
  struct wslay_event_msg m;
  m.opcode = opcode;
  m.msg = (const uint8_t *)data;
  m.msg_length = len;
  if (wslay_event_queue_msg(s->ctx, &m) != 0) {
    fprintf(stderr, "fault-platform: cannot queue a frame\n");
    finish(s, "error");
  }
}

/* The frame of a FRAME object, if it has one. */
static void send_frame(session *s, const cJSON *f) {
  const char *text = get_string(f, "text"), *bin = get_string(f, "binary");
  const char *thex = get_string(f, "textHex");
  const char *bhex = get_string(f, "binaryHex");
  const cJSON *json = cJSON_GetObjectItemCaseSensitive(f, "json");
  if (text != NULL) {
    queue_frame(s, WSLAY_TEXT_FRAME, text, strlen(text));
  } else if (bin != NULL) {
    queue_frame(s, WSLAY_BINARY_FRAME, bin, strlen(bin));
  } else if (thex != NULL || bhex != NULL) {
    size_t len;
    char *data = hex_decode(thex != NULL ? thex : bhex, &len);
    queue_frame(s, thex != NULL ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME, data,
                len);
    free(data);
  } else if (json != NULL) {
    char *out = cJSON_PrintUnformatted(json);
    if (out == NULL) fail_oom();
    queue_frame(s, WSLAY_TEXT_FRAME, out, strlen(out));
    free(out);
  }
}

/* close / drop / reset of a FRAME or ENTRY: 1 if it ends the script. */
static int take_ending(session *s, const cJSON *o) {
  const cJSON *cl = cJSON_GetObjectItemCaseSensitive(o, "close");
  if (cl != NULL) {
    const char *reason = get_string(o, "reason");
    s->close_pending = 1;
    s->close_has_code = cJSON_IsNumber(cl);
    s->close_code = s->close_has_code ? (uint16_t)cl->valuedouble : 0;
    snprintf(s->close_reason, sizeof s->close_reason, "%s",
             reason != NULL ? reason : "");
    return 1;
  }
  if (is_true(o, "drop")) {
    s->drop_pending = 1;
    return 1;
  }
  if (is_true(o, "reset")) {
    s->reset_pending = 1;
    return 1;
  }
  return 0;
}

/* Move the script on as far as it can go now. */
static void run_script(session *s) {
  while (!s->script_done && !s->ending && !s->delaying) {
    const cJSON *f;
    if (wslay_event_get_close_received(s->ctx)
        || wslay_event_get_close_sent(s->ctx)) {
      s->script_done = 1; /* the client closed: the rest is moot */
      return;
    }
    if (!s->entry_waited) {
      if (s->nmsgs < get_int(s->entry, "afterMessages", 0)) return;
      s->entry_waited = 1;
    }
    if (s->step >= s->nframes) {
      take_ending(s, s->entry);
      s->script_done = 1;
      return;
    }
    f = cJSON_GetArrayItem(s->frames, s->step);
    if (!s->step_waited) {
      long delay = get_int(f, "delayMs", 0);
      if (s->nmsgs < get_int(f, "afterMessages", 0)) return;
      s->step_waited = 1;
      if (delay > 0) {
        s->delaying = 1;
        mastra__timer_start(&s->step_timer, (uint64_t)delay);
        return;
      }
    }
    send_frame(s, f);
    s->step++;
    s->step_waited = 0;
    if (take_ending(s, f)) s->script_done = 1;
  }
}

/* What waits for the send queue to drain: a close, a drop, a reset. */
static void run_endings(session *s) {
  if (s->ending || s->dropped) return;
  if (wslay_event_get_queued_msg_count(s->ctx) > 0
      || wslay_event_want_write(s->ctx))
    return;
  if (s->close_pending) {
    int r;
    s->close_pending = 0;
    r = wslay_event_queue_close(
        s->ctx, s->close_has_code ? s->close_code : 0,
        (const uint8_t *)s->close_reason, strlen(s->close_reason));
    if (r != 0 && r != WSLAY_ERR_NO_MORE_MSG) {
      fprintf(stderr, "fault-platform: wslay refused close %u (%d)\n",
              (unsigned)s->close_code, r);
      finish(s, "error");
    }
  } else if (s->reset_pending) {
    struct linger lg = {1, 0};
    setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    finish(s, "reset");
  } else if (s->drop_pending) {
    /* FIN, no close frame; read (and record) until the client's EOF */
    s->drop_pending = 0;
    s->dropped = 1;
    wslay_event_shutdown_write(s->ctx);
    shutdown(s->fd, SHUT_WR);
    mastra__timer_start(&s->wait_timer, CLOSE_WAIT_MS);
  }
}

static void rearm(session *s) {
  uint32_t ev = 0;
  if (s->ending) return;
  if (wslay_event_want_read(s->ctx)) ev |= EPOLLIN;
  if (!s->dropped && wslay_event_want_write(s->ctx)) ev |= EPOLLOUT;
  if (ev == 0) {
    finish(s, s->dropped ? "dropped" : "closed");
    return;
  }
  if (mastra__io_start(&s->io, ev) < 0) {
    finish(s, "error");
    return;
  }
  if (!s->dropped && wslay_event_get_close_sent(s->ctx)
      && s->wait_timer.slot == 0)
    mastra__timer_start(&s->wait_timer, CLOSE_WAIT_MS);
}

static void pump(session *s, int readable) {
  int i;
  if (s->ending || s->ended) return;
  if (readable && wslay_event_want_read(s->ctx)) {
    if (wslay_event_recv(s->ctx) != 0) {
      if (s->dropped)
        finish(s, "dropped");
      else
        finish(s, wslay_event_get_close_received(s->ctx) ? "closed" : "eof");
      return;
    }
  }
  for (i = 0; i < 2 && !s->ending; i++) {
    run_script(s);
    run_endings(s);
    if (s->ending) return;
    if (!s->dropped && wslay_event_want_write(s->ctx)
        && wslay_event_send(s->ctx) != 0) {
      finish(s, wslay_event_get_close_received(s->ctx) ? "closed" : "eof");
      return;
    }
  }
  rearm(s);
}

static void on_sock(mastra__io *io, uint32_t revents) {
  session *s = io->data;
  enter(s);
  pump(s, (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0);
  leave(s);
}

static void on_step_timer(mastra__timer *t) {
  session *s = t->data;
  enter(s);
  s->delaying = 0;
  pump(s, 0);
  leave(s);
}

/* The session's start: libmicrohttpd does not close a connection that
** its own upgrade callback gives back, so that callback only sets up. */
static void on_kick(mastra__timer *t) {
  session *s = t->data;
  enter(s);
  if (!s->ending) pump(s, 1); /* extra_in first, then what the socket has */
  leave(s);
}

static void on_wait_timer(mastra__timer *t) {
  session *s = t->data;
  enter(s);
  finish(s, s->dropped ? "dropped" : "timeout");
  leave(s);
}

static ssize_t ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len,
                       int flags, void *user) {
  session *s = user;
  ssize_t n;
  (void)flags;
  if (s->extra_off < s->extra_len) { /* what MHD read ahead comes first */
    size_t k = s->extra_len - s->extra_off;
    if (k > len) k = len;
    memcpy(buf, s->extra + s->extra_off, k);
    s->extra_off += k;
    return (ssize_t)k;
  }
  do
    n = recv(s->fd, buf, len, 0);
  while (n < 0 && errno == EINTR);
  if (n > 0) return n;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
  else
    wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
  return -1;
}

static ssize_t ws_send(wslay_event_context_ptr ctx, const uint8_t *data,
                       size_t len, int flags, void *user) {
  session *s = user;
  ssize_t n;
  (void)flags;
  do
    n = send(s->fd, data, len, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n >= 0) return n;
  wslay_event_set_error(ctx, errno == EAGAIN || errno == EWOULDBLOCK
                                 ? WSLAY_ERR_WOULDBLOCK
                                 : WSLAY_ERR_CALLBACK_FAILURE);
  return -1;
}

static void on_msg(wslay_event_context_ptr ctx,
                   const struct wslay_event_on_msg_recv_arg *arg,
                   void *user) {
  session *s = user;
  (void)ctx;
  if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
    size_t n = arg->msg_length > 2 ? arg->msg_length - 2 : 0;
    cJSON_AddNumberToObject(s->event, "closeCode",
                            arg->status_code != 0 ? arg->status_code : 1005);
    cJSON_AddItemToObject(s->event, "closeReason",
                          bytes_item((const char *)arg->msg + 2 * (n > 0), n));
    return;
  }
  {
    cJSON *m = cJSON_CreateObject();
    if (m == NULL) fail_oom();
    cJSON_AddNumberToObject(m, "opcode", arg->opcode);
    add_bytes(m, "data", "hex", (const char *)arg->msg, arg->msg_length);
    cJSON_AddItemToArray(s->messages, m);
  }
  if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME)
    s->nmsgs++;
}

static void on_upgrade(void *cls, struct MHD_Connection *conn, void *req_cls,
                       const char *extra_in, size_t extra_in_size,
                       MHD_socket sock, struct MHD_UpgradeResponseHandle *urh) {
  static const struct wslay_event_callbacks cbs = {
      ws_recv, ws_send, NULL, NULL, NULL, NULL, on_msg};
  session *s = cls;
  int fl, one = 1;
  (void)conn;
  (void)req_cls;
  s->urh = urh;
  s->fd = sock;
  mastra__io_init(g.loop, &s->io, sock, on_sock, s);
  s->upgraded = 1;
  mastra__timer_start(&s->kick, 0);
  if (extra_in_size > 0) {
    s->extra = malloc(extra_in_size);
    if (s->extra == NULL) fail_oom();
    memcpy(s->extra, extra_in, extra_in_size);
    s->extra_len = extra_in_size;
  }
  if (wslay_event_context_server_init(&s->ctx, &cbs, s) != 0) {
    s->ctx = NULL;
    finish(s, "error");
    return;
  }
  wslay_event_config_set_max_recv_msg_length(s->ctx, WS_MAX_RECV_MSG);
  fl = fcntl(sock, F_GETFL);
  if (fl < 0 || fcntl(sock, F_SETFL, fl | O_NONBLOCK) < 0) {
    finish(s, "error");
    return;
  }
  setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* A session for a 101 about to be queued; it owns the event. */
static session *session_new(const cJSON *entry, cJSON *event) {
  session *s = calloc(1, sizeof *s);
  if (s == NULL) fail_oom();
  s->fd = -1;
  s->entry = entry;
  s->frames = cJSON_GetObjectItemCaseSensitive(entry, "frames");
  s->nframes = list_size(s->frames);
  s->event = event;
  s->messages = cJSON_GetObjectItemCaseSensitive(event, "messages");
  if (s->messages == NULL)
    s->messages = cJSON_AddArrayToObject(event, "messages");
  if (s->messages == NULL) fail_oom();
  mastra__loop_ref(g.loop);
  s->handle.shutdown = session_shutdown;
  s->handle.free = session_free;
  mastra__loop_add_handle(g.loop, &s->handle);
  mastra__timer_init(g.loop, &s->step_timer, on_step_timer, s);
  mastra__timer_init(g.loop, &s->wait_timer, on_wait_timer, s);
  mastra__timer_init(g.loop, &s->kick, on_kick, s);
  link_session(s);
  return s;
}

/* }====== */

/* {====== HTTP ====== */

static void wait_link(request *r) {
  r->prev = NULL;
  r->next = g.waiting;
  if (g.waiting != NULL) g.waiting->prev = r;
  g.waiting = r;
}

static void wait_unlink(request *r) {
  if (r->prev != NULL)
    r->prev->next = r->next;
  else if (g.waiting == r)
    g.waiting = r->next;
  if (r->next != NULL) r->next->prev = r->prev;
  r->prev = r->next = NULL;
}

static void resume(request *r) {
  if (!r->suspended) return;
  r->suspended = 0;
  wait_unlink(r);
  MHD_resume_connection(r->conn);
}

static void on_request_timer(mastra__timer *t) { resume(t->data); }

static void suspend(request *r, long delay_ms) {
  r->suspended = 1;
  wait_link(r);
  MHD_suspend_connection(r->conn);
  if (delay_ms > 0) mastra__timer_start(&r->timer, (uint64_t)delay_ms);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  request *r = calloc(1, sizeof *r);
  (void)cls;
  if (r == NULL) fail_oom();
  r->conn = conn;
  r->uri = xstrdup(uri);
  mastra__timer_init(g.loop, &r->timer, on_request_timer, r);
  return r;
}

static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **req_cls, enum MHD_RequestTerminationCode why) {
  request *r = *req_cls;
  (void)cls;
  (void)conn;
  if (r == NULL) return;
  mastra__timer_stop(&r->timer);
  if (r->suspended) {
    r->suspended = 0;
    wait_unlink(r);
  }
  if (r->streaming) log_stream_end(r, why);
  free(r->cur);
  cJSON_Delete(r->event);
  free(r->uri);
  free(r->body);
  free(r);
  *req_cls = NULL;
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind,
                                  const char *key, const char *value) {
  cJSON *list = cls, *pair = cJSON_CreateArray();
  char *name = xstrdup(key), *p;
  (void)kind;
  for (p = name; *p != '\0'; p++) *p = (char)tolower((unsigned char)*p);
  cJSON_AddItemToArray(pair, cJSON_CreateString(name));
  cJSON_AddItemToArray(pair, bytes_item(value ? value : "",
                                        value ? strlen(value) : 0));
  cJSON_AddItemToArray(list, pair);
  free(name);
  return MHD_YES;
}

static route *find_route(const char *method, const char *uri) {
  size_t i, plen = strcspn(uri, "?");
  for (i = 0; i < g.nroutes; i++) {
    route *rt = &g.routes[i];
    if (rt->method != NULL && strcmp(rt->method, method) != 0) continue;
    if (rt->with_query ? strcmp(rt->path, uri) == 0
                       : strlen(rt->path) == plen
                             && strncmp(rt->path, uri, plen) == 0)
      return rt;
  }
  return NULL;
}

static int has_token(const char *list, const char *token) {
  size_t tlen = strlen(token);
  const char *p = list;
  while (*p != '\0') {
    const char *end;
    size_t n;
    while (*p == ' ' || *p == '\t' || *p == ',') p++;
    end = p + strcspn(p, ",");
    n = (size_t)(end - p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    if (n == tlen && strncasecmp(p, token, n) == 0) return 1;
    p = end;
  }
  return 0;
}

static int valid_key(const char *key) {
  size_t i;
  if (key == NULL || strlen(key) != 24 || strcmp(key + 22, "==") != 0)
    return 0;
  for (i = 0; i < 22; i++) {
    char c = key[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
          || (c >= '0' && c <= '9') || c == '+' || c == '/'))
      return 0;
  }
  return 1;
}

/* The log event of a request (HTTP or WebSocket). */
static cJSON *new_event(request *r, const char *type, const char *method,
                        const route *rt, long index) {
  cJSON *e = cJSON_CreateObject(), *headers;
  if (e == NULL) fail_oom();
  cJSON_AddStringToObject(e, "type", type);
  cJSON_AddNumberToObject(e, "seq", (double)++g.seq);
  cJSON_AddNumberToObject(e, "t", (double)since_start());
  cJSON_AddStringToObject(e, "method", method);
  cJSON_AddItemToObject(e, "path", bytes_item(r->uri, strlen(r->uri)));
  headers = cJSON_AddArrayToObject(e, "headers");
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, add_header, headers);
  if (rt != NULL) {
    cJSON_AddNumberToObject(e, "route", (double)(rt - g.routes + 1));
    cJSON_AddNumberToObject(e, rt->is_ws ? "entry" : "response",
                            (double)rt->pos[index]);
  }
  return e;
}

typedef struct offered {
  char buf[4096];
  int any;
} offered;

static enum MHD_Result collect_protocol(void *cls, enum MHD_ValueKind kind,
                                        const char *key, const char *value) {
  offered *o = cls;
  size_t used = strlen(o->buf);
  (void)kind;
  if (strcasecmp(key, "Sec-WebSocket-Protocol") != 0 || value == NULL)
    return MHD_YES;
  snprintf(o->buf + used, sizeof o->buf - used, "%s%s", o->any ? ", " : "",
           value);
  o->any = 1;
  return MHD_YES;
}

/* Queue the 101 answer; the session takes the event. */
static enum MHD_Result answer_upgrade(request *r) {
  const cJSON *entry = r->answer;
  const cJSON *proto = cJSON_GetObjectItemCaseSensitive(entry, "protocol");
  const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                "Sec-WebSocket-Key");
  char accept[29], selected[4096] = "";
  offered o;
  struct MHD_Response *resp;
  enum MHD_Result rc;
  session *s;
  memset(&o, 0, sizeof o);
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, collect_protocol, &o);
  if (cJSON_IsString(proto)) {
    snprintf(selected, sizeof selected, "%s", proto->valuestring);
  } else if (proto == NULL && o.any) { /* the first one offered */
    const char *p = o.buf + strspn(o.buf, " \t");
    size_t n = strcspn(p, ",");
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
    memcpy(selected, p, n);
    selected[n] = '\0';
  }
  cJSON_AddNumberToObject(r->event, "status", 101);
  if (selected[0] != '\0')
    cJSON_AddStringToObject(r->event, "selected", selected);
  cJSON_AddStringToObject(r->event, "outcome", "upgraded");
  s = session_new(entry, r->event);
  r->event = NULL;
  mastra__ws_accept_key(key, accept);
  resp = MHD_create_response_for_upgrade(on_upgrade, s);
  if (resp == NULL) fail_oom();
  /* libmicrohttpd adds "Connection: Upgrade" itself */
  MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, "websocket");
  MHD_add_response_header(resp, "Sec-WebSocket-Accept", accept);
  if (selected[0] != '\0')
    MHD_add_response_header(resp, "Sec-WebSocket-Protocol", selected);
  add_headers(resp, entry);
  rc = MHD_queue_response(r->conn, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
  MHD_destroy_response(resp);
  if (rc != MHD_YES) {
    enter(s);
    finish(s, "error");
    leave(s);
  }
  return rc;
}

static int is_handshake(struct MHD_Connection *conn) {
  const char *upgrade, *connection, *version, *key;
  upgrade = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Upgrade");
  connection = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Connection");
  version = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                        "Sec-WebSocket-Version");
  key = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Sec-WebSocket-Key");
  return upgrade != NULL && has_token(upgrade, "websocket")
         && connection != NULL && has_token(connection, "upgrade")
         && version != NULL && strcmp(version, "13") == 0 && valid_key(key);
}

/* "protocol" (the offered value) and an empty "messages" list */
static void ws_fields(request *r) {
  offered o;
  memset(&o, 0, sizeof o);
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, collect_protocol, &o);
  if (o.any) cJSON_AddStringToObject(r->event, "protocol", o.buf);
  cJSON_AddArrayToObject(r->event, "messages");
}

static enum MHD_Result bad_handshake(request *r) {
  ws_fields(r);
  cJSON_AddNumberToObject(r->event, "status", 400);
  cJSON_AddStringToObject(r->event, "outcome", "bad-handshake");
  log_event(r->event);
  return send_error(r->conn, 400, "invalid_request",
                    "not a WebSocket handshake (Upgrade, Connection,"
                    " Sec-WebSocket-Version 13, Sec-WebSocket-Key)");
}

/* A WebSocket route with a good handshake: refuse, stall, delay or
** upgrade as the entry says. */
static enum MHD_Result decide_ws(request *r, const char *method,
                                 const route *rt, long index) {
  struct MHD_Connection *conn = r->conn;
  const cJSON *entry = rt->items[index];
  long refuse = get_int(entry, "refuse", 0);
  r->event = new_event(r, "ws", method, rt, index);
  ws_fields(r);
  if (refuse > 0) {
    cJSON_AddNumberToObject(r->event, "status", (double)refuse);
    cJSON_AddStringToObject(r->event, "outcome", "refused");
    log_event(r->event);
    return send_scripted(conn, entry, (int)refuse);
  }
  if (is_true(entry, "stall")) {
    cJSON_AddStringToObject(r->event, "outcome", "stalled");
    log_event(r->event);
    r->stalled = 1;
    suspend(r, 0);
    return MHD_YES;
  }
  if (get_int(entry, "delayMs", 0) > 0) {
    suspend(r, get_int(entry, "delayMs", 0));
    return MHD_YES;
  }
  return answer_upgrade(r);
}

/* {====== streamed responses (RESPONSE chunks) ====== */

static void stream_next(request *r) {
  free(r->cur);
  r->cur = NULL;
  r->cur_len = r->cur_off = 0;
  r->chunk++;
  r->chunk_waited = 0;
}

/* The content reader: one CHUNK's bytes a call. Waits (delayMs, stall)
** suspend the connection and return 0, as libmicrohttpd asks. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  request *r = cls;
  const cJSON *chunks = cJSON_GetObjectItemCaseSensitive(r->answer, "chunks");
  (void)pos;
  for (;;) {
    const cJSON *ch = cJSON_GetArrayItem(chunks, r->chunk);
    size_t n;
    if (ch == NULL) {
      r->stream_how = "completed";
      return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (g.stopping) {
      r->stream_how = "shutdown";
      return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (!r->chunk_waited) {
      long delay = get_int(ch, "delayMs", 0);
      r->chunk_waited = 1;
      if (delay > 0) {
        suspend(r, delay);
        return 0;
      }
    }
    if (is_true(ch, "stall")) {
      r->stalled = 1;
      suspend(r, 0);
      return 0;
    }
    if (is_true(ch, "drop")) {
      r->stream_how = "dropped";
      return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (is_true(ch, "reset")) {
      const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
          r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
      if (ci != NULL) {
        struct linger lg = {1, 0};
        setsockopt(ci->connect_fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
      }
      r->stream_how = "reset";
      return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (r->cur == NULL) {
      const char *data = get_string(ch, "data"), *hex = get_string(ch, "dataHex");
      if (hex != NULL) {
        r->cur = hex_decode(hex, &r->cur_len);
      } else {
        r->cur = xstrdup(data != NULL ? data : "");
        r->cur_len = strlen(r->cur);
      }
      r->cur_off = 0;
    }
    n = r->cur_len - r->cur_off;
    if (n > max) n = max;
    if (n == 0) { /* an empty piece, or the end of this one */
      stream_next(r);
      continue;
    }
    memcpy(buf, r->cur + r->cur_off, n);
    r->cur_off += n;
    if (r->cur_off == r->cur_len) stream_next(r);
    return (ssize_t)n;
  }
}

static enum MHD_Result send_stream(request *r, int status) {
  const char *ct = get_string(r->answer, "contentType");
  struct MHD_Response *resp = MHD_create_response_from_callback(
      MHD_SIZE_UNKNOWN, 16384, stream_read, r, NULL);
  enum MHD_Result rc;
  if (resp == NULL) return MHD_NO;
  r->streaming = 1;
  MHD_add_response_header(resp, "Content-Type",
                          ct != NULL ? ct : "text/event-stream");
  MHD_add_response_header(resp, "Cache-Control", "no-cache");
  add_headers(resp, r->answer);
  rc = MHD_queue_response(r->conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return rc;
}

static void log_stream_end(request *r, enum MHD_RequestTerminationCode why) {
  cJSON *e = cJSON_CreateObject();
  const char *how = r->stream_how;
  if (e == NULL) fail_oom();
  if (how == NULL || (why != MHD_REQUEST_TERMINATED_COMPLETED_OK
                      && strcmp(how, "completed") == 0))
    how = g.stopping ? "shutdown"
          : why == MHD_REQUEST_TERMINATED_CLIENT_ABORT
                  || why == MHD_REQUEST_TERMINATED_READ_ERROR
              ? "aborted"
              : why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "completed"
                                                           : "error";
  cJSON_AddStringToObject(e, "type", "http-end");
  cJSON_AddNumberToObject(e, "seq", (double)++g.seq);
  cJSON_AddNumberToObject(e, "t", (double)since_start());
  cJSON_AddNumberToObject(e, "request", (double)r->seq);
  cJSON_AddNumberToObject(e, "chunksSent", (double)r->chunk);
  cJSON_AddStringToObject(e, "how", how);
  log_event(e);
  cJSON_Delete(e);
}

/* }====== */

static enum MHD_Result decide(request *r, const char *method) {
  route *rt = find_route(method, r->uri);
  const cJSON *resp;
  long index, status;
  cJSON *event;
  r->decided = 1;
  if (rt != NULL && rt->is_ws && !r->too_large && !is_handshake(r->conn)) {
    /* a malformed handshake uses no entry */
    r->event = new_event(r, "ws", method, NULL, 0);
    cJSON_AddNumberToObject(r->event, "route", (double)(rt - g.routes + 1));
    return bad_handshake(r);
  }
  if (rt != NULL) {
    index = (long)(rt->next < rt->nitems ? rt->next : rt->nitems - 1);
    if (rt->next < rt->nitems) rt->next++;
  } else {
    index = 0;
  }
  if (rt != NULL && rt->is_ws && !r->too_large) {
    r->is_ws = 1;
    r->answer = rt->items[index];
    return decide_ws(r, method, rt, index);
  }
  event = new_event(r, "http", method, rt, index);
  r->seq = g.seq;
  add_bytes(event, "body", "bodyHex", r->body ? r->body : "", r->len);
  if (r->too_large) {
    cJSON_AddNumberToObject(event, "status", 413);
    cJSON_AddStringToObject(event, "outcome", "answered");
    log_event(event);
    cJSON_Delete(event);
    return send_error(r->conn, 413, "invalid_request", "body too large");
  }
  if (rt == NULL) {
    cJSON_AddNumberToObject(event, "status", 404);
    cJSON_AddStringToObject(event, "outcome", "answered");
    log_event(event);
    cJSON_Delete(event);
    return send_error(r->conn, 404, "not_found", "no route");
  }
  resp = rt->items[index];
  r->answer = resp;
  status = get_int(resp, "status", 200);
  if (is_true(resp, "drop")) {
    cJSON_AddStringToObject(event, "outcome", "dropped");
  } else if (is_true(resp, "stall")) {
    cJSON_AddStringToObject(event, "outcome", "stalled");
  } else {
    cJSON_AddNumberToObject(event, "status", (double)status);
    cJSON_AddStringToObject(event, "outcome", "answered");
  }
  log_event(event);
  cJSON_Delete(event);
  if (is_true(resp, "drop")) return MHD_NO; /* closes the connection */
  if (is_true(resp, "stall")) {
    r->stalled = 1;
    suspend(r, 0);
    return MHD_YES;
  }
  if (get_int(resp, "delayMs", 0) > 0) {
    suspend(r, get_int(resp, "delayMs", 0));
    return MHD_YES;
  }
  if (cJSON_GetObjectItemCaseSensitive(resp, "chunks") != NULL)
    return send_stream(r, (int)status);
  return send_scripted(r->conn, resp, (int)status);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload,
                                  size_t *upload_size, void **req_cls) {
  request *r = *req_cls;
  (void)cls;
  (void)version;
  if (r == NULL) { /* no URI callback: cannot happen, but be safe */
    r = on_uri(NULL, url, conn);
    *req_cls = r;
  }
  r->conn = conn;
  if (g.stopping) return MHD_NO;
  if (*upload_size > 0) {
    size_t n = *upload_size;
    *upload_size = 0;
    if (r->too_large || r->len + n > BODY_MAX) {
      r->too_large = 1;
      return MHD_YES;
    }
    if (r->len + n > r->cap) {
      size_t cap = r->cap ? r->cap : 4096;
      char *b;
      while (cap < r->len + n) cap *= 2;
      b = realloc(r->body, cap);
      if (b == NULL) fail_oom();
      r->body = b;
      r->cap = cap;
    }
    memcpy(r->body + r->len, upload, n);
    r->len += n;
    return MHD_YES;
  }
  if (!r->seen) { /* the first call (the head): the body comes next */
    r->seen = 1;
    return MHD_YES;
  }
  if (!r->decided) return decide(r, method);
  /* resumed after delayMs */
  if (r->stalled) return MHD_NO;
  if (r->is_ws) return answer_upgrade(r);
  if (cJSON_GetObjectItemCaseSensitive(r->answer, "chunks") != NULL)
    return send_stream(r, (int)get_int(r->answer, "status", 200));
  return send_scripted(conn, r->answer, (int)get_int(r->answer, "status", 200));
}

static size_t identity_unescape(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls;
  (void)c;
  return strlen(s);
}

static void on_httpd(mastra__io *io, uint32_t revents) {
  (void)io;
  (void)revents;
  MHD_run(g.httpd);
}

static int http_start(char *err, size_t errlen) {
  struct sockaddr_in sa;
  const union MHD_DaemonInfo *info;
  unsigned port;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = 0;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  g.httpd = MHD_start_daemon(
      MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE
          | MHD_USE_ITC,
      0, NULL, NULL, on_request, NULL,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)4000,
      MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
      MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL,
      MHD_OPTION_UNESCAPE_CALLBACK, identity_unescape, NULL,
      MHD_OPTION_END);
  if (g.httpd == NULL) {
    snprintf(err, errlen, "cannot listen on 127.0.0.1: %s", strerror(errno));
    return -1;
  }
  info = MHD_get_daemon_info(g.httpd, MHD_DAEMON_INFO_BIND_PORT);
  port = info != NULL ? info->port : 0;
  snprintf(g.base_url, sizeof g.base_url, "http://127.0.0.1:%u", port);
  snprintf(g.ws_url, sizeof g.ws_url, "ws://127.0.0.1:%u", port);
  info = MHD_get_daemon_info(g.httpd, MHD_DAEMON_INFO_EPOLL_FD);
  mastra__io_init(g.loop, &g.httpd_io, info->epoll_fd, on_httpd, NULL);
  if (mastra__io_start(&g.httpd_io, EPOLLIN) < 0) {
    snprintf(err, errlen, "cannot watch the HTTP daemon");
    return -1;
  }
  return 0;
}

static int http_timeout(void) {
  MHD_UNSIGNED_LONG_LONG t;
  if (MHD_get_timeout(g.httpd, &t) != MHD_YES) return -1;
  return t > 60000 ? 60000 : (int)t;
}

/* }====== */

/* {====== main ====== */

static void on_signal(mastra__io *io, uint32_t revents) {
  struct signalfd_siginfo si;
  (void)revents;
  while (read(io->fd, &si, sizeof si) == (ssize_t)sizeof si) g.stopping = 1;
}

static void on_stdin(mastra__io *io, uint32_t revents) {
  char buf[4096];
  ssize_t n;
  (void)revents;
  do
    n = read(io->fd, buf, sizeof buf);
  while (n < 0 && errno == EINTR);
  if (n == 0 || (n < 0 && errno != EAGAIN)) {
    mastra__io_stop(io);
    g.stopping = 1;
  }
}

static void usage(void) {
  fprintf(stderr,
          "usage: fault-platform [--log FILE] [--watch-stdin] SCRIPT.json\n"
          "  (the script format is described at the top of"
          " spec/support/fault-platform.c)\n");
}

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *data = NULL;
  size_t cap = 0, n = 0;
  if (f == NULL) return NULL;
  for (;;) {
    size_t k;
    if (n == cap) {
      char *p;
      cap = cap ? cap * 2 : 65536;
      p = realloc(data, cap + 1);
      if (p == NULL) fail_oom();
      data = p;
    }
    k = fread(data + n, 1, cap - n, f);
    n += k;
    if (k == 0) break;
  }
  fclose(f);
  data[n] = '\0';
  *len = n;
  return data;
}

/* Stop everything: sessions, waiting requests, the daemon. */
static void shutdown_all(void) {
  session *s, *next;
  for (s = g.sessions; s != NULL; s = next) {
    next = s->next;
    if (!s->upgraded || s->ended) continue;
    enter(s);
    finish(s, "shutdown");
    leave(s);
  }
  while (g.waiting != NULL) resume(g.waiting);
  mastra__io_stop(&g.httpd_io);
  MHD_stop_daemon(g.httpd);
  g.httpd = NULL;
  /* 101 answers that never became sessions */
  for (s = g.sessions; s != NULL; s = next) {
    next = s->next;
    if (s->ended) continue;
    enter(s);
    finish(s, "shutdown");
    leave(s);
  }
}

int main(int argc, char **argv) {
  const char *log_path = NULL, *script_path = NULL;
  char err[1024], *text;
  size_t len;
  int i, watch_stdin = 0, sfd;
  sigset_t sigs;
  mastra__io sig_io, stdin_io;
  check c;

  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--log") == 0 && i + 1 < argc) {
      log_path = argv[++i];
    } else if (strcmp(argv[i], "--watch-stdin") == 0) {
      watch_stdin = 1;
    } else if (argv[i][0] == '-' || script_path != NULL) {
      usage();
      return EXIT_USAGE;
    } else {
      script_path = argv[i];
    }
  }
  if (script_path == NULL) {
    usage();
    return EXIT_USAGE;
  }
  text = read_file(script_path, &len);
  if (text == NULL) {
    fprintf(stderr, "fault-platform: cannot read %s: %s\n", script_path,
            strerror(errno));
    return EXIT_USAGE;
  }
  g.script = cJSON_ParseWithLength(text, len);
  if (g.script == NULL) {
    const char *at = cJSON_GetErrorPtr();
    fprintf(stderr, "fault-platform: %s is not JSON (near byte %ld)\n",
            script_path, at != NULL ? (long)(at - text) : -1L);
    free(text);
    return EXIT_USAGE;
  }
  free(text);
  c.err = err;
  c.errlen = sizeof err;
  if (load_routes(&c) < 0) { /* check it before listening */
    fprintf(stderr, "fault-platform: %s: %s\n", script_path, err);
    free_routes();
    cJSON_Delete(g.script);
    return EXIT_USAGE;
  }
  free_routes();
  g.log_fd = -1;
  if (log_path != NULL) {
    g.log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND
                                  | O_CLOEXEC, 0644);
    if (g.log_fd < 0) {
      fprintf(stderr, "fault-platform: cannot open %s: %s\n", log_path,
              strerror(errno));
      return EXIT_USAGE;
    }
  }
  signal(SIGPIPE, SIG_IGN);
  g.t0 = mastra__now_ms();
  g.loop = mastra__loop_new();
  if (g.loop == NULL) fail_oom();

  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigprocmask(SIG_BLOCK, &sigs, NULL);
  sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
  mastra__io_init(g.loop, &sig_io, sfd, on_signal, NULL);
  mastra__io_start(&sig_io, EPOLLIN);
  mastra__io_init(g.loop, &stdin_io, 0, on_stdin, NULL);
  if (watch_stdin) {
    int fl = fcntl(0, F_GETFL);
    if (fl >= 0) fcntl(0, F_SETFL, fl | O_NONBLOCK);
    mastra__io_start(&stdin_io, EPOLLIN);
  }

  if (http_start(err, sizeof err) < 0) {
    fprintf(stderr, "fault-platform: %s\n", err);
    return 1;
  }
  /* the port is known: $WS and $URL, then the routes again (they point
  ** into the substituted strings) */
  substitute(g.script);
  if (load_routes(&c) < 0) {
    fprintf(stderr, "fault-platform: %s: %s\n", script_path, err);
    return 1;
  }
  printf("{\"url\":\"%s\",\"ws\":\"%s\",\"pid\":%d}\n", g.base_url, g.ws_url,
         (int)getpid());
  fflush(stdout);

  while (!g.stopping) {
    mastra__loop_run_once(g.loop, http_timeout());
    if (g.httpd != NULL) MHD_run(g.httpd);
  }

  shutdown_all();
  mastra__io_stop(&sig_io);
  mastra__io_stop(&stdin_io);
  close(sfd);
  mastra__loop_close(g.loop);
  mastra__loop_unref(g.loop);
  free_routes();
  cJSON_Delete(g.script);
  if (g.log_fd >= 0) close(g.log_fd);
  return 0;
}

/* }====== */
