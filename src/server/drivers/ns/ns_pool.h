/*
** The warm pool of the `namespaces` driver (ns_pool.c; docs/platform.md,
** "The warm pool"): keepers and inits of ISOLATED sandboxes started ahead,
** taken by fresh creates.
*/
#ifndef MP_NS_POOL_H
#define MP_NS_POOL_H

#include <cjson/cJSON.h>

#include "drivers/ns/ns_box.h"

/* its size (--warm-pool; 0: none, of templates too), the members per
** template (--warm-pool-templates) and the templates (--warm-pool-
** template-max), DATA_DIR/pool and the driver's box functions, at setup */
void mp_ns_pool_setup(const char *data_dir, int size, int per_template,
                      int max_templates, const mp_ns_box_ops *ops);
/* once the loop runs: what a killed server left goes to the trash, and
** the pool fills */
void mp_ns_pool_start(mp_server *srv);
/* at exit, after the loop's close ended the members: their directory */
void mp_ns_pool_finish(void);
/* a fresh ISOLATED sb takes a member of its template (or a plain one)
** that said "W": 0 (sb's box is it, its keeper named); -1 when there is
** none or it cannot be renamed. A sandbox of a template makes it the
** pool's most recently used, taken or not. */
int mp_ns_pool_take(mp_server *srv, mp_sandbox *sb);
/* the inspector's health: o.warmPool = {size, ready, warming,
** perTemplate, templateMax, templates: [{key, ready, warming}]}, plain
** members that said "W" and those whose keepers are still on their way,
** then the same per template */
void mp_ns_pool_health(cJSON *o);
/* the template of key is removed: its members are dropped (ended on the
** loop) and the pool keeps none of it */
void mp_ns_pool_drop_template(const char *key);
/* a member's keeper said "W" */
void mp_ns_pool_ready(ns_box *b);
/* a member failed (why: its keeper's message): logged, dropped, replaced
** (after POOL_FAILURES_MAX in a row, not) */
void mp_ns_pool_failed(ns_box *b, const char *why);

#endif
