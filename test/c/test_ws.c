/*
** Tests of src/core/hash.h: SHA-1 (FIPS 180-4 / RFC 3174 vectors), base64
** (RFC 4648 vectors) and the WebSocket accept key (RFC 6455 section 1.3);
** of src/core/sha256.h: SHA-256 (FIPS 180-4 vectors; the SHA extensions'
** blocks against the portable ones, fed in pieces).
** No framework: the last line of stdout is "N passed, N failed", and the
** exit status is 1 on a failure.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "sha256.h"

#include "check.h"

static void hex(const unsigned char *md, char out[2 * MASTRA__SHA1_LEN + 1]) {
  static const char digits[] = "0123456789abcdef";
  int i;
  for (i = 0; i < MASTRA__SHA1_LEN; i++) {
    out[2 * i] = digits[md[i] >> 4];
    out[2 * i + 1] = digits[md[i] & 15];
  }
  out[2 * MASTRA__SHA1_LEN] = '\0';
}

static int sha1_is(const void *data, size_t len, const char *want) {
  unsigned char md[MASTRA__SHA1_LEN];
  char got[2 * MASTRA__SHA1_LEN + 1];
  mastra__sha1(data, len, md);
  hex(md, got);
  if (strcmp(got, want) != 0) {
    fprintf(stderr, "sha1 of %zu bytes: got %s, want %s\n", len, got, want);
    return 0;
  }
  return 1;
}

/* the same data fed in pieces of `step` bytes */
static int sha1_chunked_is(const void *data, size_t len, size_t step,
                           const char *want) {
  const unsigned char *p = data;
  unsigned char md[MASTRA__SHA1_LEN];
  char got[2 * MASTRA__SHA1_LEN + 1];
  mastra__sha1_ctx c;
  size_t off = 0;
  mastra__sha1_init(&c);
  while (off < len) {
    size_t n = len - off < step ? len - off : step;
    mastra__sha1_update(&c, p + off, n);
    off += n;
  }
  mastra__sha1_final(&c, md);
  hex(md, got);
  if (strcmp(got, want) != 0) {
    fprintf(stderr, "sha1 of %zu bytes by %zu: got %s, want %s\n", len, step,
            got, want);
    return 0;
  }
  return 1;
}

static char *repeat(char ch, size_t n) {
  char *s = malloc(n + 1);
  if (s == NULL) abort();
  memset(s, ch, n);
  s[n] = '\0';
  return s;
}

static void test_sha1(void) {
  static const char two_blocks[] =
      "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  static const char fox[] = "The quick brown fox jumps over the lazy dog";
  static const size_t steps[] = {1, 3, 7, 63, 64, 65, 1000};
  char *a;
  size_t i;

  CHECK(sha1_is("", 0, "da39a3ee5e6b4b0d3255bfef95601890afd80709"));
  CHECK(sha1_is("abc", 3, "a9993e364706816aba3e25717850c26c9cd0d89d"));
  CHECK(sha1_is(two_blocks, sizeof two_blocks - 1,
                "84983e441c3bd26ebaae4aa1f95129e5e54670f1"));
  CHECK(sha1_is(fox, sizeof fox - 1,
                "2fd4e1c67a2d28fced849ee1bb76e7391b93eb12"));

  /* padding boundaries: 55 fits one block, 56 needs a second, 64 is full */
  a = repeat('a', 64);
  CHECK(sha1_is(a, 55, "c1c8bbdc22796e28c0e15163d20899b65621d65a"));
  CHECK(sha1_is(a, 56, "c2db330f6083854c99d4b5bfb6e8f29f201be699"));
  CHECK(sha1_is(a, 64, "0098ba824b5c16427bd7a1122a5a442a25ec644d"));
  free(a);

  /* a million 'a' (FIPS 180 / RFC 3174 test 3), whole and in pieces */
  a = repeat('a', 1000000);
  CHECK(sha1_is(a, 1000000, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"));
  for (i = 0; i < sizeof steps / sizeof steps[0]; i++)
    CHECK(sha1_chunked_is(a, 1000000, steps[i],
                          "34aa973cd4c4daa4f61eeb2bdbad27316534016f"));
  free(a);

  CHECK(sha1_chunked_is(two_blocks, sizeof two_blocks - 1, 5,
                        "84983e441c3bd26ebaae4aa1f95129e5e54670f1"));
}

static int b64_is(const void *in, size_t len, const char *want) {
  char out[64];
  size_t n;
  memset(out, 'x', sizeof out);
  n = mastra__base64_encode(in, len, out);
  if (n != strlen(want) || strcmp(out, want) != 0
      || n != MASTRA__BASE64_LEN(len)) {
    fprintf(stderr, "base64 of %zu bytes: got \"%s\" (%zu), want \"%s\"\n",
            len, out, n, want);
    return 0;
  }
  return 1;
}

static void test_base64(void) {
  static const unsigned char bin[] = {0xfb, 0xff, 0xbf, 0x00, 0x10, 0x83};
  static const unsigned char nonce[] = {1, 2, 3, 4, 5, 6, 7, 8,
                                        9, 10, 11, 12, 13, 14, 15, 16};
  /* RFC 4648 section 10 */
  CHECK(b64_is("", 0, ""));
  CHECK(b64_is("f", 1, "Zg=="));
  CHECK(b64_is("fo", 2, "Zm8="));
  CHECK(b64_is("foo", 3, "Zm9v"));
  CHECK(b64_is("foob", 4, "Zm9vYg=="));
  CHECK(b64_is("fooba", 5, "Zm9vYmE="));
  CHECK(b64_is("foobar", 6, "Zm9vYmFy"));
  /* the last two characters of the alphabet, and NUL bytes */
  CHECK(b64_is(bin, 3, "+/+/"));
  CHECK(b64_is(bin, 6, "+/+/ABCD"));
  CHECK(b64_is(bin + 3, 1, "AA=="));
  /* a 16-byte key is 24 characters ending in "==" */
  CHECK(b64_is(nonce, 16, "AQIDBAUGBwgJCgsMDQ4PEA=="));
}

static void test_accept_key(void) {
  char out[29];
  memset(out, 'x', sizeof out);
  /* RFC 6455 section 1.3 (the value "s3pPLMBiTxaWbQ+Azbpx+VKwXs4=" quoted
  ** in some places is wrong: Python's hashlib agrees with the RFC) */
  mastra__ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out);
  CHECK(strcmp(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=") == 0);
  CHECK(strcmp(out, "s3pPLMBiTxaWbQ+Azbpx+VKwXs4=") != 0);
  CHECK(strlen(out) == 28);
  /* a second key, checked against Python's hashlib + base64 */
  mastra__ws_accept_key("x3JJHMbDL1EzLkh9GBhXDw==", out);
  CHECK(strcmp(out, "HSmrc0sMlYUkAGmm5OPpG2HaGWk=") == 0);
  mastra__ws_accept_key("AQIDBAUGBwgJCgsMDQ4PEA==", out);
  CHECK(strcmp(out, "C/0nmHhBztSRGR1CwL6Tf4ZjwpY=") == 0);
}

static int sha256_is(const void *data, size_t len, const char *want) {
  char got[2 * MASTRA__SHA256_LEN + 1];
  mastra__sha256_hex(data, len, got);
  if (strcmp(got, want) != 0) {
    fprintf(stderr, "sha256 of %zu bytes: got %s, want %s\n", len, got, want);
    return 0;
  }
  return 1;
}

/* the data in pieces of step bytes (portable blocks or the default) */
static void sha256_pieces(const unsigned char *p, size_t len, size_t step,
                          int portable, char out[2 * MASTRA__SHA256_LEN + 1]) {
  mastra__sha256_ctx c;
  size_t off = 0;
  mastra__sha256_portable(portable);
  mastra__sha256_init(&c);
  while (off < len) {
    size_t n = len - off < step ? len - off : step;
    mastra__sha256_update(&c, p + off, n);
    off += n;
  }
  mastra__sha256_final_hex(&c, out);
  mastra__sha256_portable(0);
}

static void test_sha256(void) {
  static const char *const vec[][2] = {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc",
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
       "jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"}};
  static const size_t steps[] = {1, 3, 63, 64, 65, 1000, 1 << 20};
  unsigned char *big = malloc(1000000);
  size_t i, j, len;
  int portable;
  for (portable = 0; portable < 2; portable++) {
    mastra__sha256_portable(portable);
    for (i = 0; i < sizeof vec / sizeof vec[0]; i++)
      CHECK(sha256_is(vec[i][0], strlen(vec[i][0]), vec[i][1]));
    if (big != NULL) {
      memset(big, 'a', 1000000);
      CHECK(sha256_is(big, 1000000, "cdc76e5c9914fb9281a1c7e284d73e67"
                                    "f1809a48a497200e046d39ccc7112cd0"));
    }
    mastra__sha256_portable(0);
  }
  if (big == NULL) return;
  /* every length around the block and padding edges, and long ones, in
  ** pieces: the default blocks (the extensions where the CPU has them)
  ** agree with the portable ones */
  for (i = 0; i < 1000000; i++) big[i] = (unsigned char)(i * 2654435761u >> 13);
  for (len = 0; len < 1000000; len = len < 200 ? len + 1 : len * 3 + 7) {
    for (j = 0; j < sizeof steps / sizeof steps[0]; j++) {
      char a[2 * MASTRA__SHA256_LEN + 1], b[2 * MASTRA__SHA256_LEN + 1];
      sha256_pieces(big, len, steps[j], 0, a);
      sha256_pieces(big, len, steps[j], 1, b);
      if (!CHECK(strcmp(a, b) == 0))
        fprintf(stderr, "sha256 of %zu bytes by %zu: %s, portable %s\n", len,
                steps[j], a, b);
    }
  }
  free(big);
}

int main(void) {
  test_sha1();
  test_base64();
  test_accept_key();
  test_sha256();
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}
