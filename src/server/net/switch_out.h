/*
** The switch's way out (switch_out.c; docs/platform.md, "Networks"): run
** in the switch network namespace (by the server with root, between its
** unshare and its return to the host's namespace; without root by the
** holder child of net.c, in the server's user namespace U), it makes the
** descriptors through which the server's egress proxy (egress.c) receives
** every TCP connection and UDP datagram that a sandbox sends out, and the
** nftables table that hands them over (TPROXY). Startup only: it waits on
** `nft`.
*/
#ifndef MP_SWITCH_OUT_H
#define MP_SWITCH_OUT_H

#include <stddef.h>

/* the ports, in the switch only, of the transparent sockets */
#define MP_SWITCH_OUT_PORT 1
/* the mark of what TPROXY takes, and the routing table that delivers it
** locally (net.c makes the rule and the route) */
#define MP_SWITCH_OUT_MARK 0x6d70u
#define MP_SWITCH_OUT_TABLE 100

/* fds[0]: a TCP listener, fds[1]: a UDP socket (both IP_TRANSPARENT, bound
** to 0.0.0.0:MP_SWITCH_OUT_PORT, non-blocking, close-on-exec; the UDP one
** reports each datagram's original destination, IP_RECVORIGDSTADDR),
** fds[2]: a raw socket (IPPROTO_RAW) that sends the answers of UDP
** destinations and ICMP refusals from any source. Then the nftables table
** (its text in dir/switch.nft): packets from sandbox links (mpe-*) and
** bridges (mpb-*) that are not for the private subnets go to them, with a
** reverse-path check (no spoofed source), everything else from a sandbox
** is dropped. 0, or -1 with err. */
int mp_switch_out_prepare(const char *dir, int fds[3], char *err, size_t errlen);

#endif
