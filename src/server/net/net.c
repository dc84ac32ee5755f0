/*
** The PRIVATE networks of the namespaces driver: bridges, veths, addresses
** and hosts files, through rtnetlink (rtnl.c; no `ip` processes). The design
** is in net.h and docs/platform.md ("Networks"). A sandbox's namespace is
** configured through a netlink socket created inside it: setns() to it,
** socket(), setns() back.
**
** Over 800 lines: the switch's state (its links, their addresses, the
** sweep) is one structure, and the ISOLATED sandboxes' links to the way
** out (the last section) share it with the PRIVATE members' links; the
** sockets and nftables table of the way out are switch_out.c's, the
** proxy egress.c's.
*/
#define _GNU_SOURCE
#include "net/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/linkdel.h"
#include "net/switch_out.h"
#include "drivers/ns/init/ns_sys.h"
#include "net/rtnl.h"
#include "sha256.h"
#include "util.h"

extern char **environ;

#define TAG_LEN 5         /* hex digits of a data directory's tag */
#define NAME_MAX_LEN 63   /* a member's host name */
#define HOST_FIRST 2      /* .1 is the gateway (with egress) */
#define OUT_SLOTS 65536   /* addresses of 10.232.0.0/16 (.0.0, .0.1, .255.255 unused) */
#define HOST_LAST 254

/* {====== the state ====== */

typedef struct member {
  struct member *next;
  char name[NAME_MAX_LEN + 1];
  char veth[IFNAMSIZ];
  int host; /* the last octet */
} member;

typedef struct envnet {
  struct envnet *next;
  char *env;
  char *hosts;   /* its hosts file */
  int idx;       /* the subnet's third octet; -1: no bridge (no member) */
  int bridge_ix; /* the bridge's ifindex */
  member *members;
} envnet;

struct mp_net {
  char *dir;
  int egress;   /* the switch has its way out (switch_out.c): out_fds */
  int out_fds[3]; /* its transparent TCP and UDP sockets, its raw socket */
  char out_err[400]; /* why there is no way out, with egress asked for */
  unsigned char out_used[OUT_SLOTS / 8]; /* the ISOLATED links' addresses */
  unsigned out_next; /* the next slot to try */
  char tag[TAG_LEN + 1];
  int unpriv;   /* the switch is in user namespace userns (no root) */
  int userns;   /* that user namespace, or -1 */
  int host_ns;  /* the namespace the server runs in */
  int links_ns; /* the namespace of the bridges (the switch, or host_ns) */
  int nl;       /* rtnetlink, in links_ns */
  mp_linkdel *del; /* deletions, on a thread of their own (linkdel.c) */
  unsigned counter;
  envnet *envs;
};

static void bridge_name(const mp_net *net, int idx, char out[IFNAMSIZ]) {
  snprintf(out, IFNAMSIZ, MP_NET_BRIDGE_PREFIX "%.5s%02x", net->tag, (unsigned)idx & 0xffu);
}

static struct in_addr ip_of(int idx, int host) {
  struct in_addr a;
  char s[32];
  snprintf(s, sizeof s, MP_NET_PREFIX ".%d.%d", idx, host);
  inet_pton(AF_INET, s, &a);
  return a;
}

static void path_in(const char *dir, const char *leaf, char *out, size_t outlen) {
  snprintf(out, outlen, "%s/%s", dir, leaf);
}

/* a line of the state file holds no newline */
static void put_clean(FILE *f, const char *s) {
  for (; *s; s++) fputc((unsigned char)*s < 0x20 ? '?' : *s, f);
}

/* state_dir/state: what the sweep needs (tag, egress) and, for people,
** which bridge and address belongs to whom. Not fsync'd: the links it
** names do not outlive a reboot either. */
static void state_write(const mp_net *net) {
  char path[4096], *text = NULL;
  size_t len = 0;
  const envnet *e;
  FILE *f = open_memstream(&text, &len);
  if (f == NULL) return;
  fprintf(f, "# mastra-platform: the private networks of this data directory"
             " (src/server/net/net.c)\ntag %s\negress 0\n", net->tag);
  for (e = net->envs; e; e = e->next) {
    const member *m;
    char br[IFNAMSIZ];
    if (e->idx < 0) continue;
    bridge_name(net, e->idx, br);
    fprintf(f, "bridge %s " MP_NET_PREFIX ".%d.0/24 ", br, e->idx);
    put_clean(f, e->env);
    fputc('\n', f);
    for (m = e->members; m; m = m->next)
      fprintf(f, "veth %s " MP_NET_PREFIX ".%d.%d %s\n", m->veth, e->idx, m->host,
              m->name);
  }
  fclose(f);
  path_in(net->dir, "state", path, sizeof path);
  mastra__write_file_atomic(path, text, len, 0644, 0);
  free(text);
}

/* rewrites e's hosts file in place (same inode) */
static int hosts_write(const envnet *e) {
  char *text = NULL;
  size_t len = 0;
  const member *m;
  int fd, rc = -1;
  FILE *f = open_memstream(&text, &len);
  if (f == NULL) return -1;
  fprintf(f, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
  for (m = e->members; m; m = m->next)
    fprintf(f, MP_NET_PREFIX ".%d.%d\t%s\n", e->idx, m->host, m->name);
  fclose(f);
  fd = open(e->hosts, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd >= 0) {
    rc = mastra__write_all(fd, text, len) == 0 && ftruncate(fd, (off_t)len) == 0 ? 0 : -1;
    close(fd);
  }
  free(text);
  return rc;
}

static envnet *env_find(mp_net *net, const char *env) {
  envnet *e;
  for (e = net->envs; e; e = e->next)
    if (strcmp(e->env, env) == 0) return e;
  return NULL;
}

/* env's record, made (with its hosts file) on first use */
static envnet *env_get(mp_net *net, const char *env) {
  envnet *e = env_find(net, env);
  char hex[2 * MASTRA__SHA256_LEN + 1], path[4096];
  if (e) return e;
  mastra__sha256_hex(env, strlen(env), hex);
  snprintf(path, sizeof path, "%s/hosts/%.16s", net->dir, hex);
  e = calloc(1, sizeof *e);
  if (e == NULL || (e->env = strdup(env)) == NULL || (e->hosts = strdup(path)) == NULL) {
    if (e) free(e->env);
    free(e);
    return NULL;
  }
  e->idx = -1;
  if (hosts_write(e) < 0) {
    free(e->hosts), free(e->env), free(e);
    return NULL;
  }
  e->next = net->envs;
  net->envs = e;
  return e;
}

static int valid_name(const char *s) {
  size_t i, n = strlen(s);
  if (n == 0 || n > NAME_MAX_LEN || s[0] == '-' || s[0] == '.') return 0;
  for (i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
          || c == '-' || c == '_' || c == '.'))
      return 0;
  }
  return 1;
}

/* }====== */

/* {====== the NAT table of older servers (the sweep only) ====== */

/* runs nft ARGS (stdin from file `in`, or /dev/null), waits; 0 when it
** exits 0, else -1 with its first line of stderr in err */
static int run_nft(const char *dir, const char *in, const char *a1, const char *a2,
                   const char *a3, const char *a4, char *err, size_t errlen) {
  char *argv[] = {"nft", (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL};
  char errpath[4096];
  posix_spawn_file_actions_t fa;
  pid_t pid;
  int rc, st = 0;
  path_in(dir, "nft.err", errpath, sizeof errpath);
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in ? in : "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  rc = posix_spawnp(&pid, "nft", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    snprintf(err, errlen, "--egress needs nft (nftables), which cannot be run: %s"
             " (apt-get install nftables)", strerror(rc));
    return -1;
  }
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
    unlink(errpath);
    return 0;
  }
  {
    char *text = NULL;
    size_t n = 0;
    if (mastra__read_file(errpath, &text, &n) == 0) text[strcspn(text, "\n")] = '\0';
    snprintf(err, errlen, "nft failed: %s", text && *text ? text : "(no message)");
    free(text);
  }
  unlink(errpath);
  return -1;
}

/* Servers before the egress proxy NATed PRIVATE networks out of the
** host's namespace with a table of their own ("egress 1" in the state
** file): the sweep deletes that table when it finds one. */
static void egress_down(const char *dir, const char *tag) {
  char table[32], err[256];
  snprintf(table, sizeof table, "mastra_%s", tag);
  run_nft(dir, NULL, "delete", "table", "inet", table, err, sizeof err);
}

/* }====== */

/* {====== open, close, sweep ====== */

void mp_net_sweep(const char *state_dir) {
  char path[4096], *text = NULL, *p;
  char tag[TAG_LEN + 1] = "";
  int egress = 0;
  size_t n;
  path_in(state_dir, "state", path, sizeof path);
  if (mastra__read_file(path, &text, &n) == 0) {
    for (p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
      if (strncmp(p, "tag ", 4) == 0 && strspn(p + 4, "0123456789abcdef") == TAG_LEN) {
        memcpy(tag, p + 4, TAG_LEN);
        tag[TAG_LEN] = '\0';
      } else if (strncmp(p, "egress 1", 8) == 0)
        egress = 1;
    }
  }
  free(text);
  if (tag[0]) {
    /* the switch namespace went with the server; with egress the links are
    ** the host's (and so are those of a crash that left a sandbox holding
    ** a descriptor of the switch: nothing to find here then) */
    int fd = mp_rtnl_open();
    if (fd >= 0) {
      char b[16], v[16];
      snprintf(b, sizeof b, MP_NET_BRIDGE_PREFIX "%s", tag);
      snprintf(v, sizeof v, MP_NET_VETH_PREFIX "%s", tag);
      mp_rtnl_delete_prefixed(fd, b, v);
      close(fd);
    }
    if (egress) egress_down(state_dir, tag);
  }
  path_in(state_dir, "hosts", path, sizeof path);
  mastra__remove_tree(path);
  path_in(state_dir, "egress.nft", path, sizeof path);
  unlink(path);
  path_in(state_dir, "state", path, sizeof path);
  unlink(path);
}

/* a netlink socket in the namespace ns (the thread comes back to host_ns) */
static int ns_socket(const mp_net *net, int ns, char *err, size_t errlen) {
  int fd, e;
  if (setns(ns, CLONE_NEWNET) < 0) {
    snprintf(err, errlen, "cannot enter the network namespace: %s", strerror(errno));
    return -1;
  }
  fd = mp_rtnl_open();
  e = errno;
  if (setns(net->host_ns, CLONE_NEWNET) < 0) abort(); /* never stay in a sandbox's */
  if (fd < 0) snprintf(err, errlen, "netlink socket: %s", strerror(e));
  return fd;
}

/* {====== without root: the switch in a user namespace of its own ====== */

/* the holder: a child that makes user namespace U (root in it: our uid and
** gid) and the switch (a network namespace of U), checks that a bridge can
** be made there, sends U, the switch and two rtnetlink sockets of the
** switch, and exits; the descriptors hold them */
static void holder(int sock, unsigned uid, unsigned gid, const char *dir, int egress) {
  const char *step = "unshare(CLONE_NEWUSER)";
  char msg[500];
  int fds[7] = {-1, -1, -1, -1, -1, -1, -1}, rc;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (unshare(CLONE_NEWUSER) < 0) goto fail;
  step = "the user namespace's id maps";
  if (mp_ns_map_self(uid, gid) < 0) goto fail;
  step = "unshare(CLONE_NEWNET) in it";
  if (unshare(CLONE_NEWNET) < 0) goto fail;
  step = "its descriptors";
  fds[0] = open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC);
  fds[1] = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  fds[2] = mp_rtnl_open();
  fds[3] = mp_rtnl_open();
  if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0 || fds[3] < 0) goto fail;
  /* bridges and veths need their modules (a user namespace cannot load
  ** them) and a kernel that lets a user namespace make them */
  rc = mp_rtnl_bridge_add(fds[2], MP_NET_BRIDGE_PREFIX "probe");
  if (rc < 0) {
    errno = -rc;
    step = "a bridge in it";
    goto fail;
  }
  mp_rtnl_link_del(fds[2], MP_NET_BRIDGE_PREFIX "probe");
  /* the way out (switch_out.c): its failure leaves the networks without
  ** one, and is told after "ok " */
  snprintf(msg, sizeof msg, "ok ");
  if (egress && mp_switch_out_prepare(dir, fds + 4, msg + 3, sizeof msg - 3) == 0)
    _exit(mp_ns_send_fds(sock, "ok", 2, fds, 7) < 0 ? 1 : 0);
  if (!egress) snprintf(msg, sizeof msg, "ok egress off");
  _exit(mp_ns_send_fds(sock, msg, strlen(msg), fds, 4) < 0 ? 1 : 0);
fail:
  snprintf(msg, sizeof msg, "%s: %s", step, strerror(errno));
  _exit(write(sock, msg, strlen(msg)) < 0 ? 1 : 0);
}

/* without root: the switch from a holder (above); net->userns, links_ns,
** nl and *dnl */
static int switch_in_userns(mp_net *net, int *dnl, char *err, size_t errlen) {
  int sv[2], fds[7], n, i, st;
  long got;
  char msg[600];
  pid_t pid;
  unsigned uid = (unsigned)geteuid(), gid = (unsigned)getegid();
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
    snprintf(err, errlen, "socketpair: %s", strerror(errno));
    return -1;
  }
  pid = fork();
  if (pid == 0) {
    close(sv[0]);
    holder(sv[1], uid, gid, net->dir, net->egress);
  }
  close(sv[1]);
  if (pid < 0) {
    snprintf(err, errlen, "fork: %s", strerror(errno));
    close(sv[0]);
    return -1;
  }
  got = mp_ns_recv_fds(sv[0], msg, sizeof msg - 1, 0, fds, 7, &n);
  if (got < 0) snprintf(msg, sizeof msg, "%s", strerror(errno));
  else msg[got] = '\0';
  close(sv[0]);
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if ((n != 4 && n != 7) || strncmp(msg, "ok", 2) != 0) {
    for (i = 0; i < n; i++) close(fds[i]);
    snprintf(err, errlen, "the server runs without root (uid %d), and the"
             " user namespace that would hold its private networks cannot"
             " be made: %s", (int)uid, msg[0] ? msg : "its child failed");
    return -1;
  }
  net->userns = fds[0];
  net->links_ns = fds[1];
  net->nl = fds[2];
  *dnl = fds[3]; /* with mp_rtnl_open's options: they go with the socket */
  if (n == 7) {
    memcpy(net->out_fds, fds + 4, sizeof net->out_fds);
  } else {
    snprintf(net->out_err, sizeof net->out_err, "%.380s", msg + 3);
    net->egress = 0;
  }
  return 0;
}

int mp_net_userns(const mp_net *net) { return net->userns; }

/* }====== */

/* the switch's routes for its way out: lo up, and what TPROXY marked
** (switch_out.c) is looked up in a table where every address is local, so
** it is delivered to the proxy's sockets whatever the destination (the
** address of another sandbox, whose /32 route would forward it, included;
** forwarding is off); and the resolv.conf that sandboxes get (any address
** works: DNS to port 53 anywhere goes to the proxy) */
static int switch_routes(mp_net *net) {
  char path[4096];
  const char *text = "# mastra-platform: the sandbox's resolver (the platform's egress"
                     " proxy)\nnameserver " MP_NET_GATEWAY "\noptions timeout:2 attempts:2\n";
  int lo = mp_rtnl_link_index(net->nl, "lo"), rc;
  rc = lo < 0 ? lo : mp_rtnl_link_up(net->nl, lo);
  if (rc == 0) rc = mp_rtnl_route_local_all(net->nl, lo, MP_SWITCH_OUT_TABLE);
  if (rc == 0) rc = mp_rtnl_rule_fwmark(net->nl, MP_SWITCH_OUT_MARK, MP_SWITCH_OUT_TABLE);
  if (rc < 0) {
    snprintf(net->out_err, sizeof net->out_err, "the switch's routes: %s", strerror(-rc));
    return -1;
  }
  path_in(net->dir, "resolv.conf", path, sizeof path);
  if (mastra__write_file_atomic(path, text, strlen(text), 0644, 0) < 0) {
    snprintf(net->out_err, sizeof net->out_err, "cannot write %.300s: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

int mp_net_out_fds(const mp_net *net, int fds[3]) {
  if (net == NULL || !net->egress) return 0;
  memcpy(fds, net->out_fds, sizeof net->out_fds);
  return 1;
}

const char *mp_net_out_error(const mp_net *net) { return net->out_err; }

const char *mp_net_resolv_path(mp_net *net) {
  static _Thread_local char path[4096];
  if (!net->egress) return NULL;
  path_in(net->dir, "resolv.conf", path, sizeof path);
  return path;
}

static mp_net *net_open(const char *state_dir, int egress, int unpriv, char *err,
                        size_t errlen) {
  mp_net *net = calloc(1, sizeof *net);
  char path[4096];
  if (net == NULL || (net->dir = strdup(state_dir)) == NULL) {
    snprintf(err, errlen, "out of memory");
    free(net);
    return NULL;
  }
  net->egress = egress != 0;
  net->unpriv = unpriv != 0;
  net->userns = net->host_ns = net->links_ns = net->nl = -1;
  net->out_fds[0] = net->out_fds[1] = net->out_fds[2] = -1;
  mp_net_sweep(state_dir);
  path_in(state_dir, "hosts", path, sizeof path);
  if (mastra__mkdirs(path, 0755, NULL) < 0) {
    snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
    goto fail;
  }
  {
    char hex[8];
    mastra__random_hex(hex, 3);
    memcpy(net->tag, hex, TAG_LEN);
    net->tag[TAG_LEN] = '\0';
  }
  net->host_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (net->host_ns < 0) {
    snprintf(err, errlen, "cannot open /proc/thread-self/ns/net: %s", strerror(errno));
    goto fail;
  }
  if (net->unpriv) {
    /* the switch, in a user namespace of its own */
    int dnl = -1;
    if (switch_in_userns(net, &dnl, err, errlen) < 0) goto fail;
    net->del = mp_linkdel_start(dnl);
  } else {
    /* the switch (a namespace of our own, held by links_ns and the sockets),
    ** or with egress the host's */
    int dnl, e;
    if (unshare(CLONE_NEWNET) < 0) {
      snprintf(err, errlen, "cannot create a network namespace for the private"
               " networks: %s (the namespaces driver needs root)", strerror(errno));
      goto fail;
    }
    net->links_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    net->nl = mp_rtnl_open();
    dnl = mp_rtnl_open();
    e = errno;
    /* the way out, made in the switch (switch_out.c) */
    if (net->egress
        && mp_switch_out_prepare(net->dir, net->out_fds, net->out_err, sizeof net->out_err) < 0)
      net->egress = 0;
    if (setns(net->host_ns, CLONE_NEWNET) < 0) abort();
    if (net->links_ns < 0 || net->nl < 0 || dnl < 0) {
      snprintf(err, errlen, "cannot hold the namespace of the bridges: %s", strerror(e));
      if (dnl >= 0) close(dnl);
      goto fail;
    }
    net->del = mp_linkdel_start(dnl);
  }
  if (net->del == NULL) {
    snprintf(err, errlen, "cannot start the thread that deletes links");
    goto fail;
  }
  state_write(net); /* the tag first: a crash from here on is swept */
  if (net->egress && switch_routes(net) < 0) {
    int i;
    for (i = 0; i < 3; i++)
      if (net->out_fds[i] >= 0) close(net->out_fds[i]), net->out_fds[i] = -1;
    net->egress = 0;
  }
  return net;
fail:
  mp_net_close(net);
  return NULL;
}

mp_net *mp_net_open(const char *state_dir, int egress, char *err, size_t errlen) {
  return net_open(state_dir, egress, 0, err, errlen);
}

mp_net *mp_net_open_user(const char *state_dir, int egress, char *err, size_t errlen) {
  return net_open(state_dir, egress, 1, err, errlen);
}

void mp_net_close(mp_net *net) {
  envnet *e, *next;
  char path[4096];
  if (net == NULL) return;
  /* With egress the links are the host's: each is deleted (waited for).
  ** Otherwise the switch goes with its last descriptor (closed below), and
  ** the kernel removes its bridges and veths, and their peers, at once. */
  for (e = net->envs; e; e = next) {
    member *m, *mn;
    next = e->next;
    for (m = e->members; m; m = mn) {
      mn = m->next;
      free(m);
    }
    unlink(e->hosts);
    free(e->hosts), free(e->env), free(e);
  }
  mp_linkdel_stop(net->del, 0);
  {
    int i;
    for (i = 0; i < 3; i++)
      if (net->out_fds[i] >= 0) close(net->out_fds[i]);
  }
  if (net->nl >= 0) close(net->nl);
  if (net->links_ns >= 0) close(net->links_ns);
  if (net->userns >= 0) close(net->userns);
  if (net->host_ns >= 0) close(net->host_ns);
  path_in(net->dir, "hosts", path, sizeof path);
  mastra__remove_tree(path);
  path_in(net->dir, "egress.nft", path, sizeof path);
  unlink(path);
  path_in(net->dir, "switch.nft", path, sizeof path);
  unlink(path);
  path_in(net->dir, "resolv.conf", path, sizeof path);
  unlink(path);
  path_in(net->dir, "state", path, sizeof path);
  unlink(path);
  free(net->dir);
  free(net);
}

int mp_net_links_netns(const mp_net *net) { return net->links_ns; }

void mp_net_flush(mp_net *net) { mp_linkdel_flush(net->del); }

/* }====== */

/* {====== members ====== */

const char *mp_net_hosts_path(mp_net *net, const char *env) {
  envnet *e = env && *env ? env_get(net, env) : NULL;
  return e ? e->hosts : NULL;
}

static member *member_find(const mp_net *net, const char *name, envnet **env) {
  envnet *e;
  member *m;
  for (e = net->envs; e; e = e->next)
    for (m = e->members; m; m = m->next)
      if (strcmp(m->name, name) == 0) {
        if (env) *env = e;
        return m;
      }
  return NULL;
}

/* the lowest subnet that no environment of ours (and, with egress, no
** address of the host) uses */
static int alloc_subnet(mp_net *net) {
  unsigned char used[256] = {0};
  envnet *e;
  int i;
  for (e = net->envs; e; e = e->next)
    if (e->idx >= 0) used[e->idx] = 1;
  for (i = 0; i < 256; i++) {
    char br[IFNAMSIZ];
    bridge_name(net, i, br);
    if (!used[i] && !mp_linkdel_pending(net->del, br)) return i; /* not still going */
  }
  return -1;
}

static int bridge_make(mp_net *net, envnet *e, int idx, char *err, size_t errlen) {
  char br[IFNAMSIZ];
  int rc, ix;
  bridge_name(net, idx, br);
  rc = mp_rtnl_bridge_add(net->nl, br);
  if (rc < 0) {
    snprintf(err, errlen, "cannot create bridge %s: %s", br, strerror(-rc));
    return -1;
  }
  ix = mp_rtnl_link_index(net->nl, br);
  rc = ix < 0 ? ix : mp_rtnl_no_ipv6_addr(net->nl, ix);
  if (rc == 0 && net->egress) rc = mp_rtnl_addr_add(net->nl, ix, ip_of(idx, 1), 24);
  /* (the gateway: the switch's stack, where the proxy takes what goes out) */
  if (rc == 0) rc = mp_rtnl_link_up(net->nl, ix);
  if (rc < 0) {
    snprintf(err, errlen, "cannot set up bridge %s: %s", br, strerror(-rc));
    mp_linkdel_queue(net->del, br);
    return -1;
  }
  e->idx = idx;
  e->bridge_ix = ix;
  return 0;
}

static void bridge_drop(mp_net *net, envnet *e) {
  char br[IFNAMSIZ];
  if (e->idx < 0) return;
  bridge_name(net, e->idx, br);
  mp_linkdel_queue(net->del, br);
  e->idx = -1;
  e->bridge_ix = 0;
}

/* inside the member's namespace: eth0's address and state, lo up, and with
** egress the default route */
static int configure_peer(mp_net *net, int netns_fd, int peer_nl, struct in_addr a,
                          int idx, char *err, size_t errlen) {
  int fd = peer_nl >= 0 ? dup(peer_nl) : ns_socket(net, netns_fd, err, errlen), ix, lo, rc;
  if (fd < 0) {
    if (peer_nl >= 0) snprintf(err, errlen, "dup: %s", strerror(errno));
    return -1;
  }
  if (peer_nl >= 0) { /* mp_rtnl_open's guard, on a socket made elsewhere */
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ix = mp_rtnl_link_index(fd, "eth0");
  lo = mp_rtnl_link_index(fd, "lo");
  rc = ix < 0 ? ix : lo < 0 ? lo : mp_rtnl_addr_add(fd, ix, a, 24);
  if (rc == 0) rc = mp_rtnl_link_up(fd, ix);
  if (rc == 0) rc = mp_rtnl_link_up(fd, lo);
  if (rc == 0 && net->egress) rc = mp_rtnl_route_default(fd, ip_of(idx, 1));
  close(fd);
  if (rc < 0) {
    snprintf(err, errlen, "cannot configure eth0 in the sandbox's namespace: %s",
             strerror(-rc));
    return -1;
  }
  return 0;
}

int mp_net_join(mp_net *net, const char *env, const char *name, int netns_fd,
                char *addr, size_t addrlen, char *err, size_t errlen) {
  return mp_net_join_nl(net, env, name, netns_fd, -1, addr, addrlen, err, errlen);
}

int mp_net_join_nl(mp_net *net, const char *env, const char *name, int netns_fd,
                   int peer_nl, char *addr, size_t addrlen, char *err, size_t errlen) {
  envnet *e;
  member *m, *mm;
  int made_bridge = 0, host, rc, ix;
  unsigned char used[256] = {0};
  struct in_addr a;
  if (env == NULL || env[0] == '\0') {
    snprintf(err, errlen, "a PRIVATE network needs an environment id");
    return -1;
  }
  if (name == NULL || !valid_name(name)) {
    snprintf(err, errlen, "'%s' cannot be a host name on a private network: use 1 to %d"
             " letters, digits, '-', '_' or '.'", name ? name : "(null)", NAME_MAX_LEN);
    return -1;
  }
  if (member_find(net, name, NULL)) {
    snprintf(err, errlen, "'%s' is already on a private network", name);
    return -1;
  }
  e = env_get(net, env);
  if (e == NULL) {
    snprintf(err, errlen, "cannot write the hosts file of environment '%s' under %s/hosts: %s",
             env, net->dir, strerror(errno));
    return -1;
  }
  if (e->idx < 0) {
    int idx = alloc_subnet(net);
    if (idx < 0) {
      snprintf(err, errlen, "every subnet of " MP_NET_PREFIX ".0.0/16 is in use: at most"
               " 256 environments have PRIVATE sandboxes at once");
      return -1;
    }
    if (bridge_make(net, e, idx, err, errlen) < 0) return -1;
    made_bridge = 1;
  }
  for (mm = e->members; mm; mm = mm->next) used[mm->host] = 1;
  for (host = HOST_FIRST; host <= HOST_LAST && used[host]; host++) {}
  if (host > HOST_LAST) {
    snprintf(err, errlen, "environment '%s' has %d PRIVATE sandboxes: the most its /24"
             " holds", env, HOST_LAST - HOST_FIRST + 1);
    goto fail;
  }
  m = calloc(1, sizeof *m);
  if (m == NULL) {
    snprintf(err, errlen, "out of memory");
    goto fail;
  }
  strcpy(m->name, name);
  m->host = host;
  snprintf(m->veth, sizeof m->veth, MP_NET_VETH_PREFIX "%.5s%06x", net->tag,
           ++net->counter & 0xffffffu);
  a = ip_of(e->idx, host);
  rc = mp_rtnl_veth_add(net->nl, m->veth, e->bridge_ix, "eth0", netns_fd);
  if (rc == -EEXIST) { /* a namespace that left and joins again: its old eth0 */
    mp_linkdel_flush(net->del); /* may still be queued for deletion */
    rc = mp_rtnl_veth_add(net->nl, m->veth, e->bridge_ix, "eth0", netns_fd);
  }
  if (rc < 0) {
    snprintf(err, errlen, "cannot create veth %s into the sandbox's namespace: %s%s",
             m->veth, strerror(-rc), rc == -EEXIST ? " (it has an eth0 already)" : "");
    free(m);
    goto fail;
  }
  ix = mp_rtnl_link_index(net->nl, m->veth);
  rc = ix < 0 ? ix : mp_rtnl_no_ipv6_addr(net->nl, ix);
  if (rc == 0) rc = mp_rtnl_link_up(net->nl, ix);
  if (rc < 0) snprintf(err, errlen, "cannot set up veth %s: %s", m->veth, strerror(-rc));
  if (rc < 0 || configure_peer(net, netns_fd, peer_nl, a, e->idx, err, errlen) < 0) {
    mp_linkdel_queue(net->del, m->veth);
    free(m);
    goto fail;
  }
  m->next = e->members;
  e->members = m;
  if (hosts_write(e) < 0) {
    snprintf(err, errlen, "cannot write %s: %s", e->hosts, strerror(errno));
    e->members = m->next;
    mp_linkdel_queue(net->del, m->veth);
    free(m);
    goto fail;
  }
  state_write(net);
  inet_ntop(AF_INET, &a, addr, (socklen_t)addrlen);
  return 0;
fail:
  if (made_bridge) bridge_drop(net, e);
  return -1;
}

void mp_net_leave(mp_net *net, const char *env, const char *name) {
  envnet *e = NULL;
  member *m = name ? member_find(net, name, &e) : NULL, **pp;
  if (m == NULL || (env && strcmp(e->env, env) != 0)) return;
  /* queued: the deletion waits on the kernel, not the caller (-ENODEV, if
  ** the namespace went first and took the pair with it, is no error) */
  mp_linkdel_queue(net->del, m->veth);
  for (pp = &e->members; *pp != m; pp = &(*pp)->next) {}
  *pp = m->next;
  free(m);
  hosts_write(e);
  if (e->members == NULL) bridge_drop(net, e);
  state_write(net);
}

/* }====== */

/* {====== the links of ISOLATED sandboxes to the way out ====== */

static struct in_addr out_ip(unsigned slot) {
  struct in_addr a;
  a.s_addr = htonl(0x0ae80000u | slot); /* 10.232.0.0/16 */
  return a;
}

static void out_veth_name(const mp_net *net, unsigned slot, char out[IFNAMSIZ]) {
  snprintf(out, IFNAMSIZ, MP_NET_EGRESS_VETH_PREFIX "%.5s%04x", net->tag, slot & 0xffffu);
}

/* a free slot (not 0.0, 0.1 or 255.255), whose veth is not still going */
static int out_alloc(mp_net *net) {
  unsigned i;
  for (i = 0; i < OUT_SLOTS; i++) {
    unsigned slot = (net->out_next + i) % OUT_SLOTS;
    char name[IFNAMSIZ];
    if (slot < 2 || slot == OUT_SLOTS - 1 || (net->out_used[slot / 8] & (1u << (slot % 8))))
      continue;
    out_veth_name(net, slot, name);
    if (mp_linkdel_pending(net->del, name)) continue;
    net->out_used[slot / 8] |= (unsigned char)(1u << (slot % 8));
    net->out_next = slot + 1;
    return (int)slot;
  }
  return -1;
}

int mp_net_out_join(mp_net *net, int netns_fd, int peer_nl, uint32_t *addr, char *err,
                    size_t errlen) {
  char name[IFNAMSIZ];
  struct in_addr gw, a;
  int slot, rc, ix, fd = -1, eix, lo;
  if (!net->egress) {
    snprintf(err, errlen, "no way out: %s", net->out_err[0] ? net->out_err : "egress is off");
    return -1;
  }
  slot = out_alloc(net);
  if (slot < 0) {
    snprintf(err, errlen, "every address of " MP_NET_EGRESS_PREFIX ".0.0/16 is in use");
    return -1;
  }
  out_veth_name(net, (unsigned)slot, name);
  inet_pton(AF_INET, MP_NET_GATEWAY, &gw);
  a = out_ip((unsigned)slot);
  rc = mp_rtnl_veth_add(net->nl, name, 0, "eth0", netns_fd);
  if (rc == -EEXIST) { /* an eth0 of a namespace that left and joins again */
    mp_linkdel_flush(net->del);
    rc = mp_rtnl_veth_add(net->nl, name, 0, "eth0", netns_fd);
  }
  if (rc < 0) {
    snprintf(err, errlen, "cannot create veth %s into the sandbox's namespace: %s", name,
             strerror(-rc));
    goto fail;
  }
  ix = mp_rtnl_link_index(net->nl, name);
  rc = ix < 0 ? ix : mp_rtnl_no_ipv6_addr(net->nl, ix);
  if (rc == 0) rc = mp_rtnl_addr_add_peer(net->nl, ix, gw, a);
  if (rc == 0) rc = mp_rtnl_link_up(net->nl, ix);
  if (rc < 0) {
    snprintf(err, errlen, "cannot set up veth %s: %s", name, strerror(-rc));
    mp_linkdel_queue(net->del, name);
    goto fail;
  }
  /* the sandbox's side: eth0 = a, its peer the gateway, the default route */
  fd = peer_nl >= 0 ? dup(peer_nl) : ns_socket(net, netns_fd, err, errlen);
  if (fd < 0) {
    if (peer_nl >= 0) snprintf(err, errlen, "dup: %s", strerror(errno));
    mp_linkdel_queue(net->del, name);
    goto fail;
  }
  eix = mp_rtnl_link_index(fd, "eth0");
  lo = mp_rtnl_link_index(fd, "lo");
  rc = eix < 0 ? eix : lo < 0 ? lo : mp_rtnl_no_ipv6_addr(fd, eix);
  if (rc == 0) rc = mp_rtnl_addr_add_peer(fd, eix, a, gw);
  if (rc == 0) rc = mp_rtnl_link_up(fd, eix);
  if (rc == 0) rc = mp_rtnl_link_up(fd, lo);
  if (rc == 0) rc = mp_rtnl_route_default(fd, gw);
  close(fd);
  if (rc < 0) {
    snprintf(err, errlen, "cannot configure eth0 in the sandbox's namespace: %s",
             strerror(-rc));
    mp_linkdel_queue(net->del, name);
    goto fail;
  }
  *addr = ntohl(a.s_addr);
  return 0;
fail:
  net->out_used[slot / 8] &= (unsigned char)~(1u << (slot % 8));
  return -1;
}

void mp_net_out_leave(mp_net *net, uint32_t addr) {
  unsigned slot = addr & 0xffffu;
  char name[IFNAMSIZ];
  if ((addr & 0xffff0000u) != 0x0ae80000u || !(net->out_used[slot / 8] & (1u << (slot % 8))))
    return;
  out_veth_name(net, slot, name);
  mp_linkdel_queue(net->del, name);
  net->out_used[slot / 8] &= (unsigned char)~(1u << (slot % 8));
}

/* }====== */
