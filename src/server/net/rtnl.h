/*
** rtnetlink for the private networks of the namespaces driver (net.c).
** Each function talks to the namespace its socket `fd` was created in; the
** int ones return 0 (an index for mp_rtnl_link_index) or a negative errno.
*/
#ifndef MP_RTNL_H
#define MP_RTNL_H

#include <netinet/in.h>

/* a NETLINK_ROUTE socket (close-on-exec) in the caller's namespace, or -1 */
int mp_rtnl_open(void);
/* the index of link `name` (-ENODEV when there is none) */
int mp_rtnl_link_index(int fd, const char *name);
int mp_rtnl_link_del(int fd, const char *name);
int mp_rtnl_link_up(int fd, int index);
/* no IPv6 link-local address on the link (before it goes up) */
int mp_rtnl_no_ipv6_addr(int fd, int index);
int mp_rtnl_bridge_add(int fd, const char *name);
/* a veth pair: `name` here, enslaved to the bridge `master`, and its peer
** `peer` made directly in the namespace of descriptor peer_ns (down) */
int mp_rtnl_veth_add(int fd, const char *name, int master, const char *peer,
                     int peer_ns);
/* a/prefix on the link, with its broadcast address */
int mp_rtnl_addr_add(int fd, int index, struct in_addr a, int prefix);
/* the default route through gw */
int mp_rtnl_route_default(int fd, struct in_addr gw);
/* local on the link with its peer at the other end (/32 each) */
int mp_rtnl_addr_add_peer(int fd, int index, struct in_addr local, struct in_addr peer);
/* `local 0.0.0.0/0 dev lo table T`: every address is local in table T */
int mp_rtnl_route_local_all(int fd, int lo_index, int table);
/* `ip rule add fwmark MARK lookup TABLE` */
int mp_rtnl_rule_fwmark(int fd, unsigned mark, int table);
/* deletes every link whose name starts with p1 or p2 (p2 may be NULL) */
void mp_rtnl_delete_prefixed(int fd, const char *p1, const char *p2);
/* used[x] = 1 for each IPv4 address a.b.x.y of the namespace in the /16 of
** base (a.b.0.0) */
void mp_rtnl_addrs_in_16(int fd, struct in_addr base, unsigned char used[256]);

#endif
