/*
** A client's WebSocket frames, read by the server (RFC 6455, section 5):
** a pull parser over a buffer of its own (ws_reader.c). The caller
** receives into mp_wsr_space(), says how much came with mp_wsr_filled(),
** then takes events from mp_wsr_next() until it answers MP_WSR_NEED.
**
** It does what wslay's reader did for the exec WebSocket (api/exec_ws.c),
** without its per-byte loops: the payload is unmasked eight bytes at a
** time while it is copied into the message, and a text message's UTF-8
** is checked once it is whole, eight ASCII bytes at a time. wslay took
** 40% of the server's time on stdin and 25% on the commands of
** uploadDir without stdin (bench/RESULTS.md); it still sends.
**
** A frame that breaks the protocol (unmasked, RSV bits, a reserved
** opcode, a control frame fragmented or over 125 bytes, a length not in
** its shortest form, a continuation without a message or a message
** inside another, a close whose code is not one a peer may send) is
** MP_WSR_ERROR 1002; text or a close reason that is not UTF-8, 1007;
** both stop the reader. A message over the limit is MP_WSR_ERROR 1009,
** once: its frames are then dropped and reading goes on, so that the
** peer's answer to our close can still be read.
*/
#ifndef MP_WS_READER_H
#define MP_WS_READER_H

#include <stddef.h>
#include <stdint.h>

#define MP_WSR_BUF 65536 /* bytes read from the socket at a time */

typedef enum {
  MP_WSR_NEED = 0, /* the bytes at hand hold no more events */
  MP_WSR_TEXT,
  MP_WSR_BINARY,
  MP_WSR_PING,
  MP_WSR_PONG,
  MP_WSR_CLOSE, /* the peer's close: code (0: it sent none), its reason */
  MP_WSR_ERROR  /* code: the close to answer with (1002, 1007, 1009) */
} mp_wsr_kind;

typedef struct mp_wsr_event {
  const unsigned char *data; /* valid until the next mp_wsr_next */
  size_t len;
  uint16_t code;
} mp_wsr_event;

typedef struct mp_wsr {
  unsigned char *buf; /* received, [start, end) not parsed yet */
  size_t start, end;
  int in_payload;     /* 0: at a frame's header */
  unsigned opcode;    /* the frame's */
  int fin;
  unsigned char key[4];
  uint64_t left, off; /* the frame's payload: to come, and seen */
  unsigned msg_opcode; /* the message being put together (0: none) */
  int skipping;        /* it is over the limit: its frames are dropped */
  unsigned char *msg;
  size_t msg_len, msg_cap, limit;
  unsigned char ctrl[125];
  size_t ctrl_len;
  int stopped;         /* a close came, or the protocol broke */
} mp_wsr;

/* limit: the largest message; -1 with errno ENOMEM */
int mp_wsr_init(mp_wsr *r, size_t limit);
void mp_wsr_free(mp_wsr *r);
/* from the next message on */
void mp_wsr_set_limit(mp_wsr *r, size_t limit);
/* where the next bytes go, and how many fit (never 0) */
unsigned char *mp_wsr_space(mp_wsr *r, size_t *len);
void mp_wsr_filled(mp_wsr *r, size_t n);
/* the bytes received and not parsed yet */
size_t mp_wsr_pending(const mp_wsr *r);
/* the next event, or MP_WSR_NEED; after a close or a protocol error,
** MP_WSR_NEED for ever. -1 (errno ENOMEM) when a message cannot be held */
int mp_wsr_next(mp_wsr *r, mp_wsr_event *ev);
/* whether s[0, n) is UTF-8 (RFC 3629: no overlong forms, no surrogates,
** nothing past U+10FFFF) */
int mp_wsr_utf8(const unsigned char *s, size_t n);

#endif
