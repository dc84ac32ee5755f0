/*
** The PRIVATE networks of src/server/net/net.c on real namespaces: holders
** (children that unshare(CLONE_NEWNET) and wait) stand for sandboxes; they
** join environments A and B, and probes (children that setns() into one and
** connect() over TCP) check who reaches whom. Then leave, close, and a
** server that dies without closing, followed by the sweep: no bridge or
** veth of ours is left, in the switch namespace or on the host. And without
** root (mp_net_open_user), in a child that drops to an unprivileged uid:
** members made as its keepers make them (under the switch's user
** namespace, handing an rtnetlink socket of their own), who reaches whom,
** leave and close; a member outside that user namespace cannot join.
** Needs root (network namespaces, veths, bridges): exits 77 (skipped)
** otherwise.
** The networks are opened without their way out (egress 0): the egress
** proxy is spec/egress_spec.lua's, end to end against a fake internet.
*/
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "net/net.h"
#include "drivers/ns/init/ns_sys.h"
#include "util.h"

#define PORT 8080
#define SKIP 77

/* {====== holders: network namespaces that wait ====== */

typedef struct {
  pid_t pid;
  int ns; /* /proc/<pid>/ns/net */
} holder;

static int write_text(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : write(fd, text, strlen(text));
  if (fd >= 0) close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* a child in a new network namespace; with listen_port, it answers every
** TCP connection on that port with "hello\n". userns: the namespace belongs
** to a new user namespace whose root is uid 100000 on the host, as a
** sandbox's does. */
static int holder_start_as(holder *h, int listen_port, int userns) {
  int p[2], go[2];
  char c = 0, path[64];
  if (pipe2(p, O_CLOEXEC) < 0 || pipe2(go, O_CLOEXEC) < 0) return -1;
  h->pid = fork();
  if (h->pid < 0) return -1;
  if (h->pid == 0) {
    int ls = -1;
    close(p[0]), close(go[1]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (unshare(CLONE_NEWNET | (userns ? CLONE_NEWUSER : 0)) < 0) {
      (void)!write(p[1], "E", 1);
      _exit(1);
    }
    if (userns) { /* the parent maps the ids, then root of the namespace */
      (void)!write(p[1], "U", 1);
      if (read(go[0], &c, 1) != 1 || setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0
          || setresuid(0, 0, 0) < 0) {
        (void)!write(p[1], "E", 1);
        _exit(1);
      }
    }
    if (listen_port) {
      struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(listen_port)};
      int one = 1;
      ls = socket(AF_INET, SOCK_STREAM, 0);
      setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 16) < 0) {
        (void)!write(p[1], "E", 1);
        _exit(1);
      }
    }
    (void)!write(p[1], "R", 1);
    close(p[1]);
    for (;;) {
      if (ls >= 0) {
        int c2 = accept(ls, NULL, NULL);
        if (c2 >= 0) {
          (void)!write(c2, "hello\n", 6);
          close(c2);
        }
      } else {
        pause();
      }
    }
  }
  close(p[1]), close(go[0]);
  if (userns && read(p[0], &c, 1) == 1 && c == 'U') {
    snprintf(path, sizeof path, "/proc/%d/uid_map", (int)h->pid);
    if (write_text(path, "0 100000 65536\n") == 0) {
      snprintf(path, sizeof path, "/proc/%d/gid_map", (int)h->pid);
      if (write_text(path, "0 100000 65536\n") == 0) (void)!write(go[1], "g", 1);
    }
  }
  close(go[1]);
  if (read(p[0], &c, 1) != 1 || c != 'R') {
    close(p[0]);
    kill(h->pid, SIGKILL);
    waitpid(h->pid, NULL, 0);
    return -1;
  }
  close(p[0]);
  snprintf(path, sizeof path, "/proc/%d/ns/net", (int)h->pid);
  h->ns = open(path, O_RDONLY | O_CLOEXEC);
  return h->ns < 0 ? -1 : 0;
}

static int holder_start(holder *h, int listen_port) {
  return holder_start_as(h, listen_port, 0);
}

static void holder_stop(holder *h) {
  if (h->pid > 0) {
    kill(h->pid, SIGKILL);
    waitpid(h->pid, NULL, 0);
  }
  if (h->ns >= 0) close(h->ns);
  h->pid = 0, h->ns = -1;
}

/* }====== */

/* {====== probes: children inside a namespace ====== */

/* without root (test_unpriv): the user namespace a probe enters first */
static int probe_userns = -1;

/* run fn(arg) in a child that entered the network namespace ns; its exit
** status (fn's result, 0..255), or -1 */
static int in_ns(int ns, int (*fn)(const void *), const void *arg) {
  int st;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (probe_userns >= 0 && setns(probe_userns, CLONE_NEWUSER) < 0) _exit(255);
    if (setns(ns, CLONE_NEWNET) < 0) _exit(255);
    _exit(fn(arg));
  }
  if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

typedef struct {
  const char *addr;
  int port;
  const char *route_to; /* add a route to this /24 or /32 via eth0 first */
  int route_prefix;
  int timeout_ms;
} probe_arg;

/* what a root process in a sandbox may do: a route to anywhere over its eth0 */
static void add_route(const char *dst, int prefix) {
  struct rtentry rt;
  struct sockaddr_in *d = (struct sockaddr_in *)&rt.rt_dst;
  struct sockaddr_in *m = (struct sockaddr_in *)&rt.rt_genmask;
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  memset(&rt, 0, sizeof rt);
  d->sin_family = m->sin_family = AF_INET;
  inet_pton(AF_INET, dst, &d->sin_addr);
  m->sin_addr.s_addr = htonl(prefix == 32 ? 0xffffffffu : 0xffffff00u);
  rt.rt_flags = RTF_UP | (prefix == 32 ? RTF_HOST : 0);
  rt.rt_dev = "eth0";
  ioctl(s, SIOCADDRT, &rt);
  close(s);
}

/* 0: connected and read "hello"; 1: not */
static int probe_fn(const void *v) {
  const probe_arg *a = v;
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(a->port)};
  struct pollfd pfd;
  char buf[16] = "";
  int s, err = 0;
  socklen_t el = sizeof err;
  if (a->route_to) add_route(a->route_to, a->route_prefix);
  inet_pton(AF_INET, a->addr, &sa.sin_addr);
  s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  if (s < 0) return 1;
  if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) return 1;
  pfd.fd = s, pfd.events = POLLOUT;
  if (poll(&pfd, 1, a->timeout_ms) != 1) return 1;
  getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el);
  if (err) return 1;
  pfd.events = POLLIN;
  if (poll(&pfd, 1, a->timeout_ms) != 1 || read(s, buf, sizeof buf - 1) != 6) return 1;
  return strcmp(buf, "hello\n") == 0 ? 0 : 1;
}

static int reaches(int ns, const char *addr, int port, const char *route_to, int prefix) {
  probe_arg a = {addr, port, route_to, prefix, 1500};
  return in_ns(ns, probe_fn, &a) == 0;
}

static int count_fn(const void *v) {
  struct if_nameindex *l = if_nameindex(), *p;
  int n = 0;
  if (l == NULL) return 255;
  for (p = l; p->if_index; p++)
    if (strncmp(p->if_name, v, strlen(v)) == 0) n++;
  if_freenameindex(l);
  return n;
}

/* links of namespace ns whose name starts with prefix */
static int count_links(int ns, const char *prefix) {
  return in_ns(ns, count_fn, prefix);
}

/* }====== */

static char *slurp(const char *path) {
  char *s = NULL;
  size_t n;
  return mastra__read_file(path, &s, &n) == 0 ? s : NULL;
}

static int has_line(const char *text, const char *line) {
  size_t n = strlen(line);
  const char *p = text;
  while (p && (p = strstr(p, line)) != NULL) {
    if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0')) return 1;
    p += n;
  }
  return 0;
}

static ino_t inode_of(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? st.st_ino : 0;
}

/* a non-loopback IPv4 address of the host, or "" */
static void host_ip(char *out, size_t len) {
  struct ifaddrs *l, *p;
  out[0] = '\0';
  if (getifaddrs(&l) < 0) return;
  for (p = l; p; p = p->ifa_next)
    if (p->ifa_addr && p->ifa_addr->sa_family == AF_INET && !(p->ifa_flags & IFF_LOOPBACK)) {
      inet_ntop(AF_INET, &((struct sockaddr_in *)p->ifa_addr)->sin_addr, out,
                (socklen_t)len);
      break;
    }
  freeifaddrs(l);
}

static void wait_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* the subnet of a 10.231.x.y address, as "10.231.x.0" */
static void subnet_of(const char *addr, char *out, size_t len) {
  snprintf(out, len, "%s", addr);
  *strrchr(out, '.') = '\0';
  strncat(out, ".0", len - strlen(out) - 1);
}

/* the kernel dismantles a namespace asynchronously: eth0 of ns goes within
** 10 s */
static int eth0_gone(int ns) {
  int i;
  for (i = 0; i < 200; i++) {
    if (count_links(ns, "eth0") == 0) return 1;
    wait_ms(50);
  }
  return 0;
}

static void test_networks(const char *dir, int egress) {
  char err[512] = "", a1[32] = "", a2[32] = "", b1[32] = "", x[32] = "", line[128];
  char subnet[32], hip[64];
  holder A1, A2, B1, I, X;
  int host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), links, not_ns;
  mp_net *net;
  const char *hostsA, *hostsB;
  char *text;
  ino_t ino;
  /* the holders first: a child forked later holds the switch namespace's
  ** descriptors (close-on-exec, but they do not exec) */
  CHECK(holder_start(&A1, 0) == 0);
  CHECK(holder_start_as(&A2, PORT, 1) == 0); /* owned by a user namespace, as */
  CHECK(holder_start_as(&B1, PORT, 1) == 0); /* a sandbox's is */
  CHECK(holder_start(&I, 0) == 0);
  CHECK(holder_start(&X, 0) == 0);
  net = mp_net_open(dir, egress, err, sizeof err);
  if (!CHECK(net != NULL)) {
    fprintf(stderr, "mp_net_open: %s\n", err);
    holder_stop(&A1), holder_stop(&A2), holder_stop(&B1), holder_stop(&I), holder_stop(&X);
    close(host_ns);
    return;
  }
  links = mp_net_links_netns(net);

  hostsA = mp_net_hosts_path(net, "env-a");
  hostsB = mp_net_hosts_path(net, "env b/with spaces");
  CHECK(hostsA && hostsB && strcmp(hostsA, hostsB) != 0);
  CHECK(mp_net_hosts_path(net, "") == NULL);
  ino = inode_of(hostsA);
  CHECK(ino != 0);
  text = hostsA ? slurp(hostsA) : NULL;
  CHECK(text && has_line(text, "127.0.0.1\tlocalhost"));
  free(text);

  if (!CHECK(mp_net_join(net, "env-a", "sbx_a1", A1.ns, a1, sizeof a1, err, sizeof err) == 0)
      || !CHECK(mp_net_join(net, "env-a", "sbx_a2", A2.ns, a2, sizeof a2, err, sizeof err) == 0)
      || !CHECK(mp_net_join(net, "env b/with spaces", "sbx_b1", B1.ns, b1, sizeof b1, err,
                            sizeof err) == 0)) {
    fprintf(stderr, "mp_net_join: %s\n", err);
    mp_net_close(net);
    holder_stop(&A1), holder_stop(&A2), holder_stop(&B1), holder_stop(&I);
    holder_stop(&X);
    close(host_ns);
    return;
  }
  printf("A1 %s, A2 %s, B1 %s\n", a1, a2, b1);
  CHECK(strncmp(a1, MP_NET_PREFIX ".", 7) == 0 && strcmp(a1, a2) != 0);
  CHECK(strrchr(a1, '.') - a1 == strrchr(a2, '.') - a2
        && strncmp(a1, a2, (size_t)(strrchr(a1, '.') - a1)) == 0); /* one /24 */
  CHECK(strncmp(a1, b1, (size_t)(strrchr(a1, '.') - a1 + 1)) != 0); /* another */

  /* refused joins leave nothing behind */
  CHECK(mp_net_join(net, "env-a", "sbx_a1", I.ns, x, sizeof x, err, sizeof err) < 0);
  CHECK(strstr(err, "already") != NULL);
  CHECK(mp_net_join(net, "env-a", "bad name\n", I.ns, x, sizeof x, err, sizeof err) < 0);
  CHECK(strstr(err, "host name") != NULL);
  CHECK(mp_net_join(net, "", "sbx_i", I.ns, x, sizeof x, err, sizeof err) < 0);
  CHECK(mp_net_join(net, "env-a", "sbx_a1b", A1.ns, x, sizeof x, err, sizeof err) < 0);
  CHECK(strstr(err, "eth0") != NULL); /* A1 has one already */
  not_ns = open("/", O_RDONLY | O_CLOEXEC);
  CHECK(mp_net_join(net, "env-c", "sbx_c", not_ns, x, sizeof x, err, sizeof err) < 0);
  printf("refused: %s\n", err);
  close(not_ns);
  mp_net_flush(net);
  CHECK(count_links(links, MP_NET_BRIDGE_PREFIX) == 2); /* env-c's did not stay */
  CHECK(count_links(links, MP_NET_VETH_PREFIX) == 3);
  CHECK(count_links(I.ns, "eth0") == 0);

  /* the hosts file: members of A, in place */
  CHECK(inode_of(hostsA) == ino);
  text = slurp(hostsA);
  snprintf(line, sizeof line, "%s\tsbx_a1", a1);
  CHECK(text && has_line(text, line));
  snprintf(line, sizeof line, "%s\tsbx_a2", a2);
  CHECK(text && has_line(text, line));
  CHECK(text && has_line(text, "127.0.0.1\tlocalhost"));
  CHECK(text && strstr(text, "sbx_b1") == NULL);
  free(text);
  text = slurp(hostsB);
  snprintf(line, sizeof line, "%s\tsbx_b1", b1);
  CHECK(text && has_line(text, line) && strstr(text, "sbx_a") == NULL);
  free(text);

  /* who reaches whom */
  CHECK(reaches(A1.ns, a2, PORT, NULL, 0));                /* same environment */
  CHECK(!reaches(B1.ns, a2, PORT, NULL, 0));               /* no route */
  subnet_of(a2, subnet, sizeof subnet);
  CHECK(!reaches(B1.ns, a2, PORT, subnet, 24));            /* a route: another bridge */
  subnet_of(b1, subnet, sizeof subnet);
  CHECK(!reaches(A1.ns, b1, PORT, subnet, 24));            /* and the other way */
  CHECK(!reaches(I.ns, a2, PORT, NULL, 0));                /* ISOLATED: lo only */
  host_ip(hip, sizeof hip);
  if (hip[0]) {
    /* the host: a listener on all its addresses, and a route to one of them */
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof sa;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(ls, 4) == 0);
    getsockname(ls, (struct sockaddr *)&sa, &sl);
    CHECK(!reaches(A1.ns, hip, ntohs(sa.sin_port), hip, 32));
    CHECK(!reaches(A1.ns, MP_NET_PREFIX ".0.1", ntohs(sa.sin_port), NULL, 0));
    close(ls);
  }

  /* leave: the veth and the hosts line go; the bridge with its last member */
  mp_net_leave(net, "env-a", "sbx_a1");
  mp_net_leave(net, "env-a", "sbx_nobody"); /* ignored */
  text = slurp(hostsA); /* at once; the links once their deletion is done */
  CHECK(text && strstr(text, "sbx_a1") == NULL && strstr(text, "sbx_a2") != NULL);
  free(text);
  mp_net_flush(net);
  CHECK(count_links(A1.ns, "eth0") == 0);
  CHECK(count_links(links, MP_NET_VETH_PREFIX) == 2);
  CHECK(count_links(links, MP_NET_BRIDGE_PREFIX) == 2);
  CHECK(inode_of(hostsA) == ino);
  mp_net_leave(net, "env-a", "sbx_a2");
  mp_net_flush(net);
  CHECK(count_links(links, MP_NET_BRIDGE_PREFIX) == 1);
  CHECK(count_links(links, MP_NET_VETH_PREFIX) == 1);
  /* and joins again, at once (its old eth0 may still wait for deletion) */
  CHECK(mp_net_join(net, "env-a", "sbx_x", X.ns, x, sizeof x, err, sizeof err) == 0);
  mp_net_leave(net, "env-a", "sbx_x");
  CHECK(mp_net_join(net, "env-a", "sbx_x", X.ns, x, sizeof x, err, sizeof err) == 0);
  mp_net_leave(net, "env-a", "sbx_x");
  /* with the same hosts file */
  CHECK(mp_net_join(net, "env-a", "sbx_a1", A1.ns, a1, sizeof a1, err, sizeof err) == 0);
  CHECK(mp_net_join(net, "env-a", "sbx_a2", A2.ns, a2, sizeof a2, err, sizeof err) == 0);
  CHECK(reaches(A1.ns, a2, PORT, NULL, 0));
  CHECK(inode_of(hostsA) == ino);

  /* a member whose namespace goes first (a sandbox destroyed before it
  ** leaves): its pair goes with it, and the leave is no error */
  CHECK(mp_net_join(net, "env-x", "sbx_x", X.ns, x, sizeof x, err, sizeof err) == 0);
  CHECK(count_links(links, MP_NET_BRIDGE_PREFIX) == 3);
  holder_stop(&X);
  mp_net_leave(net, "env-x", "sbx_x");
  mp_net_flush(net);
  CHECK(count_links(links, MP_NET_BRIDGE_PREFIX) == 2);

  /* close: every bridge and veth goes with the switch namespace, and the
  ** peers in the sandboxes with them (the kernel dismantles it after the
  ** last descriptor: wait for it) */
  mp_net_close(net);
  CHECK(eth0_gone(B1.ns) && eth0_gone(A2.ns) && eth0_gone(A1.ns));
  CHECK(count_links(host_ns, MP_NET_BRIDGE_PREFIX) == 0);
  CHECK(count_links(host_ns, MP_NET_VETH_PREFIX) == 0);
  CHECK(access(hostsA, F_OK) != 0);
  holder_stop(&A1), holder_stop(&A2), holder_stop(&B1), holder_stop(&I);
  close(host_ns);
}

/* a server that joins and dies without closing: its links go with it, and
** the sweep removes the rest */
static void test_crash(const char *dir) {
  holder C;
  int p[2], st;
  char addr[32] = "", path[4096];
  pid_t pid;
  CHECK(holder_start(&C, 0) == 0);
  CHECK(pipe(p) == 0);
  pid = fork();
  if (pid == 0) {
    char err[256];
    mp_net *net = mp_net_open(dir, 0, err, sizeof err);
    char a[32] = "";
    if (net && mp_net_join(net, "env-c", "sbx_c", C.ns, a, sizeof a, err, sizeof err) == 0)
      (void)!write(p[1], a, strlen(a));
    else
      fprintf(stderr, "crash child: %s\n", err);
    _exit(0); /* as kill -9 would: no close */
  }
  close(p[1]);
  CHECK(read(p[0], addr, sizeof addr - 1) > 0);
  close(p[0]);
  waitpid(pid, &st, 0);
  snprintf(path, sizeof path, "%s/state", dir);
  CHECK(access(path, F_OK) == 0);
  CHECK(eth0_gone(C.ns));
  mp_net_sweep(dir);
  CHECK(access(path, F_OK) != 0);
  snprintf(path, sizeof path, "%s/hosts", dir);
  CHECK(access(path, F_OK) != 0);
  {
    int host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    CHECK(count_links(host_ns, MP_NET_BRIDGE_PREFIX) == 0);
    CHECK(count_links(host_ns, MP_NET_VETH_PREFIX) == 0);
    close(host_ns);
  }
  /* and a server starts again on it */
  {
    char err[256];
    mp_net *net = mp_net_open(dir, 0, err, sizeof err);
    CHECK(net != NULL && mp_net_join(net, "env-c", "sbx_c", C.ns, addr, sizeof addr, err,
                                     sizeof err) == 0);
    mp_net_close(net);
  }
  holder_stop(&C);
}

/* {====== without root (mp_net_open_user) ====== */

#define UNPRIV_UID 47600

/* a member as a keeper makes it without root: in a user namespace under
** userns (-1: under ours), its own network namespace, whose descriptor and an rtnetlink
** socket made in it it hands over (h->ns, *nl) */
static int member_under(holder *h, int userns, int listen_port, int *nl) {
  int sv[2], fds[2], n;
  char c;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) return -1;
  h->pid = fork();
  if (h->pid < 0) return -1;
  if (h->pid == 0) {
    int ls = -1;
    close(sv[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* userns -1: a user namespace beside it, as keepers made them before */
    if (userns >= 0 && setns(userns, CLONE_NEWUSER) < 0) _exit(1);
    {
      unsigned uid = (unsigned)geteuid(), gid = (unsigned)getegid();
      if (unshare(CLONE_NEWUSER) < 0 || mp_ns_map_self(uid, gid) < 0
          || unshare(CLONE_NEWNET) < 0)
        _exit(1);
    }
    /* not the switch's descriptors (a fork that does not exec: net.h) */
    if (sv[1] > 3) close_range(3, (unsigned)sv[1] - 1, 0);
    close_range((unsigned)sv[1] + 1, ~0u, 0);
    fds[0] = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    fds[1] = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (listen_port) {
      struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(listen_port)};
      ls = socket(AF_INET, SOCK_STREAM, 0);
      if (ls < 0 || bind(ls, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(ls, 16) < 0)
        _exit(1);
    }
    if (fds[0] < 0 || fds[1] < 0 || mp_ns_send_fds(sv[1], "R", 1, fds, 2) < 0) _exit(1);
    close(fds[0]), close(fds[1]);
    for (;;) {
      int c2 = ls >= 0 ? accept(ls, NULL, NULL) : (pause(), -1);
      if (c2 >= 0) {
        (void)!write(c2, "hello\n", 6);
        close(c2);
      }
    }
  }
  close(sv[1]);
  fds[0] = fds[1] = -1;
  if (mp_ns_recv_fds(sv[0], &c, 1, 0, fds, 2, &n) != 1 || n != 2) {
    while (n > 0) close(fds[--n]);
    close(sv[0]);
    kill(h->pid, SIGKILL);
    waitpid(h->pid, NULL, 0);
    h->pid = 0, h->ns = -1;
    return -1;
  }
  close(sv[0]);
  h->ns = fds[0];
  *nl = fds[1];
  return 0;
}

/* as an unprivileged uid: the switch in a user namespace of its own, members
** under it that hand their sockets, who reaches whom, leave and close;
** returns the failures */
static int unpriv_body(const char *dir) {
  char err[512] = "", a1[32] = "", a2[32] = "", b1[32] = "", x[32] = "", subnet[32];
  holder A1, A2, B1, O;
  int nl1 = -1, nl2 = -1, nlb = -1, nlo = -1, links;
  mp_net *net = mp_net_open_user(dir, 0, err, sizeof err);
  if (!CHECK(net != NULL)) {
    fprintf(stderr, "mp_net_open_user: %s\n", err);
    return g_fail;
  }
  links = mp_net_links_netns(net);
  probe_userns = dup(mp_net_userns(net));
  CHECK(probe_userns >= 0);
  CHECK(member_under(&A1, probe_userns, 0, &nl1) == 0);
  CHECK(member_under(&A2, probe_userns, PORT, &nl2) == 0);
  CHECK(member_under(&B1, probe_userns, PORT, &nlb) == 0);
  CHECK(member_under(&O, -1, 0, &nlo) == 0);
  if (g_fail) {
    mp_net_close(net);
    return g_fail;
  }
  /* a member whose user namespace is not under the switch's cannot join */
  CHECK(mp_net_join_nl(net, "env-a", "sbx_o", O.ns, nlo, x, sizeof x, err, sizeof err) < 0);
  printf("unpriv, outside: %s\n", err);
  /* without its socket the server cannot enter a member's namespace */
  CHECK(mp_net_join(net, "env-a", "sbx_a1", A1.ns, x, sizeof x, err, sizeof err) < 0);
  printf("unpriv, refused: %s\n", err);
  if (!CHECK(mp_net_join_nl(net, "env-a", "sbx_a1", A1.ns, nl1, a1, sizeof a1, err,
                            sizeof err) == 0)
      || !CHECK(mp_net_join_nl(net, "env-a", "sbx_a2", A2.ns, nl2, a2, sizeof a2, err,
                               sizeof err) == 0)
      || !CHECK(mp_net_join_nl(net, "env-b", "sbx_b1", B1.ns, nlb, b1, sizeof b1, err,
                               sizeof err) == 0))
    fprintf(stderr, "mp_net_join_nl: %s\n", err);
  printf("unpriv: A1 %s, A2 %s, B1 %s\n", a1, a2, b1);
  mp_net_flush(net); /* the refused join's links */
  CHECK(count_links(links, MP_NET_BRIDGE_PREFIX) == 2);
  CHECK(count_links(links, MP_NET_VETH_PREFIX) == 3);
  CHECK(reaches(A1.ns, a2, PORT, NULL, 0));
  subnet_of(a2, subnet, sizeof subnet);
  CHECK(!reaches(B1.ns, a2, PORT, subnet, 24));
  subnet_of(b1, subnet, sizeof subnet);
  CHECK(!reaches(A1.ns, b1, PORT, subnet, 24));
  mp_net_leave(net, "env-a", "sbx_a1");
  mp_net_flush(net);
  CHECK(count_links(A1.ns, "eth0") == 0);
  CHECK(count_links(links, MP_NET_VETH_PREFIX) == 2);
  mp_net_close(net);
  CHECK(eth0_gone(A2.ns) && eth0_gone(B1.ns));
  close(nl1), close(nl2), close(nlb), close(nlo);
  holder_stop(&A1), holder_stop(&A2), holder_stop(&B1), holder_stop(&O);
  close(probe_userns);
  probe_userns = -1;
  return g_fail;
}

static void test_unpriv(const char *dir) {
  int st, host_ns;
  pid_t pid;
  CHECK(mkdir(dir, 0755) == 0 && chown(dir, UNPRIV_UID, UNPRIV_UID) == 0);
  fflush(stdout);
  pid = fork();
  if (pid == 0) {
    int fails;
    g_pass = g_fail = 0;
    if (setgroups(0, NULL) < 0 || setresgid(UNPRIV_UID, UNPRIV_UID, UNPRIV_UID) < 0
        || setresuid(UNPRIV_UID, UNPRIV_UID, UNPRIV_UID) < 0)
      _exit(100);
    prctl(PR_SET_DUMPABLE, 1); /* the members open nothing of ours, but probes */
    fails = unpriv_body(dir);
    printf("unpriv: %d passed, %d failed\n", g_pass, fails);
    fflush(stdout);
    _exit(fails > 99 ? 99 : fails);
  }
  CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  CHECK(count_links(host_ns, MP_NET_BRIDGE_PREFIX) == 0);
  CHECK(count_links(host_ns, MP_NET_VETH_PREFIX) == 0);
  close(host_ns);
}

/* }====== */

int main(int argc, char **argv) {
  int egress = 0;
  char tmpl[] = "/tmp/mp-net-test-XXXXXX", dir[256], dir2[256], dir3[256];
  holder probe;
  int fds;
  if (geteuid() != 0) {
    printf("skipped: the private networks need root (network namespaces, bridges)\n");
    return SKIP;
  }
  if (holder_start(&probe, 0) < 0) {
    printf("skipped: cannot create a network namespace here\n");
    return SKIP;
  }
  holder_stop(&probe);
  if (mkdtemp(tmpl) == NULL) return 1;
  snprintf(dir, sizeof dir, "%s/net", tmpl);
  snprintf(dir2, sizeof dir2, "%s/net2", tmpl);
  snprintf(dir3, sizeof dir3, "%s/net3", tmpl);
  fds = count_fds();
  test_networks(dir, egress);
  if (!egress) test_crash(dir2);
  if (!egress) {
    chmod(tmpl, 0755); /* reachable by UNPRIV_UID */
    test_unpriv(dir3);
  }
  CHECK(count_fds() == fds);
  mastra__remove_tree(tmpl);
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail ? 1 : 0;
}
