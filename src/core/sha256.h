/*
** SHA-256 (FIPS 180-4). The bucket store of mastra-platform names each
** object file by the SHA-256 of its key; an exec's fingerprint is the
** SHA-256 of its request (execs.c), fed in pieces. Where the CPU has the
** SHA extensions (x86-64 SHA-NI, checked at run time), the blocks go
** through them: an exec request of 1 MB is hashed on the server's loop.
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
/* final, as 64 lowercase hex digits and a NUL */
void mastra__sha256_final_hex(mastra__sha256_ctx *c,
                              char out[2 * MASTRA__SHA256_LEN + 1]);

/* one shot */
void mastra__sha256(const void *data, size_t len,
                    unsigned char out[MASTRA__SHA256_LEN]);
/* one shot, as 64 lowercase hex digits and a NUL */
void mastra__sha256_hex(const void *data, size_t len,
                        char out[2 * MASTRA__SHA256_LEN + 1]);

/* For the tests: 1 to use the portable blocks even where the SHA
** extensions are (0: back to the default). */
void mastra__sha256_portable(int on);

#endif
