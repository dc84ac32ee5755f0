/*
** The egress proxy (egress.c; docs/platform.md, "Networks", "Egress"): on
** the server's loop, in the host's network namespace, it takes every TCP
** connection and UDP datagram that a sandbox sends out (handed over by the
** switch's transparent sockets, switch_out.h), decides by the policy
** (egress_rules.h: the refused ranges, the host's own addresses, the
** server's --egress-allow/--egress-deny and the sandbox's own narrowing,
** by address and by the name of the TLS SNI, the HTTP Host or a DNS
** answer), opens the connection itself, copies the bytes both ways
** (non-blocking, bounded buffers) and logs each one (egress_log.h).
** DNS (UDP port 53 to any address) goes to the upstream resolver.
** A refusal is at once: a TCP reset, an ICMP error, a DNS REFUSED.
*/
#ifndef MP_EGRESS_H
#define MP_EGRESS_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include "loop.h"
#include "net/egress_rules.h"

typedef struct mp_egress mp_egress;
typedef struct mp_egress_box mp_egress_box;

/* most TCP connections and UDP flows of one sandbox at once */
#define MP_EGRESS_CONN_MAX 256
#define MP_EGRESS_FLOW_MAX 64

typedef struct mp_egress_config {
  mp_egress_rules allow; /* empty: everything not denied */
  mp_egress_rules deny;
  mp_egress_rules open;  /* refused ranges the operator opens (CIDRs) */
  struct sockaddr_in dns; /* the upstream resolver (sin_port 0: none) */
  int conn_max;           /* per sandbox (0: MP_EGRESS_CONN_MAX) */
} mp_egress_config;

/* fds: the switch's TCP listener, UDP socket and raw socket (borrowed: the
** net module owns them). cfg is copied by reference: it must outlive eg. */
mp_egress *mp_egress_open(mastra__loop *loop, const int fds[3], const mp_egress_config *cfg);
/* stops everything: every connection and flow closed, every box freed */
void mp_egress_close(mp_egress *eg);

/* a sandbox's address on the switch (host order): its box, which gets a
** name later (a pooled sandbox) */
mp_egress_box *mp_egress_box_add(mp_egress *eg, uint32_t addr);
/* the sandbox's id, and the file of its log on disk (NULL: memory only);
** an existing log there is read back (a server that restarted) */
void mp_egress_box_name(mp_egress_box *b, const char *id, const char *log_path);
/* the sandbox's own rules at create (comma-separated, as the flags): they
** only narrow the server's. 0, or -1 with err. */
int mp_egress_box_narrow(mp_egress_box *b, const char *allow, const char *deny, char *err,
                         size_t errlen);
/* closes its connections and flows (logged) and frees it */
void mp_egress_box_remove(mp_egress_box *b);
uint32_t mp_egress_box_addr(const mp_egress_box *b);
/* its counts into o ({connections, allowed, refused, open, bytesOut,
** bytesIn, dnsQueries}); with entries, its log too ("entries": newest last,
** at most `entries`) */
void mp_egress_box_json(const mp_egress_box *b, cJSON *o, int entries);
/* bytes the box holds now (bench: the memory of a sandbox's egress) */
size_t mp_egress_box_memory(const mp_egress_box *b);

#endif
