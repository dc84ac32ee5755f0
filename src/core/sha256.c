/*
** SHA-256 (see sha256.h).
*/
#include "sha256.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#define HAVE_SHA_NI 1
#endif

static const uint32_t k256[64] = {
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
  0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
  0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
  0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
  0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
  0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror32(uint32_t x, int n) {
  return (x >> n) | (x << (32 - n));
}

/* n 64-byte blocks, portable */
static void blocks_portable(uint32_t hh[8], const unsigned char *p,
                            size_t n) {
  for (; n > 0; n--, p += 64) {
    uint32_t w[64], a, b, c, d, e, f, g, h;
    int i;
    for (i = 0; i < 16; i++)
      w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16
             | (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (i = 16; i < 64; i++) {
      uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18)
                    ^ (w[i - 15] >> 3);
      uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19)
                    ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = hh[0], b = hh[1], c = hh[2], d = hh[3];
    e = hh[4], f = hh[5], g = hh[6], h = hh[7];
    for (i = 0; i < 64; i++) {
      uint32_t s1 = ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + s1 + ch + k256[i] + w[i];
      uint32_t s0 = ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      h = g, g = f, f = e, e = d + t1;
      d = c, c = b, b = a, a = t1 + s0 + maj;
    }
    hh[0] += a, hh[1] += b, hh[2] += c, hh[3] += d;
    hh[4] += e, hh[5] += f, hh[6] += g, hh[7] += h;
  }
}

#ifdef HAVE_SHA_NI
/* n 64-byte blocks with the SHA extensions: the state lives as ABEF and
** CDGH (what sha256rnds2 takes); each group of 4 rounds adds the next 4
** words of the schedule, W[j] = msg2(msg1(W[j-4], W[j-3])
** + W[j-2..j-1] shifted by one word, W[j-1]) */
__attribute__((target("sha,sse4.1,ssse3")))
static void blocks_ni(uint32_t hh[8], const unsigned char *p, size_t n) {
  const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL,
                                       0x0405060700010203ULL);
  __m128i s0, s1, t, m[4];
  t = _mm_loadu_si128((const __m128i *)(const void *)&hh[0]); /* DCBA */
  s1 = _mm_loadu_si128((const __m128i *)(const void *)&hh[4]); /* HGFE */
  t = _mm_shuffle_epi32(t, 0xB1);                   /* CDAB */
  s1 = _mm_shuffle_epi32(s1, 0x1B);                 /* EFGH */
  s0 = _mm_alignr_epi8(t, s1, 8);                   /* ABEF */
  s1 = _mm_blend_epi16(s1, t, 0xF0);                /* CDGH */
  for (; n > 0; n--, p += 64) {
    __m128i abef = s0, cdgh = s1, k;
    int j;
    for (j = 0; j < 16; j++) {
      if (j < 4) {
        m[j] = _mm_shuffle_epi8(
            _mm_loadu_si128((const __m128i *)(const void *)(p + 16 * j)),
            bswap);
      } else {
        __m128i w4 = m[j & 3], w3 = m[(j + 1) & 3], w2 = m[(j + 2) & 3],
                w1 = m[(j + 3) & 3];
        m[j & 3] = _mm_sha256msg2_epu32(
            _mm_add_epi32(_mm_sha256msg1_epu32(w4, w3),
                          _mm_alignr_epi8(w1, w2, 4)),
            w1);
      }
      k = _mm_add_epi32(m[j & 3], _mm_loadu_si128(
                                      (const __m128i *)(const void *)&k256[4 * j]));
      s1 = _mm_sha256rnds2_epu32(s1, s0, k);
      s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(k, 0x0E));
    }
    s0 = _mm_add_epi32(s0, abef);
    s1 = _mm_add_epi32(s1, cdgh);
  }
  t = _mm_shuffle_epi32(s0, 0x1B);                  /* FEBA */
  s1 = _mm_shuffle_epi32(s1, 0xB1);                 /* DCHG */
  s0 = _mm_blend_epi16(t, s1, 0xF0);                /* DCBA */
  s1 = _mm_alignr_epi8(s1, t, 8);                   /* HGFE */
  _mm_storeu_si128((__m128i *)(void *)&hh[0], s0);
  _mm_storeu_si128((__m128i *)(void *)&hh[4], s1);
}
#endif

static int portable_forced;

void mastra__sha256_portable(int on) { portable_forced = on; }

#ifdef HAVE_SHA_NI
/* the CPU has SHA (CPUID 7.0:EBX bit 29), SSE4.1 and SSSE3 (1:ECX bits
** 19 and 9); asked of cpuid itself: clang 14's __builtin_cpu_supports
** knows no "sha" */
static int cpu_has_sha_ni(void) {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 19)) || !(c & (1u << 9)))
    return 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  return (b & (1u << 29)) != 0;
}
#endif

static void blocks(uint32_t hh[8], const unsigned char *p, size_t n) {
#ifdef HAVE_SHA_NI
  /* asked once (cpuid is a VM exit here); any thread may ask first */
  static atomic_int ni = -1;
  int have = atomic_load_explicit(&ni, memory_order_relaxed);
  if (have < 0) {
    have = cpu_has_sha_ni();
    atomic_store_explicit(&ni, have, memory_order_relaxed);
  }
  if (have && !portable_forced) {
    blocks_ni(hh, p, n);
    return;
  }
#endif
  blocks_portable(hh, p, n);
}

void mastra__sha256_init(mastra__sha256_ctx *c) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                 0xa54ff53a, 0x510e527f, 0x9b05688c,
                                 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, iv, sizeof iv);
  c->total = 0;
  c->nbuf = 0;
}

/* whole blocks straight from the input; only a partial one is copied */
void mastra__sha256_update(mastra__sha256_ctx *c, const void *data,
                           size_t len) {
  const unsigned char *p = data;
  c->total += len;
  if (c->nbuf > 0) {
    size_t take = 64 - c->nbuf;
    if (take > len) take = len;
    memcpy(c->buf + c->nbuf, p, take);
    c->nbuf += take;
    p += take;
    len -= take;
    if (c->nbuf < 64) return;
    blocks(c->h, c->buf, 1);
    c->nbuf = 0;
  }
  if (len >= 64) {
    blocks(c->h, p, len / 64);
    p += len / 64 * 64;
    len %= 64;
  }
  memcpy(c->buf, p, len);
  c->nbuf = len;
}

void mastra__sha256_final(mastra__sha256_ctx *c,
                          unsigned char out[MASTRA__SHA256_LEN]) {
  uint64_t bits = c->total * 8;
  int i;
  c->buf[c->nbuf++] = 0x80;
  if (c->nbuf > 56) {
    memset(c->buf + c->nbuf, 0, 64 - c->nbuf);
    blocks(c->h, c->buf, 1);
    c->nbuf = 0;
  }
  memset(c->buf + c->nbuf, 0, 56 - c->nbuf);
  for (i = 0; i < 8; i++) c->buf[56 + i] = (unsigned char)(bits >> (56 - 8 * i));
  blocks(c->h, c->buf, 1);
  for (i = 0; i < 8; i++) {
    out[4 * i] = (unsigned char)(c->h[i] >> 24);
    out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
    out[4 * i + 2] = (unsigned char)(c->h[i] >> 8);
    out[4 * i + 3] = (unsigned char)c->h[i];
  }
}

void mastra__sha256_final_hex(mastra__sha256_ctx *c,
                              char out[2 * MASTRA__SHA256_LEN + 1]) {
  static const char hex[] = "0123456789abcdef";
  unsigned char d[MASTRA__SHA256_LEN];
  int i;
  mastra__sha256_final(c, d);
  for (i = 0; i < MASTRA__SHA256_LEN; i++) {
    out[2 * i] = hex[d[i] >> 4];
    out[2 * i + 1] = hex[d[i] & 15];
  }
  out[2 * MASTRA__SHA256_LEN] = '\0';
}

void mastra__sha256(const void *data, size_t len,
                    unsigned char out[MASTRA__SHA256_LEN]) {
  mastra__sha256_ctx c;
  mastra__sha256_init(&c);
  mastra__sha256_update(&c, data, len);
  mastra__sha256_final(&c, out);
}

void mastra__sha256_hex(const void *data, size_t len,
                        char out[2 * MASTRA__SHA256_LEN + 1]) {
  mastra__sha256_ctx c;
  mastra__sha256_init(&c);
  mastra__sha256_update(&c, data, len);
  mastra__sha256_final_hex(&c, out);
}
