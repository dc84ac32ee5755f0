/*
** The init of a `namespaces` sandbox (driver_ns.c): the program that
** `mastra-platform __ns-init ...` runs, exec'd by the server in a child.
**
** It runs as root on the host (or without root, below), in two
** processes:
**
**   the keeper (the server's child, host pid namespace): joins the
**     sandbox's cgroups, unshares the mount, pid, uts, ipc and net
**     namespaces, mounts the root (an overlay of the base and the
**     sandbox's upper layer, with a private /tmp, a minimal /dev and
**     /dev/pts, /dev/shm), sets the hostname to the sandbox id, brings
**     loopback up, forks the init, writes the init's uid and gid maps
**     (0 -> UIDS, MP_NS_UID_COUNT ids: ns_init.h), tells the server "R
**     <init pid>" on the ready socket, and waits for the init; a warm
**     keeper (the server's pool) says "W" instead, and sets the hostname
**     only once the server names its sandbox, "h <id>", then says "R";
**     a PRIVATE sandbox's keeper also bind-mounts its environment's hosts
**     file read-only at /etc/hosts, and says "N <init pid>" first: the
**     server attaches the init's network namespace to the environment's
**     network (net.c) and answers "j" (or "x <message>"), and only then
**     comes "R" (commands wait for it);
**   the init (pid 1 of the sandbox's pid namespace): mounts /proc,
**     pivot_roots into the overlay (the host's tree is unmounted from the
**     sandbox's view), becomes host uid UIDS and unshares a user namespace
**     (whose maps the keeper writes; the namespace's owner is then the
**     sandbox's uid), becomes non-dumpable and reaps orphans until it is
**     killed.
**
** Both have PR_SET_PDEATHSIG = SIGKILL: the keeper dies with the server,
** the init with the keeper, and every process of the sandbox with its
** pid namespace's init (setsid'd ones too). The mounts live in the
** sandbox's mount namespace only: they go when its last process does,
** and the host's mount table never holds them.
**
** Commands join the namespaces from the server's side (driver_ns.c):
** mount, uts, ipc, net and pid as host root, then the user namespace,
** where they are uid 0 (host uid UIDS).
**
** The root's lower layers: the base, and for a base with
** MP_BASE_HOST_USR (base.h) a second overlay on /usr, the base's usr over
** the host's /usr. With root, where the server hands an id map's user
** namespace as descriptor MP_NS_IDMAP_FD (ns_idmap.c), they are idmapped
** mounts: the host's root owns them inside too; and for UIDS other than
** MP_NS_UID_BASE the sandbox's own layer and a template's are idmapped
** too, from MP_NS_UID_BASE (their owners on disk) to UIDS.
**
** Without root (the server is not root: ns_user.c), the keeper first
** joins the user namespace the server hands as MP_NS_IDMAP_FD, if any (the
** parent of every sandbox's, for PRIVATE networks: net.h), then unshares a
** user namespace of its own, where root is the server's uid and gid (a
** single id each, mapped by the keeper itself), then the others,
** owned by it; /dev's nodes are the host's, bound (no mknod), overlayfs
** keeps its xattrs in user.overlay.* (userxattr), and the init stays in
** the keeper's user namespace, dumpable: commands join that user
** namespace first, then the others (driver_ns.c). A PRIVATE sandbox's
** keeper sends its "N" line with a descriptor of its network namespace and
** an rtnetlink socket made there: the server cannot enter it.
**
** A failure before "R" is told as "E <step>: <ERRNO NAME>" on the ready
** socket ("E mount /proc: ENOTDIR"; ns_init.h names the protocol's
** messages, descriptors and arguments).
*/
#define _GNU_SOURCE
#include "drivers/ns/init/ns_init.h"

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

static int ready_fd = -1;
/* the server is not root: the keeper's own user namespace (ns_user.c) */
static int unpriv;
/* with root: the host uid of the sandbox's root (MP_NS_INIT_UIDS), and
** where idmapped mounts work and it is not MP_NS_UID_BASE, the user
** namespaces of the base's id map and of the layers' (idmap_users) */
static unsigned uids = MP_NS_UID_BASE;
static int base_userns = -1, layers_userns = -1;
/* without root, a PRIVATE sandbox's network namespace and an rtnetlink
** socket made in it, sent with "N" (the server cannot enter it: net.h) */
static int net_fds[2] = {-1, -1};

/* the failure, "E <what>\n" on the ready socket (ns_init.h), and exit */
static void vdie(const char *fmt, va_list ap, int e) {
  char msg[MP_NS_LINE_MAX - 40];
  int n;
  msg[0] = MP_NS_SAY_ERROR;
  msg[1] = ' ';
  n = vsnprintf(msg + 2, sizeof msg - 2, fmt, ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof msg - 2) n = (int)sizeof msg - 3;
  n += 2;
  if (e != 0)
    n += snprintf(msg + n, sizeof msg - (size_t)n, ": %s", mp_ns_errno_name(e));
  if ((size_t)n >= sizeof msg - 1) n = (int)sizeof msg - 2;
  msg[n++] = '\n';
  if (ready_fd >= 0 && write(ready_fd, msg, (size_t)n) < 0) _exit(1);
  _exit(1);
}

/* a failed step: "E <step>: <ERRNO NAME>", the step in fmt and errno's
** name after it ("mount /proc: ENOTDIR") */
static void die(const char *fmt, ...) {
  int e = errno;
  va_list ap;
  va_start(ap, fmt);
  vdie(fmt, ap, e);
  va_end(ap);
}

/* a failure that no errno tells: "E <what>" */
static void die_why(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vdie(fmt, ap, 0);
  va_end(ap);
}

/* mount, or die naming the step ("mount /proc", as the sandbox sees it) */
static void mount_or_die(const char *step, const char *src, const char *dst,
                         const char *type, unsigned long flags,
                         const char *data) {
  if (mount(src, dst, type, flags, data) < 0) die("%s", step);
}

/* the character devices of merged's /dev */
static void nodes(const char *merged) {
  static const struct {
    const char *name;
    unsigned maj, min;
  } all[] = {{"null", 1, 3}, {"zero", 1, 5},    {"full", 1, 7},
             {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
  char path[4600];
  size_t i;
  for (i = 0; i < sizeof all / sizeof all[0]; i++) {
    snprintf(path, sizeof path, "%s/dev/%s", merged, all[i].name);
    if (unpriv) {
      /* no mknod in a user namespace: the host's nodes, bound */
      char host[64], step[80];
      int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
      if (fd < 0) die("create /dev/%s", all[i].name);
      close(fd);
      snprintf(host, sizeof host, "/dev/%s", all[i].name);
      snprintf(step, sizeof step, "bind /dev/%s", all[i].name);
      if (access(host, F_OK) == 0)
        mount_or_die(step, host, path, NULL, MS_BIND, NULL);
      continue;
    }
    if (mknod(path, S_IFCHR | 0666, makedev(all[i].maj, all[i].min)) < 0)
      die("mknod /dev/%s", all[i].name);
    chmod(path, 0666); /* the umask */
  }
}

/* mount a file system of `type` on merged/name ("mount /name") */
static void mount_in(const char *merged, const char *name, const char *type,
                     unsigned long flags, const char *data) {
  char path[4600], step[80];
  snprintf(path, sizeof path, "%s/%s", merged, name);
  snprintf(step, sizeof step, "mount /%s", name);
  mount_or_die(step, type, path, type, flags, data);
}

static void link_or_die(const char *target, const char *merged,
                        const char *name) {
  char path[4600];
  snprintf(path, sizeof path, "%s/%s", merged, name);
  if (symlink(target, path) < 0) die("symlink /%s", name);
}

static void make_dir(const char *merged, const char *name, int mode) {
  char path[4600];
  snprintf(path, sizeof path, "%s/%s", merged, name);
  if (mkdir(path, (mode_t)mode) < 0 && errno != EEXIST) die("mkdir /%s", name);
}

/* A base with MP_BASE_HOST_USR (base.h) holds a small layer of /usr: the
** sandbox's /usr is a second overlay, that layer over the host's /usr,
** whose upper directory is upper/usr, inside the sandbox's upper layer
** (a checkpoint has both), and its work directory work-usr. Their
** directories are made before the root's overlay is mounted. */
static int usr_dirs(const char *base, const char *root) {
  char path[4400];
  snprintf(path, sizeof path, "%s/" MP_BASE_HOST_USR, base);
  if (access(path, F_OK) < 0) return 0;
  snprintf(path, sizeof path, "%s/upper/usr", root);
  if (mkdir(path, 0755) < 0 && errno != EEXIST) die("mkdir the layer's /usr");
  /* with root, it belongs to the sandbox's root, as /usr does */
  if (!unpriv && chown(path, MP_NS_UID_BASE, MP_NS_UID_BASE) < 0)
    die("chown the layer's /usr");
  snprintf(path, sizeof path, "%s/work-usr", root);
  if (mkdir(path, 0700) < 0 && errno != EEXIST) die("mkdir work-usr");
  return 1;
}

static void mount_usr(const char *base, const char *usr, const char *layers,
                      const char *tpl, const char *merged) {
  char opts[24000], path[4400], tusr[4500] = "";
  if (tpl[0] != '\0') {
    snprintf(tusr, sizeof tusr, "%s/usr", tpl);
    if (access(tusr, F_OK) == 0) strcat(tusr, ":");
    else tusr[0] = '\0';
  }
  snprintf(opts, sizeof opts, "lowerdir=%s%s/usr:%s,upperdir=%supper/usr,"
           "workdir=%swork-usr%s", tusr, base, usr, layers, layers,
           unpriv ? ",userxattr" : "");
  snprintf(path, sizeof path, "%s/usr", merged);
  mount_or_die("mount /usr", "overlay", path, "overlay", MS_NOSUID, opts);
}

/* a user namespace of map's ids, or die naming what it is for */
static int userns_or_die(const char *map, const char *what) {
  int fd = mp_ns_userns_of(map);
  if (fd < 0) die("the user namespace of %s", what);
  return fd;
}

/* The id maps' user namespaces of idmapped_lowers, made before the pid
** namespace is (mp_ns_userns_of forks: a child of ours after it would be
** that namespace's pid 1, and its end the namespace's) */
static void idmap_users(void) {
  char map[96];
  if (unpriv || uids == MP_NS_UID_BASE || !mp_ns_is_userns(MP_NS_IDMAP_FD))
    return;
  snprintf(map, sizeof map, "0 %u %u\n", uids, MP_NS_UID_COUNT);
  base_userns = userns_or_die(map, "the base's id map");
  snprintf(map, sizeof map, "0 0 1\n%u %u %u\n", MP_NS_UID_BASE, uids,
           MP_NS_UID_COUNT);
  layers_userns = userns_or_die(map, "the layers' id map");
}

/* mkdir name in the sandbox's directory (the cwd: mount_root; 0700) and
** mount src there idmapped by userns: path, name */
static void idmap_at(int userns, const char *src, const char *name, char *path,
                     size_t n, const char *what) {
  snprintf(path, n, "%s", name);
  if (mkdir(path, 0700) < 0 && errno != EEXIST)
    die("mkdir the mount point of %s", what);
  if (mp_ns_idmap_mount(userns, src, path) < 0)
    die("an idmapped mount of %s", what);
}

/* The overlays' layers, named relative to the sandbox's directory (the
** cwd: mount_root), in this mount namespace only. With root, where the
** server handed an id map (MP_NS_IDMAP_FD: idmapped mounts work here):
** the base and /usr mounted idmapped (host 0 -> the sandbox's root, uids)
** on lower-base and lower-usr, the overlays' lower layers; and when uids
** is not MP_NS_UID_BASE (ns_init.h), the sandbox's own layers (the
** directory itself: upper, work, work-usr) on layers/ (the prefix in
** layers) and a template's layer on lower-template, idmapped from
** MP_NS_UID_BASE to uids (and host 0, overlayfs's own work files, as
** itself). Else: the base bound on lower-base, /usr and the layers as
** they are. */
static void idmapped_lowers(const char *base, int host_usr, char *lower,
                            char *usr, char *layers, char *tpl, size_t n) {
  char what[4400];
  int fd;
  snprintf(lower, n, "lower-base");
  snprintf(usr, n, "/usr");
  layers[0] = '\0';
  if (unpriv || !mp_ns_is_userns(MP_NS_IDMAP_FD)) {
    if (mkdir(lower, 0700) < 0 && errno != EEXIST)
      die("mkdir the mount point of the base");
    mount_or_die("bind the base", base, lower, NULL, MS_BIND | MS_REC, NULL);
    return;
  }
  /* the map of MP_NS_UID_BASE, or of uids (idmap_users) */
  fd = base_userns >= 0 ? base_userns : MP_NS_IDMAP_FD;
  /* the base's path, which the operator gave or the server made: the one
  ** host path a failure names */
  snprintf(what, sizeof what, "the base %s", base);
  idmap_at(fd, base, "lower-base", lower, n, what);
  if (host_usr) idmap_at(fd, "/usr", "lower-usr", usr, n, "the host's /usr");
  if (fd != MP_NS_IDMAP_FD) close(fd);
  close(MP_NS_IDMAP_FD);
  if (layers_userns < 0) return;
  fd = layers_userns;
  if (tpl[0] != '\0') {
    char src[4400];
    snprintf(src, sizeof src, "%s", tpl);
    idmap_at(fd, src, "lower-template", tpl, n, "the template's layer");
  }
  idmap_at(fd, ".", "layers", layers, n, "the sandbox's layer");
  snprintf(layers, n, "layers/");
  close(fd);
  layers_userns = -1;
}

/* file, read-only at merged/etc/<leaf> (created there if missing) */
static void bind_etc(const char *merged, const char *leaf, const char *file) {
  char path[4400], step[80];
  snprintf(path, sizeof path, "%s/etc/%s", merged, leaf);
  if (access(path, F_OK) < 0) {
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) die("create /etc/%s", leaf);
    close(fd);
  }
  snprintf(step, sizeof step, "bind /etc/%s", leaf);
  mount_or_die(step, file, path, NULL, MS_BIND, NULL);
  snprintf(step, sizeof step, "bind /etc/%s read-only", leaf);
  mount_or_die(step, file, path, NULL,
               MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

/* the root's mounts below the overlay (all in the new mount namespace) */
static void mount_root(const char *base, const char *root, const char *hosts,
                       const char *resolv, char *merged, size_t n) {
  char opts[24000], lower[4400], usr[4400], tpl[4400], layers[4400];
  int host_usr = usr_dirs(base, root);
  /* the overlays name their layers relative to root: a sandbox sees their
  ** options in its mountinfo, and the host's paths are none of its
  ** business. The keeper goes back to the directory it was started in
  ** once they are mounted: its cwd must not hold the sandbox's directory
  ** (an operator's or a spec's scan of cwds under the data directory finds
  ** commands, never keepers) */
  int back = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (back < 0) die("open the working directory");
  if (chdir(root) < 0) die("chdir to the sandbox's directory");
  /* a template's layer, between the base and the sandbox's own */
  snprintf(tpl, sizeof tpl, "%s", MP_NS_TEMPLATE_LINK);
  if (access(tpl, F_OK) < 0) tpl[0] = '\0';
  snprintf(merged, n, "%s/merged", root);
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    die("make the mounts private");
  idmapped_lowers(base, host_usr, lower, usr, layers, tpl, sizeof lower);
  /* without root, overlayfs keeps its xattrs in user.overlay.* */
  snprintf(opts, sizeof opts,
           "lowerdir=%s%s%s,upperdir=%supper,workdir=%swork%s", tpl,
           tpl[0] ? ":" : "", lower, layers, layers,
           unpriv ? ",userxattr" : "");
  if (mount("overlay", merged, "overlay", MS_NOSUID, opts) < 0)
    die("mount / (an overlay of the base %s)", base);
  if (host_usr) mount_usr(lower, usr, layers, tpl, merged);
  if (fchdir(back) < 0) die("chdir back to the working directory");
  close(back);
  make_dir(merged, "tmp", 01777);
  make_dir(merged, "dev", 0755);
  make_dir(merged, "proc", 0555);
  mount_in(merged, "tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=50%");
  mount_in(merged, "dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755,size=64k");
  nodes(merged);
  make_dir(merged, "dev/pts", 0755);
  make_dir(merged, "dev/shm", 01777);
  mount_in(merged, "dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
           "newinstance,ptmxmode=0666,mode=0620");
  mount_in(merged, "dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=25%");
  link_or_die("pts/ptmx", merged, "dev/ptmx");
  link_or_die("/proc/self/fd", merged, "dev/fd");
  link_or_die("/proc/self/fd/0", merged, "dev/stdin");
  link_or_die("/proc/self/fd/1", merged, "dev/stdout");
  link_or_die("/proc/self/fd/2", merged, "dev/stderr");
  /* the environment's hosts file, read-only; the server rewrites it in
  ** place as members come and go */
  if (hosts != NULL) bind_etc(merged, "hosts", hosts);
  /* with egress, the resolver of the server's proxy */
  if (resolv != NULL) bind_etc(merged, "resolv.conf", resolv);
}

/* A warm keeper (its ID argument MP_NS_ARG_NONE, driver_ns.c's pool): its
** sandbox is ready (MP_NS_SAY_WARM told the server so) but has no id yet;
** the server names it with MP_NS_TELL_NAME, "h <id>", when a create takes
** it, then it says MP_NS_SAY_READY as any keeper; and its command line
** (args, nargs: the strings are contiguous) becomes "mastra-ns-init
** __ns-init SERVER_PID ID", so that ps names its sandbox as a cold
** keeper's does. EOF: the server closed the pool. */
static void await_name(char **args, int nargs) {
  char msg[300];
  size_t n = 0;
  ssize_t r;
  while (n == 0 || msg[n - 1] != '\n') {
    if (n == sizeof msg - 1) die_why("the server's name line is too long");
    do r = read(ready_fd, msg + n, sizeof msg - 1 - n);
    while (r < 0 && errno == EINTR);
    if (r <= 0) _exit(1);
    n += (size_t)r;
  }
  msg[n - 1] = '\0';
  if (msg[0] != MP_NS_TELL_NAME || msg[1] != ' ' || msg[2] == '\0')
    die_why("the server said '%s', not a name", msg);
  if (sethostname(msg + 2, strlen(msg + 2)) < 0) die("sethostname");
  {
    char line[400], *end = args[nargs - 1] + strlen(args[nargs - 1]);
    int len = snprintf(line, sizeof line, "%s%c%s%c%s%c%s", args[0], 0,
                       args[1], 0, args[MP_NS_INIT_SERVER_PID], 0, msg + 2);
    if (len > 0 && len < end - args[0]) {
      memset(args[0], 0, (size_t)(end - args[0]));
      memcpy(args[0], line, (size_t)len);
    }
  }
}

/* a PRIVATE sandbox, or one with egress: MP_NS_SAY_NET, "N <init>", then
** the server's answer, MP_NS_TELL_JOINED or MP_NS_TELL_REFUSED */
static void await_network(pid_t init) {
  char msg[MP_NS_LINE_MAX];
  ssize_t n;
  snprintf(msg, sizeof msg, "%c %d\n", MP_NS_SAY_NET, (int)init);
  if (net_fds[0] >= 0) {
    if (mp_ns_send_fds(ready_fd, msg, strlen(msg), net_fds, 2) < 0) _exit(1);
    close(net_fds[0]);
    close(net_fds[1]);
  } else if (write(ready_fd, msg, strlen(msg)) < 0) {
    _exit(1);
  }
  do n = read(ready_fd, msg, sizeof msg - 1); while (n < 0 && errno == EINTR);
  if (n <= 0) _exit(1);
  msg[n] = '\0';
  msg[strcspn(msg, "\n")] = '\0';
  if (msg[0] != MP_NS_TELL_JOINED)
    die_why("%s", msg[0] == MP_NS_TELL_REFUSED && msg[1] != '\0' ? msg + 2
            : "the server did not attach the network");
}

static void loopback_up(void) {
  struct ifreq ifr;
  int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) die("bring lo up: socket");
  memset(&ifr, 0, sizeof ifr);
  snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
  if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) die("bring lo up: SIOCGIFFLAGS");
  ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
  if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) die("bring lo up: SIOCSIFFLAGS");
  close(s);
}

static void read_byte(int fd, char want) {
  char c = 0;
  ssize_t n;
  do n = read(fd, &c, 1); while (n < 0 && errno == EINTR);
  if (n != 1 || c != want) _exit(1);
}

static void write_byte(int fd, char c) {
  if (write(fd, &c, 1) != 1) _exit(1);
}

/* the server's blocked and ignored signals are not ours */
static void reset_signals(void) {
  struct sigaction dfl;
  sigset_t none;
  int i;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (i = 1; i < NSIG; i++) sigaction(i, &dfl, NULL); /* EINVAL: skipped */
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

/* pid 1 of the sandbox: never returns */
static void on_sigchld(int sig) { (void)sig; }

/* pid 1's job: reap its children and every orphan the kernel hands it.
** SIGCHLD stays blocked between the scans, so one that arrives while we
** reap is pending for sigsuspend (a default-ignored SIGCHLD would never
** wake pid 1 of a namespace: it gets a handler). */
static void reap_forever(void) {
  struct sigaction sa;
  sigset_t chld, wait_set;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigchld;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGCHLD, &sa, NULL);
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigprocmask(SIG_BLOCK, &chld, &wait_set);
  sigdelset(&wait_set, SIGCHLD);
  for (;;) {
    while (waitpid(-1, NULL, WNOHANG) > 0)
      ;
    sigsuspend(&wait_set);
  }
}

static void run_init(const char *merged, int to_keeper, int from_keeper,
                     char **args, int nargs) {
  char path[4400];
  int i;
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) _exit(1);
  /* the pivot_root below moves the keeper's root too: it opens our /proc
  ** directory first */
  read_byte(from_keeper, MP_NS_PIPE_GO);
  snprintf(path, sizeof path, "%s/proc", merged);
  mount_or_die("mount /proc", "proc", path, "proc",
               MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
  if (chdir(merged) < 0) die("chdir to the root");
  if (syscall(SYS_pivot_root, ".", ".") < 0) die("pivot_root");
  if (umount2(".", MNT_DETACH) < 0) die("unmount the host's tree");
  if (chdir("/") < 0) die("chdir /");
  /* with root, the user namespace is made as the sandbox's root: the
  ** kernel charges what a process counts per user (inotify instances and
  ** watches, user namespaces...) to the namespace's owner too, which is
  ** then this sandbox's uid, never host root's (ns_uids.h). The credential
  ** change clears the parent-death signal: armed again, and a keeper gone
  ** meanwhile ends the read of MP_NS_PIPE_MAPPED. */
  if (!unpriv) {
    if (setgroups(0, NULL) < 0 || setresgid(uids, uids, uids) < 0
        || setresuid(uids, uids, uids) < 0)
      die("become the sandbox's root (host uid %u)", uids);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) _exit(1);
    if (unshare(CLONE_NEWUSER) < 0) die("unshare the user namespace");
  }
  write_byte(to_keeper, MP_NS_PIPE_USERNS);
  if (!unpriv) read_byte(from_keeper, MP_NS_PIPE_MAPPED);
  /* the sandbox's syscall filter (ns_seccomp.c), once its namespaces are
  ** made: pid 1 runs under it as every process of the sandbox does
  ** (without root it stays dumpable: what ptraces it may make no call the
  ** filter denies) */
  if (mp_ns_filter_install() < 0) die("install the syscall filter");
  close(to_keeper);
  close(from_keeper);
  if (ready_fd >= 0) close(ready_fd);
  /* with root, nothing in the sandbox may ptrace or open the namespaces of
  ** an init that was root on the host. Without root it is the server's
  ** uid, as every process of the sandbox, and stays dumpable: commands
  ** open its namespaces with the server's uid and no capability */
  if (!unpriv) prctl(PR_SET_DUMPABLE, 0);
  /* ps in the sandbox shows "mastra-init", not the host's paths (the
  ** strings are contiguous: overwrite them all) */
  {
    char *end = args[nargs - 1] + strlen(args[nargs - 1]);
    memset(args[0], 0, (size_t)(end - args[0]));
    snprintf(args[0], (size_t)(end - args[0]), "mastra-init");
  }
  /* nor the server's environment (/proc/1/environ of a dumpable init) */
  for (i = 0; environ[i] != NULL; i++)
    memset(environ[i], 0, strlen(environ[i]));
  mp_ns_close_all();
  reap_forever();
}

/* an optional argument: NULL when it is MP_NS_ARG_NONE */
static const char *given(const char *arg) {
  return strcmp(arg, MP_NS_ARG_NONE) == 0 ? NULL : arg;
}

int mp_ns_init_main(int argc, char **argv) {
  /* argv: ns_init.h, MP_NS_INIT_* */
  char merged[4200], msg[64];
  int to_keeper[2], from_keeper[2], i, status, procdir;
  pid_t init;
  const char *hosts, *resolv, *id;
  int joins;
  if (argc < MP_NS_INIT_CGROUPS) return 2;
  ready_fd = atoi(argv[MP_NS_INIT_READY]);
  id = given(argv[MP_NS_INIT_ID]);
  hosts = given(argv[MP_NS_INIT_HOSTS]);
  resolv = given(argv[MP_NS_INIT_RESOLV]);
  joins = hosts != NULL || resolv != NULL;
  reset_signals();
  setpgid(0, 0); /* out of the server's process group */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0
      || getppid() != (pid_t)atol(argv[MP_NS_INIT_SERVER_PID]))
    die_why("the server is gone");
  mp_ns_write_text("/proc/self/oom_score_adj", "-1000");
  /* read on the host, installed by the init (run_init) */
  if (mp_ns_filter_load(argv[MP_NS_INIT_FILTER]) < 0)
    die("read the syscall filter");
  for (i = MP_NS_INIT_CGROUPS; i < argc; i++)
    if (mp_ns_write_text(argv[i], "0") < 0) die("join the cgroup %s", argv[i]);
  unpriv = geteuid() != 0;
  if (!unpriv) {
    char *end;
    unsigned long u = strtoul(argv[MP_NS_INIT_UIDS], &end, 10);
    if (*end != '\0' || u == 0 || u > 0xffffffffUL - MP_NS_UID_COUNT)
      die_why("bad host uids '%s'", argv[MP_NS_INIT_UIDS]);
    uids = (unsigned)u;
  }
  if (unpriv) {
    /* the user namespace first: it owns the others; under the server's
    ** user namespace for PRIVATE networks when it hands one (net.h) */
    unsigned uid, gid;
    if (mp_ns_is_userns(MP_NS_IDMAP_FD)) {
      if (setns(MP_NS_IDMAP_FD, CLONE_NEWUSER) < 0)
        die("join the server's user namespace");
      close(MP_NS_IDMAP_FD);
    }
    uid = (unsigned)geteuid();
    gid = (unsigned)getegid();
    if (unshare(CLONE_NEWUSER) < 0) die("unshare the user namespace");
    if (mp_ns_map_self(uid, gid) < 0)
      die("write the user namespace's id maps");
  }
  idmap_users();
  if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS | CLONE_NEWIPC
              | CLONE_NEWNET) < 0)
    die("unshare the mount, pid, uts, ipc and net namespaces");
  if (unpriv && joins) {
    net_fds[0] = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    net_fds[1] = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (net_fds[0] < 0 || net_fds[1] < 0)
      die("open the network namespace and its rtnetlink socket");
  }
  mount_root(argv[MP_NS_INIT_BASE], argv[MP_NS_INIT_ROOT], hosts, resolv,
             merged, sizeof merged);
  if (id != NULL && sethostname(id, strlen(id)) < 0) die("sethostname");
  loopback_up();
  if (pipe2(to_keeper, O_CLOEXEC) < 0 || pipe2(from_keeper, O_CLOEXEC) < 0)
    die("pipe");
  init = fork();
  if (init < 0) die("fork the init");
  if (init == 0) {
    close(to_keeper[0]);
    close(from_keeper[1]);
    run_init(merged, to_keeper[1], from_keeper[0], argv, argc);
  }
  close(to_keeper[1]);
  close(from_keeper[0]);
  snprintf(msg, sizeof msg, "/proc/%d", (int)init);
  procdir = open(msg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (procdir < 0) die("open the init's /proc directory");
  write_byte(from_keeper[1], MP_NS_PIPE_GO);
  read_byte(to_keeper[0], MP_NS_PIPE_USERNS);
  if (!unpriv) {
    if (mp_ns_write_maps(procdir, uids, MP_NS_UID_COUNT) < 0)
      die("write the init's id maps");
    write_byte(from_keeper[1], MP_NS_PIPE_MAPPED);
  }
  close(procdir);
  if (joins) await_network(init);
  if (id == NULL) { /* warm: in its cgroups, its init up */
    snprintf(msg, sizeof msg, "%c\n", MP_NS_SAY_WARM);
    if (write(ready_fd, msg, 2) != 2) _exit(1);
    await_name(argv, argc);
  }
  snprintf(msg, sizeof msg, "%c %d\n", MP_NS_SAY_READY, (int)init);
  if (write(ready_fd, msg, strlen(msg)) < 0) _exit(1);
  mp_ns_close_all();
  while (waitpid(init, &status, 0) < 0 && errno == EINTR)
    ;
  return 0;
}
