/*
** The disk use of a directory tree (see diskuse.h): nftw on a thread of
** its own, started on demand. The result is shared through atomics, so
** the server's thread takes no lock; a walk that is asked to stop (at
** shutdown) stops at its next entry.
*/
#define _GNU_SOURCE
#include "inspector/diskuse.h"

#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "util.h"

struct mp_diskuse {
  char *dir;
  pthread_t thread;
  int joinable;               /* a thread was started and not joined */
  _Atomic int walking;
  _Atomic int stop;
  _Atomic uint64_t bytes;
  _Atomic int64_t at_ms;
};

/* nftw passes no user data: one walk at a time in the process */
static _Atomic(uint64_t) walk_sum;
static _Atomic(int) *walk_stop;

static int on_entry(const char *path, const struct stat *st, int type,
                    struct FTW *ftw) {
  (void)path;
  (void)type;
  (void)ftw;
  walk_sum += (uint64_t)st->st_blocks * 512;
  return *walk_stop ? 1 : 0;
}

static pthread_mutex_t walk_lock = PTHREAD_MUTEX_INITIALIZER;

static void *walk(void *arg) {
  mp_diskuse *du = arg;
  /* the lock is the walker threads' only (never the server thread's) */
  pthread_mutex_lock(&walk_lock);
  walk_sum = 0;
  walk_stop = &du->stop;
  if (nftw(du->dir, on_entry, 32, FTW_PHYS | FTW_MOUNT) == 0) {
    du->bytes = walk_sum;
    du->at_ms = mastra__wall_ms();
  }
  pthread_mutex_unlock(&walk_lock);
  du->walking = 0;
  return NULL;
}

mp_diskuse *mp_diskuse_new(const char *dir) {
  mp_diskuse *du = calloc(1, sizeof *du);
  if (du == NULL || (du->dir = strdup(dir)) == NULL) {
    free(du);
    return NULL;
  }
  return du;
}

void mp_diskuse_get(mp_diskuse *du, int64_t max_age_ms, uint64_t *bytes,
                    int64_t *at_ms, int *walking) {
  int64_t at = du->at_ms;
  if (!du->walking && (at == 0 || mastra__wall_ms() - at > max_age_ms)) {
    if (du->joinable) pthread_join(du->thread, NULL); /* it has ended */
    du->joinable = 0;
    du->walking = 1;
    if (pthread_create(&du->thread, NULL, walk, du) == 0) du->joinable = 1;
    else du->walking = 0;
  }
  *bytes = du->bytes;
  *at_ms = du->at_ms;
  *walking = du->walking;
}

void mp_diskuse_free(mp_diskuse *du) {
  if (du == NULL) return;
  du->stop = 1;
  if (du->joinable) pthread_join(du->thread, NULL);
  free(du->dir);
  free(du);
}
