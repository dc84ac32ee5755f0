/*
** The `namespaces` driver of mastra-platform (docs/platform.md, "Drivers").
**
** One file of about 840 lines on purpose: it is the life of a sandbox's
** box (its keeper and init, a command's entry, the teardown, the release
** and the timers of the drain), whose callbacks call one another through
** the box's static state. What is a job of its own is a file beside it:
** the warm pool (ns_pool.c), the tree (ns_tree.c), the disk (ns_disk.c),
** cgroups (ns_cgroup.c), strays (ns_reap.c), uids (ns_uids.c), networks
** (ns_net.c), the host's setup (ns_host.c).
**
** A sandbox is <data>/sandboxes/<id>/{upper,work,merged}: its upper layer
** over the base (base.c), mounted as an overlay inside the sandbox's own
** mount namespace by its init (ns_init.c), which also owns its pid, uts,
** ipc and net namespaces and a user namespace where root is the first of
** its host uid range (ns_uids.h; without root the server's uid, ns_user.c;
** its layers idmapped to it, ns_idmap.c, ns_init.c). The init starts when
** the sandbox is created (or, for a restored one and after a restart, at
** its first command), without waiting: the server watches its ready
** socket on the loop.
**
** A command is a mastra__proc like the process driver's, whose program is
** `mastra-ns-init __ns-exec` (ns_exec.c) instead of /bin/sh, posix_spawn'd
** with the ready socket: it waits for the init's "R" (the server never
** waits for it), joins the sandbox's cgroups, setns()es into its
** namespaces and forks /bin/sh into the sandbox's pid namespace, in the
** same process group; it exits as /bin/sh did. So proc.c's timeout, kill
** of the group, output and stdin work unchanged. With root, a command of
** a running sandbox needs no relay: the server's own child, born in the
** sandbox's pid namespace, execs `mastra-ns-init __ns-enter`, which
** enters the sandbox and execs its /bin/sh in place (ns_enter.c). The
** server never waits on a process that a sandbox can signal: both
** programs enter the sandbox after the exec that ends the server's wait.
**
** cgroups (ns_cgroup.c): made before the init starts, removed on the loop
** once a destroyed sandbox's processes are gone. A destroy's strays and
** what its drain waits for (the keeper, the init, the cgroups' members)
** are ns_reap.c's; the init's exit and the keeper's reaping tell the drain
** (mp_sandbox_recheck). The init is the program
** mastra-ns-init (libc alone), or mastra-platform itself without it.
**
** A record that goes (a destroyed one forgotten, a failed create, the
** server's exit) releases its part: on the loop nothing waits, the part
** outlives the record until its keeper is reaped and its cgroups removed;
** at the server's exit the wait is bounded (~2 s).
**
** With --sandbox-disk-max (ns_disk.c) a new sandbox's ROOT is the mount
** point of an image of its own, made in ns_prepare before its tree (a
** warm member's with the member), detached and removed at its teardown
** before ROOT goes to the trash, unmounted at the server's exit, mounted
** again (or a killed server's mount adopted) when a start loads its
** record; a start removes the images of no sandbox
** (mp_ns_disk_sweep_orphans). A
** template's build gets none: its layer is renamed out of its tree.
**
** The warm pool (ns_pool.c): a fresh ISOLATED create takes a box whose
** keeper and init run already (mp_ns_pool_take); a restore, a PRIVATE
** sandbox and a record loaded at start start their own.
**
** PRIVATE networks (net.c): ns_setup opens the net module (which sweeps
** what a previous server left) and ns_finish closes it. A PRIVATE
** sandbox's keeper bind-mounts its environment's hosts file and says "N
** <init>" before "R": on_ready attaches the init's network namespace
** (mp_net_join, on the loop: a few rtnetlink round trips) and answers "j",
** so its commands, which wait for "R", find eth0 in place. Destroy, reap
** and an init that exits leave the network (mp_net_leave). Without root
** (mp_net_open_user) the keepers join the switch's user namespace first
** (handed as MP_NS_IDMAP_FD, the root's id map slot) and send "N" with
** their network namespace and an rtnetlink socket made in it.
*/
#define _GNU_SOURCE
#include "drivers/ns/driver_ns.h"
#include "drivers/ns/ns_box.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "drivers/ns/ns_disk.h"
#include "drivers/ns/ns_host.h"
#include "drivers/ns/ns_options.h"
#include "drivers/ns/ns_reap.h"
#include "util/log.h"
#include "net/net.h"
#include "drivers/ns/ns_cgroup.h"
#include "drivers/ns/ns_enter.h"
#include "drivers/ns/init/ns_exec.h"
#include "drivers/ns/init/ns_init.h"
#include "drivers/ns/ns_net.h"
#include "drivers/ns/ns_pool.h"
#include "drivers/ns/ns_tree.h"
#include "drivers/ns/init/ns_sys.h"
#include "drivers/ns/ns_uids.h"
#include "drivers/ns/ns_user.h"
#include "sandbox/record.h"
#include "sandbox/template.h" /* MP_TEMPLATE_BUILD_PROJECT */
#include "util/trash.h"
#include "util.h"

/* proc.c hands a command's fd3 as its descriptor 3, __ns-exec's ready
** socket */
_Static_assert(MP_NS_READY_FD == 3, "MP_NS_READY_FD is proc.c's fd3");

/* the cgroups of a destroyed sandbox are removed once its processes are
** gone: tried every RMDIR_RETRY_MS, this many times */
#define RMDIR_RETRY_MS 50
#define RMDIR_TRIES 200

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

static void box_done_if_detached(ns_box *b);
static void box_detach(ns_box *b);

/* the cgroups of a destroyed sandbox, once its processes are gone */
static void on_rmdir_retry(mastra__timer *t) {
  ns_box *b = t->data;
  if (mp_nscg_remove(b->id) == 0) {
    b->cg_made = 0;
  } else if (++b->rmdir_tries < RMDIR_TRIES) {
    mastra__timer_start(&b->rmdir_timer, RMDIR_RETRY_MS);
    return;
  } else {
    mp_log("sandbox %s: its cgroups are still busy; the next start removes"
           " them (its host uids %u.. are not given to another sandbox)",
           b->id, b->uid_base);
    b->cg_made = 0;
    b->uid_kept = 1;
  }
  mp_ns_uids_put_if_gone(b);
  box_done_if_detached(b);
}

/* its cgroups removed on the loop, tried until its processes are gone */
static void cg_remove_later(ns_box *b) {
  if (!b->cg_made) return;
  b->rmdir_tries = 0;
  mastra__timer_start(&b->rmdir_timer, RMDIR_RETRY_MS);
}

/* {====== the init ====== */

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

static int is_private(const mp_sandbox *sb) {
  return strcmp(sb->network, "PRIVATE") == 0;
}

static void net_leave(mp_sandbox *sb, ns_box *b) { mp_ns_net_leave(sb, b); }

static void on_keeper_exit(mastra__io *io, uint32_t revents) {
  ns_box *b = io->data;
  mp_sandbox *sb = b->sb;
  siginfo_t si;
  (void)revents;
  memset(&si, 0, sizeof si);
  if (waitid(P_PIDFD, (id_t)b->keeper_fd, &si, WEXITED | WNOHANG) < 0) {
    if (errno != ECHILD) return;
  } else if (si.si_pid == 0) {
    return;
  }
  mastra__io_stop(&b->keeper_io);
  mastra__io_stop(&b->ready_io);
  close_fd(&b->keeper_fd);
  close_fd(&b->ready_fd);
  if (!b->torn) close_fd(&b->init_fd); /* a torn one's: init_io */
  b->started = b->ready = 0;
  if (b->warm) {
    net_leave(NULL, b);
    mp_ns_pool_failed(b, "its keeper exited before a create took it");
    return;
  }
  if (sb == NULL) {
    box_done_if_detached(b);
    return;
  }
  mp_ns_uids_put_if_gone(b);
  if (!sb->destroyed_ms && !sb->destroying)
    mp_log("sandbox %s: its init exited; the next command starts a new one",
           sb->id);
  net_leave(sb, b);
  mp_sandbox_recheck(sb); /* a destroy may wait for it */
}

/* MP_NS_SAY_NET, "N <init>", from a keeper (PRIVATE, or with egress; sb
** NULL: a warm box): join (ns_net.c), then answer (the keeper says "R" or
** "W" after MP_NS_TELL_JOINED; MP_NS_TELL_REFUSED, "x <why>", makes it fail
** with why) */
static void join_network(mp_sandbox *sb, ns_box *b, const char *line,
                         size_t len) {
  char path[64], err[600], answer[MP_NS_LINE_MAX];
  int fd, rc = -1, got[2] = {-1, -1}, n;
  /* without root the line comes with the sandbox's network namespace and an
  ** rtnetlink socket made in it (net.h, mp_net_join_nl) */
  if (mp_ns_recv_fds(b->ready_fd, answer, len, MSG_DONTWAIT, got, 2, &n)
      != (long)len) {
    while (n > 0) close(got[--n]);
    return;
  }
  snprintf(path, sizeof path, "/proc/%ld/ns/net", atol(line + 2));
  fd = got[0] >= 0 ? got[0] : open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    snprintf(err, sizeof err, "%s: %s", path, strerror(errno));
  else
    rc = mp_ns_net_join(sb, b, fd, got[1], err, sizeof err);
  if (fd >= 0) close(fd);
  if (got[1] >= 0) close(got[1]);
  if (rc == 0) {
    snprintf(answer, sizeof answer, "%c\n", MP_NS_TELL_JOINED);
  } else {
    mp_log("sandbox %s: cannot join its network: %s", sb ? sb->id : "(warm)", err);
    snprintf(answer, sizeof answer, "%c cannot join the %s network: %s\n",
             MP_NS_TELL_REFUSED, sb && is_private(sb) ? "private" : "egress",
             err);
  }
  /* a few bytes into an empty socket: never blocks */
  if (send(b->ready_fd, answer, strlen(answer), MSG_DONTWAIT | MSG_NOSIGNAL)
      < 0)
    mp_log("sandbox %s: cannot answer its init: %s", sb ? sb->id : "(warm)",
           strerror(errno));
}

static void on_ready(mastra__io *io, uint32_t revents) {
  ns_box *b = io->data;
  mp_sandbox *sb = b->sb;
  char buf[MP_NS_LINE_MAX];
  ssize_t n;
  (void)revents;
  mastra__io_stop(&b->ready_io); /* the data stays for the commands */
  n = recv(b->ready_fd, buf, sizeof buf - 1, MSG_PEEK | MSG_DONTWAIT);
  if (n <= 0) return;
  buf[n] = '\0';
  if (b->warm) { /* "N" (the way out), "W" (ready to be named), or a failure */
    char *eol = strchr(buf, '\n');
    if (buf[0] == MP_NS_SAY_NET) {
      if (eol != NULL) join_network(NULL, b, buf, (size_t)(eol - buf + 1));
      mastra__io_start(&b->ready_io, EPOLLIN); /* its "W", or the rest of the line */
      return;
    }
    if (n >= 2 && buf[0] == MP_NS_SAY_WARM && buf[1] == '\n'
        && recv(b->ready_fd, buf, 2, MSG_DONTWAIT) == 2) {
      mp_ns_pool_ready(b);
      mastra__io_start(&b->ready_io, EPOLLIN); /* for an "R" once named */
      return;
    }
    if (buf[0] == MP_NS_SAY_WARM && n < 2) { /* the rest is on its way */
      mastra__io_start(&b->ready_io, EPOLLIN);
      return;
    }
    buf[strcspn(buf, "\n")] = '\0';
    mp_ns_pool_failed(b, buf[0] == MP_NS_SAY_ERROR ? buf + 2 : buf);
    return;
  }
  if (buf[0] == MP_NS_SAY_READY || buf[0] == MP_NS_SAY_NET) {
    char *nl = strchr(buf, '\n');
    if (nl == NULL) { /* the rest of the line is on its way */
      mastra__io_start(&b->ready_io, EPOLLIN);
      return;
    }
    b->init_pid = atol(buf + 2);
    b->init_fd = pidfd_open((pid_t)b->init_pid, 0);
    b->ready = 1;
    if (buf[0] == MP_NS_SAY_NET) join_network(sb, b, buf, (size_t)(nl - buf + 1));
  } else {
    /* "E <step>: <ERRNO NAME>", which stays in the socket for the command
    ** that waits (__ns-exec says it on the command's stderr) */
    buf[strcspn(buf, "\n")] = '\0';
    mp_log("sandbox %s did not start: %s", sb->id,
           buf[0] == MP_NS_SAY_ERROR && buf[1] != '\0' ? buf + 2 : buf);
  }
}

/* b's keeper (mp_ns_box_ops.start_keeper) */
static int start_keeper(mp_server *srv, ns_box *b, const char *name,
                        const char *root, const char *hosts, char *err,
                        size_t errlen) {
  char spid[24], sready[8], suids[16], cgp[MP_NSCG_MAX][4500];
  char *argv[MP_NS_INIT_CGROUPS + 1 + MP_NSCG_MAX];
  posix_spawn_file_actions_t fa;
  int sv[2], i, rc;
  if (mp_ns_uids_take_box(b, err, errlen) < 0) return -1;
  if (!b->cg_made) {
    /* a template's cpuCount and memoryMB (a warm box has no sandbox: its
    ** template's, kept in the box) */
    const mp_sandbox *sb = b->sb;
    if (sb != NULL) {
      b->cpu_count = sb->cpu_count;
      b->memory_mb = sb->memory_mb;
    }
    if (mp_nscg_make(b->id, b->cpu_count, (long long)b->memory_mb << 20, err,
                     errlen) < 0)
      return -1;
    b->cg_made = 1;
  }
  mastra__timer_stop(&b->rmdir_timer);
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
    snprintf(err, errlen, "socketpair: %s", strerror(errno));
    return -1;
  }
  snprintf(spid, sizeof spid, "%d", (int)getpid());
  snprintf(sready, sizeof sready, "%d", MP_NS_READY_FD);
  argv[0] = "mastra-ns-init";
  argv[1] = MP_NS_INIT_ARG;
  argv[MP_NS_INIT_SERVER_PID] = spid;
  argv[MP_NS_INIT_ID] = (char *)name;
  argv[MP_NS_INIT_BASE] = mp_ns_host.base;
  argv[MP_NS_INIT_ROOT] = (char *)root;
  argv[MP_NS_INIT_READY] = sready;
  argv[MP_NS_INIT_HOSTS] = (char *)hosts;
  /* with egress: "N" for ISOLATED too */
  argv[MP_NS_INIT_RESOLV] = (char *)mp_ns_net_resolv();
  argv[MP_NS_INIT_FILTER] = mp_ns_host.filter;
  snprintf(suids, sizeof suids, "%u", b->uid_base);
  argv[MP_NS_INIT_UIDS] = mp_ns_host.unpriv ? (char *)MP_NS_ARG_NONE : suids;
  for (i = 0; i < mp_nscg_count(); i++) {
    mp_nscg_join_file(b->id, i, cgp[i], sizeof cgp[i]);
    argv[MP_NS_INIT_CGROUPS + i] = cgp[i];
  }
  argv[MP_NS_INIT_CGROUPS + i] = NULL;
  /* the keeper resets its signals and sets its own process group */
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], MP_NS_READY_FD);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (mp_ns_host.idmap_fd >= 0)
    posix_spawn_file_actions_adddup2(&fa, mp_ns_host.idmap_fd, MP_NS_IDMAP_FD);
  posix_spawn_file_actions_addclosefrom_np(&fa, mp_ns_host.idmap_fd >= 0
                                                    ? MP_NS_IDMAP_FD + 1
                                                    : MP_NS_READY_FD + 1);
  rc = posix_spawn(&b->keeper, mp_ns_host.init_bin, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(sv[1]);
  if (rc != 0) {
    close(sv[0]);
    snprintf(err, errlen, "cannot start the sandbox's init: %s",
             strerror(rc));
    return -1;
  }
  b->ready_fd = sv[0];
  b->keeper_fd = pidfd_open(b->keeper, 0);
  if (b->keeper_fd < 0) {
    rc = errno;
    kill(b->keeper, SIGKILL);
    waitpid(b->keeper, NULL, 0);
    close_fd(&b->ready_fd);
    snprintf(err, errlen, "pidfd_open: %s", strerror(rc));
    return -1;
  }
  mastra__io_init(srv->loop, &b->keeper_io, b->keeper_fd, on_keeper_exit, b);
  mastra__io_init(srv->loop, &b->ready_io, b->ready_fd, on_ready, b);
  mastra__io_start(&b->keeper_io, EPOLLIN);
  mastra__io_start(&b->ready_io, EPOLLIN);
  b->started = 1;
  return 0;
}

static int start_init(mp_server *srv, mp_sandbox *sb, char *err,
                      size_t errlen) {
  const char *hosts = MP_NS_ARG_NONE;
  if (((ns_box *)sb->driver_data)->started) return 0;
  if (is_private(sb)) {
    hosts = mp_ns_host.net ? mp_net_hosts_path(mp_ns_host.net, sb->environment)
                           : NULL;
    if (hosts == NULL) {
      snprintf(err, errlen, "PRIVATE networks are not available: %s",
               mp_ns_host.net ? "cannot create the environment's hosts file"
               : mp_ns_host.net_err);
      return -1;
    }
  }
  return start_keeper(srv, sb->driver_data, sb->id, sb->root, hosts, err,
                      errlen);
}

/* SIGKILL the keeper and the init (every process of the sandbox dies with
** its pid namespace's init) */
static void stop_init(ns_box *b) {
  if (b->init_fd >= 0) syscall(SYS_pidfd_send_signal, b->init_fd, SIGKILL,
                               NULL, 0);
  if (b->keeper_fd >= 0) syscall(SYS_pidfd_send_signal, b->keeper_fd,
                                 SIGKILL, NULL, 0);
}

/* }====== */

/* {====== the driver ====== */

/* a box named id (mp_ns_box_ops.make) */
static ns_box *box_new(mastra__loop *loop, const char *id) {
  ns_box *b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  b->keeper_fd = b->init_fd = b->ready_fd = -1;
  b->loop = loop;
  snprintf(b->id, sizeof b->id, "%s", id);
  mastra__timer_init(loop, &b->rmdir_timer, on_rmdir_retry, b);
  return b;
}

static ns_box *box_of(mp_server *srv, mp_sandbox *sb) {
  ns_box *b = sb->driver_data;
  if (b != NULL) return b;
  b = box_new(srv->loop, sb->id);
  if (b == NULL) return NULL;
  b->sb = sb;
  sb->driver_data = b;
  return b;
}

/* a sandbox of a template: ROOT/template links to its layer (ns_tree.h) */
static int template_link(mp_server *srv, mp_sandbox *sb, char *err,
                         size_t errlen) {
  if (sb->template_key[0] == '\0') return 0;
  return mp_ns_tree_link(srv->data_dir, sb->root, sb->template_key, err,
                         errlen);
}

/* a template's build: its layer is renamed out of its tree at the end
** (template.c), so it never gets a disk of its own (ns_disk.h: EXDEV) */
static int is_build(const mp_sandbox *sb) {
  return strcmp(sb->project, MP_TEMPLATE_BUILD_PROJECT) == 0;
}

static int ns_prepare(mp_server *srv, mp_sandbox *sb, char *err,
                      size_t errlen) {
  char img[4400];
  ns_box *b;
  int fresh, made = 0, e;
  {
    /* the checkpoint's tree is the upper layer */
    size_t n = strlen(sb->root) + sizeof "/upper";
    char *dir = malloc(n);
    if (dir == NULL) {
      snprintf(err, errlen, "out of memory");
      return -1;
    }
    snprintf(dir, n, "%s/upper", sb->root);
    free(sb->dir);
    sb->dir = dir;
  }
  /* a loaded sandbox with a disk of its own: mounted (a killed server's
  ** mount adopted) before its tree is looked at */
  mp_ns_disk_path(srv->data_dir, sb->id, img, sizeof img);
  if (!sb->restoring) {
    int rc = mp_ns_disk_mount(img, sb->root, err, errlen);
    if (rc < 0) return -1;
    if (rc > 0) {
      if ((b = box_of(srv, sb)) == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
      }
      b->disk = 1;
    }
  }
  /* a sandbox loaded at startup has its tree, and a restore writes it
  ** first: their inits start at their first command */
  fresh = access(sb->dir, F_OK) < 0 && !sb->restoring;
  /* a member of its template's (or, for a plain one, of the plain pool) */
  if (fresh && !is_private(sb) && !(mp_ns_disk_on() && is_build(sb))
      && sb->driver_data == NULL && mp_ns_pool_take(srv, sb) == 0) {
    mp_ns_net_name(sb, sb->driver_data); /* its egress box gets its id and log */
    return 0;
  }
  if ((b = box_of(srv, sb)) == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  /* its recorded range before the pool takes it (a loaded one: or later) */
  if (!fresh && mp_ns_uids_take_box(b, err, errlen) < 0 && sb->restoring)
    return -1;
  /* a new one's own disk, its tree inside (ENOSPC: the create's 507) */
  if ((fresh || sb->restoring) && !b->disk && mp_ns_disk_on()
      && !is_build(sb)) {
    if (mp_ns_disk_make(img, sb->root, err, errlen) < 0) return -1;
    b->disk = made = 1;
  }
  if (mp_ns_tree_make(sb->root, err, errlen) < 0) goto fail;
  if (template_link(srv, sb, err, errlen) < 0) goto fail;
  if (fresh && start_init(srv, sb, err, errlen) < 0) goto fail;
  return 0;
fail:
  /* nothing of a new disk is left: no mount, loop device, nor image */
  e = errno;
  if (made) {
    mp_ns_disk_remove(img, sb->root);
    rmdir(sb->root);
    b->disk = 0;
  }
  errno = e;
  return -1;
}

/* A running sandbox's working directory that does not exist is the
** spawn's error, as with the process driver (resolved in the init's root,
** its symlinks there): -1 and err. 0 when it exists, and when it cannot be
** told (a starting init): then the command says so and exits 127. */
static int missing_cwd(const ns_box *b, const char *cwd, char *err,
                       size_t errlen) {
  struct open_how how;
  char path[64];
  int root, fd, e;
  if (!b->ready || b->init_pid <= 0) return 0;
  snprintf(path, sizeof path, "/proc/%ld/root", b->init_pid);
  root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) return 0;
  memset(&how, 0, sizeof how);
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT;
  fd = (int)syscall(SYS_openat2, root, cwd, &how, sizeof how);
  e = errno;
  close(root);
  if (fd >= 0) close(fd);
  if (fd >= 0 || (e != ENOENT && e != ENOTDIR)) return 0;
  snprintf(err, errlen, "cannot run in directory '%s': %s", cwd, strerror(e));
  return -1;
}

/* the fast path of ns_spawn (ns_enter.c: the server's child execs
** `mastra-ns-init __ns-enter` in the sandbox's pid namespace): 1 when it
** spawned (rc), 0 when it cannot serve this command (the caller goes
** through __ns-exec; so does a server without mastra-ns-init, whose own
** binary would cost its dynamic loading here) */
static int spawn_entered(mp_server *srv, mp_sandbox *sb, ns_box *b,
                         const mp_exec_spec *spec, char *const *envp,
                         const char *cwd, mastra__proc **out, int *rc,
                         char *err, size_t errlen) {
  mastra__proc_opts opts;
  if (mp_ns_host.unpriv || mp_ns_host.own_pidns < 0 || !mp_ns_host.init_found
      || !b->ready || b->init_fd < 0)
    return 0;
  mp_proc_opts(&opts, spec, envp, NULL);
  return mp_ns_enter_spawn(srv->loop, mp_ns_host.init_bin, b->init_fd,
                           mp_ns_host.own_pidns, sb->id, cwd,
                           mp_ns_host.filter, &opts, out, rc, err, errlen);
}

/* A command: `mastra-ns-init __ns-exec SERVER_PID CWD FILTER CGROUP_PROCS...
** -- COMMAND` (ns_exec.c, ns_init.h), spawned without a fork of the server,
** with the ready socket as MP_NS_READY_FD (a starting sandbox, or without root;
** a running one with root: spawn_entered) */
/* envp with MP_NS_ENV_PREFIX before each entry: one allocation, freed with
** free(); NULL when out of memory */
static char **wrap_env(char *const *envp) {
  size_t n = 0, bytes = 0, plen = strlen(MP_NS_ENV_PREFIX), i;
  char **out, *p;
  for (; envp[n] != NULL; n++) bytes += plen + strlen(envp[n]) + 1;
  out = malloc((n + 1) * sizeof *out + bytes);
  if (out == NULL) return NULL;
  p = (char *)(out + n + 1);
  for (i = 0; i < n; i++) {
    size_t len = strlen(envp[i]) + 1;
    out[i] = p;
    memcpy(p, MP_NS_ENV_PREFIX, plen);
    memcpy(p + plen, envp[i], len);
    p += plen + len;
  }
  out[n] = NULL;
  return out;
}

static int ns_spawn(mp_server *srv, mp_sandbox *sb, const mp_exec_spec *spec,
                    char *const *envp, mastra__proc **out, char *err,
                    size_t errlen) {
  ns_box *b = box_of(srv, sb);
  char cwd[4200], spid[24], cgp[MP_NSCG_MAX][4500];
  char *argv[MP_NS_EXEC_CGROUPS + 3 + MP_NSCG_MAX], **wrapped;
  mastra__proc_opts opts;
  unsigned uids = sb->uid_base; /* its record's: saved when it changes */
  int i, n, rc;
  if (b == NULL) {
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  if (start_init(srv, sb, err, errlen) < 0) return -EIO;
  if (sb->uid_base != uids) mp_record_save(srv, sb);
  /* a template's setWorkdir is its sandboxes' default (and what a relative
  ** cwd is under), else /workspace */
  if (spec->cwd == NULL || spec->cwd[0] == '\0')
    snprintf(cwd, sizeof cwd, "%s", sb->workdir[0] ? sb->workdir : "/workspace");
  else if (spec->cwd[0] == '/')
    snprintf(cwd, sizeof cwd, "%s", spec->cwd);
  else if ((size_t)snprintf(cwd, sizeof cwd, "%s/%s",
                            sb->workdir[0] ? sb->workdir : "/workspace",
                            spec->cwd) >= sizeof cwd) {
    snprintf(err, errlen, "the working directory is too long");
    return -ENAMETOOLONG;
  }
  if (missing_cwd(b, cwd, err, errlen) < 0) return -ENOENT;
  /* the program starts as host root: it sees the command's environment
  ** only under MP_NS_ENV_PREFIX (ns_init.h) */
  wrapped = wrap_env(envp);
  if (wrapped == NULL) {
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  if (spawn_entered(srv, sb, b, spec, wrapped, cwd, out, &rc, err, errlen)) {
    free(wrapped);
    return rc;
  }
  snprintf(spid, sizeof spid, "%d", (int)getpid());
  argv[0] = "mastra-ns-exec";
  argv[1] = MP_NS_EXEC_ARG;
  argv[MP_NS_EXEC_SERVER_PID] = spid;
  argv[MP_NS_EXEC_CWD] = cwd;
  argv[MP_NS_EXEC_FILTER] = mp_ns_host.filter;
  n = MP_NS_EXEC_CGROUPS;
  for (i = 0; i < mp_nscg_count(); i++) {
    mp_nscg_join_file(sb->id, i, cgp[i], sizeof cgp[i]);
    argv[n++] = cgp[i];
  }
  argv[n++] = MP_NS_ARG_END;
  argv[n++] = (char *)spec->command;
  argv[n] = NULL;
  mp_proc_opts(&opts, spec, wrapped, NULL);
  opts.pdeathsig = 0; /* the program sets its own, and checks its parent */
  opts.exe = mp_ns_host.init_bin;
  opts.argv = argv;
  opts.fd3 = b->ready_fd;
  rc = mastra__proc_spawn(srv->loop, &opts, out, err, errlen);
  free(wrapped); /* the spawn returns after the program's exec */
  return rc;
}

/* a torn box's init exited: every other process of its pid namespace was
** reaped before (the kernel's zap of a dying namespace) */
static void on_init_exit(mastra__io *io, uint32_t revents) {
  ns_box *b = io->data;
  (void)revents;
  mastra__io_stop(&b->init_io);
  close_fd(&b->init_fd);
  mp_sandbox_recheck(b->sb);
}

static void ns_teardown(mp_server *srv, mp_sandbox *sb) {
  ns_box *b = box_of(srv, sb);
  if (b != NULL) {
    stop_init(b);
    net_leave(sb, b);
    cg_remove_later(b);
    b->torn = 1;
    if (b->init_fd >= 0) {
      mastra__io_init(srv->loop, &b->init_io, b->init_fd, on_init_exit, b);
      mastra__io_start(&b->init_io, EPOLLIN);
    }
    mp_ns_uids_put_if_gone(b); /* none started */
  }
  /* a template's build keeps its layer (sandbox/template.c) */
  if (sb->keep_layer != NULL && rename(sb->dir, sb->keep_layer) < 0)
    mp_log("cannot keep the layer of %s at %s: %s", sb->id, sb->keep_layer,
           strerror(errno));
  {
    /* its own disk: detached from the host (what its mount namespace
    ** holds goes with its last process, then the loop device), its image
    ** removed; ROOT is an empty directory then */
    char img[4400];
    mp_ns_disk_path(srv->data_dir, sb->id, img, sizeof img);
    if ((b != NULL && b->disk) || access(img, F_OK) == 0) {
      mp_ns_disk_remove(img, sb->root);
      if (b != NULL) b->disk = 0;
    }
  }
  mp_trash(srv, sb->root); /* removed off the loop */
}

/* the keeper reaped and the cgroups removed, waiting at most ~2 s
** (mp_ns_box_ops.finish_now) */
static void box_finish_now(ns_box *b) {
  int i;
  stop_init(b);
  mastra__io_stop(&b->keeper_io);
  mastra__io_stop(&b->ready_io);
  mastra__io_stop(&b->init_io);
  mastra__timer_stop(&b->rmdir_timer);
  if (b->keeper_fd >= 0) {
    struct pollfd pfd = {b->keeper_fd, POLLIN, 0};
    siginfo_t si;
    poll(&pfd, 1, 2000);
    waitid(P_PIDFD, (id_t)b->keeper_fd, &si, WEXITED | WNOHANG);
  }
  if (b->init_fd >= 0) {
    struct pollfd pfd = {b->init_fd, POLLIN, 0};
    poll(&pfd, 1, 2000);
  }
  close_fd(&b->keeper_fd);
  close_fd(&b->ready_fd);
  close_fd(&b->init_fd);
  for (i = 0; b->cg_made && i < 100 && mp_nscg_remove(b->id) < 0; i++)
    sleep_ms(20);
  b->cg_made = 0;
}

static void box_free(mastra__handle *h) {
  ns_box *b = (ns_box *)h;
  mastra__timer_stop(&b->rmdir_timer);
  mastra__io_stop(&b->keeper_io);
  mastra__io_stop(&b->init_io);
  close_fd(&b->init_fd);
  mp_ns_uids_put_box(b);
  free(b);
}

static void box_shutdown(mastra__handle *h) {
  box_finish_now((ns_box *)h);
  mp_ns_uids_put_box((ns_box *)h);
  free(h);
}

/* a detached box whose keeper is reaped and whose cgroups are gone */
static void box_done_if_detached(ns_box *b) {
  if (b->sb != NULL || b->keeper_fd >= 0 || b->cg_made) return;
  mastra__loop_defer_free(b->loop, &b->handle); /* after the dispatch */
}

/* The record goes (the server exits, a destroyed record is forgotten, a
** create failed): nothing of the sandbox outlives the server. On the loop
** nothing waits: the box reaps its keeper and removes its cgroups there. */
static void ns_release(mp_server *srv, mp_sandbox *sb) {
  ns_box *b = sb->driver_data;
  (void)srv;
  if (b == NULL) return;
  sb->driver_data = NULL;
  b->sb = NULL;
  if (mastra__loop_closed(b->loop)) {
    box_finish_now(b);
    /* the server's exit: its disk unmounted, its image kept for the next */
    if (b->disk) mp_ns_disk_unmount(sb->root);
    mp_ns_uids_put_box(b);
    free(b);
    return;
  }
  box_detach(b);
}

/* a box on no sandbox, ended on the loop (mp_ns_box_ops.detach) */
static void box_detach(ns_box *b) {
  stop_init(b);
  net_leave(NULL, b); /* its way out (a PRIVATE member left at its teardown) */
  mastra__io_stop(&b->ready_io);
  mastra__io_stop(&b->init_io);
  close_fd(&b->ready_fd);
  close_fd(&b->init_fd);
  b->handle.shutdown = box_shutdown;
  b->handle.free = box_free;
  mastra__loop_add_handle(b->loop, &b->handle);
  if (b->rmdir_timer.slot == 0) cg_remove_later(b);
  box_done_if_detached(b);
}


static const mp_ns_box_ops box_ops = {
    .make = box_new,
    .make_tree = mp_ns_tree_make,
    .start_keeper = start_keeper,
    .detach = box_detach,
    .finish_now = box_finish_now,
    .put_uids = mp_ns_uids_put_box,
    .link_template = mp_ns_tree_link,
};

static int ns_setup(mp_server *srv, char *err, size_t errlen) {
  int rc;
  /* before the base or anything else: a flag it cannot honour stops it */
  if (mp_ns_disk_setup(srv->data_dir, mp_ns_opts.disk_max,
                       mp_ns_opts.inodes_max, mp_ns_opts.disk_reserve,
                       geteuid() != 0, err, errlen)
      < 0)
    return -1;
  rc = mp_ns_host_setup(srv, err, errlen);
  if (rc == 0)
    mp_ns_pool_setup(srv->data_dir, mp_ns_opts.warm_pool,
                     mp_ns_opts.warm_pool_templates,
                     mp_ns_opts.warm_pool_template_max, &box_ops);
  return rc;
}

static void ns_start(mp_server *srv) {
  mp_ns_disk_sweep_orphans(srv);
  mp_ns_host_start(srv); /* the egress proxy, before the pool's boxes join */
  mp_ns_pool_start(srv);
}

static void ns_stop(mp_server *srv) { mp_ns_host_stop(srv); }

static void ns_finish(mp_server *srv) {
  mp_ns_pool_finish();
  mp_ns_host_finish(srv);
}

/* a template's layer is about to go (template.c): its warm members first */
static void ns_template_gone(mp_server *srv, const char *key) {
  (void)srv;
  mp_ns_pool_drop_template(key);
}

static void ns_health(const mp_server *srv, cJSON *o) {
  (void)srv;
  mp_ns_pool_health(o);
  mp_ns_uids_health(o);
  mp_ns_disk_health(o);
}

const mp_driver mp_ns_driver = {
    .name = "namespaces",
    .flags = mp_ns_flags,
    .available = mp_ns_host_available,
    .setup = ns_setup,
    .start = ns_start,
    .stop = ns_stop,
    .finish = ns_finish,
    .limits = mp_ns_host_limits,
    .prepare = ns_prepare,
    .spawn = ns_spawn,
    .teardown = ns_teardown,
    .release = ns_release,
    /* trusted.overlay.* (root) or user.overlay.* (userxattr, without
    ** root): overlayfs's opaque directories and redirects */
    .tar_flags = "--numeric-owner --xattrs --xattrs-include=trusted.overlay.*"
                 " --xattrs-include=user.overlay.*",
    .layer_tree = 1,
    .templates = 1,
    /* a command (its __ns-exec and child, or the entered /bin/sh) dies
    ** with the server (PR_SET_PDEATHSIG), the rest of the sandbox with
    ** its init */
    .no_run_files = 1,
    .kill_strays = mp_ns_kill_strays,
    .left = mp_ns_left,
    .egress = mp_ns_net_json,
    .egress_narrow = mp_ns_net_narrow,
    .health = ns_health,
    .template_gone = ns_template_gone,
};

/* }====== */
