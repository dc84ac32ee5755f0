/* The physical limits of bench/run, measured in the same run as the figures.
 *
 *   baseline spawn KEY N CONC [ARGV...]
 *                               N x posix_spawn(ARGV, default /bin/true) +
 *                               waitpid, at most CONC in flight (after 10
 *                               untimed ones): per-child latency (ms), and
 *                               KEY.wall (ms) and KEY.rate (ops/s) once
 *   baseline http KEY URL N     N x GET URL with libcurl, one easy handle (the
 *                               connection is kept alive): latency (ms)
 *   baseline write KEY DIR BYTES N
 *                               N x what a durable store does to keep BYTES:
 *                               write a new file in DIR, fsync it, rename it
 *                               over the final name, fsync DIR (after 3
 *                               untimed ones): latency (ms)
 *
 * Prints "KEY<TAB>unit<TAB>samples" lines (samples space-separated), the
 * format every producer of bench/run appends to the samples file. */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void emit(const char *key, const char *unit, const double *xs, int n) {
  printf("%s\t%s\t", key, unit);
  for (int i = 0; i < n; i++) printf(i ? " %.4f" : "%.4f", xs[i]);
  printf("\n");
}

static int bench_spawn(const char *key, int n, int conc, char **argv) {
  pid_t *pids = calloc((size_t)conc, sizeof *pids);
  double *t0 = calloc((size_t)conc, sizeof *t0);
  double *lat = calloc((size_t)n, sizeof *lat);
  int started = 0, done = 0, live = 0;
  if (!pids || !t0 || !lat) return 1;
  for (int i = 0; i < 10; i++) { /* warm-up: page cache, dynamic loader */
    pid_t p;
    int st;
    if (posix_spawn(&p, argv[0], NULL, NULL, argv, environ) == 0) waitpid(p, &st, 0);
  }
  double w0 = now_ms();
  while (done < n) {
    while (live < conc && started < n) {
      int slot = 0;
      while (pids[slot]) slot++;
      t0[slot] = now_ms();
      int rc = posix_spawn(&pids[slot], argv[0], NULL, NULL, argv, environ);
      if (rc) {
        fprintf(stderr, "posix_spawn: %s\n", strerror(rc));
        return 1;
      }
      started++, live++;
    }
    int st;
    pid_t p = waitpid(-1, &st, 0);
    if (p < 0) {
      if (errno == EINTR) continue;
      perror("waitpid");
      return 1;
    }
    for (int i = 0; i < conc; i++)
      if (pids[i] == p) {
        lat[done++] = now_ms() - t0[i];
        pids[i] = 0, live--;
        break;
      }
  }
  double wall = now_ms() - w0;
  char wkey[256];
  emit(key, "ms", lat, n);
  snprintf(wkey, sizeof wkey, "%s.wall", key);
  emit(wkey, "ms", &wall, 1);
  double rate = n / (wall / 1e3);
  snprintf(wkey, sizeof wkey, "%s.rate", key);
  emit(wkey, "ops/s", &rate, 1);
  free(pids), free(t0), free(lat);
  return 0;
}

static size_t sink(char *p, size_t s, size_t n, void *u) {
  (void)p, (void)u;
  return s * n;
}

static int bench_http(const char *key, const char *url, int n) {
  double *lat = calloc((size_t)n, sizeof *lat);
  CURL *h;
  if (!lat || curl_global_init(CURL_GLOBAL_DEFAULT) || !(h = curl_easy_init())) return 1;
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  for (int i = -10; i < n; i++) { /* 10 warm-up requests */
    double t = now_ms();
    CURLcode rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
      fprintf(stderr, "curl: %s\n", curl_easy_strerror(rc));
      return 1;
    }
    if (i >= 0) lat[i] = now_ms() - t;
  }
  emit(key, "ms", lat, n);
  curl_easy_cleanup(h);
  curl_global_cleanup();
  free(lat);
  return 0;
}

static int write_all(int fd, const char *p, size_t len) {
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n, len -= (size_t)n;
  }
  return 0;
}

static int bench_write(const char *key, const char *dir, size_t bytes, int n) {
  double *lat = calloc((size_t)n, sizeof *lat);
  char *data = malloc(bytes ? bytes : 1);
  char tmp[4096], dst[4096];
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (!lat || !data || dfd < 0) {
    perror(dfd < 0 ? dir : "malloc");
    return 1;
  }
  memset(data, 'x', bytes);
  snprintf(tmp, sizeof tmp, "%s/.baseline-write.tmp", dir);
  snprintf(dst, sizeof dst, "%s/.baseline-write", dir);
  for (int i = -3; i < n; i++) {
    double t = now_ms();
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write_all(fd, data, bytes) < 0 || fsync(fd) < 0 || close(fd) < 0 ||
        rename(tmp, dst) < 0 || fsync(dfd) < 0) {
      perror(tmp);
      return 1;
    }
    if (i >= 0) lat[i] = now_ms() - t;
  }
  unlink(dst);
  close(dfd);
  emit(key, "ms", lat, n);
  free(lat), free(data);
  return 0;
}

int main(int argc, char **argv) {
  static char *true_argv[] = {"/bin/true", NULL};
  if (argc >= 5 && !strcmp(argv[1], "spawn"))
    return bench_spawn(argv[2], atoi(argv[3]), atoi(argv[4]), argc > 5 ? argv + 5 : true_argv);
  if (argc == 5 && !strcmp(argv[1], "http"))
    return bench_http(argv[2], argv[3], atoi(argv[4]));
  if (argc == 6 && !strcmp(argv[1], "write"))
    return bench_write(argv[2], argv[3], strtoul(argv[4], NULL, 10), atoi(argv[5]));
  fprintf(stderr,
          "usage: baseline spawn KEY N CONC [ARGV...] | http KEY URL N"
          " | write KEY DIR BYTES N\n");
  return 2;
}
