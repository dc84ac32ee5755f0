/*
** The egress proxy (egress.h): TCP relays, UDP flows and DNS on the loop.
**
** TCP: the switch's transparent listener hands over each connection a
** sandbox opens to an outside address, already accepted by the switch's
** kernel; getsockname() says where it was going, getpeername() which
** sandbox opened it. For ports 80 and 443 the first bytes are read first
** (at most 16 KiB, 3 s) for the HTTP Host or the TLS SNI. The policy
** decides; a refusal resets the sandbox's connection (SO_LINGER 0), an
** allowed one gets its own non-blocking connect from the server, and the
** bytes are copied both ways through two 64 KiB buffers, reading a side
** only while the buffer towards the other has room (back-pressure), with
** half-closes passed on. Nothing here blocks.
**
** UDP: each datagram arrives with its original destination
** (IP_RECVORIGDSTADDR); a flow (sandbox port, destination) gets a
** connected UDP socket of the server's, closed after 30 s without
** traffic, and answers go back through the switch's raw socket with the
** destination as their source. Port 53 anywhere is DNS: the query's name
** is checked against the deny rules (a REFUSED answer), the query goes to
** the upstream resolver, and the A records of the answer are remembered
** per sandbox (the name of an address, for rules by name on other ports).
** A refused datagram gets an ICMP "administratively prohibited" at once.
**
** Over 800 lines: the TCP relays, the UDP flows and DNS share the boxes
** (a sandbox's connections, flows, names and log) and the policy, which
** would otherwise be a header of internals for three files.
*/
#define _GNU_SOURCE
#include "net/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net/egress_log.h"

#define BUF_CAP (64 * 1024)
#define PEEK_MAX (16 * 1024)
#define PEEK_MS 3000
#define CONNECT_MS 15000
#define FLOW_IDLE_MS 30000
#define NAMES_MAX 128 /* remembered DNS answers per sandbox */
#define BUCKETS 1024

typedef struct conn conn;
typedef struct flow flow;

typedef struct name_of {
  uint32_t addr; /* host order */
  char name[MP_EGRESS_NAME_MAX + 1];
} name_of;

struct mp_egress_box {
  mp_egress_box *next; /* in its bucket */
  mp_egress *eg;
  uint32_t addr;
  char id[64];
  mp_egress_rules allow, deny; /* the sandbox's own (narrowing) */
  int narrowed;
  conn *conns;
  int nconns;
  flow *flows;
  int nflows;
  name_of *names; /* NAMES_MAX, allocated at the first DNS answer */
  size_t names_next;
  mp_egress_log log;
};

struct mp_egress {
  mastra__loop *loop;
  const mp_egress_config *cfg;
  int tcp_fd, udp_fd, raw_fd;
  mastra__io tcp_io, udp_io;
  mp_egress_box *buckets[BUCKETS];
};

typedef struct half { /* bytes read from one side, to write to the other */
  char *buf;
  size_t off, len;
  int eof;      /* the side that reads into it saw EOF */
  int shut;     /* the other side was shut for writing */
} half;

enum { PEEKING, CONNECTING, RELAYING };

struct conn {
  mastra__handle handle; /* freed after the loop's dispatch */
  conn *next;
  mp_egress_box *box;
  int state;
  int fd[2]; /* 0: the sandbox's side, 1: the server's connection out */
  mastra__io io[2];
  half h[2]; /* h[0]: from the sandbox, out; h[1]: in, to the sandbox */
  mastra__timer timer;
  mp_egress_entry e;
};

struct flow {
  mastra__handle handle;
  flow *next;
  mp_egress_box *box;
  int fd;
  mastra__io io;
  mastra__timer idle;
  uint32_t dst; /* host order: where the sandbox sent (answers come from it) */
  uint16_t dport, sport;
  int dns;
  mp_egress_entry e;
};

/* {====== boxes ====== */

static unsigned bucket_of(uint32_t addr) { return (addr * 2654435761u) >> 22; }

static mp_egress_box *box_find(mp_egress *eg, uint32_t addr) {
  mp_egress_box *b;
  for (b = eg->buckets[bucket_of(addr)]; b; b = b->next)
    if (b->addr == addr) return b;
  return NULL;
}

mp_egress_box *mp_egress_box_add(mp_egress *eg, uint32_t addr) {
  mp_egress_box *b = calloc(1, sizeof *b);
  unsigned k = bucket_of(addr);
  if (b == NULL) return NULL;
  b->eg = eg;
  b->addr = addr;
  b->next = eg->buckets[k];
  eg->buckets[k] = b;
  return b;
}

void mp_egress_box_name(mp_egress_box *b, const char *id, const char *log_path) {
  snprintf(b->id, sizeof b->id, "%s", id ? id : "");
  mp_egress_log_open(&b->log, log_path);
}

int mp_egress_box_narrow(mp_egress_box *b, const char *allow, const char *deny, char *err,
                         size_t errlen) {
  if (allow && mp_egress_rules_add(&b->allow, allow, err, errlen) < 0) return -1;
  if (deny && mp_egress_rules_add(&b->deny, deny, err, errlen) < 0) return -1;
  /* an empty allow list given on purpose allows nothing */
  if (allow) b->narrowed = 1;
  return 0;
}

uint32_t mp_egress_box_addr(const mp_egress_box *b) { return b->addr; }

static void names_remember(uint32_t addr_net, void *ud) {
  void **p = ud;
  mp_egress_box *b = p[0];
  const char *name = p[1];
  size_t i;
  uint32_t addr = ntohl(addr_net);
  if (b->names == NULL && (b->names = calloc(NAMES_MAX, sizeof *b->names)) == NULL) return;
  for (i = 0; i < NAMES_MAX; i++)
    if (b->names[i].addr == addr) {
      snprintf(b->names[i].name, sizeof b->names[i].name, "%s", name);
      return;
    }
  b->names[b->names_next].addr = addr;
  snprintf(b->names[b->names_next].name, sizeof b->names[0].name, "%s", name);
  b->names_next = (b->names_next + 1) % NAMES_MAX;
}

static const char *names_lookup(const mp_egress_box *b, uint32_t addr) {
  size_t i;
  if (b->names == NULL) return NULL;
  for (i = 0; i < NAMES_MAX; i++)
    if (b->names[i].addr == addr && b->names[i].name[0]) return b->names[i].name;
  return NULL;
}

/* }====== */

/* {====== the policy ====== */

/* 1 when addr is one of the host's own (the kernel routes it to itself):
** a connected UDP socket's source is then the address itself */
static int host_local(uint32_t addr) {
  struct sockaddr_in to, me;
  socklen_t len = sizeof me;
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), local = 0;
  if (fd < 0) return 1; /* in doubt, no */
  memset(&to, 0, sizeof to);
  to.sin_family = AF_INET;
  to.sin_port = htons(9);
  to.sin_addr.s_addr = htonl(addr);
  if (connect(fd, (struct sockaddr *)&to, sizeof to) == 0
      && getsockname(fd, (struct sockaddr *)&me, &len) == 0)
    local = me.sin_addr.s_addr == to.sin_addr.s_addr;
  close(fd);
  return local;
}

static int rules_match(const mp_egress_rules *r, uint32_t addr, const char *name) {
  return mp_egress_rules_has_addr(r, addr) || (name && name[0] && mp_egress_rules_has_name(r, name));
}

/* 1 (allowed) or 0 with why */
static int policy(const mp_egress_box *b, uint32_t addr, const char *name, char *why,
                  size_t whylen) {
  const mp_egress_config *cfg = b->eg->cfg;
  const char *r = mp_egress_reserved(addr);
  if (r && !mp_egress_rules_has_addr(&cfg->open, addr)) {
    snprintf(why, whylen, "%s", r);
    return 0;
  }
  if (host_local(addr)) {
    snprintf(why, whylen, "an address of the host");
    return 0;
  }
  if (rules_match(&cfg->deny, addr, name)) {
    snprintf(why, whylen, "denied by --egress-deny");
    return 0;
  }
  if (rules_match(&b->deny, addr, name)) {
    snprintf(why, whylen, "denied by the sandbox's egress rules");
    return 0;
  }
  if (!mp_egress_rules_empty(&cfg->allow) && !rules_match(&cfg->allow, addr, name)) {
    snprintf(why, whylen, "not in --egress-allow");
    return 0;
  }
  if (b->narrowed && !rules_match(&b->allow, addr, name)) {
    snprintf(why, whylen, "not in the sandbox's egress allow list");
    return 0;
  }
  return 1;
}

/* }====== */

/* {====== TCP ====== */

static void reset_close(int fd) {
  struct linger l = {1, 0};
  if (fd < 0) return;
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  close(fd);
}

static void handle_free(mastra__handle *h) { free(h); }

/* the memory of c or f goes after the dispatch: a later event of the same
** epoll batch may still name its watchers (stopped: skipped) */
static void defer_free(mastra__loop *loop, mastra__handle *h) {
  h->prev = h->next = h;
  h->free = handle_free;
  mastra__loop_defer_free(loop, h);
}

static void conn_free(conn *c, int reset) {
  mp_egress_box *b = c->box;
  conn **pp;
  int i;
  for (pp = &b->conns; *pp && *pp != c; pp = &(*pp)->next) {}
  if (*pp) *pp = c->next;
  b->nconns--;
  mastra__timer_stop(&c->timer);
  for (i = 0; i < 2; i++) {
    mastra__io_stop(&c->io[i]);
    if (reset) reset_close(c->fd[i]);
    else if (c->fd[i] >= 0) close(c->fd[i]);
    free(c->h[i].buf);
  }
  c->e.end_ms = mp_egress_wall_ms();
  mp_egress_log_add(&b->log, &c->e);
  defer_free(b->eg->loop, &c->handle);
}

static void conn_update(conn *c) {
  int s;
  if (c->state != RELAYING) return;
  for (s = 0; s < 2; s++) {
    uint32_t ev = 0;
    if (!c->h[s].eof && c->h[s].len < BUF_CAP) ev |= EPOLLIN;
    if (c->h[1 - s].len > 0) ev |= EPOLLOUT;
    if (ev) mastra__io_start(&c->io[s], ev);
    else mastra__io_stop(&c->io[s]);
  }
}

/* reads side s into h[s]: 0, or -1 on an error */
static int conn_read(conn *c, int s) {
  half *h = &c->h[s];
  while (!h->eof && h->len < BUF_CAP) {
    ssize_t n;
    if (h->off > 0 && h->off + h->len == BUF_CAP) {
      memmove(h->buf, h->buf + h->off, h->len);
      h->off = 0;
    }
    n = read(c->fd[s], h->buf + h->off + h->len, BUF_CAP - h->off - h->len);
    if (n > 0) {
      h->len += (size_t)n;
      if (s == 0) c->e.bytes_out += (uint64_t)n;
      else c->e.bytes_in += (uint64_t)n;
    } else if (n == 0) {
      h->eof = 1;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      break;
    } else if (errno != EINTR) {
      return -1;
    }
  }
  return 0;
}

/* writes h[1-s] to side s: 0, or -1 */
static int conn_write(conn *c, int s) {
  half *h = &c->h[1 - s];
  while (h->len > 0) {
    ssize_t n = send(c->fd[s], h->buf + h->off, h->len, MSG_NOSIGNAL);
    if (n > 0) {
      h->off += (size_t)n;
      h->len -= (size_t)n;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      break;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return -1;
    }
  }
  if (h->len == 0) h->off = 0;
  if (h->len == 0 && h->eof && !h->shut) {
    shutdown(c->fd[s], SHUT_WR);
    h->shut = 1;
  }
  return 0;
}

static void on_conn_io(mastra__io *io, uint32_t ev) {
  conn *c = io->data;
  int s = io == &c->io[0] ? 0 : 1;
  if (c->state == CONNECTING) return; /* on_connected watches fd[1] */
  if ((ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) && conn_read(c, s) < 0) {
    snprintf(c->e.why, sizeof c->e.why, "%s: %s", s ? "the destination" : "the sandbox",
             strerror(errno));
    conn_free(c, 1);
    return;
  }
  /* what was read goes out at once if it can */
  if (conn_write(c, 1 - s) < 0 || ((ev & EPOLLOUT) && conn_write(c, s) < 0)) {
    snprintf(c->e.why, sizeof c->e.why, "write: %s", strerror(errno));
    conn_free(c, 1);
    return;
  }
  if (c->h[0].shut && c->h[1].shut) {
    conn_free(c, 0);
    return;
  }
  conn_update(c);
}

static void on_connected(mastra__io *io, uint32_t ev) {
  conn *c = io->data;
  int err = 0;
  socklen_t len = sizeof err;
  (void)ev;
  if (c->state != CONNECTING) {
    on_conn_io(io, ev);
    return;
  }
  if (getsockopt(c->fd[1], SOL_SOCKET, SO_ERROR, &err, &len) < 0) err = errno;
  if (err == EINPROGRESS || err == EALREADY) return;
  if (err != 0) {
    snprintf(c->e.why, sizeof c->e.why, "connect: %s", strerror(err));
    conn_free(c, 1);
    return;
  }
  mastra__timer_stop(&c->timer);
  c->state = RELAYING;
  mastra__io_stop(&c->io[1]);
  mastra__io_init(c->box->eg->loop, &c->io[1], c->fd[1], on_conn_io, c);
  /* the peeked bytes, and anything since */
  if (conn_write(c, 1) < 0) {
    snprintf(c->e.why, sizeof c->e.why, "write: %s", strerror(errno));
    conn_free(c, 1);
    return;
  }
  conn_update(c);
}

static void conn_decide(conn *c) {
  struct sockaddr_in to;
  const char *known;
  int fd;
  mastra__timer_stop(&c->timer);
  mastra__io_stop(&c->io[0]);
  mastra__io_init(c->box->eg->loop, &c->io[0], c->fd[0], on_conn_io, c);
  if (!c->e.name[0] && (known = names_lookup(c->box, c->e.addr)) != NULL)
    snprintf(c->e.name, sizeof c->e.name, "%s", known);
  if (!policy(c->box, c->e.addr, c->e.name, c->e.why, sizeof c->e.why)) {
    c->e.allowed = 0;
    conn_free(c, 1);
    return;
  }
  c->e.allowed = 1;
  fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(c->e.why, sizeof c->e.why, "socket: %s", strerror(errno));
    conn_free(c, 1);
    return;
  }
  c->fd[1] = fd;
  memset(&to, 0, sizeof to);
  to.sin_family = AF_INET;
  to.sin_port = htons(c->e.port);
  to.sin_addr.s_addr = htonl(c->e.addr);
  if (connect(fd, (struct sockaddr *)&to, sizeof to) < 0 && errno != EINPROGRESS) {
    snprintf(c->e.why, sizeof c->e.why, "connect: %s", strerror(errno));
    conn_free(c, 1);
    return;
  }
  c->state = CONNECTING;
  mastra__io_init(c->box->eg->loop, &c->io[1], fd, on_connected, c);
  mastra__io_start(&c->io[1], EPOLLOUT);
  mastra__timer_start(&c->timer, CONNECT_MS);
}

static void on_conn_timer(mastra__timer *t) {
  conn *c = t->data;
  if (c->state == PEEKING) {
    conn_decide(c); /* no name came: the address decides */
    return;
  }
  snprintf(c->e.why, sizeof c->e.why, "connect: timed out");
  conn_free(c, 1);
}

/* the first bytes of a connection to port 80 or 443 */
static void on_peek(mastra__io *io, uint32_t ev) {
  conn *c = io->data;
  int rc;
  (void)ev;
  if (conn_read(c, 0) < 0) {
    snprintf(c->e.why, sizeof c->e.why, "the sandbox: %s", strerror(errno));
    conn_free(c, 1);
    return;
  }
  if (c->e.port == 443)
    rc = mp_egress_sni((unsigned char *)c->h[0].buf, c->h[0].len, c->e.name);
  else
    rc = mp_egress_http_host((unsigned char *)c->h[0].buf, c->h[0].len, c->e.name);
  if (rc != 1) c->e.name[0] = '\0';
  if (rc == -1 && !c->h[0].eof && c->h[0].len < PEEK_MAX) return; /* more to come */
  conn_decide(c);
}

static void tcp_accept(mp_egress *eg, int fd) {
  struct sockaddr_in peer, dst;
  socklen_t plen = sizeof peer, dlen = sizeof dst;
  mp_egress_box *b;
  conn *c;
  if (getpeername(fd, (struct sockaddr *)&peer, &plen) < 0
      || getsockname(fd, (struct sockaddr *)&dst, &dlen) < 0
      || (b = box_find(eg, ntohl(peer.sin_addr.s_addr))) == NULL) {
    reset_close(fd);
    return;
  }
  c = calloc(1, sizeof *c);
  if (c != NULL) c->h[0].buf = malloc(BUF_CAP);
  if (c != NULL && c->h[0].buf != NULL) c->h[1].buf = malloc(BUF_CAP);
  if (c == NULL || c->h[1].buf == NULL) {
    if (c) free(c->h[0].buf);
    free(c);
    reset_close(fd);
    return;
  }
  c->box = b;
  c->fd[0] = fd;
  c->fd[1] = -1;
  c->e.start_ms = mp_egress_wall_ms();
  c->e.addr = ntohl(dst.sin_addr.s_addr);
  c->e.port = ntohs(dst.sin_port);
  memcpy(c->e.proto, "tcp", 4);
  c->next = b->conns;
  b->conns = c;
  b->nconns++;
  mastra__timer_init(eg->loop, &c->timer, on_conn_timer, c);
  if (b->nconns > (eg->cfg->conn_max > 0 ? eg->cfg->conn_max : MP_EGRESS_CONN_MAX)) {
    snprintf(c->e.why, sizeof c->e.why, "too many connections at once (at most %d)",
             eg->cfg->conn_max > 0 ? eg->cfg->conn_max : MP_EGRESS_CONN_MAX);
    conn_free(c, 1);
    return;
  }
  if (c->e.port == 80 || c->e.port == 443) {
    c->state = PEEKING;
    mastra__io_init(eg->loop, &c->io[0], fd, on_peek, c);
    mastra__io_start(&c->io[0], EPOLLIN);
    mastra__timer_start(&c->timer, PEEK_MS);
    return;
  }
  mastra__io_init(eg->loop, &c->io[0], fd, on_conn_io, c);
  conn_decide(c);
}

static void on_tcp(mastra__io *io, uint32_t ev) {
  mp_egress *eg = io->data;
  int i;
  (void)ev;
  for (i = 0; i < 64; i++) {
    int fd = accept4(eg->tcp_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) break;
    tcp_accept(eg, fd);
  }
}

/* }====== */

/* {====== UDP ====== */

static uint16_t csum(const void *data, size_t len) {
  const unsigned char *p = data;
  uint32_t sum = 0;
  size_t i;
  for (i = 0; i + 1 < len; i += 2) sum += (uint32_t)(p[i] << 8 | p[i + 1]);
  if (len & 1) sum += (uint32_t)p[len - 1] << 8;
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return htons((uint16_t)~sum);
}

/* a datagram from src:sport to dst:dport (host order), through the raw
** socket (its UDP checksum left 0: optional in IPv4) */
static void raw_udp(mp_egress *eg, uint32_t src, uint16_t sport, uint32_t dst, uint16_t dport,
                    const void *data, size_t len) {
  static unsigned char pkt[65535];
  struct iphdr *ip = (struct iphdr *)pkt;
  struct udphdr *udp = (struct udphdr *)(pkt + sizeof *ip);
  struct sockaddr_in to;
  if (len > sizeof pkt - sizeof *ip - sizeof *udp) return;
  memset(pkt, 0, sizeof *ip + sizeof *udp);
  ip->version = 4;
  ip->ihl = 5;
  ip->ttl = 64;
  ip->protocol = IPPROTO_UDP;
  ip->tot_len = htons((uint16_t)(sizeof *ip + sizeof *udp + len));
  ip->saddr = htonl(src);
  ip->daddr = htonl(dst);
  udp->source = htons(sport);
  udp->dest = htons(dport);
  udp->len = htons((uint16_t)(sizeof *udp + len));
  memcpy(pkt + sizeof *ip + sizeof *udp, data, len);
  memset(&to, 0, sizeof to);
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(dst);
  sendto(eg->raw_fd, pkt, sizeof *ip + sizeof *udp + len, 0, (struct sockaddr *)&to, sizeof to);
}

/* ICMP "communication administratively prohibited" for a datagram that
** sandbox:sport sent to dst:dport, from dst */
static void raw_refuse(mp_egress *eg, uint32_t sandbox, uint16_t sport, uint32_t dst,
                       uint16_t dport, size_t len) {
  unsigned char pkt[20 + 8 + 20 + 8];
  struct iphdr *ip = (struct iphdr *)pkt, *orig = (struct iphdr *)(pkt + 28);
  struct icmphdr *icmp = (struct icmphdr *)(pkt + 20);
  struct udphdr *udp = (struct udphdr *)(pkt + 48);
  struct sockaddr_in to;
  memset(pkt, 0, sizeof pkt);
  ip->version = 4, ip->ihl = 5, ip->ttl = 64, ip->protocol = IPPROTO_ICMP;
  ip->tot_len = htons(sizeof pkt);
  ip->saddr = htonl(dst), ip->daddr = htonl(sandbox);
  icmp->type = ICMP_DEST_UNREACH;
  icmp->code = ICMP_PKT_FILTERED;
  orig->version = 4, orig->ihl = 5, orig->ttl = 64, orig->protocol = IPPROTO_UDP;
  orig->tot_len = htons((uint16_t)(28 + len));
  orig->saddr = htonl(sandbox), orig->daddr = htonl(dst);
  orig->check = csum(orig, 20);
  udp->source = htons(sport), udp->dest = htons(dport), udp->len = htons((uint16_t)(8 + len));
  icmp->checksum = csum(icmp, sizeof pkt - 20);
  memset(&to, 0, sizeof to);
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(sandbox);
  sendto(eg->raw_fd, pkt, sizeof pkt, 0, (struct sockaddr *)&to, sizeof to);
}

static void flow_free(flow *f) {
  mp_egress_box *b = f->box;
  flow **pp;
  for (pp = &b->flows; *pp && *pp != f; pp = &(*pp)->next) {}
  if (*pp) *pp = f->next;
  b->nflows--;
  mastra__io_stop(&f->io);
  mastra__timer_stop(&f->idle);
  if (f->fd >= 0) close(f->fd);
  if (!f->dns) { /* DNS queries are logged one by one */
    f->e.end_ms = mp_egress_wall_ms();
    mp_egress_log_add(&b->log, &f->e);
  }
  defer_free(b->eg->loop, &f->handle);
}

static void on_flow_idle(mastra__timer *t) { flow_free(t->data); }

/* an answer from the destination (or the resolver) */
static void on_flow(mastra__io *io, uint32_t ev) {
  flow *f = io->data;
  static unsigned char buf[65536];
  int i;
  (void)ev;
  for (i = 0; i < 64; i++) {
    ssize_t n = recv(f->fd, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      break; /* an ICMP error (ECONNREFUSED): nothing to pass on */
    }
    f->e.bytes_in += (uint64_t)n;
    if (f->dns) {
      char name[MP_EGRESS_NAME_MAX + 1];
      unsigned qtype;
      if (mp_egress_dns_question(buf, (size_t)n, name, &qtype)) {
        void *ud[2] = {f->box, name};
        mp_egress_dns_answers(buf, (size_t)n, names_remember, ud);
      }
    }
    raw_udp(f->box->eg, f->dst, f->dport, f->box->addr, f->sport, buf, (size_t)n);
  }
  mastra__timer_start(&f->idle, f->dns ? 5000 : FLOW_IDLE_MS);
}

static flow *flow_find(mp_egress_box *b, uint16_t sport, uint32_t dst, uint16_t dport) {
  flow *f;
  for (f = b->flows; f; f = f->next)
    if (f->sport == sport && f->dst == dst && f->dport == dport) return f;
  return NULL;
}

static flow *flow_new(mp_egress_box *b, uint16_t sport, uint32_t dst, uint16_t dport,
                      int dns) {
  mp_egress *eg = b->eg;
  struct sockaddr_in to;
  flow *f;
  int fd;
  if (b->nflows >= MP_EGRESS_FLOW_MAX) {
    flow *oldest = b->flows;
    while (oldest && oldest->next) oldest = oldest->next; /* the list's end: the oldest */
    if (oldest) flow_free(oldest);
  }
  memset(&to, 0, sizeof to);
  if (dns) {
    if (eg->cfg->dns.sin_port == 0) return NULL;
    to = eg->cfg->dns;
  } else {
    to.sin_family = AF_INET;
    to.sin_port = htons(dport);
    to.sin_addr.s_addr = htonl(dst);
  }
  fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return NULL;
  if (connect(fd, (struct sockaddr *)&to, sizeof to) < 0) {
    close(fd);
    return NULL;
  }
  f = calloc(1, sizeof *f);
  if (f == NULL) {
    close(fd);
    return NULL;
  }
  f->box = b;
  f->fd = fd;
  f->dst = dst, f->dport = dport, f->sport = sport, f->dns = dns;
  f->e.start_ms = mp_egress_wall_ms();
  f->e.addr = dst;
  f->e.port = dport;
  f->e.allowed = 1;
  memcpy(f->e.proto, "udp", 4);
  mastra__io_init(eg->loop, &f->io, fd, on_flow, f);
  mastra__timer_init(eg->loop, &f->idle, on_flow_idle, f);
  mastra__io_start(&f->io, EPOLLIN);
  mastra__timer_start(&f->idle, dns ? 5000 : FLOW_IDLE_MS);
  f->next = b->flows;
  b->flows = f;
  b->nflows++;
  return f;
}

static void dns_query(mp_egress_box *b, uint16_t sport, uint32_t dst, unsigned char *msg,
                      size_t len) {
  mp_egress_entry e;
  flow *f;
  unsigned qtype = 0;
  memset(&e, 0, sizeof e);
  e.start_ms = e.end_ms = mp_egress_wall_ms();
  e.addr = dst;
  e.port = 53;
  memcpy(e.proto, "dns", 4);
  e.bytes_out = len;
  if (!mp_egress_dns_question(msg, len, e.name, &qtype)) e.name[0] = '\0';
  e.allowed = 1;
  if (e.name[0] && (mp_egress_rules_has_name(&b->eg->cfg->deny, e.name)
                    || mp_egress_rules_has_name(&b->deny, e.name))) {
    size_t n = mp_egress_dns_refuse(msg, len, 5);
    e.allowed = 0;
    snprintf(e.why, sizeof e.why, "the name is denied");
    if (n) raw_udp(b->eg, dst, 53, b->addr, sport, msg, n);
    mp_egress_log_add(&b->log, &e);
    return;
  }
  f = flow_find(b, sport, dst, 53);
  if (f == NULL) f = flow_new(b, sport, dst, 53, 1);
  if (f == NULL || send(f->fd, msg, len, 0) < 0) {
    size_t n = mp_egress_dns_refuse(msg, len, 2);
    snprintf(e.why, sizeof e.why, "%s", b->eg->cfg->dns.sin_port ? "the resolver cannot be"
             " reached" : "no resolver (--egress-dns)");
    if (n) raw_udp(b->eg, dst, 53, b->addr, sport, msg, n);
  }
  mp_egress_log_add(&b->log, &e);
}

static void udp_datagram(mp_egress *eg, const struct sockaddr_in *src,
                         const struct sockaddr_in *dst, unsigned char *data, size_t len) {
  uint32_t s = ntohl(src->sin_addr.s_addr), d = ntohl(dst->sin_addr.s_addr);
  uint16_t sport = ntohs(src->sin_port), dport = ntohs(dst->sin_port);
  mp_egress_box *b = box_find(eg, s);
  flow *f;
  if (b == NULL) return;
  if (dport == 53) {
    dns_query(b, sport, d, data, len);
    return;
  }
  f = flow_find(b, sport, d, dport);
  if (f == NULL) {
    mp_egress_entry e;
    const char *known = names_lookup(b, d);
    memset(&e, 0, sizeof e);
    snprintf(e.name, sizeof e.name, "%s", known ? known : "");
    if (!policy(b, d, e.name, e.why, sizeof e.why)) {
      e.start_ms = e.end_ms = mp_egress_wall_ms();
      e.addr = d, e.port = dport;
      memcpy(e.proto, "udp", 4);
      e.bytes_out = len;
      mp_egress_log_add(&b->log, &e);
      raw_refuse(eg, s, sport, d, dport, len);
      return;
    }
    f = flow_new(b, sport, d, dport, 0);
    if (f == NULL) return;
    memcpy(f->e.name, e.name, sizeof e.name);
  }
  if (send(f->fd, data, len, 0) >= 0) f->e.bytes_out += len;
  mastra__timer_start(&f->idle, FLOW_IDLE_MS);
}

static void on_udp(mastra__io *io, uint32_t ev) {
  mp_egress *eg = io->data;
  static unsigned char buf[65536];
  int i;
  (void)ev;
  for (i = 0; i < 64; i++) {
    struct sockaddr_in src, dst;
    char ctl[256];
    struct iovec iov = {buf, sizeof buf};
    struct msghdr mh;
    struct cmsghdr *cm;
    ssize_t n;
    int have = 0;
    memset(&mh, 0, sizeof mh);
    mh.msg_name = &src;
    mh.msg_namelen = sizeof src;
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl;
    mh.msg_controllen = sizeof ctl;
    n = recvmsg(eg->udp_fd, &mh, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
      if (cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_ORIGDSTADDR) {
        memcpy(&dst, CMSG_DATA(cm), sizeof dst);
        have = 1;
      }
    if (have) udp_datagram(eg, &src, &dst, buf, (size_t)n);
  }
}

/* }====== */

void mp_egress_box_remove(mp_egress_box *b) {
  mp_egress *eg = b->eg;
  mp_egress_box **pp = &eg->buckets[bucket_of(b->addr)];
  while (b->conns) {
    snprintf(b->conns->e.why, sizeof b->conns->e.why, "the sandbox went");
    conn_free(b->conns, 1);
  }
  while (b->flows) flow_free(b->flows);
  while (*pp && *pp != b) pp = &(*pp)->next;
  if (*pp) *pp = b->next;
  mp_egress_rules_free(&b->allow);
  mp_egress_rules_free(&b->deny);
  mp_egress_log_free(&b->log);
  free(b->names);
  free(b);
}

void mp_egress_box_json(const mp_egress_box *b, cJSON *o, int entries) {
  const conn *c;
  int open = 0;
  for (c = b->conns; c; c = c->next) open++;
  mp_egress_log_json(&b->log, o, entries);
  cJSON_AddNumberToObject(o, "open", open + b->nflows);
}

size_t mp_egress_box_memory(const mp_egress_box *b) {
  size_t n = sizeof *b;
  n += b->log.cap * sizeof *b->log.ring;
  if (b->names) n += NAMES_MAX * sizeof *b->names;
  n += (size_t)b->nconns * (sizeof(conn) + 2 * BUF_CAP) + (size_t)b->nflows * sizeof(flow);
  return n;
}

mp_egress *mp_egress_open(mastra__loop *loop, const int fds[3], const mp_egress_config *cfg) {
  mp_egress *eg = calloc(1, sizeof *eg);
  if (eg == NULL) return NULL;
  eg->loop = loop;
  eg->cfg = cfg;
  eg->tcp_fd = fds[0], eg->udp_fd = fds[1], eg->raw_fd = fds[2];
  mastra__io_init(loop, &eg->tcp_io, eg->tcp_fd, on_tcp, eg);
  mastra__io_init(loop, &eg->udp_io, eg->udp_fd, on_udp, eg);
  mastra__io_start(&eg->tcp_io, EPOLLIN);
  mastra__io_start(&eg->udp_io, EPOLLIN);
  return eg;
}

void mp_egress_close(mp_egress *eg) {
  size_t i;
  if (eg == NULL) return;
  mastra__io_stop(&eg->tcp_io);
  mastra__io_stop(&eg->udp_io);
  for (i = 0; i < BUCKETS; i++)
    while (eg->buckets[i]) mp_egress_box_remove(eg->buckets[i]);
  free(eg);
}
