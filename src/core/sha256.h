/*
** SHA-256 (FIPS 180-4). The bucket store of mastra-platform names each
** object file by the SHA-256 of its key.
*/
#ifndef MASTRA_SHA256_H
#define MASTRA_SHA256_H

#include <stddef.h>

#define MASTRA__SHA256_LEN 32

/* one shot */
void mastra__sha256(const void *data, size_t len,
                    unsigned char out[MASTRA__SHA256_LEN]);
/* one shot, as 64 lowercase hex digits and a NUL */
void mastra__sha256_hex(const void *data, size_t len,
                        char out[2 * MASTRA__SHA256_LEN + 1]);

#endif
