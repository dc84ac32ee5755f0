/*
** WebSocket client (RFC 6455) on the loop: libcurl connects (TCP, TLS for
** wss://, proxies) with CURLOPT_CONNECT_ONLY, we send the HTTP/1.1
** Upgrade with curl_easy_send and read the answer with curl_easy_recv,
** then wslay frames the messages over the same two calls.
**
** Each socket has a libcurl multi of its own (mastra__multi,
** http_client.h), not the loop's shared one: a CONNECT_ONLY connection sits
** idle in its multi's connection cache, where any other transfer that opens a
** connection prunes it once it is older than CURLOPT_MAXAGE_CONN (118 s
** by default) or evicts it when the cache is full, closing the socket
** under our feet (checked against libcurl 7.88.1: test/c/test_net.c
** "pruning"). A private multi never opens a second connection. It costs
** the multi's wake-up socketpair: three descriptors per socket instead of
** one.
**
** States: connecting -> open -> closing -> closed; connecting -> closed.
** Every change of state, every received message, every drain of the
** send queue and its fall below MASTRA__WS_SEND_LOW signal the socket's
** id. The easy handle stays in its multi
** until the socket is closed (removing it earlier is
** http4s/http4s-curl#59), and wslay is never called again after it
** returned an error.
**
** Failure names (mastra__ws.errname): the CURLE_* name of a libcurl
** failure (connect, TLS, send, recv), "CURLE_OPERATION_TIMEDOUT" for the
** handshake deadline, "http_status" when the upgrade was answered with
** another status than 101 (http_status, http_body), "bad_handshake",
** "connection_closed" (EOF without a close frame), "protocol_error" (a
** bad frame; wslay's code in the message), "keepalive_timeout" (below),
** "closed" (the loop was closed), "CURLE_OUT_OF_MEMORY".
**
** Keepalive (keepalive_ms > 0): a socket that goes silent is not waited
** on forever. While open, a tick every keepalive_ms / 2 looks at whether
** any byte arrived since the last one (data, a ping, a pong). After one
** silent tick it sends a ping (any peer that reads answers it); after two
** it fails with "keepalive_timeout": between keepalive_ms and 1.5 times
** that with nothing received. A tick while the socket is not read (the
** owner holds MASTRA__WS_PENDING_MAX unread) is not silent: that silence
** is ours, not the peer's. A peer that stops reading (its send queue or
** ours full) still answers nothing, so a peer whose sending may pause as
** long should ping us (mastra-platform pings resumable execs).
*/
#ifndef MASTRA_WS_CLIENT_H
#define MASTRA_WS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <wslay/wslay.h>

#include "http_client.h"
#include "loop.h"

#define MASTRA__WS_DEFAULT_HANDSHAKE_MS 30000
#define MASTRA__WS_DEFAULT_CLOSE_MS 3000
#define MASTRA__WS_DEFAULT_MAX_MESSAGE ((uint64_t)64 << 20)
/* A send queue that drains below this signals the id (a writer that
** waits for room may go on), as does one that empties. */
#define MASTRA__WS_SEND_LOW ((size_t)256 << 10)
/* What one write to the socket takes at most (ws->out). */
#define MASTRA__WS_OUT_BUF ((size_t)64 << 10)
/* Stop reading while this much received data waits for the owner. */
#define MASTRA__WS_PENDING_MAX ((size_t)8 << 20)
/* The largest response head to an Upgrade request, and the most of a
** refusal's body that is kept. */
#define MASTRA__WS_HEAD_MAX 16384
/* What one read of the socket takes: wslay asks for 4 KiB at a time, which
** cost a recv per 4 KiB (131,072 of them for 512 MB). Held only while
** bytes arrive: freed when the socket has nothing more to read. */
#define MASTRA__WS_READ_AHEAD ((size_t)64 << 10)
#define MASTRA__WS_BODY_MAX 16384

typedef enum mastra__ws_state {
  MASTRA__WS_CONNECTING,
  MASTRA__WS_OPEN,
  MASTRA__WS_CLOSING,
  MASTRA__WS_CLOSED
} mastra__ws_state;

typedef struct mastra__ws_msg {
  struct mastra__ws_msg *next;
  int binary;
  size_t len;
  char data[];
} mastra__ws_msg;

typedef struct mastra__ws_opts {
  const char *url;                /* ws://, wss:// (http://, https://) */
  const char *const *protocols;   /* offered subprotocols, in order */
  size_t nprotocols;
  const char *const *headers;     /* extra "Name: value" lines */
  size_t nheaders;
  uint64_t handshake_timeout_ms;  /* 0: none (libcurl's connect timeout) */
  uint64_t close_timeout_ms;      /* 0: MASTRA__WS_DEFAULT_CLOSE_MS */
  uint64_t max_message;           /* 0: MASTRA__WS_DEFAULT_MAX_MESSAGE */
  const char *ca_file;            /* PEM bundle to trust; NULL: the system's */
  uint64_t keepalive_ms;          /* 0: none (see above) */
} mastra__ws_opts;

typedef struct mastra__ws mastra__ws;

struct mastra__ws {
  mastra__handle handle;
  mastra__loop *loop;
  uint64_t id;
  mastra__ws_state state;
  int phase;                 /* where the handshake is */
  mastra__multi m;           /* private: see above */
  mastra__xfer xfer;         /* the CONNECT_ONLY easy handle */
  mastra__io io;             /* the connected socket, once curl is done */
  mastra__timer timer;       /* handshake deadline, then close timeout */
  wslay_event_context_ptr ctx;
  /* handshake */
  char *request;
  size_t req_len, req_off;
  char *head;                /* the response; bytes after it feed wslay */
  size_t head_len, head_end, feed_off, body_want;
  /* bytes read from the socket that wslay has not taken yet (pump() always
  ** reads until wslay would block, so none waits unseen by epoll) */
  unsigned char *ahead;
  size_t ahead_len, ahead_off;
  /* bytes wslay handed us to send, not sent yet: its frames go out in
  ** MASTRA__WS_OUT_BUF writes, not a header and 4 KiB pieces each */
  unsigned char *out;
  size_t out_len, out_off;
  unsigned out_blocked : 1;  /* the socket said EAGAIN: the same bytes next */
  char accept[29];
  char **protocols;
  size_t nprotocols;
  char *protocol;            /* selected by the server, or NULL */
  char *target;              /* the URL, for messages */
  uint64_t handshake_ms, close_ms, max_message, keepalive_ms;
  unsigned rx : 1;           /* bytes arrived since the last keepalive tick */
  unsigned silent_ticks : 2; /* keepalive ticks in a row without any */
  /* the data message being received (wslay buffers none: its frames'
  ** chunks are copied here as they come), and its frame's kind */
  mastra__ws_msg *in;
  int in_frame;              /* 0: none, 1: data, 2: control (wslay's) */
  int in_fin;                /* the frame ends its message */
  /* received messages, oldest first */
  mastra__ws_msg *qhead, *qtail;
  size_t qbytes, qcount;
  /* how it ended */
  unsigned opened : 1, orphan : 1, paused : 1, changed : 1, oom : 1;
  unsigned close_received : 1;
  int close_code;            /* of the peer's close frame; 1005: none in it */
  char *close_reason;
  int http_status;           /* of a refused upgrade */
  char *http_body;
  size_t http_body_len;
  const char *errname;       /* NULL: no failure */
  char *error;
};

/* Start connecting. Returns 0, or -1 with *errname and err set (a bad
** URL: "CURLE_URL_MALFORMAT", "CURLE_UNSUPPORTED_PROTOCOL"; out of
** memory; a closed loop). */
int mastra__ws_connect(mastra__loop *loop, const mastra__ws_opts *opts,
                       mastra__ws **out, const char **errname, char *err,
                       size_t errlen);
/* Queue a message and start sending. Returns 0, or -1 with err set (not
** open, out of memory). */
int mastra__ws_send(mastra__ws *ws, const void *data, size_t len, int binary,
                    char *err, size_t errlen);
/* The oldest received message (NULL: none), then drop it with pop. */
const mastra__ws_msg *mastra__ws_peek(const mastra__ws *ws);
void mastra__ws_pop(mastra__ws *ws);
/* Bytes queued for sending. */
size_t mastra__ws_buffered(const mastra__ws *ws);
/* Start the closing handshake (code 0: a close frame without a code);
** while connecting, abort. Ends when the peer answers or the close
** timeout passes. */
void mastra__ws_close(mastra__ws *ws, int code, const char *reason,
                      size_t reason_len);
const char *mastra__ws_state_name(mastra__ws_state s);
/* The owner lets go: an open socket is closed (best effort, in the
** background); anything else is released at once. Never signals. */
void mastra__ws_release(mastra__ws *ws);

#endif
