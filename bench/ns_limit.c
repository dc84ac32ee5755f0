/* The limit of a namespaces-driver sandbox (issue 13, part 6), measured in
 * the same run as its figures:
 *
 *   ns_limit KEY N LOWER DIR
 *
 * N times (after 3 untimed ones), timed from the first step to the end:
 *   1. an upper and a work directory under DIR, owned by the mapped root;
 *   2. clone() into new user, mount, pid, uts, ipc and net namespaces; the
 *      parent maps root of the user namespace to uid/gid 100000 (65536 ids);
 *   3. in the child: root of its namespace (setgroups, setresgid,
 *      setresuid), mounts made private, then an overlay mount (lower:
 *      LOWER, read-only; upper and work from step 1) on DIR/root;
 *   4. fork and exec of /bin/true from the overlay (LOWER must hold
 *      bin/true: /usr does), waited for by the child, the child by us.
 * Prints "KEY<TAB>ms<TAB>samples" (the format of bench/baseline.c) and
 * "KEY.unshare<TAB>ms<TAB>samples": the namespaces alone (step 2, the child
 * exits at once), to show what the overlay and the exec add.
 * Needs root (it maps ids and mounts): exits 77 otherwise, with a line on
 * stderr. Everything it makes goes when its child exits (the namespaces,
 * the mount) or before it returns (the directories under DIR). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAPPED_ID 100000
#define NS_FLAGS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS \
                  | CLONE_NEWIPC | CLONE_NEWNET)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void emit(const char *key, const double *xs, int n) {
  printf("%s\tms\t", key);
  for (int i = 0; i < n; i++) printf(i ? " %.4f" : "%.4f", xs[i]);
  printf("\n");
}

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : write(fd, text, strlen(text));
  if (fd >= 0) close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int rm_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st, (void)type, (void)ftw;
  return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

static void rm_rf(const char *path) { /* untimed cleanup */
  if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
    fprintf(stderr, "ns_limit: cannot remove %s: %s\n", path, strerror(errno));
}

/* the child: pid 1 of its namespace, root of its user namespace */
static int child(int go, const char *lower, const char *dir, int full) {
  char c, opts[8400], root[4200], exe[4400];
  if (read(go, &c, 1) != 1 || c != 'g') return 10;
  /* root of the namespace: uid 100000 on the host, no host groups */
  if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) return 16;
  if (!full) return 0;
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) return 11;
  snprintf(opts, sizeof opts, "lowerdir=%s,upperdir=%s/upper,workdir=%s/work", lower, dir,
           dir);
  snprintf(root, sizeof root, "%s/root", dir);
  if (mount("overlay", root, "overlay", 0, opts) < 0) {
    fprintf(stderr, "ns_limit: overlay mount (%s) on %s: %s (uid %d must reach DIR:"
            " every directory above it needs o+x)\n", opts, root, strerror(errno), MAPPED_ID);
    return 12;
  }
  snprintf(exe, sizeof exe, "%s/bin/true", root);
  pid_t pid = fork();
  if (pid < 0) return 13;
  if (pid == 0) {
    char *argv[] = {exe, NULL}, *envp[] = {NULL};
    execve(exe, argv, envp);
    _exit(127);
  }
  int st;
  if (waitpid(pid, &st, 0) < 0) return 14;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 15;
}

/* one sandbox's worth; its duration in ms, or -1 */
static double one(const char *lower, const char *dir, int full) {
  char path[4200], map[64];
  int p[2], st;
  double t0 = now_ms();
  if (full) {
    snprintf(path, sizeof path, "%s/upper", dir);
    if (mkdir(path, 0755) < 0 || chown(path, MAPPED_ID, MAPPED_ID) < 0) return -1;
    snprintf(path, sizeof path, "%s/work", dir);
    if (mkdir(path, 0755) < 0 || chown(path, MAPPED_ID, MAPPED_ID) < 0) return -1;
  }
  if (pipe2(p, O_CLOEXEC) < 0) return -1;
  pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD | NS_FLAGS, NULL, NULL, NULL, 0);
  if (pid < 0) {
    fprintf(stderr, "ns_limit: clone: %s\n", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    close(p[1]);
    _exit(child(p[0], lower, dir, full));
  }
  close(p[0]);
  snprintf(map, sizeof map, "0 %d 65536\n", MAPPED_ID);
  snprintf(path, sizeof path, "/proc/%d/uid_map", (int)pid);
  int ok = write_file(path, map) == 0;
  snprintf(path, sizeof path, "/proc/%d/gid_map", (int)pid);
  ok = ok && write_file(path, map) == 0;
  if (!ok || write(p[1], "g", 1) != 1) kill(pid, SIGKILL);
  close(p[1]);
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  double t = now_ms() - t0;
  if (full) {
    snprintf(path, sizeof path, "%s/upper", dir);
    rm_rf(path);
    snprintf(path, sizeof path, "%s/work", dir);
    rm_rf(path);
  }
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "ns_limit: the child failed (%s %d)\n",
            WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    return -1;
  }
  return t;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: ns_limit KEY N LOWER DIR\n");
    return 2;
  }
  if (geteuid() != 0) {
    fprintf(stderr, "ns_limit: skipped: needs root (user-namespace mapping, overlay mount)\n");
    return 77;
  }
  const char *key = argv[1], *lower = argv[3], *dir = argv[4];
  int n = atoi(argv[2]);
  char root[4200], key2[256];
  if (n < 1) return 2;
  snprintf(root, sizeof root, "%s/root", dir);
  if (mkdir(dir, 0755) < 0 && errno != EEXIST) return perror(dir), 1;
  if (mkdir(root, 0755) < 0 && errno != EEXIST) return perror(root), 1;
  double *full = calloc((size_t)n, sizeof *full), *bare = calloc((size_t)n, sizeof *bare);
  if (!full || !bare) return 1;
  for (int i = 0; i < 3; i++) /* warm-up: page cache, dynamic loader */
    if (one(lower, dir, 1) < 0) return 1;
  /* interleaved: a noisy neighbour hits both */
  for (int i = 0; i < n; i++) {
    if ((full[i] = one(lower, dir, 1)) < 0 || (bare[i] = one(lower, dir, 0)) < 0) return 1;
  }
  rmdir(root);
  rmdir(dir);
  emit(key, full, n);
  snprintf(key2, sizeof key2, "%s.unshare", key);
  emit(key2, bare, n);
  free(full), free(bare);
  return 0;
}
