/*
** A client's WebSocket frames, read by the server (ws_reader.h).
*/
#include "http/ws_reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define OP_CONT 0x0
#define OP_TEXT 0x1
#define OP_BINARY 0x2
#define OP_CLOSE 0x8
#define OP_PING 0x9
#define OP_PONG 0xa

int mp_wsr_init(mp_wsr *r, size_t limit) {
  memset(r, 0, sizeof *r);
  r->buf = malloc(MP_WSR_BUF);
  r->msg_cap = limit < 4096 ? limit : 4096;
  r->msg = malloc(r->msg_cap ? r->msg_cap : 1);
  if (r->buf == NULL || r->msg == NULL) {
    mp_wsr_free(r);
    errno = ENOMEM;
    return -1;
  }
  r->limit = limit;
  return 0;
}

void mp_wsr_free(mp_wsr *r) {
  free(r->buf);
  free(r->msg);
  r->buf = r->msg = NULL;
}

void mp_wsr_set_limit(mp_wsr *r, size_t limit) { r->limit = limit; }

unsigned char *mp_wsr_space(mp_wsr *r, size_t *len) {
  if (r->start == r->end) {
    r->start = r->end = 0;
  } else if (r->end == MP_WSR_BUF) { /* a header cut at the end: move it */
    memmove(r->buf, r->buf + r->start, r->end - r->start);
    r->end -= r->start;
    r->start = 0;
  }
  *len = MP_WSR_BUF - r->end;
  return r->buf + r->end;
}

void mp_wsr_filled(mp_wsr *r, size_t n) { r->end += n; }

size_t mp_wsr_pending(const mp_wsr *r) { return r->end - r->start; }

/* dst[i] = src[i] ^ key[(off + i) % 4], eight bytes at a time */
static void unmask(unsigned char *dst, const unsigned char *src, size_t n,
                   const unsigned char key[4], uint64_t off) {
  unsigned char k[8];
  uint64_t k8, w;
  size_t i;
  for (i = 0; i < 8; i++) k[i] = key[(off + i) & 3];
  memcpy(&k8, k, 8);
  for (i = 0; i + 8 <= n; i += 8) {
    memcpy(&w, src + i, 8);
    w ^= k8;
    memcpy(dst + i, &w, 8);
  }
  for (; i < n; i++) dst[i] = src[i] ^ k[i & 7];
}

int mp_wsr_utf8(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t k, len;
    unsigned cp;
    if (i + 8 <= n) { /* the common case: eight ASCII bytes */
      uint64_t w;
      memcpy(&w, s + i, 8);
      if ((w & 0x8080808080808080ull) == 0) {
        i += 8;
        continue;
      }
    }
    if (c < 0x80) {
      i++;
      continue;
    }
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return 0; /* a continuation byte, 0xc0, 0xc1 or past 0xf4 */
    }
    if (n - i < len) return 0;
    for (k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (s[i + k] & 0x3fu);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff)))
        || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
      return 0;
    i += len;
  }
  return 1;
}

/* the codes a peer may send in a close (RFC 6455, 7.4) */
static int close_code_ok(unsigned code) {
  return (code >= 1000 && code <= 1011 && code != 1004 && code != 1005
          && code != 1006)
         || (code >= 3000 && code <= 4999);
}

static int broke(mp_wsr *r, mp_wsr_event *ev, uint16_t code) {
  r->stopped = 1;
  ev->data = NULL;
  ev->len = 0;
  ev->code = code;
  return MP_WSR_ERROR;
}

/* a frame's header at r->start, when it is all there: 1 taken, 0 more
** bytes needed, or an event (an error, or 1009) */
static int take_header(mp_wsr *r, mp_wsr_event *ev, int *event) {
  const unsigned char *h = r->buf + r->start;
  size_t avail = r->end - r->start, need = 2;
  unsigned len7;
  uint64_t len;
  int control;
  *event = MP_WSR_NEED;
  if (avail < 2) return 0;
  len7 = h[1] & 0x7fu;
  need += (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + ((h[1] & 0x80) ? 4 : 0);
  if (avail < need) return 0;
  r->fin = (h[0] & 0x80) != 0;
  r->opcode = h[0] & 0x0fu;
  control = (r->opcode & 0x8) != 0;
  if ((h[0] & 0x70) != 0 || (h[1] & 0x80) == 0) { /* RSV bits; no mask */
    *event = broke(r, ev, 1002);
    return 1;
  }
  if (len7 == 126) {
    len = ((uint64_t)h[2] << 8) | h[3];
    if (len < 126) len = UINT64_MAX; /* not the shortest form */
  } else if (len7 == 127) {
    int k;
    len = 0;
    for (k = 0; k < 8; k++) len = (len << 8) | h[2 + k];
    if (len < 65536 || (len >> 63) != 0) len = UINT64_MAX;
  } else {
    len = len7;
  }
  if (len == UINT64_MAX
      || (control && (!r->fin || len > 125
                      || (r->opcode != OP_CLOSE && r->opcode != OP_PING
                          && r->opcode != OP_PONG)))
      || (!control && r->opcode > OP_BINARY)
      || (r->opcode == OP_CONT && r->msg_opcode == 0)
      || ((r->opcode == OP_TEXT || r->opcode == OP_BINARY)
          && r->msg_opcode != 0)) {
    *event = broke(r, ev, 1002);
    return 1;
  }
  memcpy(r->key, h + need - 4, 4);
  r->start += need;
  r->left = len;
  r->off = 0;
  r->in_payload = 1;
  if (control) {
    r->ctrl_len = 0;
    return 1;
  }
  if (r->opcode != OP_CONT) { /* a message begins */
    r->msg_opcode = r->opcode;
    r->msg_len = 0;
    r->skipping = 0;
  }
  if (!r->skipping && len > r->limit - r->msg_len) {
    r->skipping = 1;
    ev->data = NULL;
    ev->len = 0;
    ev->code = 1009;
    *event = MP_WSR_ERROR;
    return 1;
  }
  if (!r->skipping && r->msg_len + len > r->msg_cap) {
    size_t cap = r->msg_cap ? r->msg_cap : 1;
    unsigned char *m;
    while (cap < r->msg_len + len) cap *= 2;
    if (cap > r->limit) cap = r->limit;
    m = realloc(r->msg, cap);
    if (m == NULL) {
      errno = ENOMEM;
      return -1;
    }
    r->msg = m;
    r->msg_cap = cap;
  }
  return 1;
}

/* a whole frame came: its event, or MP_WSR_NEED for a part of a message */
static int frame_done(mp_wsr *r, mp_wsr_event *ev) {
  r->in_payload = 0;
  if (r->opcode & 0x8) {
    ev->data = r->ctrl;
    ev->len = r->ctrl_len;
    ev->code = 0;
    if (r->opcode == OP_PING) return MP_WSR_PING;
    if (r->opcode == OP_PONG) return MP_WSR_PONG;
    if (r->ctrl_len == 1) return broke(r, ev, 1002);
    if (r->ctrl_len >= 2) {
      unsigned code = ((unsigned)r->ctrl[0] << 8) | r->ctrl[1];
      if (!close_code_ok(code)) return broke(r, ev, 1002);
      if (!mp_wsr_utf8(r->ctrl + 2, r->ctrl_len - 2)) return broke(r, ev, 1007);
      ev->code = (uint16_t)code;
      ev->data = r->ctrl + 2;
      ev->len = r->ctrl_len - 2;
    }
    r->stopped = 1; /* nothing after a close is read */
    return MP_WSR_CLOSE;
  }
  if (!r->fin) return MP_WSR_NEED;
  {
    unsigned op = r->msg_opcode;
    r->msg_opcode = 0;
    if (r->skipping) { /* told already (1009) */
      r->skipping = 0;
      return MP_WSR_NEED;
    }
    if (op == OP_TEXT && !mp_wsr_utf8(r->msg, r->msg_len)) return broke(r, ev, 1007);
    ev->data = r->msg;
    ev->len = r->msg_len;
    ev->code = 0;
    return op == OP_TEXT ? MP_WSR_TEXT : MP_WSR_BINARY;
  }
}

int mp_wsr_next(mp_wsr *r, mp_wsr_event *ev) {
  while (!r->stopped) {
    size_t take;
    if (!r->in_payload) {
      int event, got = take_header(r, ev, &event);
      if (got < 0) return -1;
      if (event != MP_WSR_NEED) return event;
      if (got == 0) return MP_WSR_NEED;
    }
    take = r->end - r->start;
    if (take > r->left) take = (size_t)r->left;
    if (take == 0) {
      /* an empty payload, or one still to come */
    } else if (r->opcode & 0x8) {
      unmask(r->ctrl + r->ctrl_len, r->buf + r->start, take, r->key, r->off);
      r->ctrl_len += take;
    } else if (!r->skipping) {
      unmask(r->msg + r->msg_len, r->buf + r->start, take, r->key, r->off);
      r->msg_len += take;
    }
    r->start += take;
    r->left -= take;
    r->off += take;
    if (r->left > 0) return MP_WSR_NEED;
    {
      int event = frame_done(r, ev);
      if (event != MP_WSR_NEED) return event;
    }
  }
  return MP_WSR_NEED;
}
