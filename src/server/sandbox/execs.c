/*
** Resumable execs (execs.h; docs/platform.md "Resumable execs").
**
** Files, in SANDBOX_ROOT/execs/ (beside the working tree, never in it or
** in its checkpoints): e-<exec_id>.json, the record (written before the
** spawn and at the end, atomically), and e-<exec_id>.stdout / .stderr,
** the spools, each made with its stream's first bytes. A spool keeps its
** stream's bytes in reused 1 MiB slots (spool.h); what an ack let go of
** frees its slots, and an ended exec's record carries the map of the
** rest. The server reads a command's pipes
** only while the exec's retained bytes (both streams) are below
** srv->exec_log_max: past that the pipes fill and the command blocks on
** its writes ("block"; nothing is lost). All the execs of the server
** retain at most srv->exec_log_total (srv->exec_spooled counts it): past
** that the oldest ended exec is evicted, and with none the command
** blocks until an ack, a delete or an eviction makes room (execs whose
** commands wait for room are pumped on a timer of their own then).
** An ended exec is kept for
** srv->exec_retain_ms after its end or its last ack, whichever is later.
*/
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "sandbox/execs.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json.h"
#include "util.h"
#include "util/log.h"

static const char *const stream_ext[2] = {"stdout", "stderr"};

const char *mp_exec_state_name(const mp_exec *e) {
  if (e->state == MP_EXEC_LOST) return "lost";
  if (e->state == MP_EXEC_EXITED)
    return e->abandoned ? "abandoned" : "exited";
  return e->attached ? "running" : "detached";
}

/* {====== files ====== */

static void file_path(const mp_sandbox *sb, const char *id, const char *ext,
                      char *out, size_t n) {
  snprintf(out, n, "%s/execs/e-%s.%s", sb->root, id, ext);
}

static void save(mp_exec *e) {
  char path[4096];
  cJSON *o = cJSON_CreateObject();
  char *text;
  int i;
  cJSON_AddStringToObject(o, "exec_id", e->id);
  cJSON_AddStringToObject(o, "fingerprint", e->fingerprint);
  cJSON_AddStringToObject(o, "state", e->state == MP_EXEC_RUNNING
                                          ? "running"
                                          : mp_exec_state_name(e));
  cJSON_AddNumberToObject(o, "startedMs", (double)e->started_ms);
  if (e->state != MP_EXEC_RUNNING) {
    cJSON_AddNumberToObject(o, "endedMs", (double)e->ended_ms);
    if (e->state == MP_EXEC_EXITED) {
      cJSON_AddNumberToObject(o, "exit_code", e->exit_code);
      cJSON_AddStringToObject(o, "reason", e->reason);
    }
  }
  for (i = 0; i < 2; i++) {
    cJSON *s = cJSON_AddObjectToObject(o, stream_ext[i]);
    cJSON_AddNumberToObject(s, "start", (double)e->spool[i].start);
    cJSON_AddNumberToObject(s, "end", (double)e->spool[i].end);
    if (e->state == MP_EXEC_EXITED) { /* where a restart finds its bytes */
      size_t k, n;
      const uint32_t *slots = mp_spool_slots(&e->spool[i], &n);
      cJSON *a = cJSON_AddArrayToObject(s, "slots");
      for (k = 0; a != NULL && k < n; k++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)slots[k]));
    }
  }
  text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (text == NULL) return;
  file_path(e->sb, e->id, "json", path, sizeof path);
  /* a kill -9 of the server is what this is for: no fsync needed for it */
  if (mastra__write_file_atomic(path, text, strlen(text), 0600, 0) < 0)
    mp_log("exec %s of %s: cannot write its record: %s", e->id, e->sb->id,
           strerror(errno));
  cJSON_free(text);
}

static void remove_files(mp_exec *e) {
  char path[4096];
  int i;
  for (i = 0; i < 2; i++) {
    file_path(e->sb, e->id, stream_ext[i], path, sizeof path);
    unlink(path);
  }
  file_path(e->sb, e->id, "json", path, sizeof path);
  unlink(path);
}

/* }====== */

/* {====== the table ====== */

static void on_retain(mastra__timer *t);
static void on_detach_timer(mastra__timer *t);
static void on_wake(mastra__timer *t);
static void fire_polls(mp_exec *e, int all);

static uint64_t retained(const mp_exec *e) {
  return (e->spool[0].end - e->spool[0].start)
         + (e->spool[1].end - e->spool[1].start);
}

/* {------ the server's lists ------ */

/* The walks of room made and of eviction see only the execs they act
** on, not every retained one (20,000 ended execs made each ack of a
** stream walk 20,000 records). */

static void running_add(mp_exec *e) {
  mp_server *srv = e->sb->srv;
  e->run_next = srv->execs_running;
  if (e->run_next != NULL) e->run_next->run_pprev = &e->run_next;
  e->run_pprev = &srv->execs_running;
  srv->execs_running = e;
}

static void running_del(mp_exec *e) {
  if (e->run_pprev == NULL) return;
  *e->run_pprev = e->run_next;
  if (e->run_next != NULL) e->run_next->run_pprev = e->run_pprev;
  e->run_next = NULL;
  e->run_pprev = NULL;
}

/* e ended and retains output: into the list by ended_ms. An exec that
** ends now goes last (the walk from the end takes no step unless the
** clock went back); a record of an earlier server ended before any of
** this one's, so the walk for it goes from the start (from_start). */
static void ended_add(mp_exec *e, int from_start) {
  mp_server *srv = e->sb->srv;
  mp_exec *after;
  if (e->in_ended || retained(e) == 0) return;
  if (from_start) {
    mp_exec *before = srv->execs_ended_first;
    while (before != NULL && before->ended_ms <= e->ended_ms)
      before = before->ended_next;
    after = before != NULL ? before->ended_prev : srv->execs_ended_last;
  } else {
    after = srv->execs_ended_last;
    while (after != NULL && after->ended_ms > e->ended_ms)
      after = after->ended_prev;
  }
  e->ended_prev = after;
  e->ended_next = after != NULL ? after->ended_next : srv->execs_ended_first;
  if (e->ended_next != NULL) e->ended_next->ended_prev = e;
  else srv->execs_ended_last = e;
  if (after != NULL) after->ended_next = e;
  else srv->execs_ended_first = e;
  e->in_ended = 1;
}

static void ended_del(mp_exec *e) {
  mp_server *srv = e->sb->srv;
  if (!e->in_ended) return;
  if (e->ended_prev != NULL) e->ended_prev->ended_next = e->ended_next;
  else srv->execs_ended_first = e->ended_next;
  if (e->ended_next != NULL) e->ended_next->ended_prev = e->ended_prev;
  else srv->execs_ended_last = e->ended_prev;
  e->ended_next = NULL;
  e->ended_prev = NULL;
  e->in_ended = 0;
}

/* room was made: every exec whose command waits with output is pumped
** from the loop (on_wake), not from under the caller */
static void wake_blocked(mp_server *srv) {
  mp_exec *e;
  if (srv->stopping) return;
  for (e = srv->execs_running; e != NULL; e = e->run_next)
    if (e->proc->out.len > 0 || e->proc->err.len > 0)
      mastra__timer_start(&e->wake_timer, 0);
}

/* }------ */

static mp_exec *exec_new(mp_sandbox *sb, const char *id) {
  mp_exec *e = calloc(1, sizeof *e);
  if (e == NULL) return NULL;
  e->sb = sb;
  snprintf(e->id, sizeof e->id, "%s", id);
  mp_spool_init(&e->spool[0]);
  mp_spool_init(&e->spool[1]);
  e->detach_ms = MP_EXEC_DETACH_DEFAULT_MS;
  mastra__timer_init(sb->srv->loop, &e->detach_timer, on_detach_timer, e);
  mastra__timer_init(sb->srv->loop, &e->retain_timer, on_retain, e);
  mastra__timer_init(sb->srv->loop, &e->wake_timer, on_wake, e);
  /* found by id in O(1): a sandbox may retain thousands of ended execs,
  ** and a list walk per new exec cost 39% of the server's time at 20,000 */
  if (mp_index_put(&sb->exec_index, e->id, e) < 0) {
    free(e);
    return NULL;
  }
  e->next = sb->execs;
  if (e->next != NULL) e->next->pprev = &e->next;
  e->pprev = &sb->execs;
  sb->execs = e;
  return e;
}

static void take_watcher(mp_exec *e, uint16_t code, const char *reason) {
  mp_exec_watcher w = e->watcher;
  if (!e->attached) return;
  e->attached = 0;
  memset(&e->watcher, 0, sizeof e->watcher);
  if (w.taken != NULL) w.taken(w.data, code, reason);
}

/* unlink e from its sandbox and free it (a running command is killed) */
static void exec_free(mp_exec *e, int files) {
  int i;
  *e->pprev = e->next;
  if (e->next != NULL) e->next->pprev = e->pprev;
  mp_index_del(&e->sb->exec_index, e->id, e);
  running_del(e);
  ended_del(e);
  take_watcher(e, 1011, "the exec was deleted");
  fire_polls(e, 1);
  mastra__timer_stop(&e->detach_timer);
  mastra__timer_stop(&e->retain_timer);
  mastra__timer_stop(&e->wake_timer);
  e->sb->srv->exec_spooled -= retained(e);
  if (e->proc != NULL) {
    mastra__proc *p = e->proc;
    e->proc = NULL;
    mastra__proc_kill(p);
    mp_sandbox_exec_done(e->sb->srv, e->sb, p);
  }
  for (i = 0; i < 2; i++) mp_spool_free(&e->spool[i]);
  if (files) remove_files(e);
  free(e);
}

static void on_retain(mastra__timer *t) {
  mp_exec *e = t->data;
  mp_server *srv = e->sb->srv;
  exec_free(e, 1);
  wake_blocked(srv);
}

static void retain(mp_exec *e, int64_t from_ms) {
  int64_t due = from_ms + (int64_t)e->sb->srv->exec_retain_ms
                - mastra__wall_ms();
  mastra__timer_stop(&e->retain_timer);
  mastra__timer_start(&e->retain_timer, due > 0 ? (uint64_t)due : 0);
}

/* An ended exec that no socket follows holds no descriptor: its spools'
** files are closed (their maps stay) and opened again to be read or
** acknowledged. Without this, each ended exec kept its two files open
** for as long as it was retained (--exec-retain, 15 min): 2,000 short
** execs held 3,300 descriptors of the server, and every command's vforked
** child then closed them all while the loop thread waited in vfork. */
static void park(mp_exec *e) {
  int i;
  if (e->proc != NULL || e->attached) return;
  for (i = 0; i < 2; i++) mp_spool_close(&e->spool[i]);
}

/* the spool of stream open again, if it holds bytes: 0, or -1 */
static int unpark(mp_exec *e, int stream) {
  mp_spool *sp = &e->spool[stream];
  char path[4096];
  int fd;
  if (sp->fd >= 0 || sp->end <= sp->start) return 0;
  file_path(e->sb, e->id, stream_ext[stream], path, sizeof path);
  fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return -1;
  mp_spool_reopen(sp, fd);
  return 0;
}

/* a record's stream: its map of slots (none: an older server's spool,
** whose offsets are file positions) */
static int load_spool(mp_spool *sp, int fd, uint64_t start, uint64_t end,
                      const cJSON *m) {
  uint32_t *slots = NULL;
  int n = 0, k, rc;
  if (m != NULL) {
    if (!cJSON_IsArray(m)) return -1;
    n = cJSON_GetArraySize(m);
    slots = malloc(((size_t)n + 1) * sizeof *slots);
    if (slots == NULL) return -1;
    for (k = 0; k < n; k++) {
      const cJSON *v = cJSON_GetArrayItem(m, k);
      if (!cJSON_IsNumber(v) || v->valuedouble < 0
          || v->valuedouble >= (double)UINT32_MAX) {
        free(slots);
        return -1;
      }
      slots[k] = (uint32_t)v->valuedouble;
    }
  }
  rc = mp_spool_load(sp, fd, start, end, slots, (size_t)n);
  free(slots);
  return rc;
}

/* a record file that a previous server left */
static mp_exec *load(mp_sandbox *sb, const char *id) {
  char path[4096], *text = NULL;
  size_t len = 0;
  cJSON *o;
  const cJSON *v;
  mp_exec *e;
  int i;
  file_path(sb, id, "json", path, sizeof path);
  if (mastra__read_file(path, &text, &len) < 0) return NULL;
  o = mastra__json_parse(text, len, NULL, NULL);
  free(text);
  v = cJSON_GetObjectItemCaseSensitive(o, "fingerprint");
  if (!cJSON_IsString(v) || strlen(v->valuestring) != 64
      || (e = exec_new(sb, id)) == NULL) {
    cJSON_Delete(o);
    return NULL;
  }
  snprintf(e->fingerprint, sizeof e->fingerprint, "%s", v->valuestring);
  v = cJSON_GetObjectItemCaseSensitive(o, "startedMs");
  e->started_ms = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
  v = cJSON_GetObjectItemCaseSensitive(o, "endedMs");
  e->ended_ms = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
  v = cJSON_GetObjectItemCaseSensitive(o, "state");
  if (cJSON_IsString(v) && (strcmp(v->valuestring, "exited") == 0
                            || strcmp(v->valuestring, "abandoned") == 0)) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "reason");
    static const char *const reasons[] = {"exited", "signaled", "timeout",
                                          "abandoned", "output_lost"};
    size_t k;
    e->state = MP_EXEC_EXITED;
    e->abandoned = strcmp(v->valuestring, "abandoned") == 0;
    v = cJSON_GetObjectItemCaseSensitive(o, "exit_code");
    e->exit_code = cJSON_IsNumber(v) ? v->valueint : -1;
    e->reason = "exited";
    for (k = 0; k < sizeof reasons / sizeof *reasons; k++)
      if (cJSON_IsString(r) && strcmp(r->valuestring, reasons[k]) == 0)
        e->reason = reasons[k];
    for (i = 0; i < 2; i++) {
      const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, stream_ext[i]);
      const cJSON *a = cJSON_GetObjectItemCaseSensitive(s, "start");
      const cJSON *b = cJSON_GetObjectItemCaseSensitive(s, "end");
      const cJSON *m = cJSON_GetObjectItemCaseSensitive(s, "slots");
      int fd;
      if (cJSON_IsNumber(b) && b->valuedouble == 0
          && cJSON_IsNumber(a) && a->valuedouble == 0)
        continue; /* the stream wrote nothing: it has no file */
      file_path(sb, id, stream_ext[i], path, sizeof path);
      fd = open(path, O_RDWR | O_CLOEXEC);
      if (fd < 0 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b)
          || a->valuedouble < 0 || b->valuedouble < a->valuedouble
          || load_spool(&e->spool[i], fd, (uint64_t)a->valuedouble,
                        (uint64_t)b->valuedouble, m) < 0) {
        if (fd >= 0) close(fd);
        e->state = MP_EXEC_LOST; /* its output is gone: as good as lost */
        break;
      }
    }
  } else {
    e->state = MP_EXEC_LOST; /* it ran when the server died */
  }
  cJSON_Delete(o);
  if (e->state == MP_EXEC_LOST) {
    for (i = 0; i < 2; i++) {
      mp_spool_free(&e->spool[i]);
      file_path(sb, id, stream_ext[i], path, sizeof path);
      unlink(path);
    }
    e->ended_ms = mastra__wall_ms();
    save(e);
    mp_log("exec %s of %s: lost (its command died with the server)", id,
           sb->id);
  }
  sb->srv->exec_spooled += retained(e);
  ended_add(e, 1);
  retain(e, e->ended_ms);
  park(e);
  return e;
}

mp_exec *mp_exec_find(mp_sandbox *sb, const char *id) {
  mp_exec *e = mp_index_get(&sb->exec_index, id);
  return e != NULL ? e : load(sb, id);
}

void mp_execs_drop(mp_sandbox *sb, int files) {
  while (sb->execs != NULL) exec_free(sb->execs, files);
  mp_index_free(&sb->exec_index);
}

/* }====== */

/* {====== the command ====== */

/* the polls whose stream passed their offset (all, with `all`) */
static void fire_polls(mp_exec *e, int all) {
  mp_exec_poll **pp = &e->polls;
  while (*pp != NULL) {
    mp_exec_poll *p = *pp;
    if (all || e->state != MP_EXEC_RUNNING
        || e->spool[p->stream].end > p->off) {
      *pp = p->next;
      p->next = NULL;
      p->exec = NULL;
      p->ready(p);
    } else {
      pp = &p->next;
    }
  }
}

static void notify(mp_exec *e) {
  fire_polls(e, 0);
  if (e->attached && e->watcher.changed != NULL)
    e->watcher.changed(e->watcher.data);
}

void mp_exec_poll_add(mp_exec *e, mp_exec_poll *p) {
  p->exec = e;
  p->next = e->polls;
  e->polls = p;
}

void mp_exec_poll_cancel(mp_exec_poll *p) {
  mp_exec_poll **pp;
  if (p->exec == NULL) return;
  for (pp = &p->exec->polls; *pp != NULL; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      break;
    }
  p->exec = NULL;
  p->next = NULL;
}

void mp_execs_release_polls(mp_server *srv) {
  mp_sandbox *sb;
  mp_exec *e;
  for (sb = srv->sandboxes; sb != NULL; sb = sb->next)
    for (e = sb->execs; e != NULL; e = e->next) fire_polls(e, 1);
}

/* stream's spool below `to` goes: the retained start moves up, and the
** slots wholly below it are free for the next segments (spool.c) */
static void forget_below(mp_exec *e, int stream, uint64_t to) {
  mp_spool *sp = &e->spool[stream];
  if (to <= sp->start) return;
  (void)unpark(e, stream); /* the slots are punched through its file */
  e->sb->srv->exec_spooled -= to - sp->start;
  mp_spool_forget(sp, to);
  if (retained(e) == 0) ended_del(e); /* nothing of it to evict */
  park(e);
}

/* the ended exec (not keep) that ended first, among those that retain
** output; or NULL */
static mp_exec *oldest_ended(mp_server *srv, const mp_exec *keep) {
  mp_exec *e = srv->execs_ended_first;
  while (e != NULL && e == keep) e = e->ended_next;
  return e;
}

/* room for n more bytes of e: its own bound, then the server's, for
** which ended execs are evicted, oldest first */
static uint64_t room(mp_exec *e) {
  mp_server *srv = e->sb->srv;
  uint64_t have = retained(e), mine, all;
  mp_exec *old;
  mine = have < srv->exec_log_max ? srv->exec_log_max - have : 0;
  while (srv->exec_spooled >= srv->exec_log_total
         && (old = oldest_ended(srv, e)) != NULL) {
    mp_log("exec %s of %s: evicted (--exec-log-total %llu reached)",
           old->id, old->sb->id, (unsigned long long)srv->exec_log_total);
    exec_free(old, 1);
  }
  all = srv->exec_spooled < srv->exec_log_total
            ? srv->exec_log_total - srv->exec_spooled : 0;
  return mine < all ? mine : all;
}

/* A stream's spool file is made with its first bytes: most commands
** write nothing to stderr, and many nothing at all, and the file's make
** and unlink cost the loop thread more than the rest of its record. */
static int create_spool(mp_exec *e, int stream) {
  char path[4096];
  int fd;
  file_path(e->sb, e->id, stream_ext[stream], path, sizeof path);
  fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  mp_spool_reopen(&e->spool[stream], fd);
  return 0;
}

/* Move what the command wrote into the spools, as far as the bound
** lets; 0, or -1 when a spool cannot be written. A stream's buffer can
** hold more than the bound (the reads of a loaded loop add up): with
** truncate_head it goes in rounds, each making room for the next, since
** nothing else would call this again while the pipe waits for it. */
static int drain(mp_exec *e) {
  mastra__proc *p = e->proc;
  int i;
  for (i = 0; i < 2; i++) {
    mastra__buf *b = i == 0 ? &p->out : &p->err;
    while (b->len > 0) {
      size_t n = b->len;
      uint64_t free_bytes = room(e);
      if (free_bytes < n && e->truncate_head) {
        /* the oldest bytes go instead (an attach is told: output_gap),
        ** this stream's first; the server-wide bound still blocks */
        uint64_t need = (n < e->sb->srv->exec_log_max
                         ? n : e->sb->srv->exec_log_max) - free_bytes;
        int j, k;
        for (k = 0; k < 2 && need > 0; k++) {
          uint64_t have, cut;
          j = k == 0 ? i : 1 - i;
          have = e->spool[j].end - e->spool[j].start;
          cut = have < need ? have : need;
          forget_below(e, j, e->spool[j].start + cut);
          need -= cut;
        }
        free_bytes = room(e);
      }
      if (free_bytes == 0) break; /* block: the pipe fills, the command waits */
      if (n > free_bytes) n = (size_t)free_bytes;
      if (e->spool[i].fd < 0 && create_spool(e, i) < 0) return -1;
      {
        uint64_t was = e->spool[i].end;
        int rc = mp_spool_append(&e->spool[i], b->data, n);
        e->sb->srv->exec_spooled += e->spool[i].end - was;
        if (rc < 0) return -1;
      }
      if (n == b->len) {
        mastra__proc_consumed(p, b);
        break;
      }
      /* keep the rest: the pipe stays paused until it is out */
      memmove(b->data, b->data + n, b->len - n);
      b->len -= n;
    }
  }
  return 0;
}

static void finish(mp_exec *e) {
  mastra__proc *p = e->proc;
  mp_server *srv = e->sb->srv;
  e->proc = NULL;
  running_del(e);
  e->exit_code = p->exit_code;
  e->reason = e->abandoned ? "abandoned"
              : e->output_errno != 0 ? "output_lost"
              : p->timed_out ? "timeout"
              : p->term_signal != 0 ? "signaled" : "exited";
  e->ended_ms = mastra__wall_ms();
  /* a server that is stopping killed it: it died with the server */
  e->state = srv->stopping && !e->abandoned ? MP_EXEC_LOST : MP_EXEC_EXITED;
  ended_add(e, 0);
  mastra__timer_stop(&e->detach_timer);
  mp_sandbox_exec_done(srv, e->sb, p);
  /* no fdatasync of the spools: like the record, they are for a server
  ** killed with -9, whose page cache outlives it; a sync here held the
  ** loop thread for a journal commit at each exec's end */
  save(e);
  retain(e, e->ended_ms);
  park(e);
}

static void pump(mp_exec *e) {
  mastra__proc *p = e->proc;
  if (p == NULL) return;
  if (drain(e) < 0) {
    /* its output cannot be kept, so its exactly-once promise cannot: the
    ** command is killed, and an attach is told why (exec_ws.c) */
    e->output_errno = errno != 0 ? errno : EIO;
    mp_log("exec %s of %s: cannot write its output: %s; killed", e->id,
           e->sb->id, strerror(e->output_errno));
    mastra__proc_consumed(p, &p->out);
    mastra__proc_consumed(p, &p->err);
    mastra__proc_kill(p);
  }
  if (p->done && p->out.len == 0 && p->err.len == 0) finish(e);
}

static void on_wake(mastra__timer *t) {
  mp_exec *e = t->data;
  pump(e);
  notify(e);
}

static void on_proc(mastra__proc *p, void *data) {
  mp_exec *e = data;
  if (e->proc != p) return;
  pump(e);
  notify(e);
}

/* the detach timeout ran out: TERM; MP_EXEC_ABANDON_KILL_MS later, KILL */
static void on_detach_timer(mastra__timer *t) {
  mp_exec *e = t->data;
  if (e->proc == NULL) return;
  if (!e->abandoned) {
    if (e->attached) return; /* an attach came as it fell due */
    e->abandoned = 1;
    mp_log("exec %s of %s: nobody attached for %llu ms: abandoned", e->id,
           e->sb->id, (unsigned long long)e->detach_ms);
    mp_exec_signal(e, SIGTERM);
    mastra__timer_start(&e->detach_timer, MP_EXEC_ABANDON_KILL_MS);
  } else {
    mp_exec_signal(e, SIGKILL);
  }
}

int mp_exec_start(mp_sandbox *sb, const char *id, const char *fingerprint,
                  const mp_exec_spec *spec, uint64_t detach_ms,
                  mp_exec **out, char *err, size_t errlen) {
  mp_server *srv = sb->srv;
  char path[4096];
  mp_exec *e;
  mastra__proc *p = NULL;
  *out = NULL;
  snprintf(path, sizeof path, "%s/execs", sb->root);
  if (mastra__mkdirs(path, 0700, NULL) < 0) {
    snprintf(err, errlen, "cannot make %s: %s", path, strerror(errno));
    return -1;
  }
  e = exec_new(sb, id);
  if (e == NULL) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  snprintf(e->fingerprint, sizeof e->fingerprint, "%s", fingerprint);
  e->detach_ms = detach_ms;
  e->started_ms = mastra__wall_ms();
  save(e); /* recorded before the spawn: a restart finds it */
  if (mp_sandbox_exec(srv, sb, spec, on_proc, e, &p, err, errlen) != 0
      || p == NULL) {
    exec_free(e, 1);
    return -1;
  }
  e->proc = p;
  running_add(e);
  *out = e;
  return 0;
}

/* }====== */

/* {====== sockets ====== */

void mp_exec_attach(mp_exec *e, const mp_exec_watcher *w) {
  take_watcher(e, 4001, "superseded");
  e->watcher = *w;
  e->attached = 1;
  if (e->proc != NULL && !e->abandoned) mastra__timer_stop(&e->detach_timer);
}

void mp_exec_detach(mp_exec *e, void *data) {
  if (!e->attached || e->watcher.data != data) return;
  e->attached = 0;
  memset(&e->watcher, 0, sizeof e->watcher);
  if (e->proc != NULL && !e->abandoned) {
    mastra__timer_stop(&e->detach_timer);
    mastra__timer_start(&e->detach_timer, e->detach_ms);
  }
  park(e);
}

void mp_exec_unattended(mp_exec *e) {
  if (e->attached || e->proc == NULL || e->abandoned) return;
  mastra__timer_stop(&e->detach_timer);
  mastra__timer_start(&e->detach_timer, e->detach_ms);
}

void mp_exec_delete(mp_exec *e) {
  mp_server *srv = e->sb->srv;
  exec_free(e, 1);
  wake_blocked(srv);
}

ssize_t mp_exec_read(mp_exec *e, int stream, uint64_t off, void *buf,
                     size_t n) {
  ssize_t got;
  if (unpark(e, stream) < 0) return -1;
  got = mp_spool_read(&e->spool[stream], off, buf, n);
  park(e); /* a read of GET .../output: nobody follows it */
  return got;
}

void mp_exec_ack(mp_exec *e, uint64_t out, uint64_t err) {
  uint64_t acks[2];
  int i, moved = 0;
  acks[0] = out;
  acks[1] = err;
  for (i = 0; i < 2; i++) {
    uint64_t to = acks[i] < e->spool[i].end ? acks[i] : e->spool[i].end;
    if (to <= e->spool[i].start) continue;
    forget_below(e, i, to);
    moved = 1;
  }
  if (!moved) return;
  wake_blocked(e->sb->srv); /* room in the server's bound */
  if (e->proc != NULL) {
    pump(e); /* room in the bound: the pipes are read again */
  } else if (e->state == MP_EXEC_EXITED) {
    save(e);
    if (e->spool[0].start == e->spool[0].end
        && e->spool[1].start == e->spool[1].end)
      retain(e, mastra__wall_ms()); /* kept as long after the last ack */
  }
}

int mp_exec_signal(mp_exec *e, int sig) {
  mastra__proc *p = e->proc;
  if (p == NULL || p->done) return 0;
  kill(-p->pid, sig);
  return 1;
}

/* }====== */
