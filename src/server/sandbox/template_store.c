/*
** A template's store on disk (template_store.h has the layout): its
** folder's paths, state.json and definition.json written durably and read
** back at start, the half-made layer's removal and a layer's size. Files
** only: the records' life and the build are template.c's.
*/
#define _GNU_SOURCE
#include "sandbox/template_store.h"

#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

void mp_template_path(const mp_template *t, const char *leaf, char *out,
                      size_t n) {
  snprintf(out, n, "%s/templates/%s%s%s", t->srv->data_dir, t->key,
           leaf[0] ? "/" : "", leaf);
}

const char *mp_template_status_word(mp_template_status s) {
  return s == MP_TEMPLATE_READY ? "ready"
         : s == MP_TEMPLATE_FAILED ? "failed" : "building";
}

int mp_template_save_state(const mp_template *t) {
  char path[4400], *text;
  int rc;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "templateId", t->id);
  cJSON_AddStringToObject(o, "projectId", t->project);
  cJSON_AddStringToObject(o, "environmentId", t->environment);
  cJSON_AddStringToObject(o, "status", mp_template_status_word(t->status));
  cJSON_AddStringToObject(o, "error", t->error);
  cJSON_AddNumberToObject(o, "createdMs", (double)t->created_ms);
  cJSON_AddNumberToObject(o, "builtMs", (double)t->built_ms);
  cJSON_AddNumberToObject(o, "sizeBytes", (double)t->size_bytes);
  cJSON_AddNumberToObject(o, "lastUsedMs", (double)t->last_used_ms);
  text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (text == NULL) return -1;
  mp_template_path(t, "state.json", path, sizeof path);
  rc = mastra__write_file_atomic(path, text, strlen(text), 0600,
                                 MASTRA__ATOMIC_SYNC);
  free(text);
  return rc;
}

int mp_template_save_definition(const mp_template *t, char *err, size_t n) {
  char dir[4400], path[4400], *text;
  mp_template_path(t, "", dir, sizeof dir);
  if (mastra__mkdirs(dir, 0700, NULL) < 0) {
    snprintf(err, n, "cannot create %s: %s", dir, strerror(errno));
    return -1;
  }
  text = cJSON_PrintUnformatted(t->definition);
  mp_template_path(t, "definition.json", path, sizeof path);
  if (text == NULL || mastra__write_file_atomic(path, text, strlen(text), 0600,
                                                MASTRA__ATOMIC_SYNC) < 0) {
    snprintf(err, n, "cannot write %s: %s", path, strerror(errno));
    free(text);
    return -1;
  }
  free(text);
  return 0;
}

void mp_template_drop_half_layer(const mp_template *t) {
  char path[4400];
  mp_template_path(t, "layer.tmp", path, sizeof path);
  mastra__remove_tree(path);
}

static unsigned long long walked;
static int walk_size(const char *path, const struct stat *st, int flag_,
                     struct FTW *ftw) {
  (void)path;
  (void)flag_;
  (void)ftw;
  walked += (unsigned long long)st->st_blocks * 512;
  return 0;
}

int mp_template_tree_size(const char *path, unsigned long long *bytes) {
  walked = 0;
  if (nftw(path, walk_size, 32, FTW_PHYS) < 0) return -1;
  *bytes = walked;
  return 0;
}

static cJSON *read_json(const char *path) {
  char *text = NULL;
  size_t len;
  cJSON *v = NULL;
  if (mastra__read_file(path, &text, &len) == 0) v = cJSON_Parse(text);
  free(text);
  return v;
}

void mp_template_read(mp_server *srv, const char *key, cJSON **definition,
                      cJSON **state) {
  char path[4400];
  snprintf(path, sizeof path, "%s/templates/%s/definition.json", srv->data_dir, key);
  *definition = read_json(path);
  snprintf(path, sizeof path, "%s/templates/%s/state.json", srv->data_dir, key);
  *state = read_json(path);
}

cJSON *mp_template_stored_definition(mp_server *srv, const char *key) {
  cJSON *def, *st;
  mp_template_read(srv, key, &def, &st);
  cJSON_Delete(st);
  return def;
}
