/*
** The record of a template and its store on disk (template_store.c),
** shared by template.c (the records' life and the build) and
** template_store.c (the files); not for the rest of the server, which goes
** through template.h.
**
**   DATA/templates/<key>/definition.json   as sent, family and all
**                        state.json        status, error, times, size
**                        build.log         every operation's output
**                        layer.tmp/        the build's layer, until kept
**                        layer/            the read-only layer (ready)
*/
#ifndef MP_TEMPLATE_STORE_H
#define MP_TEMPLATE_STORE_H

#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#include "loop.h"
#include "proc.h"
#include "sandbox/sandbox.h"
#include "sandbox/template.h"
#include "sandbox/template_def.h"

#define MP_TEMPLATE_TAIL_MAX 2048

struct mp_template {
  mp_template *next;
  mp_server *srv;
  char id[MP_TEMPLATE_ID_MAX];
  char key[MP_TEMPLATE_KEY_MAX];
  char project[MP_NAME_MAX];
  char environment[MP_NAME_MAX];
  char family[MP_TEMPLATE_FAMILY_MAX + 1];
  cJSON *definition;  /* as sent */
  cJSON *build_envs;  /* templateBuildEnvs (memory only), or NULL */
  cJSON *env;         /* its sandboxes' env (setEnvs) */
  char workdir[1024]; /* the last setWorkdir, or "" */
  int cpu_count, memory_mb;
  mp_template_status status;
  char error[4096];
  int64_t created_ms, built_ms;
  int64_t last_used_ms; /* its last request, or last seen in use */
  int dirty;            /* last_used_ms is newer than state.json's */
  unsigned long long size_bytes;
  /* the build */
  mp_sandbox *sb;
  mastra__proc *proc;
  int op;               /* the operation running (0-based) */
  cJSON *op_env;        /* env of the operations so far */
  char cwd[1024];
  int64_t deadline_ms;
  FILE *log;
  char tail[MP_TEMPLATE_TAIL_MAX];
  size_t tail_len;
  mastra__timer step;
  mp_waiter gone; /* the build sandbox's destroy */
};

/* DATA/templates/<key>/leaf (leaf "": the folder) */
void mp_template_path(const mp_template *t, const char *leaf, char *out,
                      size_t n);
/* building | ready | failed */
const char *mp_template_status_word(mp_template_status s);
/* state.json, durably: 0, or -1 (errno) */
int mp_template_save_state(const mp_template *t);
/* the folder and definition.json, durably: 0, or -1 (err) */
int mp_template_save_definition(const mp_template *t, char *err, size_t n);
/* remove layer.tmp, the half-made layer of a build that did not finish */
void mp_template_drop_half_layer(const mp_template *t);
/* the bytes on disk of the tree at path: 0, or -1 (errno) */
int mp_template_tree_size(const char *path, unsigned long long *bytes);
/* DATA/templates/<key>'s definition and state, parsed (each NULL when it
** is missing or not JSON; the caller deletes them) */
void mp_template_read(mp_server *srv, const char *key, cJSON **definition,
                      cJSON **state);

#endif
