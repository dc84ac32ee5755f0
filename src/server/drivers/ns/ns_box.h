/*
** A sandbox's part of the `namespaces` driver, shared by driver_ns.c (the
** driver: keepers, commands, release) and ns_pool.c (the warm pool, whose
** members are boxes on no sandbox yet), which gets the driver's box
** functions as mp_ns_box_ops (the driver calls the pool, never the other
** way). Not for the rest of the server.
*/
#ifndef MP_NS_BOX_H
#define MP_NS_BOX_H

#include <sys/types.h>

#include "loop.h"
#include "sandbox/sandbox.h"

/* Released on the loop (a destroyed record forgotten, a create that
** failed, a warm member dropped), a box outlives its sandbox ("detached",
** sb NULL) until its keeper is reaped and its cgroups are removed, both on
** the loop, then frees itself; the loop's close ends what is left with a
** bounded wait. */
typedef struct ns_box {
  mastra__handle handle;       /* on the loop's list: detached, or warm */
  mastra__loop *loop;
  mp_sandbox *sb;              /* NULL: detached, or warm */
  char id[MP_ID_MAX];          /* its cgroups' name */
  pid_t keeper;
  int keeper_fd;               /* pidfd of the keeper (our child) */
  int init_fd;                 /* pidfd of the init, once ready */
  long init_pid;
  int ready_fd;                /* our end of the ready socket */
  int started, cg_made;
  int ready;                   /* "R" came (a warm box: "W") */
  int joined;                  /* a member of its environment's network */
  struct mp_egress_box *egress; /* its part of the egress proxy (ns_net.c), or NULL */
  unsigned out_addr;           /* its link to the way out (ISOLATED), or 0 */
  unsigned uid_base;           /* its host uid range (ns_uids.h), taken
                               ** at its first keeper, put back when the
                               ** box is freed; 0: none yet */
  int uid_kept;                /* its processes may outlive it: the range
                               ** is never put back */
  int warm;                    /* in the warm pool (ns_pool.c) */
  int disk;                    /* its own disk (ns_disk.h) is mounted at
                               ** its root: the sandbox's, or pool_root */
  char *pool_root;             /* a warm box's DATA/pool/<n> */
  /* a warm box's template (its root links to the template's layer), or
  ** "": a plain one; and the limits its cgroups were made with (a box on
  ** no sandbox: the template's cpuCount and memoryMB; 0: the server's) */
  char pool_key[MP_TEMPLATE_KEY_MAX];
  int cpu_count, memory_mb;
  struct ns_box *pool_next;
  unsigned rmdir_tries;
  int torn;                    /* torn down: a destroy drains it (ns_left),
                               ** and its uid range is put back once its
                               ** processes are gone */
  mastra__io keeper_io, ready_io;
  mastra__io init_io;          /* a torn box's init_fd: its exit */
  mastra__timer rmdir_timer;
} ns_box;

/* What the warm pool (ns_pool.c) does with boxes: the driver's functions
** (driver_ns.c), handed to it at setup */
typedef struct mp_ns_box_ops {
  /* a box whose cgroups are named id, on no sandbox: NULL without memory */
  ns_box *(*make)(mastra__loop *loop, const char *id);
  /* root/{upper,work,merged}, with upper's workspace and root's home owned
  ** by the sandbox's root: 0, or -1 and err */
  int (*make_tree)(const char *root, char *err, size_t errlen);
  /* b's cgroups, then its keeper over the tree at root, which mounts it,
  ** forks the init and says "R" (its hostname name), or, with name "-",
  ** says "W" and waits for "h <id>" (ns_init.c); hosts: the environment's
  ** hosts file, or "-". The loop watches both: 0, or -1 and err */
  int (*start_keeper)(mp_server *srv, ns_box *b, const char *name,
                      const char *root, const char *hosts, char *err,
                      size_t errlen);
  /* b, on no sandbox and not on the loop's list, ended on the loop: its
  ** init and keeper killed, the keeper reaped and the cgroups removed as
  ** they become free, then freed */
  void (*detach)(ns_box *b);
  /* the same, now, waiting at most ~2 s (the server's exit, the loop's
  ** close); b is not freed */
  void (*finish_now)(ns_box *b);
  /* b is freed: its uid range is free again (unless b->uid_kept) */
  void (*put_uids)(ns_box *b);
  /* root/template links to DATA/templates/<key>/layer, which the keeper
  ** puts between the base and root's own layer: 0, or -1 and err (the
  ** layer is gone: errno ENOENT) */
  int (*link_template)(const char *data_dir, const char *root,
                       const char *key, char *err, size_t errlen);
} mp_ns_box_ops;

#endif
