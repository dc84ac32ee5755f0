/*
** rtnetlink for the private networks (net.c): links, addresses and routes
** of the namespace a socket was created in. rtnetlink answers a request
** synchronously (the acknowledgement is queued before send() returns), so
** each call is one quick round trip that waits on nothing but the kernel:
** safe on the server's loop. Every int function returns 0 (or an index),
** or a negative errno.
*/
#define _GNU_SOURCE
#include "net/rtnl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/fib_rules.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

/* {====== messages ====== */

typedef struct {
  union {
    struct nlmsghdr h;
    char buf[1024];
  } u;
  int bad;  /* did not fit */
  int dump; /* a dump request (NLM_F_DUMP overlaps NLM_F_EXCL: a flag of its own) */
} nlmsg;

static _Thread_local unsigned nl_seq; /* the deletion thread of net.c has its own */

static void msg_init(nlmsg *m, int type, int flags) {
  memset(m, 0, sizeof *m);
  m->u.h.nlmsg_len = NLMSG_LENGTH(0);
  m->u.h.nlmsg_type = (unsigned short)type;
  m->u.h.nlmsg_flags = (unsigned short)(NLM_F_REQUEST | flags);
  m->dump = flags == NLM_F_DUMP;
}

/* appends len bytes (data, or zeros) at the aligned end; the start or NULL */
static void *msg_put(nlmsg *m, const void *data, size_t len) {
  size_t at = NLMSG_ALIGN(m->u.h.nlmsg_len);
  if (m->bad || at + NLMSG_ALIGN(len) > sizeof m->u.buf) {
    m->bad = 1;
    return NULL;
  }
  if (data) memcpy(m->u.buf + at, data, len);
  m->u.h.nlmsg_len = (unsigned)(at + NLMSG_ALIGN(len));
  return m->u.buf + at;
}

static struct rtattr *msg_attr(nlmsg *m, int type, const void *data, size_t len) {
  struct rtattr *a = msg_put(m, NULL, RTA_SPACE(len));
  if (a == NULL) return NULL;
  a->rta_type = (unsigned short)type;
  a->rta_len = (unsigned short)RTA_LENGTH(len);
  if (len) memcpy(RTA_DATA(a), data, len);
  return a;
}

static void msg_str(nlmsg *m, int type, const char *s) {
  msg_attr(m, type, s, strlen(s) + 1);
}

static void msg_u32(nlmsg *m, int type, unsigned v) {
  msg_attr(m, type, &v, sizeof v);
}

static struct rtattr *msg_nest(nlmsg *m, int type) {
  return msg_attr(m, type, NULL, 0);
}

static void msg_end(nlmsg *m, struct rtattr *nest) {
  if (nest && !m->bad)
    nest->rta_len = (unsigned short)(m->u.buf + m->u.h.nlmsg_len - (char *)nest);
}

int mp_rtnl_open(void) {
  struct timeval tv = {5, 0}; /* the kernel answers at once: a guard only */
  int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (fd < 0) return -1;
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

typedef void (*nl_each)(struct nlmsghdr *h, void *ud);

/* Send m (acknowledged, or a dump when m has NLM_F_DUMP) and read the
** answers up to the acknowledgement or the dump's end; each (if not NULL)
** sees every other answer. 0, or a negative errno. */
static int nl_run(int fd, nlmsg *m, nl_each each, void *ud) {
  static _Thread_local union {
    struct nlmsghdr h;
    char buf[32768];
  } in;
  unsigned seq = ++nl_seq;
  if (m->bad) return -EMSGSIZE;
  if (!m->dump) m->u.h.nlmsg_flags |= NLM_F_ACK;
  m->u.h.nlmsg_seq = seq;
  if (send(fd, m->u.buf, m->u.h.nlmsg_len, 0) < 0) return -errno;
  for (;;) {
    ssize_t n = recv(fd, in.buf, sizeof in.buf, 0);
    struct nlmsghdr *h;
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (n == 0) return -EPIPE;
    for (h = &in.h; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
      if (h->nlmsg_seq != seq) continue;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr *e = NLMSG_DATA(h);
        return e->error;
      }
      if (h->nlmsg_type == NLMSG_DONE) return 0;
      if (each) each(h, ud);
    }
  }
}

/* }====== */

/* {====== links, addresses, routes ====== */

static const char *link_name(struct nlmsghdr *h) {
  struct ifinfomsg *ifi = NLMSG_DATA(h);
  int len = (int)IFLA_PAYLOAD(h);
  struct rtattr *a;
  for (a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len))
    if (a->rta_type == IFLA_IFNAME) return RTA_DATA(a);
  return NULL;
}

static void take_index(struct nlmsghdr *h, void *ud) {
  if (h->nlmsg_type == RTM_NEWLINK)
    *(int *)ud = ((struct ifinfomsg *)NLMSG_DATA(h))->ifi_index;
}

/* the index of link name, or a negative errno (-ENODEV) */
int mp_rtnl_link_index(int fd, const char *name) {
  nlmsg m;
  struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
  int index = 0, rc;
  msg_init(&m, RTM_GETLINK, 0);
  msg_put(&m, &ifi, sizeof ifi);
  msg_str(&m, IFLA_IFNAME, name);
  rc = nl_run(fd, &m, take_index, &index);
  if (rc < 0) return rc;
  return index > 0 ? index : -ENODEV;
}

int mp_rtnl_link_del(int fd, const char *name) {
  nlmsg m;
  struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
  msg_init(&m, RTM_DELLINK, 0);
  msg_put(&m, &ifi, sizeof ifi);
  msg_str(&m, IFLA_IFNAME, name);
  return nl_run(fd, &m, NULL, NULL);
}

int mp_rtnl_link_up(int fd, int index) {
  nlmsg m;
  struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = index,
                          .ifi_flags = IFF_UP, .ifi_change = IFF_UP};
  msg_init(&m, RTM_NEWLINK, 0);
  msg_put(&m, &ifi, sizeof ifi);
  return nl_run(fd, &m, NULL, NULL);
}

/* no IPv6 link-local address on a link of ours (set before it goes up) */
int mp_rtnl_no_ipv6_addr(int fd, int index) {
  nlmsg m;
  struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_index = index};
  struct rtattr *spec, *inet6;
  unsigned char mode = IN6_ADDR_GEN_MODE_NONE;
  msg_init(&m, RTM_NEWLINK, 0);
  msg_put(&m, &ifi, sizeof ifi);
  spec = msg_nest(&m, IFLA_AF_SPEC);
  inet6 = msg_nest(&m, AF_INET6);
  msg_attr(&m, IFLA_INET6_ADDR_GEN_MODE, &mode, sizeof mode);
  msg_end(&m, inet6);
  msg_end(&m, spec);
  return nl_run(fd, &m, NULL, NULL);
}

int mp_rtnl_bridge_add(int fd, const char *name) {
  nlmsg m;
  struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
  struct rtattr *info;
  msg_init(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  msg_put(&m, &ifi, sizeof ifi);
  msg_str(&m, IFLA_IFNAME, name);
  info = msg_nest(&m, IFLA_LINKINFO);
  msg_str(&m, IFLA_INFO_KIND, "bridge");
  msg_end(&m, info);
  return nl_run(fd, &m, NULL, NULL);
}

/* a veth pair: `name` in fd's namespace, enslaved to master, and its peer
** `peer` created directly in the namespace peer_ns (down) */
int mp_rtnl_veth_add(int fd, const char *name, int master, const char *peer,
                    int peer_ns) {
  nlmsg m;
  struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
  struct ifinfomsg pifi = {.ifi_family = AF_UNSPEC}; /* up later: not before the pair
                                                     ** is whole (ENOTCONN) */
  struct rtattr *info, *data, *p;
  msg_init(&m, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  msg_put(&m, &ifi, sizeof ifi);
  msg_str(&m, IFLA_IFNAME, name);
  msg_u32(&m, IFLA_MASTER, (unsigned)master);
  info = msg_nest(&m, IFLA_LINKINFO);
  msg_str(&m, IFLA_INFO_KIND, "veth");
  data = msg_nest(&m, IFLA_INFO_DATA);
  p = msg_nest(&m, VETH_INFO_PEER);
  msg_put(&m, &pifi, sizeof pifi);
  msg_str(&m, IFLA_IFNAME, peer);
  msg_u32(&m, IFLA_NET_NS_FD, (unsigned)peer_ns);
  msg_end(&m, p);
  msg_end(&m, data);
  msg_end(&m, info);
  return nl_run(fd, &m, NULL, NULL);
}

int mp_rtnl_addr_add(int fd, int index, struct in_addr a, int prefix) {
  nlmsg m;
  struct ifaddrmsg ifa = {.ifa_family = AF_INET, .ifa_prefixlen = (unsigned char)prefix,
                          .ifa_scope = RT_SCOPE_UNIVERSE, .ifa_index = (unsigned)index};
  struct in_addr bcast = a;
  bcast.s_addr |= htonl(0xffffffffu >> prefix);
  msg_init(&m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
  msg_put(&m, &ifa, sizeof ifa);
  msg_attr(&m, IFA_LOCAL, &a, sizeof a);
  msg_attr(&m, IFA_ADDRESS, &a, sizeof a);
  msg_attr(&m, IFA_BROADCAST, &bcast, sizeof bcast);
  return nl_run(fd, &m, NULL, NULL);
}

int mp_rtnl_route_default(int fd, struct in_addr gw) {
  nlmsg m;
  struct rtmsg rt = {.rtm_family = AF_INET, .rtm_table = RT_TABLE_MAIN,
                     .rtm_protocol = RTPROT_BOOT, .rtm_scope = RT_SCOPE_UNIVERSE,
                     .rtm_type = RTN_UNICAST};
  msg_init(&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
  msg_put(&m, &rt, sizeof rt);
  msg_attr(&m, RTA_GATEWAY, &gw, sizeof gw);
  return nl_run(fd, &m, NULL, NULL);
}

/* a point-to-point address: `local` on the link, `peer` at its other end
** (the kernel adds the /32 route to peer through the link) */
int mp_rtnl_addr_add_peer(int fd, int index, struct in_addr local, struct in_addr peer) {
  nlmsg m;
  struct ifaddrmsg ifa = {.ifa_family = AF_INET, .ifa_prefixlen = 32,
                          .ifa_scope = RT_SCOPE_UNIVERSE, .ifa_index = (unsigned)index};
  msg_init(&m, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
  msg_put(&m, &ifa, sizeof ifa);
  msg_attr(&m, IFA_LOCAL, &local, sizeof local);
  msg_attr(&m, IFA_ADDRESS, &peer, sizeof peer);
  return nl_run(fd, &m, NULL, NULL);
}

/* `local 0.0.0.0/0 dev lo table T`: in table T every address is this
** namespace's own (the egress switch: net.c) */
int mp_rtnl_route_local_all(int fd, int lo_index, int table) {
  nlmsg m;
  struct rtmsg rt = {.rtm_family = AF_INET, .rtm_table = (unsigned char)table,
                     .rtm_protocol = RTPROT_BOOT, .rtm_scope = RT_SCOPE_HOST,
                     .rtm_type = RTN_LOCAL};
  msg_init(&m, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
  msg_put(&m, &rt, sizeof rt);
  msg_u32(&m, RTA_OIF, (unsigned)lo_index);
  return nl_run(fd, &m, NULL, NULL);
}

/* `ip rule add fwmark MARK lookup TABLE` (priority 100) */
int mp_rtnl_rule_fwmark(int fd, unsigned mark, int table) {
  nlmsg m;
  struct fib_rule_hdr fr = {.family = AF_INET, .table = (unsigned char)table,
                            .action = FR_ACT_TO_TBL};
  msg_init(&m, RTM_NEWRULE, NLM_F_CREATE | NLM_F_EXCL);
  msg_put(&m, &fr, sizeof fr);
  msg_u32(&m, FRA_FWMARK, mark);
  msg_u32(&m, FRA_TABLE, (unsigned)table);
  msg_u32(&m, FRA_PRIORITY, 100);
  return nl_run(fd, &m, NULL, NULL);
}

typedef struct {
  char (*names)[IFNAMSIZ];
  size_t n, cap;
  const char *prefix[2];
} name_list;

static void collect_link(struct nlmsghdr *h, void *ud) {
  name_list *l = ud;
  const char *name = h->nlmsg_type == RTM_NEWLINK ? link_name(h) : NULL;
  int i;
  if (name == NULL || strlen(name) >= IFNAMSIZ) return;
  for (i = 0; i < 2; i++)
    if (l->prefix[i] && strncmp(name, l->prefix[i], strlen(l->prefix[i])) == 0) break;
  if (i == 2) return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    void *p = realloc(l->names, cap * sizeof *l->names);
    if (p == NULL) return;
    l->names = p, l->cap = cap;
  }
  strcpy(l->names[l->n++], name);
}

/* Deletes every link of fd's namespace whose name starts with p1 or p2
** (bridges before veths: either order works, the kernel detaches ports). */
void mp_rtnl_delete_prefixed(int fd, const char *p1, const char *p2) {
  nlmsg m;
  struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
  name_list l = {NULL, 0, 0, {p1, p2}};
  size_t i;
  msg_init(&m, RTM_GETLINK, NLM_F_DUMP);
  msg_put(&m, &ifi, sizeof ifi);
  nl_run(fd, &m, collect_link, &l);
  for (i = 0; i < l.n; i++) mp_rtnl_link_del(fd, l.names[i]);
  free(l.names);
}

typedef struct {
  uint32_t base; /* host order */
  unsigned char *used;
} marks;

static void mark_addr(struct nlmsghdr *h, void *ud) {
  marks *mk = ud;
  struct ifaddrmsg *ifa = NLMSG_DATA(h);
  int len = (int)IFA_PAYLOAD(h);
  struct rtattr *a;
  if (h->nlmsg_type != RTM_NEWADDR || ifa->ifa_family != AF_INET) return;
  for (a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
    if (a->rta_type == IFA_LOCAL || a->rta_type == IFA_ADDRESS) {
      uint32_t v = ntohl(((struct in_addr *)RTA_DATA(a))->s_addr);
      if ((v & 0xffff0000u) == mk->base) mk->used[(v >> 8) & 0xff] = 1;
    }
  }
}

void mp_rtnl_addrs_in_16(int fd, struct in_addr base, unsigned char used[256]) {
  nlmsg m;
  struct ifaddrmsg ifa = {.ifa_family = AF_INET};
  marks mk = {ntohl(base.s_addr) & 0xffff0000u, used};
  msg_init(&m, RTM_GETADDR, NLM_F_DUMP);
  msg_put(&m, &ifa, sizeof ifa);
  nl_run(fd, &m, mark_addr, &mk);
}

/* }====== */
