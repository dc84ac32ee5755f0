/*
** Comma-separated header values (the lists of RFC 9110 section 5.6.1), as
** Connection, Upgrade and Sec-WebSocket-Protocol carry them: parsed the
** same way by the WebSocket client (ws_client.c) and by the exec WebSocket
** of mastra-platform.
*/
#ifndef MASTRA_HTTP_TOKENS_H
#define MASTRA_HTTP_TOKENS_H

#include <stddef.h>

/* The next element of the list [*pos, end): empty elements are skipped,
** and the blanks (space, tab) around each element are not part of it.
** Returns 1 with *tok and *len set (and *pos moved past the element), or
** 0 at the end of the list. */
int mastra__list_next(const char **pos, const char *end, const char **tok,
                      size_t *len);

/* Whether the list v[0..vlen) holds token (ASCII case-insensitive). */
int mastra__list_has(const char *v, size_t vlen, const char *token);

#endif
