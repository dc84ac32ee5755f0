/*
** SHA-1 (FIPS 180-4) and base64 (RFC 4648), for the WebSocket handshake:
** Sec-WebSocket-Accept = base64(SHA-1(key + the RFC 6455 GUID)).
** SHA-1 is used here for that handshake only, never as a security hash.
*/
#ifndef MASTRA_HASH_H
#define MASTRA_HASH_H

#include <stddef.h>
#include <stdint.h>

#define MASTRA__SHA1_LEN 20
/* bytes base64 needs for n input bytes, without the terminating NUL */
#define MASTRA__BASE64_LEN(n) ((((n) + 2) / 3) * 4)

typedef struct mastra__sha1_ctx {
  uint32_t h[5];
  uint64_t total;          /* bytes hashed so far */
  unsigned char buf[64];
  size_t nbuf;
} mastra__sha1_ctx;

void mastra__sha1_init(mastra__sha1_ctx *c);
void mastra__sha1_update(mastra__sha1_ctx *c, const void *data, size_t len);
void mastra__sha1_final(mastra__sha1_ctx *c,
                        unsigned char out[MASTRA__SHA1_LEN]);
/* one shot */
void mastra__sha1(const void *data, size_t len,
                  unsigned char out[MASTRA__SHA1_LEN]);

/* Standard alphabet with '=' padding. `out` needs MASTRA__BASE64_LEN(len)
** + 1 bytes; it is NUL-terminated. Returns the length written. */
size_t mastra__base64_encode(const void *in, size_t len, char *out);

/* The Sec-WebSocket-Accept value for a Sec-WebSocket-Key: 28 characters
** and a NUL. */
void mastra__ws_accept_key(const char *client_key, char out[29]);

#endif
