/*
** Link deletions on a thread of their own (linkdel.h): the loop thread
** queues names under a mutex that no one holds during a deletion.
*/
#define _GNU_SOURCE
#include "net/linkdel.h"

#include <net/if.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net/rtnl.h"

typedef struct job {
  struct job *next;
  char name[IFNAMSIZ];
} job;

struct mp_linkdel {
  int nl;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t more, idle;
  job *head, *tail;
  char current[IFNAMSIZ]; /* being deleted ("" when none) */
  int stop;
};

static void *run(void *ud) {
  mp_linkdel *d = ud;
  pthread_mutex_lock(&d->mu);
  for (;;) {
    job *j;
    while (d->head == NULL && !d->stop) pthread_cond_wait(&d->more, &d->mu);
    if (d->head == NULL) break;
    j = d->head;
    d->head = j->next;
    if (d->head == NULL) d->tail = NULL;
    strcpy(d->current, j->name);
    pthread_mutex_unlock(&d->mu);
    mp_rtnl_link_del(d->nl, j->name); /* -ENODEV: gone with its namespace */
    free(j);
    pthread_mutex_lock(&d->mu);
    d->current[0] = '\0';
    if (d->head == NULL) pthread_cond_broadcast(&d->idle);
  }
  pthread_cond_broadcast(&d->idle);
  pthread_mutex_unlock(&d->mu);
  return NULL;
}

mp_linkdel *mp_linkdel_start(int nl) {
  mp_linkdel *d = calloc(1, sizeof *d);
  if (d == NULL) {
    close(nl);
    return NULL;
  }
  d->nl = nl;
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->more, NULL);
  pthread_cond_init(&d->idle, NULL);
  /* the thread takes no signal: the server's loop reads SIGTERM, SIGINT
  ** and SIGHUP from a signalfd, which works only while every thread
  ** blocks them */
  sigset_t all, old;
  int rc;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rc = pthread_create(&d->thread, NULL, run, d);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    pthread_cond_destroy(&d->idle), pthread_cond_destroy(&d->more);
    pthread_mutex_destroy(&d->mu);
    close(nl);
    free(d);
    return NULL;
  }
  return d;
}

void mp_linkdel_queue(mp_linkdel *d, const char *name) {
  job *j = calloc(1, sizeof *j);
  if (j == NULL || strlen(name) >= IFNAMSIZ) {
    free(j);
    return;
  }
  strcpy(j->name, name);
  pthread_mutex_lock(&d->mu);
  if (d->tail) d->tail->next = j;
  else d->head = j;
  d->tail = j;
  pthread_cond_signal(&d->more);
  pthread_mutex_unlock(&d->mu);
}

int mp_linkdel_pending(mp_linkdel *d, const char *name) {
  const job *j;
  int found;
  pthread_mutex_lock(&d->mu);
  found = strcmp(d->current, name) == 0;
  for (j = d->head; j && !found; j = j->next) found = strcmp(j->name, name) == 0;
  pthread_mutex_unlock(&d->mu);
  return found;
}

void mp_linkdel_flush(mp_linkdel *d) {
  pthread_mutex_lock(&d->mu);
  while (d->head || d->current[0]) pthread_cond_wait(&d->idle, &d->mu);
  pthread_mutex_unlock(&d->mu);
}

void mp_linkdel_stop(mp_linkdel *d, int drain) {
  if (d == NULL) return;
  pthread_mutex_lock(&d->mu);
  if (!drain) {
    while (d->head) {
      job *j = d->head;
      d->head = j->next;
      free(j);
    }
    d->tail = NULL;
  }
  d->stop = 1;
  pthread_cond_signal(&d->more);
  pthread_mutex_unlock(&d->mu);
  pthread_join(d->thread, NULL);
  pthread_cond_destroy(&d->idle), pthread_cond_destroy(&d->more);
  pthread_mutex_destroy(&d->mu);
  close(d->nl);
  free(d);
}
