/*
** libFuzzer harness of the server's WebSocket reader
** (src/server/http/ws_reader.h). The first byte picks the size of the
** pieces the rest is fed in (1 to 256 bytes); the rest is a client's byte
** stream. Properties, beside ASan and UBSan finding nothing:
**   - the events are the same fed in pieces as fed whole (one byte
**     stream, one meaning, wherever the reads cut it);
**   - a message is never longer than the limit, and text is UTF-8;
**   - an error is 1002, 1007 or 1009, and after a close or a 1002/1007
**     nothing more comes.
*/
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/ws_reader.h"

#define LIMIT 3000
#define MAX_EVENTS 4096

typedef struct {
  int kind;
  uint16_t code;
  size_t len;
  uint64_t sum; /* of the data, so that two runs compare cheaply */
} event;

static uint64_t sum(const unsigned char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  size_t i;
  for (i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

static size_t run(const uint8_t *data, size_t size, size_t piece, event *ev) {
  mp_wsr r;
  size_t off = 0, n = 0;
  int ended = 0;
  if (mp_wsr_init(&r, LIMIT) < 0) abort();
  for (;;) {
    mp_wsr_event e;
    int k;
    while ((k = mp_wsr_next(&r, &e)) != MP_WSR_NEED) {
      if (k < 0 || ended) abort(); /* no memory; or an event after the end */
      if (e.len > LIMIT) abort();
      if (k == MP_WSR_TEXT && !mp_wsr_utf8(e.data, e.len)) abort();
      if (k == MP_WSR_ERROR && e.code != 1002 && e.code != 1007 && e.code != 1009)
        abort();
      if (k == MP_WSR_CLOSE || (k == MP_WSR_ERROR && e.code != 1009)) ended = 1;
      if (n < MAX_EVENTS) {
        ev[n].kind = k;
        ev[n].code = e.code;
        ev[n].len = e.len;
        ev[n].sum = e.len ? sum(e.data, e.len) : 0;
      }
      n++;
    }
    if (off == size) break;
    {
      size_t room, k2 = size - off;
      unsigned char *space = mp_wsr_space(&r, &room);
      if (room == 0) abort();
      if (k2 > piece) k2 = piece;
      if (k2 > room) k2 = room;
      memcpy(space, data + off, k2);
      mp_wsr_filled(&r, k2);
      off += k2;
    }
  }
  mp_wsr_free(&r);
  return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static event a[MAX_EVENTS], b[MAX_EVENTS];
  size_t na, nb, i, piece;
  if (size < 1) return 0;
  piece = (size_t)data[0] % 256 + 1;
  data++;
  size--;
  na = run(data, size, MP_WSR_BUF, a);
  nb = run(data, size, piece, b);
  if (na != nb) abort();
  for (i = 0; i < na && i < MAX_EVENTS; i++)
    if (a[i].kind != b[i].kind || a[i].code != b[i].code || a[i].len != b[i].len
        || a[i].sum != b[i].sum)
      abort();
  return 0;
}
