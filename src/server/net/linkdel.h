/*
** Link deletions off the server's loop, for the private networks (net.c).
** Deleting a network device waits for RCU grace periods in the kernel: a
** few ms on a quiet machine, tens of ms on a busy one. A thread of its own
** does them, in the order they were queued, through its own rtnetlink
** socket; the loop thread only queues (a short lock).
*/
#ifndef MP_LINKDEL_H
#define MP_LINKDEL_H

typedef struct mp_linkdel mp_linkdel;

/* takes the rtnetlink socket nl (of the namespace the links are in); NULL
** (nl closed) if the thread cannot start */
mp_linkdel *mp_linkdel_start(int nl);
/* queues the deletion of link `name` (a missing link is no error) */
void mp_linkdel_queue(mp_linkdel *d, const char *name);
/* nonzero while `name` is queued or being deleted */
int mp_linkdel_pending(mp_linkdel *d, const char *name);
/* waits until every queued deletion is done (shutdown and tests) */
void mp_linkdel_flush(mp_linkdel *d);
/* drain: do what is queued first (else drop it); then ends the thread,
** closes the socket and frees d */
void mp_linkdel_stop(mp_linkdel *d, int drain);

#endif
