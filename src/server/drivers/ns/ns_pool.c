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
**
** Templates: a member may carry a template's key (pool_key; "" is a plain
** member), its root linked to the template's layer before its keeper
** starts, its cgroups made with the template's limits. A fresh ISOLATED
** create of template T (taken or cold) makes T one of the pool's
** templates, the most recently used first: each has --warm-pool-templates
** members, refilled as the plain ones; past --warm-pool-template-max the
** least recently used one goes, members and all. A take matches on the
** key. Before a template's layer is removed (retention, a DELETE) its
** members are dropped (mp_ns_pool_drop_template): they are not its users
** and never hold it back. --warm-pool 0 is no pool at all.
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
#include "drivers/ns/ns_disk.h"
#include "drivers/ns/ns_options.h" /* MP_WARM_POOL_TEMPLATE_MAX */
#include "drivers/ns/ns_uids.h"
#include "drivers/ns/init/ns_init.h" /* MP_NS_TELL_NAME, MP_NS_ARG_NONE */
#include "util/trash.h"
#include "util.h"

/* a taken member is replaced this long after the take */
#define POOL_REFILL_MS 100
/* members that fail in a row before the pool stops refilling */
#define POOL_FAILURES_MAX 3

/* a template with members: its key, its sandboxes' limits, its last use */
typedef struct pool_template {
  char key[MP_TEMPLATE_KEY_MAX];
  int cpu_count, memory_mb;
  unsigned long long used;     /* pool.clock at its last create */
} pool_template;

static struct {
  const mp_ns_box_ops *ops;    /* the driver's */
  mp_server *srv;
  int size;                    /* --warm-pool */
  int per_template;            /* --warm-pool-templates */
  int max_templates;           /* --warm-pool-template-max */
  pool_template tpl[MP_WARM_POOL_TEMPLATE_MAX];
  int ntpl;
  unsigned long long clock;
  char data_dir[4100];
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

/* a member's own disk (ns_disk.h): DATA/pool/<n>.img, mounted at its
** root */
static void image_of(const char *root, char *out, size_t n) {
  snprintf(out, n, "%s.img", root);
}

/* its disk unmounted, and its image removed too when remove */
static void disk_off(ns_box *b, const char *root, int remove) {
  char img[4400];
  if (!b->disk || root == NULL) return;
  mp_ns_disk_unmount(root);
  image_of(root, img, sizeof img);
  if (remove && unlink(img) < 0 && errno != ENOENT)
    mp_log("cannot remove %s: %s", img, strerror(errno));
  b->disk = 0;
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
  pool.ops->finish_now(b);
  disk_off(b, b->pool_root, 0); /* the image goes with the directory */
  free(b->pool_root); /* the directory goes at mp_ns_pool_finish */
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
    disk_off(b, b->pool_root, 1);
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

/* the members of key ("": the plain ones), ready and still warming */
static void count_of(const char *key, int *ready, int *warming) {
  const ns_box *b;
  *ready = *warming = 0;
  for (b = pool.first; b != NULL; b = b->pool_next) {
    if (strcmp(b->pool_key, key) != 0) continue;
    if (b->ready) (*ready)++;
    else (*warming)++;
  }
}

void mp_ns_pool_health(cJSON *o) {
  int ready, warming, i;
  cJSON *w = cJSON_AddObjectToObject(o, "warmPool"), *a;
  if (w == NULL) return;
  count_of("", &ready, &warming);
  cJSON_AddNumberToObject(w, "size", pool.size);
  cJSON_AddNumberToObject(w, "ready", ready);
  cJSON_AddNumberToObject(w, "warming", warming);
  cJSON_AddNumberToObject(w, "perTemplate",
                          pool.size > 0 ? pool.per_template : 0);
  cJSON_AddNumberToObject(w, "templateMax",
                          pool.size > 0 ? pool.max_templates : 0);
  a = cJSON_AddArrayToObject(w, "templates");
  for (i = 0; a != NULL && i < pool.ntpl; i++) {
    cJSON *t = cJSON_CreateObject();
    count_of(pool.tpl[i].key, &ready, &warming);
    cJSON_AddStringToObject(t, "key", pool.tpl[i].key);
    cJSON_AddNumberToObject(t, "ready", ready);
    cJSON_AddNumberToObject(t, "warming", warming);
    cJSON_AddItemToArray(a, t);
  }
}

void mp_ns_pool_failed(ns_box *b, const char *why) {
  mp_log("a warm sandbox failed: %s", why);
  count_failure();
  drop(b);
}

/* one more member at the end of the pool, of template tp (NULL: a plain
** one): 0, or -1 and err (*gone: tp's layer is gone) */
static int add(mp_server *srv, const pool_template *tp, int *gone, char *err,
               size_t errlen) {
  char id[MP_ID_MAX], root[4300];
  ns_box *b, **tail;
  *gone = 0;
  snprintf(id, sizeof id, "pool-%u", ++pool.seq);
  snprintf(root, sizeof root, "%s/%u", pool.dir, pool.seq);
  b = pool.ops->make(srv->loop, id);
  if (b == NULL || (b->pool_root = strdup(root)) == NULL) {
    free(b);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (tp != NULL) {
    snprintf(b->pool_key, sizeof b->pool_key, "%s", tp->key);
    b->cpu_count = tp->cpu_count;
    b->memory_mb = tp->memory_mb;
  }
  /* its own disk, made with it (a take moves it: mp_ns_pool_take) */
  if (mp_ns_disk_on()) {
    char img[4400];
    image_of(root, img, sizeof img);
    if (mp_ns_disk_make(img, root, err, errlen) < 0) goto fail;
    b->disk = 1;
  }
  if (pool.ops->make_tree(root, err, errlen) < 0) goto fail;
  /* its root links to the layer before its keeper mounts the overlay */
  if (tp != NULL
      && pool.ops->link_template(pool.data_dir, root, tp->key, err, errlen)
             < 0) {
    *gone = errno == ENOENT;
    goto fail;
  }
  if (pool.ops->start_keeper(srv, b, MP_NS_ARG_NONE, root, MP_NS_ARG_NONE,
                             err, errlen) < 0)
    goto fail;
  b->warm = 1;
  for (tail = &pool.first; *tail != NULL; tail = &(*tail)->pool_next)
    ;
  *tail = b;
  b->handle.shutdown = member_shutdown;
  b->handle.free = member_free;
  mastra__loop_add_handle(srv->loop, &b->handle);
  return 0;
fail:
  if (b->cg_made) mp_nscg_remove(id); /* empty: nothing joined them */
  disk_off(b, root, 1);
  mastra__remove_tree(root);
  member_free(&b->handle);
  return -1;
}

/* every member of key, warm or still warming, dropped */
static void drop_members(const char *key) {
  ns_box *b = pool.first, *next;
  for (; b != NULL; b = next) {
    next = b->pool_next;
    if (strcmp(b->pool_key, key) == 0) drop(b);
  }
}

/* the template at i is no longer the pool's, nor are its members */
static void forget_template(int i) {
  char key[MP_TEMPLATE_KEY_MAX];
  snprintf(key, sizeof key, "%s", pool.tpl[i].key);
  memmove(&pool.tpl[i], &pool.tpl[i + 1],
          (size_t)(pool.ntpl - i - 1) * sizeof pool.tpl[0]);
  pool.ntpl--;
  drop_members(key);
}

static int find_template(const char *key) {
  int i;
  for (i = 0; i < pool.ntpl; i++)
    if (strcmp(pool.tpl[i].key, key) == 0) return i;
  return -1;
}

/* sb, a fresh ISOLATED sandbox of a template, was created: its template is
** the most recently used (and one of the pool's, the least recently used
** one forgotten when there are too many) */
static void note_template(const mp_sandbox *sb) {
  int i = find_template(sb->template_key);
  if (pool.size <= 0 || pool.per_template <= 0 || pool.max_templates <= 0)
    return;
  if (i < 0) {
    if (pool.ntpl == pool.max_templates) {
      int lru = 0, j;
      for (j = 1; j < pool.ntpl; j++)
        if (pool.tpl[j].used < pool.tpl[lru].used) lru = j;
      mp_log("the warm pool drops the members of template %s, the least"
             " recently used of %d (--warm-pool-template-max)",
             pool.tpl[lru].key, pool.max_templates);
      forget_template(lru);
    }
    i = pool.ntpl++;
    snprintf(pool.tpl[i].key, sizeof pool.tpl[i].key, "%s", sb->template_key);
  }
  pool.tpl[i].cpu_count = sb->cpu_count;
  pool.tpl[i].memory_mb = sb->memory_mb;
  pool.tpl[i].used = ++pool.clock;
}

void mp_ns_pool_drop_template(const char *key) {
  int i = find_template(key);
  if (i >= 0) forget_template(i);
  else drop_members(key); /* none: its members went with it */
}

static void on_refill(mastra__timer *t) {
  char err[600];
  int ready, warming, n, i, gone;
  (void)t;
  count_of("", &ready, &warming);
  for (n = ready + warming; n < pool.size && pool.failures < POOL_FAILURES_MAX;
       n++) {
    if (add(pool.srv, NULL, &gone, err, sizeof err) == 0) continue;
    mp_log("cannot warm a sandbox: %s", err);
    count_failure();
    return;
  }
  for (i = 0; i < pool.ntpl && pool.failures < POOL_FAILURES_MAX; i++) {
    count_of(pool.tpl[i].key, &ready, &warming);
    for (n = ready + warming; n < pool.per_template; n++) {
      if (add(pool.srv, &pool.tpl[i], &gone, err, sizeof err) == 0) continue;
      mp_log("cannot warm a sandbox of template %s: %s", pool.tpl[i].key, err);
      if (gone) { /* removed under us: not the pool's failure */
        forget_template(i--);
        break;
      }
      count_failure();
      return;
    }
  }
}

int mp_ns_pool_take(mp_server *srv, mp_sandbox *sb) {
  ns_box *b;
  char line[MP_ID_MAX + 4], dir[4200], err[600];
  int n;
  if (sb->template_key[0] != '\0') {
    note_template(sb);
    refill_later(); /* its members, once its first command has run */
  }
  for (b = pool.first;
       b != NULL && (!b->ready || strcmp(b->pool_key, sb->template_key) != 0);
       b = b->pool_next)
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
      || (!b->disk && rename(b->pool_root, sb->root) < 0)) {
    mp_log("cannot rename %s to %s: %s", b->pool_root, sb->root,
           strerror(errno));
    mp_nscg_rename(sb->id, b->id);
    drop(b);
    return -1;
  }
  if (b->disk) {
    /* a mount point cannot be renamed: its image is, and its mount moves
    ** (the overlay of its keeper holds the layers, not their paths) */
    char from[4400], to[4400];
    image_of(b->pool_root, from, sizeof from);
    mp_ns_disk_path(srv->data_dir, sb->id, to, sizeof to);
    if (rename(from, to) < 0) {
      mp_log("cannot rename %s to %s: %s", from, to, strerror(errno));
      mp_nscg_rename(sb->id, b->id);
      drop(b);
      return -1;
    }
    if (mp_ns_disk_move(b->pool_root, sb->root, err, sizeof err) < 0) {
      mp_log("sandbox %s: %s", sb->id, err);
      rename(to, from);
      mp_nscg_rename(sb->id, b->id);
      drop(b);
      return -1;
    }
    rmdir(b->pool_root);
  }
  /* made with its template's limits; these are the sandbox's (the same,
  ** its definition being its key) */
  if ((b->cpu_count != sb->cpu_count || b->memory_mb != sb->memory_mb)
      && mp_nscg_make(sb->id, sb->cpu_count, (long long)sb->memory_mb << 20,
                      err, sizeof err) < 0)
    mp_log("sandbox %s: %s", sb->id, err);
  b->cpu_count = sb->cpu_count;
  b->memory_mb = sb->memory_mb;
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

void mp_ns_pool_setup(const char *data_dir, int size, int per_template,
                      int max_templates, const mp_ns_box_ops *ops) {
  snprintf(pool.data_dir, sizeof pool.data_dir, "%s", data_dir);
  snprintf(pool.dir, sizeof pool.dir, "%s/pool", data_dir);
  pool.size = size;
  pool.per_template = per_template;
  pool.max_templates = max_templates < MP_WARM_POOL_TEMPLATE_MAX
                           ? max_templates : MP_WARM_POOL_TEMPLATE_MAX;
  pool.ops = ops;
}

void mp_ns_pool_start(mp_server *srv) {
  pool.srv = srv;
  mastra__timer_init(srv->loop, &pool.refill, on_refill, NULL);
  /* a killed server's: its keepers died with it */
  if (access(pool.dir, F_OK) == 0) {
    mp_ns_disk_sweep(pool.dir); /* and its members' disks */
    mp_trash(srv, pool.dir);
  }
  if (pool.size > 0) mastra__timer_start(&pool.refill, 0);
}

void mp_ns_pool_finish(void) {
  if (pool.dir[0] != '\0' && access(pool.dir, F_OK) == 0
      && mastra__remove_tree(pool.dir) < 0)
    mp_log("cannot remove %s: %s (the next start does)", pool.dir,
           strerror(errno));
}
