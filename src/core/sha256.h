/*
** SHA-256 (FIPS 180-4). The bucket store of mastra-platform names each
** object file by the SHA-256 of its key.
*/
#ifndef MASTRA_SHA256_H
#define MASTRA_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define MASTRA__SHA256_LEN 32

typedef struct mastra__sha256_ctx {
  uint32_t h[8];
  uint64_t total;          /* bytes hashed so far */
  unsigned char buf[64];
  size_t nbuf;
} mastra__sha256_ctx;

void mastra__sha256_init(mastra__sha256_ctx *c);
void mastra__sha256_update(mastra__sha256_ctx *c, const void *data,
                           size_t len);
void mastra__sha256_final(mastra__sha256_ctx *c,
                          unsigned char out[MASTRA__SHA256_LEN]);
/* one shot, as 64 lowercase hex digits and a NUL */
void mastra__sha256_hex(const void *data, size_t len,
                        char out[2 * MASTRA__SHA256_LEN + 1]);

#endif
