/*
** The retained output of one stream of a command (lua/mastra/output.lua):
** the newest `max` bytes of what was appended, in one block, with the
** bytes dropped before them counted.
**
** Why in C: a command's kept output used to be the list of its chunks,
** joined once at the end. On the machines we run on, a page the kernel
** hands out for the first time costs more than the copy into it, and
** 256 MB kept touched 256 MB of fresh pages for the chunks and 256 MB
** more for the joined string. Here the chunks are copied into one block
** and can be collected at once (their memory is reused); a block of 2 MiB
** or more is its own mapping, advised for transparent huge pages (one
** fault per 2 MiB where the kernel has them) and grown with mremap (its
** bytes are never copied again).
**
** A buffer with a bound holds a block of at most twice the bound plus
** the last append (its bytes move to the block's start when they fill at
** most half of it). Dropping follows the rule of output.lua: the oldest bytes beyond `max`
** go, and then up to 3 more if they are UTF-8 continuation bytes, so that
** text keeps no tail of a cut character.
*/
#ifndef MASTRA_RETAINED_H
#define MASTRA_RETAINED_H

#include <stddef.h>
#include <stdint.h>

typedef struct mastra__retained {
  char *data;       /* the block: malloc'd, or mapped when big (retained.c) */
  size_t cap;       /* its size */
  size_t start;     /* offset of the oldest retained byte */
  size_t len;       /* retained bytes */
  size_t max;       /* bytes to keep; SIZE_MAX: everything */
  uint64_t dropped; /* bytes dropped, oldest first */
} mastra__retained;

/* An empty buffer that keeps the newest max bytes (SIZE_MAX: all). */
void mastra__retained_init(mastra__retained *r, size_t max);

/* Keep the n bytes at s, dropping the oldest beyond max. 0, or -1 when
** out of memory: then the oldest bytes that s pushed out are gone all the
** same, and s is counted as dropped. */
int mastra__retained_append(mastra__retained *r, const char *s, size_t n);

/* Free the block; the buffer is then empty (its counts stay). */
void mastra__retained_free(mastra__retained *r);

#endif
