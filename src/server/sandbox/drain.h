/*
** The end of a destroy (drain.c): after its teardown, a sandbox's last
** processes are killed and waited for on the loop until none is left on
** the host, bounded by srv->destroy_wait_ms (docs/platform.md, "Destroy").
** sandbox.c starts it and is told through the callback it passes;
** drivers report events with mp_sandbox_recheck (sandbox.h).
*/
#ifndef MP_DRAIN_H
#define MP_DRAIN_H

#include "sandbox/sandbox.h"

/* done(sb, rc, message): rc 0 nothing of sb is left; -1 some of it was
** still there at the deadline (message says what and what to do; the
** drain goes on, every second, without telling again), called once per
** start: from mp_drain_start itself when `now` and nothing is left,
** else on the loop. A drain that runs already keeps its deadline (done
** is replaced). */
typedef void (*mp_drain_done)(mp_sandbox *sb, int rc, const char *message);
void mp_drain_start(mp_sandbox *sb, mp_drain_done done, int now);
/* the record goes (the server's exit): stop watching */
void mp_drain_stop(mp_sandbox *sb);

#endif
