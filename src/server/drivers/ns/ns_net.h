/*
** The networks of a `namespaces` sandbox (ns_net.c): what its keeper's "N"
** line joins (a PRIVATE sandbox: its environment's network, net.c; an
** ISOLATED one with egress: its own link to the switch's way out), its box
** in the egress proxy (egress.h) with the sandbox's log, and the leave.
** driver_ns.c calls these on the loop; mp_ns_host (ns_host.c) holds the
** net module and the proxy.
*/
#ifndef MP_NS_NET_H
#define MP_NS_NET_H

#include <stddef.h>

#include "drivers/ns/ns_box.h"

/* the keeper's RESOLV argument: the sandboxes' resolv.conf with egress,
** else "-" */
const char *mp_ns_net_resolv(void);
/* 1 when a sandbox of this network says "N" (PRIVATE, or egress) */
int mp_ns_net_joins(const char *network);
/* b joins (sb NULL: a warm box, ISOLATED; named later by mp_ns_net_name)
** through netns_fd and, without root, peer_nl (an rtnetlink socket made
** in it, or -1). 0, or -1 with err. */
int mp_ns_net_join(mp_sandbox *sb, ns_box *b, int netns_fd, int peer_nl, char *err,
                   size_t errlen);
/* b's egress box gets sb's id and log file (a warm box taken) */
void mp_ns_net_name(mp_sandbox *sb, ns_box *b);
/* leaves whatever b joined (sb NULL: a warm box) */
void mp_ns_net_leave(mp_sandbox *sb, ns_box *b);

/* the driver's `egress_narrow` (sandbox.h) */
int mp_ns_net_narrow(mp_sandbox *sb, const char *allow, const char *deny, char *err,
                     size_t errlen);
/* the driver's `egress` (sandbox.h): its counts and log */
int mp_ns_net_json(mp_sandbox *sb, cJSON *o, int entries);

#endif
