/*
** The `namespaces` driver on this host (ns_host.h): availability, the
** base, the init's binary, the setup of ids, cgroups and PRIVATE networks
** for the whole server, and their finish.
*/
#define _GNU_SOURCE
#include "drivers/ns/ns_host.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "drivers/ns/base.h"
#include "drivers/ns/ns_cgroup.h"
#include "drivers/ns/ns_idmap.h"
#include "drivers/ns/ns_uids.h"
#include "drivers/ns/ns_options.h"
#include "drivers/ns/ns_seccomp.h"
#include "drivers/ns/ns_user.h"
#include "drivers/ns/init/ns_init.h" /* MP_NS_FILTER_FILE */
#include "net/egress.h"
#include "util/log.h"
#include "util.h"

#include <arpa/inet.h>

#ifndef MP_NS_INIT_INSTALLED
#define MP_NS_INIT_INSTALLED "../libexec/mastra-platform/mastra-ns-init"
#endif

mp_ns_host_state mp_ns_host = {.idmap_fd = -1, .own_pidns = -1};


int mp_ns_host_available(char *why, size_t n) {
  struct stat st;
  if (stat("/proc/self/ns/user", &st) < 0
      || stat("/proc/self/ns/pid", &st) < 0) {
    snprintf(why, n, "this kernel has no user or pid namespaces");
    return 0;
  }
  if (geteuid() != 0) return mp_ns_user_probe(why, n);
  return 1;
}

const char *mp_ns_host_limits(const mp_server *srv) {
  (void)srv;
  return mp_ns_host.limits;
}

void mp_ns_host_stop(mp_server *srv) {
  (void)srv;
  mp_egress_close(mp_ns_host.egress);
  mp_ns_host.egress = NULL;
}

void mp_ns_host_finish(mp_server *srv) {
  mp_ns_host_stop(srv); /* a failed start: the loop is still there */
  if (mp_ns_host.own_pidns >= 0) close(mp_ns_host.own_pidns);
  mp_ns_host.own_pidns = -1;
  mp_nscg_finish();
  if (mp_ns_host.idmap_fd >= 0) close(mp_ns_host.idmap_fd);
  mp_ns_host.idmap_fd = -1;
  if (mp_ns_host.net != NULL) mp_net_close(mp_ns_host.net);
  mp_ns_host.net = NULL;
}

/* mastra-ns-init beside the server's binary (the build tree), or where
** `cmake --install` puts it; else the server's own binary (`__ns-init`),
** which costs its dynamic loading at every sandbox start */
static void find_init(void) {
  static const char *const rel[] = {"mastra-ns-init", MP_NS_INIT_INSTALLED};
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  size_t i;
  char *slash;
  snprintf(mp_ns_host.init_bin, sizeof mp_ns_host.init_bin, "/proc/self/exe");
  if (n <= 0) return;
  exe[n] = '\0';
  slash = strrchr(exe, '/');
  if (slash == NULL) return;
  slash[1] = '\0';
  for (i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s%s", exe, rel[i]);
    if (access(path, X_OK) == 0) {
      snprintf(mp_ns_host.init_bin, sizeof mp_ns_host.init_bin, "%s", path);
      mp_ns_host.init_found = 1;
      return;
    }
  }
  mp_log("mastra-ns-init is not beside %s (nor in %s): sandboxes start"
         " through mastra-platform itself, a few ms slower", exe,
         MP_NS_INIT_INSTALLED);
}

/* The base: --base (or MASTRA_PLATFORM_BASE), else DATA/base, built when
** it is missing (a skeleton over the host's /usr, a moment without root,
** then TypeScript and tsx from the npm registry, bounded in base.c and
** left out where the registry cannot be reached); its real path, which
** mounts name without following a symlink (move_mount's target). 0, -1
** (err: a given base is wrong), or -2 (err: it cannot be built here). */
static int ns_base(const mp_server *srv, char out[PATH_MAX], char *err,
                   size_t errlen) {
  const char *given = mp_ns_opts.base;
  char base[4096];
  if (given == NULL) given = getenv("MASTRA_PLATFORM_BASE");
  if (given != NULL && given[0] != '\0')
    snprintf(base, sizeof base, "%s", given);
  else
    snprintf(base, sizeof base, "%s/base", srv->data_dir);
  if (!mp_base_ready(base)) {
    mp_log("building the base of the sandboxes in %s (once): the host's"
           " tools, then TypeScript and tsx from the npm registry", base);
    if (mp_base_build(base, 0, err, errlen) < 0) return -2;
  }
  if (realpath(base, out) == NULL) {
    snprintf(err, errlen, "the base %s: %s", base, strerror(errno));
    return -1;
  }
  return 0;
}

/* 0, -1 (err: a flag asks for what cannot be done here) or -2 (err: the
** driver cannot run here after all) */
static void default_dns(void);

/* Keepers and inits ask for oom_score_adj -1000 (ns_init.c), so that the
** kernel's OOM killer takes a sandbox's commands before the processes that
** hold it; where the server lacks CAP_SYS_RESOURCE (without root) the
** kernel refuses, each keeper would fail alone and in silence, so a child
** tries once here and the server says it once. */
static void oom_probe(void) {
  int status = 0;
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    _exit(fd < 0 ? errno : write(fd, "-1000", 5) == 5 ? 0 : errno);
  }
  if (pid < 0) return;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    mp_log("the sandboxes' keepers and inits cannot have oom_score_adj -1000 (%s;"
           " it needs CAP_SYS_RESOURCE): under memory pressure the kernel may kill"
           " them as readily as a sandbox's commands",
           strerror(WEXITSTATUS(status)));
}

int mp_ns_host_setup(mp_server *srv, char *err, size_t errlen) {
  char dir[4200], base[PATH_MAX];
  int egress = mp_ns_opts.egress, rc = ns_base(srv, base, err, errlen);
  if (rc < 0) return rc;
  find_init();
  snprintf(mp_ns_host.base, sizeof mp_ns_host.base, "%s", base);
  mp_ns_host.unpriv = geteuid() != 0;
  oom_probe();
  mp_ns_host.own_pidns = -1;
  if (!mp_ns_host.unpriv)
    mp_ns_host.own_pidns = open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC);
  mp_ns_host.idmap_fd = -1;
  if (!mp_ns_host.unpriv) mp_ns_host.idmap_fd = mp_ns_idmap_open(base);
  /* a host uid range a sandbox where its layers can be idmapped (ns_uids.h) */
  {
    char why[700];
    int own = 0;
    if (mp_ns_host.unpriv)
      snprintf(why, sizeof why, "without root a user namespace maps one id,"
               " the server's own");
    else if (mp_ns_host.idmap_fd < 0)
      snprintf(why, sizeof why, "idmapped mounts do not work here");
    else
      own = mp_ns_idmap_layers_probe(srv->data_dir, why, sizeof why);
    mp_ns_uids_setup(mp_ns_opts.uid_first, mp_ns_opts.uid_ranges, !own,
                     mp_ns_host.unpriv ? (unsigned)geteuid() : MP_NS_UID_BASE);
    if (!own && mp_ns_host.unpriv)
      mp_log("every sandbox has the same host uid (%u, the server's): %s",
             (unsigned)geteuid(), why);
    else if (!own)
      mp_log("every sandbox has the same host uids (%u..%u): %s", MP_NS_UID_BASE,
             MP_NS_UID_BASE + MP_NS_UID_COUNT - 1, why);
  }
  /* every sandbox process runs under it; one this server cannot build, no
  ** sandbox */
  {
    mp_ns_seccomp_opts so;
    so.nested_ns = mp_ns_opts.nested_ns;
    so.io_uring = mp_ns_opts.io_uring;
    so.keyrings = mp_ns_uids_own();
    snprintf(mp_ns_host.filter, sizeof mp_ns_host.filter,
             "%s/" MP_NS_FILTER_FILE, srv->data_dir);
    if (mp_ns_seccomp_write(mp_ns_host.filter, &so, err, errlen) < 0) return -2;
  }
  mp_nscg_setup(srv->data_dir, mp_ns_opts.pids_max, mp_ns_opts.memory_max,
                mp_ns_cpu_max(), mp_ns_host.unpriv, mp_ns_host.limits,
                sizeof mp_ns_host.limits);
  /* sweeps what a previous server of this data directory left (bridges,
  ** veths, NAT rules, hosts files), then makes the switch namespace;
  ** without root in a user namespace of its own, U, which the keepers
  ** join first (as MP_NS_IDMAP_FD, free without root): net.h */
  snprintf(dir, sizeof dir, "%s/net", srv->data_dir);
  if (mp_ns_host.unpriv) {
    char why[300];
    mp_ns_host.net = mp_net_open_user(dir, egress, mp_ns_host.net_err,
                                      sizeof mp_ns_host.net_err);
    /* sandboxes nested under it, or no PRIVATE (ISOLATED as before) */
    if (mp_ns_host.net != NULL
        && !mp_ns_user_probe_under(mp_net_userns(mp_ns_host.net), why,
                                   sizeof why)) {
      snprintf(mp_ns_host.net_err, sizeof mp_ns_host.net_err,
               "the server runs without root"
               " (uid %d), and a sandbox's namespaces cannot be made under the"
               " user namespace of its private networks: %s", (int)geteuid(),
               why);
      mp_net_close(mp_ns_host.net);
      mp_ns_host.net = NULL;
    }
    if (mp_ns_host.net != NULL)
      mp_ns_host.idmap_fd =
          fcntl(mp_net_userns(mp_ns_host.net), F_DUPFD_CLOEXEC, 0);
  } else {
    mp_ns_host.net = mp_net_open(dir, egress, mp_ns_host.net_err,
                                 sizeof mp_ns_host.net_err);
  }
  if (mp_ns_host.net == NULL)
    mp_log("PRIVATE networks are not available: %s", mp_ns_host.net_err);
  if (!egress)
    snprintf(mp_ns_host.egress_err, sizeof mp_ns_host.egress_err, "--egress off");
  else if (mp_ns_host.net == NULL)
    snprintf(mp_ns_host.egress_err, sizeof mp_ns_host.egress_err, "%s", mp_ns_host.net_err);
  else if (mp_net_out_error(mp_ns_host.net)[0])
    snprintf(mp_ns_host.egress_err, sizeof mp_ns_host.egress_err, "%s",
             mp_net_out_error(mp_ns_host.net));
  if (egress && mp_ns_host.egress_err[0])
    mp_log("egress is off: sandboxes have no way out: %s", mp_ns_host.egress_err);
  if (egress && !mp_ns_opts.dns_given) default_dns();
  return 0;
}

/* the resolver behind the sandboxes' DNS: the host's first nameserver */
static void default_dns(void) {
  char *text = NULL, *p;
  size_t n;
  struct sockaddr_in *sin = &mp_ns_opts.egress_cfg.dns;
  if (mastra__read_file("/etc/resolv.conf", &text, &n) == 0) {
    for (p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
      char addr[64];
      if (sscanf(p, "nameserver %63s", addr) == 1
          && inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons(53);
        break;
      }
    }
  }
  free(text);
  if (sin->sin_port == 0)
    mp_log("egress: /etc/resolv.conf names no IPv4 nameserver: the sandboxes' DNS"
           " answers SERVFAIL (--egress-dns ADDR names one)");
}

void mp_ns_host_start(mp_server *srv) {
  int fds[3];
  if (!mp_ns_opts.egress || mp_ns_host.net == NULL || !mp_net_out_fds(mp_ns_host.net, fds))
    return;
  mp_ns_host.egress = mp_egress_open(srv->loop, fds, &mp_ns_opts.egress_cfg);
  if (mp_ns_host.egress == NULL)
    snprintf(mp_ns_host.egress_err, sizeof mp_ns_host.egress_err, "out of memory");
}
