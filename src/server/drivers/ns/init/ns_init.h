/*
** The contract between the server (driver_ns.c, ns_pool.c, ns_enter.c,
** ns_host.c) and mastra-ns-init (ns_init.c, ns_exec.c): the one header
** both sides include. Its argument layouts, descriptor numbers, files and
** the messages on the ready socket and on the keeper's pipes to its init
** are named here, and nowhere else spelt out. docs/platform.md, "The
** init's protocol".
**
** mastra-ns-init's programs, selected by argv[1]:
**
**   __ns-init (ns_init.c): a sandbox's keeper and init, posix_spawn'd by
**     driver_ns.c with the ready socket as MP_NS_READY_FD (and an id map's
**     user namespace as MP_NS_IDMAP_FD);
**   __ns-exec (ns_exec.c): a command of a starting sandbox, or of any
**     sandbox without root, with the ready socket as MP_NS_READY_FD;
**   __ns-enter (ns_exec.c): a command of a running sandbox with root,
**     exec'd by the server's vforked child (ns_enter.c).
**
** Failures. The keeper and the init end with one line on the ready socket,
** MP_NS_SAY_ERROR, "E <step>: <ERRNO NAME>\n" ("E mount /proc: ENOTDIR";
** the name from mp_ns_errno_name), which the server logs and which a
** waiting __ns-exec hands the command: "mastra-platform: the sandbox did
** not start: mount /proc: ENOTDIR" on its stderr, exit
** MP_NS_EXIT_FAILED. __ns-exec and __ns-enter say "mastra-platform: <step>:
** <ERRNO NAME>" on the command's stderr and exit MP_NS_EXIT_FAILED.
*/
#ifndef MP_NS_INIT_H
#define MP_NS_INIT_H

#include "drivers/ns/init/ns_sys.h" /* mp_ns_write_text */

/* The ids of the sandboxes' layers on the host: a file of uid k in a
** sandbox (0..MP_NS_UID_COUNT-1) is owned by host uid MP_NS_UID_BASE + k
** in its upper layer, a template's layer and a checkpoint, whatever the
** sandbox. Each sandbox runs as a host uid range of its own (ns_uids.h:
** root in it is host uid UIDS, the keeper's argument), and the keeper
** mounts those layers idmapped from MP_NS_UID_BASE to UIDS when they
** differ (without root, or without idmapped mounts, UIDS is
** MP_NS_UID_BASE for every sandbox). */
#define MP_NS_UID_BASE 100000
#define MP_NS_UID_COUNT 65536

/* {====== programs and arguments ====== */

/* argv[1], which selects the program (mastra-platform's main too, without
** mastra-ns-init) */
#define MP_NS_INIT_ARG "__ns-init"
#define MP_NS_EXEC_ARG "__ns-exec"
#define MP_NS_ENTER_ARG "__ns-enter"

/* an optional argument that is not given, and the ID of a warm keeper */
#define MP_NS_ARG_NONE "-"
/* the end of __ns-exec's and __ns-enter's cgroup files: COMMAND follows,
** the last argument */
#define MP_NS_ARG_END "--"

/* `NAME __ns-init SERVER_PID ID BASE ROOT READY_FD HOSTS RESOLV FILTER
** UIDS [CGROUP_PROCS...]`: indices in argv. ID: the hostname, or MP_NS_ARG_NONE
** (a warm keeper of the pool: it says MP_NS_SAY_WARM and waits for
** MP_NS_TELL_NAME); HOSTS: the environment's hosts file (PRIVATE), or
** none; RESOLV: the sandboxes' resolv.conf with egress (then ISOLATED
** sandboxes join too: their link to the way out), or none; FILTER: the
** syscall filter's file; UIDS: the host uid of the sandbox's root, the
** first of its MP_NS_UID_COUNT ids (MP_NS_ARG_NONE without root);
** CGROUP_PROCS: the cgroup.procs files to join. */
enum {
  MP_NS_INIT_SERVER_PID = 2,
  MP_NS_INIT_ID,
  MP_NS_INIT_BASE,
  MP_NS_INIT_ROOT,
  MP_NS_INIT_READY,
  MP_NS_INIT_HOSTS,
  MP_NS_INIT_RESOLV,
  MP_NS_INIT_FILTER,
  MP_NS_INIT_UIDS,
  MP_NS_INIT_CGROUPS /* the first, if any */
};

/* `NAME __ns-exec SERVER_PID CWD FILTER [CGROUP_PROCS...] -- COMMAND` */
enum {
  MP_NS_EXEC_SERVER_PID = 2,
  MP_NS_EXEC_CWD,
  MP_NS_EXEC_FILTER,
  MP_NS_EXEC_CGROUPS
};

/* `NAME __ns-enter CWD FILTER [CGROUP_PROCS...] -- COMMAND` */
enum { MP_NS_ENTER_CWD = 2, MP_NS_ENTER_FILTER, MP_NS_ENTER_CGROUPS };

/* the exit status of a command that could not start */
#define MP_NS_EXIT_FAILED 127

/* }====== */

/* {====== descriptors and files ====== */

/* the ready socket (a unix stream socket), in the keeper and in __ns-exec */
#define MP_NS_READY_FD 3
/* the keeper's id map's user namespace with root (ns_idmap.c), or the
** switch's user namespace without root (net.h), when the server has one */
#define MP_NS_IDMAP_FD 4

/* the syscall filter, a classic BPF program that the server writes (as
** DATA/MP_NS_FILTER_FILE, ns_seccomp.c) and every way into a sandbox
** installs (mp_ns_filter_load, mp_ns_filter_install) */
#define MP_NS_FILTER_FILE "ns-seccomp.bpf"

/* a base that holds this file layers its usr directory over the host's
** /usr (ns_init.c; base.c builds it); without it, its usr is a whole copy */
#define MP_BASE_HOST_USR ".mastra-host-usr"
/* a sandbox of a template: ROOT/template links to the template's layer,
** the root's lower layer above the base (and its usr above the base's) */
#define MP_NS_TEMPLATE_LINK "template"

/* A command's environment reaches mastra-ns-init (__ns-exec, __ns-enter)
** with every entry prefixed MP_NS_ENV_PREFIX: the program starts as host
** root, and neither the dynamic loader (of a build that is not static, or
** of mastra-platform itself as the fallback) nor libc may act on an
** LD_PRELOAD, GLIBC_TUNABLES or GCONV_PATH that a request set, which could
** name a file the sandbox wrote. The program strips the prefix in the
** environment it hands the command's /bin/sh (mp_ns_env_unwrap). */
#define MP_NS_ENV_PREFIX "MASTRA_NS_ENV_"

/* }====== */

/* {====== the ready socket ======
** Lines of text, each one message, its first byte its kind; the keeper's
** (and the init's) MP_NS_SAY_*, the server's MP_NS_TELL_*. In order:
**
**   [N <init pid>  -> j | x <why>]   PRIVATE, or egress: the network
**   [W             <- h <id>]        a warm keeper, named by a create
**    R <init pid>                    ready: commands may enter
**    E <step>: <ERRNO>               instead, at any point: it failed
**
** Without root the N line comes with two descriptors (SCM_RIGHTS): the
** sandbox's network namespace and an rtnetlink socket made in it. The
** server reads with MSG_PEEK where __ns-exec must see the line too (R, E:
** they stay in the socket). */
#define MP_NS_SAY_READY 'R'   /* "R <init pid>" */
#define MP_NS_SAY_WARM 'W'    /* "W": warm, waiting for a name */
#define MP_NS_SAY_NET 'N'     /* "N <init pid>": attach my network */
#define MP_NS_SAY_ERROR 'E'   /* "E <step>: <ERRNO NAME>" */
#define MP_NS_TELL_NAME 'h'   /* "h <id>": the hostname of a warm keeper */
#define MP_NS_TELL_JOINED 'j' /* "j": the network is attached */
#define MP_NS_TELL_REFUSED 'x' /* "x <why>": it is not; fail with why */

/* the longest line either side writes, newline included */
#define MP_NS_LINE_MAX 1100

/* }====== */

/* {====== the keeper's pipes to its init ======
** One byte each way, in order: the keeper opened the init's /proc
** directory (GO: the init may pivot_root), the init made its user
** namespace (USERNS), the keeper wrote its id maps (MAPPED, with root). */
#define MP_NS_PIPE_GO 'g'
#define MP_NS_PIPE_USERNS 'u'
#define MP_NS_PIPE_MAPPED 'm'

/* }====== */

int mp_ns_init_main(int argc, char **argv);

#endif
