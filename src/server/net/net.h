/*
** The PRIVATE networks of the namespaces driver (docs/platform.md,
** "Networks"). One bridge per environment, one veth per member, an address
** from the environment's own subnet and a hosts file per environment.
**
** The bridges and the host ends of the veths live in a network namespace
** of their own (the "switch"), which the server creates at mp_net_open and
** holds by descriptor: the host's network is not involved at all, and a
** server that dies takes them with it (the kernel removes a namespace, its
** bridges and veths, and the veths' peers, when its last reference goes).
** With egress (the default) the switch has a way out that is no route:
** its nftables table (switch_out.c) hands every TCP connection and UDP
** datagram a sandbox sends out to transparent sockets, which the server's
** egress proxy (egress.c) reads in the host's namespace; each bridge gets
** its subnet's first address (the gateway) and members a default route
** through it; an ISOLATED sandbox gets a veth of its own (mp_net_out_join),
** 10.232.x.y with the switch at 10.232.0.1 at its other end. Forwarding
** stays off in the switch: nothing is routed between links. Without root
** (mp_net_open_user) the switch belongs to a user namespace of the server's
** own: below.
**
** A join is a few rtnetlink round trips (quick, synchronous kernel
** answers), safe on the server's loop. Deleting a link waits for the kernel
** (RCU grace periods: ms, tens of ms on a busy machine), so a leave only
** queues its deletions for a thread of net.c's own (linkdel.c). mp_net_open,
** mp_net_sweep and mp_net_close may wait (on `nft` with egress, on the
** deletions): call them at startup and shutdown, not on the loop.
**
** The descriptors net.c holds are close-on-exec; a child the server forks
** and that does not exec should close them (close_range), or it holds the
** switch namespace alive after the server is gone.
*/
#ifndef MP_NET_H
#define MP_NET_H

#include <stddef.h>
#include <stdint.h>

typedef struct mp_net mp_net;

/* the subnets of the environments: 10.231.N.0/24, N = 0..255 */
#define MP_NET_PREFIX "10.231"
/* link names: bridges mpb-<tag><N>, host ends of veths mpv-<tag><counter>
** (<tag>: 5 hex digits per data directory, recorded in state_dir/state) */
#define MP_NET_BRIDGE_PREFIX "mpb-"
#define MP_NET_VETH_PREFIX "mpv-"
/* the links of ISOLATED sandboxes to the way out: mpe-<tag><4 hex>, the
** sandbox at 10.232.x.y, the switch's end at MP_NET_GATEWAY; sandboxes'
** /etc/resolv.conf names it (mp_net_resolv_path) */
#define MP_NET_EGRESS_VETH_PREFIX "mpe-"
#define MP_NET_EGRESS_PREFIX "10.232"
#define MP_NET_GATEWAY "10.232.0.1"

/* state_dir: <data>/net (created); egress: nonzero for the switch's way out
** (--egress on; where it cannot be made, mp_net_out_error says why and the
** networks work without it). Sweeps what a previous server on state_dir
** left first. */
mp_net *mp_net_open(const char *state_dir, int egress, char *err, size_t errlen);
/* Without root (the namespaces driver in unprivileged user namespaces,
** ns_user.c): the switch is the network namespace of a user namespace U of
** the server's own (root in it: the server's uid and gid), made by a child
** that sends their descriptors, and two rtnetlink sockets of the switch,
** and exits. The server uses those sockets (the kernel checks the opener's
** capabilities, U's, and the sender's: the server's uid owns U, so it has
** every capability in U and in the user namespaces under it). Sandboxes'
** user namespaces must be made under U (their keepers setns() into
** mp_net_userns first), and a join needs an rtnetlink socket made inside
** the sandbox (mp_net_join_nl). The way out is made by the same child, in
** the switch, and sent with them. */
mp_net *mp_net_open_user(const char *state_dir, int egress, char *err, size_t errlen);
/* U (without root), or -1 */
int mp_net_userns(const mp_net *net);
/* removes every bridge and veth it made (without egress: by dropping the
** switch namespace, which the kernel then dismantles), the hosts files and
** the NAT rules */
void mp_net_close(mp_net *net);
/* After a kill -9: removes what a previous server on this data dir left
** (bridges, veths, NAT rules, hosts files), from what state_dir records. */
void mp_net_sweep(const char *state_dir);
/* Attach the network namespace `netns_fd` (an open /proc/<pid>/ns/net) to
** the private network of environment `env` as host name `name` (the sandbox
** id): creates the environment's bridge on first use, a veth pair whose peer
** (eth0) is created in netns_fd and configured there (address, up, lo up,
** the subnet's route; with egress a default route), and adds "addr name" to
** the environment's hosts file. addr receives the dotted IPv4 address.
** Returns 0, or -1 with a message in err. */
int mp_net_join(mp_net *net, const char *env, const char *name, int netns_fd,
                char *addr, size_t addrlen, char *err, size_t errlen);
/* mp_net_join, configuring the member's side through peer_nl, an rtnetlink
** socket made in netns_fd (by a process that may: without root the
** server cannot enter a sandbox's namespace), or -1: one made by entering
** netns_fd (root) */
int mp_net_join_nl(mp_net *net, const char *env, const char *name, int netns_fd,
                   int peer_nl, char *addr, size_t addrlen, char *err, size_t errlen);
/* removes the member's hosts line at once and queues the deletion of its
** veth (its eth0 goes with it), and of the bridge with the last member.
** Unknown names are ignored. */
void mp_net_leave(mp_net *net, const char *env, const char *name);
/* The environment's hosts file (localhost lines + one line per member),
** created on first use and updated in place (same inode, so a read-only bind
** mount at /etc/hosts in each sandbox sees new members). NULL when env is
** not a valid environment name (empty) or the file cannot be created. */
const char *mp_net_hosts_path(mp_net *net, const char *env);

/* the switch's way out: 1 and its transparent TCP listener, UDP socket and
** raw socket (switch_out.h; owned by net), or 0 when there is none */
int mp_net_out_fds(const mp_net *net, int fds[3]);
/* why there is no way out ("" when there is one) */
const char *mp_net_out_error(const mp_net *net);
/* the sandboxes' resolv.conf (with a way out), or NULL */
const char *mp_net_resolv_path(mp_net *net);
/* An ISOLATED sandbox's link to the way out: a veth from the switch whose
** peer is eth0 in netns_fd (configured through peer_nl as mp_net_join_nl
** does), its address *addr (host order, 10.232.x.y). 0, or -1 with err. */
int mp_net_out_join(mp_net *net, int netns_fd, int peer_nl, uint32_t *addr, char *err,
                    size_t errlen);
/* queues the deletion of that link (unknown addresses are ignored) */
void mp_net_out_leave(mp_net *net, uint32_t addr);

/* For tests and diagnostics: a descriptor of the network namespace that
** holds the bridges (the switch, or the host's with egress); owned by net. */
int mp_net_links_netns(const mp_net *net);
/* waits until the queued deletions are done (tests; blocks) */
void mp_net_flush(mp_net *net);

#endif
