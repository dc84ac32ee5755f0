/*
** The switch's way out (switch_out.h): transparent sockets and the
** nftables table of the switch namespace, made once at startup in that
** namespace.
*/
#define _GNU_SOURCE
#include "net/switch_out.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/net.h"
#include "util.h"

extern char **environ;

static int transparent(int type, char *err, size_t errlen) {
  struct sockaddr_in sin;
  int one = 1, fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(err, errlen, "socket: %s", strerror(errno));
    return -1;
  }
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_port = htons(MP_SWITCH_OUT_PORT);
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (setsockopt(fd, SOL_IP, IP_TRANSPARENT, &one, sizeof one) < 0) {
    snprintf(err, errlen, "IP_TRANSPARENT: %s", strerror(errno));
    goto fail;
  }
  if (type == SOCK_DGRAM && setsockopt(fd, SOL_IP, IP_RECVORIGDSTADDR, &one, sizeof one) < 0) {
    snprintf(err, errlen, "IP_RECVORIGDSTADDR: %s", strerror(errno));
    goto fail;
  }
  if (bind(fd, (struct sockaddr *)&sin, sizeof sin) < 0) {
    snprintf(err, errlen, "bind: %s", strerror(errno));
    goto fail;
  }
  if (type == SOCK_STREAM && listen(fd, 1024) < 0) {
    snprintf(err, errlen, "listen: %s", strerror(errno));
    goto fail;
  }
  return fd;
fail:
  close(fd);
  return -1;
}

/* nft -f path, waited for */
static int nft_file(const char *dir, const char *path, char *err, size_t errlen) {
  char *argv[] = {"nft", "-f", (char *)path, NULL}, errpath[4200];
  posix_spawn_file_actions_t fa;
  pid_t pid;
  int rc, st = 0;
  snprintf(errpath, sizeof errpath, "%s/switch.err", dir);
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  rc = posix_spawnp(&pid, "nft", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    snprintf(err, errlen, "egress needs nft (nftables), which cannot be run: %s"
             " (apt-get install nftables)", strerror(rc));
    return -1;
  }
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char *text = NULL;
    size_t n = 0;
    if (mastra__read_file(errpath, &text, &n) == 0) text[strcspn(text, "\n")] = '\0';
    snprintf(err, errlen, "nft failed in the switch: %s", text && *text ? text : "(no message)");
    free(text);
    unlink(errpath);
    return -1;
  }
  unlink(errpath);
  return 0;
}

int mp_switch_out_prepare(const char *dir, int fds[3], char *err, size_t errlen) {
  char path[4200], text[2048];
  int one = 1;
  fds[0] = fds[1] = fds[2] = -1;
  /* Every packet a sandbox sends out (not to the private subnets, whose
  ** traffic the bridges switch: with br_netfilter it passes these hooks
  ** too) goes to the proxy's sockets: TPROXY keeps its original
  ** destination, and its mark routes it to them (net.c's rule and
  ** table). The forward path is never used (forwarding is off in a new
  ** namespace, and stays off): nothing is routed between links. */
  snprintf(text, sizeof text,
           "table inet mastra_switch {\n"
           "  chain pre {\n"
           "    type filter hook prerouting priority mangle; policy accept;\n"
           "    iifname \"" MP_NET_EGRESS_VETH_PREFIX "*\" fib saddr . iif oif missing drop\n"
           "    iifname \"" MP_NET_BRIDGE_PREFIX "*\" ip daddr " MP_NET_PREFIX ".0.0/16 accept\n"
           "    iifname \"" MP_NET_BRIDGE_PREFIX "*\" meta nfproto ipv6 accept\n"
           "    iifname { \"" MP_NET_EGRESS_VETH_PREFIX "*\", \"" MP_NET_BRIDGE_PREFIX "*\" }"
           " meta nfproto ipv4 meta l4proto { tcp, udp } tproxy ip to :%d meta mark set %u"
           " accept\n"
           "    iifname { \"" MP_NET_EGRESS_VETH_PREFIX "*\", \"" MP_NET_BRIDGE_PREFIX "*\" }"
           " drop\n"
           "  }\n"
           "}\n", MP_SWITCH_OUT_PORT, MP_SWITCH_OUT_MARK);
  snprintf(path, sizeof path, "%s/switch.nft", dir);
  if (mastra__write_file_atomic(path, text, strlen(text), 0644, 0) < 0) {
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  if (nft_file(dir, path, err, errlen) < 0) return -1;
  /* frames the bridges switch skip the IP hooks (br_netfilter, on by
  ** default in a new namespace, would run them there, where TPROXY does not
  ** deliver): what a member sends to its gateway goes up the bridge's own
  ** stack, through the table above. Per namespace; absent without
  ** br_netfilter, which is then off anyway. */
  {
    static const char *const calls[] = {"iptables", "ip6tables", "arptables"};
    size_t i;
    for (i = 0; i < sizeof calls / sizeof calls[0]; i++) {
      char sysctl[128];
      int fd;
      snprintf(sysctl, sizeof sysctl, "/proc/sys/net/bridge/bridge-nf-call-%s", calls[i]);
      fd = open(sysctl, O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        if (write(fd, "0\n", 2) != 2) {} /* best effort */
        close(fd);
      }
    }
  }
  fds[0] = transparent(SOCK_STREAM, err, errlen);
  if (fds[0] < 0) goto fail;
  fds[1] = transparent(SOCK_DGRAM, err, errlen);
  if (fds[1] < 0) goto fail;
  fds[2] = socket(AF_INET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_RAW);
  if (fds[2] < 0) {
    snprintf(err, errlen, "a raw socket: %s", strerror(errno));
    goto fail;
  }
  setsockopt(fds[2], SOL_IP, IP_HDRINCL, &one, sizeof one);
  return 0;
fail:
  if (fds[0] >= 0) close(fds[0]);
  if (fds[1] >= 0) close(fds[1]);
  fds[0] = fds[1] = fds[2] = -1;
  return -1;
}
