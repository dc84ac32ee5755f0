/*
** The warm pool of the `namespaces` driver (ns_pool.h; docs/platform.md,
** "The warm pool"). --warm-pool N keepers and inits of ISOLATED sandboxes
** run ahead, each a box (ns_box.h) under DATA/pool/<n> with cgroups named
** pool-<n>, whose keeper did all a keeper does but set the hostname, said
** "W" and waits (ns_init.c). A fresh ISOLATED create takes the oldest that
** said "W" (before it, its keeper may not have joined the cgroups that a
** rename would move): its cgroups and its directory are renamed to the
** sandbox's (the overlay holds its layers, not their paths), and "h <id>"
** makes the keeper set the hostname and say "R", so the first command
** waits for no mount, unshare or fork. A new member starts POOL_REFILL_MS
** later, after the new sandbox's first command rather than beside it.
**
** Members are on the loop's list of handles: its close ends them (the
** server's exit; their directory goes at mp_ns_pool_finish). A member
** that fails is dropped (detached: ended on the loop) and replaced, until
** POOL_FAILURES_MAX fail in a row.
*/
#define _GNU_SOURCE
#include "drivers/ns/ns_pool.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/log.h"
#include "drivers/ns/ns_cgroup.h"
#include "drivers/ns/ns_uids.h"
#include "drivers/ns/init/ns_init.h" /* MP_NS_TELL_NAME, MP_NS_ARG_NONE */
#include "util/trash.h"
#include "util.h"

/* a taken member is replaced this long after the take */
#define POOL_REFILL_MS 100
/* members that fail in a row before the pool stops refilling */
#define POOL_FAILURES_MAX 3

static struct {
  const mp_ns_box_ops *ops;    /* the driver's */
  mp_server *srv;
  int size;                    /* --warm-pool */
  char dir[4200];              /* DATA/pool */
  ns_box *first;               /* the members, oldest first */
  unsigned seq;
  int failures;                /* members that failed in a row */
  mastra__timer refill;
} pool;

static void refill_later(void) {
  if (pool.size > 0 && pool.refill.loop != NULL && pool.refill.slot == 0
      && pool.failures < POOL_FAILURES_MAX)
    mastra__timer_start(&pool.refill, POOL_REFILL_MS);
}

static void unlink_member(ns_box *b) {
  ns_box **p;
  for (p = &pool.first; *p != NULL; p = &(*p)->pool_next) {
    if (*p == b) {
      *p = b->pool_next;
      break;
    }
  }
  b->pool_next = NULL;
  b->warm = 0;
}

static void member_shutdown(mastra__handle *h) {
  ns_box *b = (ns_box *)h;
  unlink_member(b);
  free(b->pool_root); /* the directory goes at mp_ns_pool_finish */
  pool.ops->finish_now(b);
  pool.ops->put_uids(b);
  free(b);
}

static void member_free(mastra__handle *h) {
  ns_box *b = (ns_box *)h;
  free(b->pool_root);
  pool.ops->put_uids(b);
  free(b);
}

/* out of the pool, ended on the loop, its directory to the trash */
static void drop(ns_box *b) {
  unlink_member(b);
  if (b->pool_root != NULL) {
    mp_trash(pool.srv, b->pool_root);
    free(b->pool_root);
    b->pool_root = NULL;
  }
  mastra__loop_remove_handle(b->loop, &b->handle);
  pool.ops->detach(b);
  refill_later();
}

static void count_failure(void) {
  if (++pool.failures == POOL_FAILURES_MAX)
    mp_log("the warm pool is off: %d warm sandboxes failed in a row",
           POOL_FAILURES_MAX);
}

void mp_ns_pool_ready(ns_box *b) {
  b->ready = 1;
  pool.failures = 0;
}

void mp_ns_pool_health(cJSON *o) {
  const ns_box *b;
  int ready = 0, warming = 0;
  cJSON *w = cJSON_AddObjectToObject(o, "warmPool");
  if (w == NULL) return;
  for (b = pool.first; b != NULL; b = b->pool_next) {
    if (b->ready) ready++;
    else warming++;
  }
  cJSON_AddNumberToObject(w, "size", pool.size);
  cJSON_AddNumberToObject(w, "ready", ready);
  cJSON_AddNumberToObject(w, "warming", warming);
}

void mp_ns_pool_failed(ns_box *b, const char *why) {
  mp_log("a warm sandbox failed: %s", why);
  count_failure();
  drop(b);
}

/* one more member at the end of the pool: 0, or -1 and err */
static int add(mp_server *srv, char *err, size_t errlen) {
  char id[MP_ID_MAX], root[4300];
  ns_box *b, **tail;
  snprintf(id, sizeof id, "pool-%u", ++pool.seq);
  snprintf(root, sizeof root, "%s/%u", pool.dir, pool.seq);
  b = pool.ops->make(srv->loop, id);
  if (b == NULL || (b->pool_root = strdup(root)) == NULL) {
    free(b);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (pool.ops->make_tree(root, err, errlen) < 0
      || pool.ops->start_keeper(srv, b, MP_NS_ARG_NONE, root, MP_NS_ARG_NONE,
                                err, errlen) < 0) {
    if (b->cg_made) mp_nscg_remove(id); /* empty: nothing joined them */
    mastra__remove_tree(root);
    member_free(&b->handle);
    return -1;
  }
  b->warm = 1;
  for (tail = &pool.first; *tail != NULL; tail = &(*tail)->pool_next)
    ;
  *tail = b;
  b->handle.shutdown = member_shutdown;
  b->handle.free = member_free;
  mastra__loop_add_handle(srv->loop, &b->handle);
  return 0;
}

static void on_refill(mastra__timer *t) {
  char err[600];
  const ns_box *b;
  int n = 0;
  (void)t;
  for (b = pool.first; b != NULL; b = b->pool_next) n++;
  for (; n < pool.size && pool.failures < POOL_FAILURES_MAX; n++) {
    if (add(pool.srv, err, sizeof err) == 0) continue;
    mp_log("cannot warm a sandbox: %s", err);
    count_failure();
    break;
  }
}

int mp_ns_pool_take(mp_server *srv, mp_sandbox *sb) {
  ns_box *b;
  char line[MP_ID_MAX + 4], dir[4200];
  int n;
  for (b = pool.first; b != NULL && !b->ready; b = b->pool_next)
    ;
  if (b == NULL) return -1;
  snprintf(dir, sizeof dir, "%s/sandboxes", srv->data_dir);
  if (mp_nscg_rename(b->id, sb->id) < 0) {
    mp_log("cannot rename the cgroups of %s to %s: %s", b->id, sb->id,
           strerror(errno));
    drop(b);
    return -1;
  }
  if (mastra__mkdirs(dir, 0755, NULL) < 0
      || rename(b->pool_root, sb->root) < 0) {
    mp_log("cannot rename %s to %s: %s", b->pool_root, sb->root,
           strerror(errno));
    mp_nscg_rename(sb->id, b->id);
    drop(b);
    return -1;
  }
  unlink_member(b);
  mastra__loop_remove_handle(b->loop, &b->handle);
  free(b->pool_root);
  b->pool_root = NULL;
  b->ready = 0; /* until its "R" */
  snprintf(b->id, sizeof b->id, "%s", sb->id);
  b->sb = sb;
  sb->driver_data = b;
  sb->uid_base = mp_ns_uids_recorded(b->uid_base); /* taken when warmed */
  /* a line into a socket it reads: never blocks. A keeper gone already:
  ** the driver says so, and the first command starts a new one */
  n = snprintf(line, sizeof line, "%c %s\n", MP_NS_TELL_NAME, sb->id);
  if (send(b->ready_fd, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
    mp_log("sandbox %s: cannot name its warm keeper: %s", sb->id,
           strerror(errno));
  refill_later();
  return 0;
}

void mp_ns_pool_setup(const char *data_dir, int size,
                      const mp_ns_box_ops *ops) {
  snprintf(pool.dir, sizeof pool.dir, "%s/pool", data_dir);
  pool.size = size;
  pool.ops = ops;
}

void mp_ns_pool_start(mp_server *srv) {
  pool.srv = srv;
  mastra__timer_init(srv->loop, &pool.refill, on_refill, NULL);
  /* a killed server's: its keepers died with it */
  if (access(pool.dir, F_OK) == 0) mp_trash(srv, pool.dir);
  if (pool.size > 0) mastra__timer_start(&pool.refill, 0);
}

void mp_ns_pool_finish(void) {
  if (pool.dir[0] != '\0' && access(pool.dir, F_OK) == 0
      && mastra__remove_tree(pool.dir) < 0)
    mp_log("cannot remove %s: %s (the next start does)", pool.dir,
           strerror(errno));
}
