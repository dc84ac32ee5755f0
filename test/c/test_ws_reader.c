/*
** Tests of the server's WebSocket reader (src/server/http/ws_reader.h):
** masked frames fed whole, a byte at a time and in uneven pieces come out
** as the same messages; fragments join across control frames; every way
** a frame can break RFC 6455 is 1002 (or 1007 for bad UTF-8) and stops
** the reader; a message over the limit is one 1009 and reading goes on.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/ws_reader.h"

#include "check.h"

#define MAX_EVENTS 16

typedef struct {
  int kind;
  uint16_t code;
  unsigned char *data;
  size_t len;
} event;

typedef struct {
  unsigned char *b;
  size_t len, cap;
} bytes;

static void put(bytes *o, const void *p, size_t n) {
  if (o->len + n > o->cap) {
    o->cap = (o->len + n) * 2;
    o->b = realloc(o->b, o->cap);
    if (o->b == NULL) abort();
  }
  memcpy(o->b + o->len, p, n);
  o->len += n;
}

/* A client's frame. flags: 1 no mask, 2 an RSV bit, 4 a 64-bit length
** where 16 bits would do (not the shortest form) */
static void frame(bytes *o, int fin, unsigned opcode, const void *payload,
                  size_t n, int flags) {
  static const unsigned char key[4] = {0x37, 0xfa, 0x21, 0x3d};
  unsigned char h[14];
  size_t hl = 2, i;
  h[0] = (unsigned char)((fin ? 0x80 : 0) | ((flags & 2) ? 0x40 : 0) | opcode);
  h[1] = (flags & 1) ? 0 : 0x80;
  if (n < 126 && !(flags & 4)) {
    h[1] |= (unsigned char)n;
  } else if (n < 65536 && !(flags & 4)) {
    h[1] |= 126;
    h[2] = (unsigned char)(n >> 8);
    h[3] = (unsigned char)n;
    hl = 4;
  } else {
    h[1] |= 127;
    for (i = 0; i < 8; i++) h[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
    hl = 10;
  }
  if (!(flags & 1)) {
    memcpy(h + hl, key, 4);
    hl += 4;
  }
  put(o, h, hl);
  for (i = 0; i < n; i++) {
    unsigned char c = ((const unsigned char *)payload)[i];
    if (!(flags & 1)) c ^= key[i % 4];
    put(o, &c, 1);
  }
}

static void close_frame(bytes *o, unsigned code, const char *reason, size_t rlen) {
  unsigned char p[125];
  p[0] = (unsigned char)(code >> 8);
  p[1] = (unsigned char)code;
  memcpy(p + 2, reason, rlen);
  frame(o, 1, 0x8, p, 2 + rlen, 0);
}

/* the events of in, fed in pieces of `piece` bytes (0: as much as fits) */
static int feed(const bytes *in, size_t piece, size_t limit, event *ev) {
  mp_wsr r;
  size_t off = 0;
  int n = 0;
  if (mp_wsr_init(&r, limit) < 0) return -1;
  for (;;) {
    mp_wsr_event e;
    int k;
    while ((k = mp_wsr_next(&r, &e)) != MP_WSR_NEED) {
      if (k < 0 || n == MAX_EVENTS) {
        mp_wsr_free(&r);
        return -1;
      }
      ev[n].kind = k;
      ev[n].code = e.code;
      ev[n].len = e.len;
      ev[n].data = malloc(e.len + 1);
      if (e.len) memcpy(ev[n].data, e.data, e.len);
      n++;
    }
    if (off == in->len) break;
    {
      size_t room, k2;
      unsigned char *space = mp_wsr_space(&r, &room);
      if (room == 0) { /* a reader that took nothing and has no room */
        CHECK(room > 0);
        break;
      }
      k2 = in->len - off;
      if (piece && k2 > piece) k2 = piece;
      if (k2 > room) k2 = room;
      memcpy(space, in->b + off, k2);
      mp_wsr_filled(&r, k2);
      off += k2;
    }
  }
  CHECK(mp_wsr_pending(&r) == 0 || r.stopped);
  mp_wsr_free(&r);
  return n;
}

static void drop(event *ev, int n) {
  int i;
  for (i = 0; i < n; i++) free(ev[i].data);
}

static int is(const event *e, int kind, const char *data) {
  return e->kind == kind && e->len == strlen(data)
         && memcmp(e->data, data, e->len) == 0;
}

/* the same bytes, whatever the pieces they come in */
static void test_pieces(void) {
  static const size_t pieces[] = {0, 1, 3, 7, 4093, 65536};
  unsigned char *big = malloc(300000);
  bytes in = {0};
  size_t i, p;
  for (i = 0; i < 300000; i++) big[i] = (unsigned char)(i * 2654435761u >> 7);
  frame(&in, 1, 0x1, "hello", 5, 0);
  frame(&in, 1, 0x2, big, 300000, 0);     /* a 64-bit length */
  frame(&in, 1, 0x2, big + 5, 70000, 0);  /* unmasked from another phase */
  frame(&in, 1, 0x2, big, 126, 0);        /* the smallest 16-bit length */
  frame(&in, 1, 0x2, "", 0, 0);
  frame(&in, 1, 0x9, "ping!", 5, 0);
  frame(&in, 1, 0xa, "", 0, 0);
  for (p = 0; p < sizeof pieces / sizeof *pieces; p++) {
    event ev[MAX_EVENTS];
    int n = feed(&in, pieces[p], 1 << 20, ev);
    CHECK(n == 7);
    if (n != 7) continue;
    CHECK(is(&ev[0], MP_WSR_TEXT, "hello"));
    CHECK(ev[1].kind == MP_WSR_BINARY && ev[1].len == 300000
          && memcmp(ev[1].data, big, 300000) == 0);
    CHECK(ev[2].kind == MP_WSR_BINARY && ev[2].len == 70000
          && memcmp(ev[2].data, big + 5, 70000) == 0);
    CHECK(ev[3].kind == MP_WSR_BINARY && ev[3].len == 126
          && memcmp(ev[3].data, big, 126) == 0);
    CHECK(ev[4].kind == MP_WSR_BINARY && ev[4].len == 0);
    CHECK(is(&ev[5], MP_WSR_PING, "ping!"));
    CHECK(is(&ev[6], MP_WSR_PONG, ""));
    drop(ev, n);
  }
  free(in.b);
  free(big);
}

/* fragments join, with a control frame between them; UTF-8 split
** between fragments is whole in the message */
static void test_fragments(void) {
  bytes in = {0};
  event ev[MAX_EVENTS];
  int n;
  frame(&in, 0, 0x1, "caf\xc3", 4, 0);
  frame(&in, 1, 0x9, "p", 1, 0);
  frame(&in, 0, 0x0, "\xa9 ", 2, 0);
  frame(&in, 1, 0x0, "ok", 2, 0);
  frame(&in, 0, 0x2, "a", 1, 0);
  frame(&in, 1, 0x0, "b", 1, 0);
  n = feed(&in, 1, 1 << 20, ev);
  CHECK(n == 3);
  if (n == 3) {
    CHECK(is(&ev[0], MP_WSR_PING, "p"));
    CHECK(is(&ev[1], MP_WSR_TEXT, "caf\xc3\xa9 ok"));
    CHECK(is(&ev[2], MP_WSR_BINARY, "ab"));
  }
  drop(ev, n);
  free(in.b);
}

/* one frame that breaks the protocol, after a good message: the good one,
** then the error, then nothing (the trailing message is not read) */
static void expect_error(const bytes *bad, uint16_t code, const char *what) {
  bytes in = {0};
  event ev[MAX_EVENTS];
  int n;
  frame(&in, 1, 0x1, "before", 6, 0);
  put(&in, bad->b, bad->len);
  frame(&in, 1, 0x1, "after", 5, 0);
  n = feed(&in, 5, 1 << 20, ev);
  if (!CHECK(n == 2 && is(&ev[0], MP_WSR_TEXT, "before")
             && ev[1].kind == MP_WSR_ERROR && ev[1].code == code))
    fprintf(stderr, "  case: %s (%d events)\n", what, n);
  drop(ev, n);
  free(in.b);
}

static void test_errors(void) {
  static const unsigned char big_ping[126] = {0};
  bytes b;
#define CASE(what, code, stmt) \
  do {                         \
    memset(&b, 0, sizeof b);   \
    stmt;                      \
    expect_error(&b, code, what); \
    free(b.b);                 \
  } while (0)
  CASE("unmasked", 1002, frame(&b, 1, 0x1, "x", 1, 1));
  CASE("an RSV bit", 1002, frame(&b, 1, 0x1, "x", 1, 2));
  CASE("opcode 3", 1002, frame(&b, 1, 0x3, "x", 1, 0));
  CASE("opcode 0xb", 1002, frame(&b, 1, 0xb, "x", 1, 0));
  CASE("a ping of 126 bytes", 1002, frame(&b, 1, 0x9, big_ping, 126, 0));
  CASE("a fragmented ping", 1002, frame(&b, 0, 0x9, "x", 1, 0));
  CASE("a continuation first", 1002, frame(&b, 1, 0x0, "x", 1, 0));
  CASE("a message inside a message", 1002,
       (frame(&b, 0, 0x2, "x", 1, 0), frame(&b, 1, 0x1, "y", 1, 0)));
  CASE("a 64-bit length under 65536", 1002, frame(&b, 1, 0x2, "x", 1, 4));
  CASE("a 16-bit length under 126", 1002,
       put(&b, "\x82\xfe\x00\x05\x00\x00\x00\x00xxxxx", 13));
  CASE("a length with its top bit", 1002,
       put(&b, "\x82\xff\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", 14));
  CASE("text that is not UTF-8", 1007, frame(&b, 1, 0x1, "\xc3\x28", 2, 0));
  CASE("text cut inside a character", 1007, frame(&b, 1, 0x1, "\xe2\x82", 2, 0));
  CASE("a close of one byte", 1002, frame(&b, 1, 0x8, "\x03", 1, 0));
  CASE("close code 1005", 1002, close_frame(&b, 1005, "", 0));
  CASE("close code 999", 1002, close_frame(&b, 999, "", 0));
  CASE("close code 2000", 1002, close_frame(&b, 2000, "", 0));
  CASE("a close reason not UTF-8", 1007, close_frame(&b, 1000, "\xff", 1));
#undef CASE
}

static void test_close(void) {
  bytes in = {0};
  event ev[MAX_EVENTS];
  int n;
  close_frame(&in, 4000, "bye", 3);
  frame(&in, 1, 0x1, "after", 5, 0);
  n = feed(&in, 0, 1 << 20, ev);
  CHECK(n == 1 && is(&ev[0], MP_WSR_CLOSE, "bye") && ev[0].code == 4000);
  drop(ev, n);
  free(in.b);
  memset(&in, 0, sizeof in);
  frame(&in, 1, 0x8, "", 0, 0);
  n = feed(&in, 1, 1 << 20, ev);
  CHECK(n == 1 && ev[0].kind == MP_WSR_CLOSE && ev[0].code == 0 && ev[0].len == 0);
  drop(ev, n);
  free(in.b);
}

/* over the limit: one 1009 for the message (whatever its fragments),
** which is dropped; the next message and a close still come */
static void test_limit(void) {
  static unsigned char part[1001];
  bytes in = {0};
  event ev[MAX_EVENTS];
  int n;
  memset(part, 'x', sizeof part);
  frame(&in, 1, 0x2, part, 600, 0);
  frame(&in, 0, 0x2, part, 600, 0);
  frame(&in, 0, 0x0, part, 600, 0);
  frame(&in, 1, 0x0, part, 600, 0);
  frame(&in, 1, 0x1, "ok", 2, 0);
  frame(&in, 1, 0x2, part, 1001, 0); /* over at once */
  close_frame(&in, 1000, "", 0);
  n = feed(&in, 100, 1000, ev);
  CHECK(n == 5);
  if (n == 5) {
    CHECK(ev[0].kind == MP_WSR_BINARY && ev[0].len == 600);
    CHECK(ev[1].kind == MP_WSR_ERROR && ev[1].code == 1009);
    CHECK(is(&ev[2], MP_WSR_TEXT, "ok"));
    CHECK(ev[3].kind == MP_WSR_ERROR && ev[3].code == 1009);
    CHECK(ev[4].kind == MP_WSR_CLOSE && ev[4].code == 1000);
  }
  drop(ev, n);
  free(in.b);
}

static void test_utf8(void) {
  static const char *good[] = {"", "plain ascii, longer than eight bytes",
                               "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80",
                               "\xed\x9f\xbf", "\xee\x80\x80", "\xef\xbf\xbf",
                               "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf",
                               "seven b\xc3\xa9 after"};
  static const char *bad[] = {"\x80", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80",
                              "\xe0\x9f\xbf", "\xed\xa0\x80", "\xed\xbf\xbf",
                              "\xf0\x80\x80\x80", "\xf0\x8f\xbf\xbf",
                              "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff",
                              "abcdefg\xc3", "\xe2\x82", "\xc3\x28" "abcdefgh"};
  size_t i;
  for (i = 0; i < sizeof good / sizeof *good; i++)
    if (!CHECK(mp_wsr_utf8((const unsigned char *)good[i], strlen(good[i]))))
      fprintf(stderr, "  good[%zu]\n", i);
  for (i = 0; i < sizeof bad / sizeof *bad; i++)
    if (!CHECK(!mp_wsr_utf8((const unsigned char *)bad[i], strlen(bad[i]))))
      fprintf(stderr, "  bad[%zu]\n", i);
}

int main(void) {
  test_pieces();
  test_fragments();
  test_errors();
  test_close();
  test_limit();
  test_utf8();
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}
