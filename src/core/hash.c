/*
** SHA-1 and base64 (see hash.h).
*/
#include "hash.h"

#include <string.h>

#define ROL(x, n) (((x) << (n)) | ((x) >> (32 - (n))))

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static uint32_t load_be32(const unsigned char *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8
         | (uint32_t)p[3];
}

static void store_be32(unsigned char *p, uint32_t v) {
  p[0] = (unsigned char)(v >> 24);
  p[1] = (unsigned char)(v >> 16);
  p[2] = (unsigned char)(v >> 8);
  p[3] = (unsigned char)v;
}

/* One 64-byte block. */
static void sha1_block(uint32_t h[5], const unsigned char *blk) {
  uint32_t w[80], a, b, c, d, e, f, k, t;
  int i;
  for (i = 0; i < 16; i++) w[i] = load_be32(blk + 4 * i);
  for (i = 16; i < 80; i++)
    w[i] = ROL(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  a = h[0];
  b = h[1];
  c = h[2];
  d = h[3];
  e = h[4];
  for (i = 0; i < 80; i++) {
    if (i < 20) {
      f = (b & c) | (~b & d);
      k = 0x5A827999u;
    } else if (i < 40) {
      f = b ^ c ^ d;
      k = 0x6ED9EBA1u;
    } else if (i < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8F1BBCDCu;
    } else {
      f = b ^ c ^ d;
      k = 0xCA62C1D6u;
    }
    t = ROL(a, 5) + f + e + k + w[i];
    e = d;
    d = c;
    c = ROL(b, 30);
    b = a;
    a = t;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

void mastra__sha1_init(mastra__sha1_ctx *c) {
  c->h[0] = 0x67452301u;
  c->h[1] = 0xEFCDAB89u;
  c->h[2] = 0x98BADCFEu;
  c->h[3] = 0x10325476u;
  c->h[4] = 0xC3D2E1F0u;
  c->total = 0;
  c->nbuf = 0;
}

void mastra__sha1_update(mastra__sha1_ctx *c, const void *data, size_t len) {
  const unsigned char *p = data;
  c->total += len;
  if (c->nbuf > 0) {
    size_t n = 64 - c->nbuf < len ? 64 - c->nbuf : len;
    memcpy(c->buf + c->nbuf, p, n);
    c->nbuf += n;
    p += n;
    len -= n;
    if (c->nbuf < 64) return;
    sha1_block(c->h, c->buf);
    c->nbuf = 0;
  }
  while (len >= 64) {
    sha1_block(c->h, p);
    p += 64;
    len -= 64;
  }
  if (len > 0) {
    memcpy(c->buf, p, len);
    c->nbuf = len;
  }
}

void mastra__sha1_final(mastra__sha1_ctx *c,
                        unsigned char out[MASTRA__SHA1_LEN]) {
  uint64_t bits = c->total * 8u;
  int i;
  c->buf[c->nbuf++] = 0x80;
  if (c->nbuf > 56) {
    memset(c->buf + c->nbuf, 0, 64 - c->nbuf);
    sha1_block(c->h, c->buf);
    c->nbuf = 0;
  }
  memset(c->buf + c->nbuf, 0, 56 - c->nbuf);
  for (i = 0; i < 8; i++)
    c->buf[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
  sha1_block(c->h, c->buf);
  for (i = 0; i < 5; i++) store_be32(out + 4 * i, c->h[i]);
  memset(c, 0, sizeof *c);
}

void mastra__sha1(const void *data, size_t len,
                  unsigned char out[MASTRA__SHA1_LEN]) {
  mastra__sha1_ctx c;
  mastra__sha1_init(&c);
  mastra__sha1_update(&c, data, len);
  mastra__sha1_final(&c, out);
}

size_t mastra__base64_encode(const void *in, size_t len, char *out) {
  static const char tab[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const unsigned char *p = in;
  size_t i, o = 0;
  for (i = 0; i + 2 < len; i += 3) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
    out[o++] = tab[v >> 18];
    out[o++] = tab[(v >> 12) & 63];
    out[o++] = tab[(v >> 6) & 63];
    out[o++] = tab[v & 63];
  }
  if (len - i == 1) {
    uint32_t v = (uint32_t)p[i] << 16;
    out[o++] = tab[v >> 18];
    out[o++] = tab[(v >> 12) & 63];
    out[o++] = '=';
    out[o++] = '=';
  } else if (len - i == 2) {
    uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
    out[o++] = tab[v >> 18];
    out[o++] = tab[(v >> 12) & 63];
    out[o++] = tab[(v >> 6) & 63];
    out[o++] = '=';
  }
  out[o] = '\0';
  return o;
}

void mastra__ws_accept_key(const char *client_key, char out[29]) {
  unsigned char md[MASTRA__SHA1_LEN];
  mastra__sha1_ctx c;
  mastra__sha1_init(&c);
  mastra__sha1_update(&c, client_key, strlen(client_key));
  mastra__sha1_update(&c, ws_guid, sizeof ws_guid - 1);
  mastra__sha1_final(&c, md);
  mastra__base64_encode(md, sizeof md, out);
}
