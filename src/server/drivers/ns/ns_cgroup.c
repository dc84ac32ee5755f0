/*
** The cgroups of the `namespaces` driver (ns_cgroup.h).
**
** v2 (/sys/fs/cgroup is cgroup2) or v1 (pids, memory and cpu hierarchies),
** under mastra-platform/<12 hex of the data directory's SHA-256>/<id>:
** pids.max, the memory limit, and one cpu share for the whole sandbox,
** capped at --sandbox-cpu-max CPUs (the CFS quota: cpu.max in v2,
** cpu.cfs_quota_us over cpu.cfs_period_us in v1), so that a spinner or a
** fork bomb in one sandbox leaves the others their share.
** With root at each hierarchy's root; without root under the server's own
** cgroup, where it is delegated to the server (else no limits).
**
** Each data directory's cgroup has a marker, MARK_DIR/<hex>: a file that
** holds the data directory's path, which its server keeps locked
** (flock, shared) from before it makes the cgroup until it exits; a kill -9
** drops the lock with the process. At start, a server sweeps:
**   - its own data directory's cgroup: what a previous server of this data
**     directory left is killed and removed;
**   - another data directory's cgroup only if its marker is unlocked (no
**     live server owns it) and names a directory that no longer exists
**     (no later server of it would ever sweep it). Without a marker (a
**     server that is still making it, or one from before markers) it is
**     left alone. The sweep holds the marker's lock (exclusive) while it
**     removes, and a starting server takes its own lock before it makes
**     its cgroup, so the two never interleave.
*/
#define _GNU_SOURCE
#include "drivers/ns/ns_cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "drivers/ns/init/ns_sys.h"
#include "util/log.h"
#include "sha256.h"
#include "util.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define CG_ROOT "/sys/fs/cgroup"
#define MARK_DIR "/run/mastra-platform"

/* the CFS period of the cpu cap: 100 ms, the kernel's default */
#define CPU_PERIOD_US 100000

static struct {
  long long pids_max;
  long long memory_max;
  double cpu_max;                   /* CPUs; 0: no cap */
  int v2;                           /* cgroup2 at CG_ROOT */
  int ncg;                          /* controllers in use (v1) or 1 (v2) */
  char cg[MP_NSCG_MAX][4300];       /* the data directory's cgroup per tree */
  char top[MP_NSCG_MAX][4200];      /* mastra-platform per tree */
  char hex[16];
  int mark_fd;                      /* our marker, locked; -1 */
} cg = {.mark_fd = -1};

int mp_nscg_count(void) { return cg.ncg; }

/* v1: `tasks`, not cgroup.procs. A write of "0" to cgroup.procs moves the
** whole thread group, under the write side of cgroup_threadgroup_rwsem,
** which waits for an RCU grace period: 4-22 ms here, paid by most first
** commands of a sandbox (a command's joins come cold, seconds apart). A
** write of "0" to `tasks` moves the writer's thread alone and skips that
** lock (0.07 ms); the writers (keepers, __ns-exec, __ns-enter) have one
** thread, so it is the same move. v2 has no `tasks`. */
void mp_nscg_join_file(const char *id, int i, char *out, size_t n) {
  snprintf(out, n, "%s/%s/%s", cg.cg[i], id, cg.v2 ? "cgroup.procs" : "tasks");
}

int mp_nscg_make(const char *id, double cpus, long long memory_bytes,
                 char *err, size_t errlen) {
  char dir[4400], path[4500], val[32];
  int i;
  double cpu_max = cpus > 0 ? cpus : cg.cpu_max;
  long long memory_max = memory_bytes > 0 ? memory_bytes : cg.memory_max;
  for (i = 0; i < cg.ncg; i++) {
    snprintf(dir, sizeof dir, "%s/%s", cg.cg[i], id);
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
      snprintf(err, errlen, "cannot create the cgroup %s: %s", dir,
               strerror(errno));
      return -1;
    }
    if (cg.v2 || strstr(cg.cg[i], "/pids/") != NULL) {
      snprintf(path, sizeof path, "%s/pids.max", dir);
      snprintf(val, sizeof val, "%lld", cg.pids_max);
      if (cg.pids_max > 0 && mp_ns_write_text(path, val) < 0)
        mp_log("cannot write %s: %s", path, strerror(errno));
    }
    if (cpu_max > 0 && (cg.v2 || strstr(cg.cg[i], "/cpu/") != NULL
                        || strstr(cg.cg[i], "/cpu,") != NULL)) {
      long long quota = (long long)(cpu_max * CPU_PERIOD_US);
      if (cg.v2) {
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        snprintf(val, sizeof val, "%lld %d", quota, CPU_PERIOD_US);
      } else {
        snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
        snprintf(val, sizeof val, "%d", CPU_PERIOD_US);
        if (mp_ns_write_text(path, val) < 0)
          mp_log("cannot write %s: %s", path, strerror(errno));
        snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
        snprintf(val, sizeof val, "%lld", quota);
      }
      if (mp_ns_write_text(path, val) < 0)
        mp_log("cannot write %s: %s", path, strerror(errno));
    }
    if (cg.v2 || strstr(cg.cg[i], "/memory/") != NULL) {
      snprintf(path, sizeof path, cg.v2 ? "%s/memory.max"
               : "%s/memory.limit_in_bytes", dir);
      snprintf(val, sizeof val, "%lld", memory_max);
      if (memory_max > 0 && mp_ns_write_text(path, val) < 0)
        mp_log("cannot write %s: %s", path, strerror(errno));
      if (cg.v2) {
        snprintf(path, sizeof path, "%s/memory.swap.max", dir);
        mp_ns_write_text(path, "0"); /* absent without swap accounting */
      }
    }
  }
  return 0;
}

/* fn(pid, data) for each pid of dir/cgroup.procs (a file of the cgroup
** file system says its size is 0: read to its end). -1 if unreadable. */
int mp_nscg_rename(const char *from, const char *to) {
  char a[4400], b[4400];
  int i, e;
  for (i = 0; i < cg.ncg; i++) {
    snprintf(a, sizeof a, "%s/%s", cg.cg[i], from);
    snprintf(b, sizeof b, "%s/%s", cg.cg[i], to);
    if (rename(a, b) < 0) break;
  }
  if (i == cg.ncg) return 0;
  e = errno;
  while (--i >= 0) { /* back to one name in every hierarchy */
    snprintf(a, sizeof a, "%s/%s", cg.cg[i], from);
    snprintf(b, sizeof b, "%s/%s", cg.cg[i], to);
    rename(b, a);
  }
  errno = e;
  return -1;
}

static int each_pid(const char *dir, void (*fn)(long pid, void *data),
                    void *data) {
  char path[4500], buf[4096], num[24];
  size_t nlen = 0;
  ssize_t n, i;
  int fd;
  snprintf(path, sizeof path, "%s/cgroup.procs", dir);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  while ((n = read(fd, buf, sizeof buf)) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    for (i = 0; i < n; i++) {
      if (buf[i] >= '0' && buf[i] <= '9' && nlen + 1 < sizeof num) {
        num[nlen++] = buf[i];
      } else if (nlen > 0) {
        num[nlen] = '\0';
        fn(atol(num), data);
        nlen = 0;
      }
    }
  }
  if (nlen > 0) {
    num[nlen] = '\0';
    fn(atol(num), data);
  }
  close(fd);
  return 0;
}

static void kill_pid(long pid, void *data) {
  (void)data;
  if (pid > 1) kill((pid_t)pid, SIGKILL);
}

/* SIGKILL what a cgroup still holds; rmdir it. 0 once it is gone. */
static int cg_remove(const char *dir) {
  each_pid(dir, kill_pid, NULL);
  return rmdir(dir) == 0 || errno == ENOENT ? 0 : -1;
}

int mp_nscg_each(const char *id, void (*fn)(long pid, void *data),
                 void *data) {
  char dir[4400];
  if (cg.ncg == 0) return -1;
  snprintf(dir, sizeof dir, "%s/%s", cg.cg[0], id);
  return each_pid(dir, fn, data);
}

int mp_nscg_remove(const char *id) {
  char dir[4400];
  int i, left = 0;
  for (i = 0; i < cg.ncg; i++) {
    snprintf(dir, sizeof dir, "%s/%s", cg.cg[i], id);
    if (cg_remove(dir) < 0) left = 1;
  }
  return left ? -1 : 0;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* The sandbox cgroups (sbx_*) under each of dirs[0..n), killed and
** removed, retried for up to ~2 s while their processes die; with
** `remove_dirs`, then dirs themselves. `why` names them in the log. */
static void sweep_dirs(char dirs[][4300], int n, int remove_dirs,
                       const char *why) {
  int i, tries;
  for (tries = 0; tries < 100; tries++) {
    int left = 0;
    for (i = 0; i < n; i++) {
      DIR *d = opendir(dirs[i]);
      struct dirent *e;
      char dir[4600];
      if (d == NULL) continue;
      while ((e = readdir(d)) != NULL) {
        /* a sandbox's, or a warm one's (driver_ns.c) */
        if (strncmp(e->d_name, "sbx_", 4) != 0
            && strncmp(e->d_name, "pool-", 5) != 0)
          continue;
        snprintf(dir, sizeof dir, "%s/%s", dirs[i], e->d_name);
        if (tries == 0) mp_log("removing the cgroup %s %s", dir, why);
        if (cg_remove(dir) < 0) left = 1;
      }
      closedir(d);
      if (!left && remove_dirs && rmdir(dirs[i]) < 0 && errno != ENOENT)
        left = 1;
    }
    if (!left) return;
    sleep_ms(20);
  }
}

/* {====== markers ====== */

static void mark_path(const char *hex, char *out, size_t n) {
  snprintf(out, n, "%s/%s", MARK_DIR, hex);
}

/* Our marker, locked (shared) and holding data_dir, before our cgroup is
** made; a sweep that removed the file between our open and our lock
** leaves us a lock on nothing: then again. */
static void mark_claim(const char *data_dir) {
  char path[256];
  int i;
  mark_path(cg.hex, path, sizeof path);
  if (mkdir(MARK_DIR, 0755) < 0 && errno != EEXIST) {
    mp_log("cannot create %s: %s (a cgroup this server leaves after a"
           " kill -9 is swept only by a server of this data directory)",
           MARK_DIR, strerror(errno));
    return;
  }
  for (i = 0; i < 10; i++) {
    struct stat a, b;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) break;
    if (flock(fd, LOCK_SH) == 0 && fstat(fd, &a) == 0 && stat(path, &b) == 0
        && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
      size_t len = strlen(data_dir);
      if (ftruncate(fd, 0) < 0 || pwrite(fd, data_dir, len, 0) != (ssize_t)len)
        mp_log("cannot write %s: %s", path, strerror(errno));
      cg.mark_fd = fd;
      return;
    }
    close(fd);
  }
  mp_log("cannot claim %s: %s", path, strerror(errno));
}

/* another data directory's cgroup (hex): swept if no server holds its
** marker and its data directory is gone */
static void sweep_other(const char *hex) {
  char path[256], *dir = NULL, dirs[MP_NSCG_MAX][4300], why[4400];
  struct stat st;
  size_t len;
  int fd, i;
  mark_path(hex, path, sizeof path);
  fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return; /* no marker: not ours to judge */
  if (flock(fd, LOCK_EX | LOCK_NB) < 0) goto done; /* its server runs */
  if (mastra__read_file(path, &dir, &len) < 0 || len == 0 || dir[0] != '/')
    goto done; /* being written: its server starts */
  if (stat(dir, &st) == 0 || errno != ENOENT) goto done;
  for (i = 0; i < cg.ncg; i++)
    snprintf(dirs[i], sizeof dirs[i], "%s/%s", cg.top[i], hex);
  snprintf(why, sizeof why, "of %s, which no longer exists", dir);
  sweep_dirs(dirs, cg.ncg, 1, why);
  for (i = 0; i < cg.ncg; i++)
    if (access(dirs[i], F_OK) == 0) break;
  if (i == cg.ncg) unlink(path); /* under our lock */
done:
  free(dir);
  close(fd);
}

/* every other data directory's cgroup under mastra-platform */
static void sweep_others(void) {
  int i;
  for (i = 0; i < cg.ncg; i++) {
    DIR *d = opendir(cg.top[i]);
    struct dirent *e;
    if (d == NULL) continue;
    while ((e = readdir(d)) != NULL) {
      size_t n = strlen(e->d_name);
      if (n != 12 || strspn(e->d_name, "0123456789abcdef") != n
          || strcmp(e->d_name, cg.hex) == 0)
        continue;
      sweep_other(e->d_name);
    }
    closedir(d);
  }
}

/* }====== */

static int mkdir_enable(const char *dir) {
  char path[4400];
  if (mkdir(dir, 0755) < 0 && errno != EEXIST) return -1;
  if (cg.v2) {
    snprintf(path, sizeof path, "%s/cgroup.subtree_control", dir);
    mp_ns_write_text(path, "+pids +memory +cpu");
  }
  return 0;
}

/* The directory of this process's own cgroup: in the cgroup v1 hierarchy
** of `controller`, or in cgroup v2 where controller is NULL. 0, or -1. */
static int own_cgroup(const char *controller, char *out, size_t n) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  char line[4200];
  int found = -1;
  if (f == NULL) return -1;
  while (found < 0 && fgets(line, sizeof line, f) != NULL) {
    char *ctl = strchr(line, ':'), *path;
    if (ctl == NULL || (path = strchr(++ctl, ':')) == NULL) continue;
    *path++ = '\0';
    path[strcspn(path, "\n")] = '\0';
    if (controller == NULL) {
      if (strcmp(line, "0:") != 0 || *ctl != '\0') continue;
      snprintf(out, n, "/sys/fs/cgroup%s", strcmp(path, "/") ? path : "");
      found = 0;
    } else {
      /* "cpu,cpuacct": one of a comma-joined list */
      char *tok, *save = NULL;
      for (tok = strtok_r(ctl, ",", &save); tok != NULL;
           tok = strtok_r(NULL, ",", &save))
        if (strcmp(tok, controller) == 0) break;
      if (tok == NULL) continue;
      snprintf(out, n, "/sys/fs/cgroup/%s%s", controller,
               strcmp(path, "/") ? path : "");
      found = 0;
    }
  }
  fclose(f);
  return found;
}

/* <parent>/mastra-platform/<hex>, made: one more hierarchy in use */
static void add_tree(const char *parent) {
  char top[4200], mid[4300];
  if (cg.ncg >= MP_NSCG_MAX) return;
  snprintf(top, sizeof top, "%s/mastra-platform", parent);
  snprintf(mid, sizeof mid, "%s/%s", top, cg.hex);
  if (mkdir_enable(top) == 0 && mkdir_enable(mid) == 0) {
    snprintf(cg.top[cg.ncg], sizeof cg.top[0], "%s", top);
    snprintf(cg.cg[cg.ncg++], sizeof cg.cg[0], "%s", mid);
  }
}

/* With root: at the root of each hierarchy (v2: one; v1: pids, memory
** and cpu, where writable). */
static void trees_root(void) {
  static const char *const v1[] = {"pids", "memory", "cpu"};
  char dir[4200];
  int i;
  if (cg.v2) {
    mp_ns_write_text(CG_ROOT "/cgroup.subtree_control", "+pids +memory +cpu");
    add_tree(CG_ROOT);
    return;
  }
  for (i = 0; i < 3; i++) {
    snprintf(dir, sizeof dir, "%s/%s/cgroup.procs", CG_ROOT, v1[i]);
    if (access(dir, W_OK) < 0) continue;
    snprintf(dir, sizeof dir, "%s/%s", CG_ROOT, v1[i]);
    add_tree(dir);
  }
}

/* Without root: under the server's own cgroup, where it is delegated to
** it (writable, as systemd makes a user's). In v2 the server first moves
** itself to the leaf <own>/mastra-server, so that <own> may enable the
** controllers of its children. */
static void trees_delegated(void) {
  static const char *const v1[] = {"pids", "memory", "cpu"};
  char own[4096], path[4400];
  int i;
  if (cg.v2) {
    if (own_cgroup(NULL, own, sizeof own) < 0 || access(own, W_OK) < 0)
      return;
    snprintf(path, sizeof path, "%s/mastra-server", own);
    if (mkdir(path, 0755) < 0 && errno != EEXIST) return;
    snprintf(path, sizeof path, "%s/mastra-server/cgroup.procs", own);
    if (mp_ns_write_text(path, "0") < 0) return;
    snprintf(path, sizeof path, "%s/cgroup.subtree_control", own);
    mp_ns_write_text(path, "+pids +memory +cpu");
    add_tree(own);
    return;
  }
  for (i = 0; i < 3; i++)
    if (own_cgroup(v1[i], own, sizeof own) == 0 && access(own, W_OK) == 0)
      add_tree(own);
}

/* what limits the sandboxes (getInfo's metadata.limits); without cgroups,
** the log says so */
static void limits_say(int unpriv, char *out, size_t n) {
  if (cg.ncg > 0) {
    snprintf(out, n, "cgroup v%d%s", cg.v2 ? 2 : 1,
             unpriv ? " (delegated)" : "");
    return;
  }
  snprintf(out, n, "none: %s", unpriv ? "cgroups not delegated"
           : "no writable cgroups");
  if (unpriv)
    mp_log("no limits: the cgroups of this server (uid %d) are not"
           " delegated to it: sandboxes run without pids, memory and cpu"
           " limits", (int)geteuid());
  else
    mp_log("no writable cgroups: sandboxes run without pids and memory"
           " limits");
}

void mp_nscg_setup(const char *data_dir, long long pids_max,
                   long long memory_max, double cpu_max, int unpriv,
                   char *limits, size_t limits_len) {
  char hex[65];
  struct statfs st;
  cg.pids_max = pids_max;
  cg.memory_max = memory_max;
  cg.cpu_max = cpu_max;
  mastra__sha256_hex(data_dir, strlen(data_dir), hex);
  hex[12] = '\0';
  memcpy(cg.hex, hex, 13);
  cg.ncg = 0;
  cg.v2 = statfs(CG_ROOT, &st) == 0 && st.f_type == CGROUP2_SUPER_MAGIC;
  if (unpriv) {
    /* no marker (MARK_DIR is root's): only this data directory's next
    ** server sweeps what this one leaves */
    trees_delegated();
  } else {
    mark_claim(data_dir);
    trees_root();
  }
  limits_say(unpriv, limits, limits_len);
  sweep_dirs(cg.cg, cg.ncg, 0, "left by a previous server");
  if (!unpriv) sweep_others();
}

void mp_nscg_finish(void) {
  char path[256];
  int i, left = 0;
  for (i = 0; i < cg.ncg; i++) {
    /* the data directory's cgroup, then mastra-platform's if it is empty
    ** (another server's keeps it busy) */
    if (rmdir(cg.cg[i]) < 0) {
      left = 1;
      continue;
    }
    rmdir(cg.top[i]);
  }
  cg.ncg = 0;
  if (cg.mark_fd >= 0) {
    /* a cgroup left behind keeps its marker for a later sweep */
    mark_path(cg.hex, path, sizeof path);
    if (!left) unlink(path);
    close(cg.mark_fd);
    cg.mark_fd = -1;
  }
}
