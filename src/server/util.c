/*
** Small helpers of mastra-platform: time, randomness, constant-time
** comparison, durable files, directory trees, logging.
*/
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "server.h"

int64_t mp_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void mp_iso8601(int64_t ms, char out[32]) {
  time_t secs = (time_t)(ms / 1000);
  char date[24];
  struct tm tm;
  gmtime_r(&secs, &tm);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm);
  snprintf(out, 32, "%s.%03uZ", date, (unsigned)(ms % 1000));
}

int mp_random_hex(char *out, size_t nbytes) {
  static const char hex[] = "0123456789abcdef";
  unsigned char buf[64];
  size_t i, got = 0;
  if (nbytes > sizeof buf) return -1;
  while (got < nbytes) {
    ssize_t n = getrandom(buf + got, nbytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    got += (size_t)n;
  }
  for (i = 0; i < nbytes; i++) {
    out[2 * i] = hex[buf[i] >> 4];
    out[2 * i + 1] = hex[buf[i] & 15];
  }
  out[2 * nbytes] = '\0';
  return 0;
}

int mp_secure_equal(const char *a, size_t alen, const char *b, size_t blen) {
  /* time depends on the length of b (the secret) only */
  unsigned char diff = (unsigned char)(alen != blen);
  size_t i;
  for (i = 0; i < blen; i++) {
    unsigned char ca = i < alen ? (unsigned char)a[i] : 0;
    diff |= (unsigned char)(ca ^ (unsigned char)b[i]);
  }
  return diff == 0;
}

static int fsync_dir_of(const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/');
  int fd, rc;
  if (slash == NULL) {
    strcpy(dir, ".");
  } else {
    size_t n = (size_t)(slash - path);
    if (n == 0) n = 1;
    if (n >= sizeof dir) return -1;
    memcpy(dir, path, n);
    dir[n] = '\0';
  }
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -1;
  rc = fsync(fd);
  close(fd);
  return rc;
}

int mp_write_file_atomic(const char *path, const void *data, size_t len,
                         int sync) {
  char tmp[4200];
  char rnd[17];
  const char *p = data;
  int fd, saved;
  if (mp_random_hex(rnd, 8) < 0) return -1;
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp-%s", path, rnd) >= sizeof tmp) {
    errno = ENAMETOOLONG;
    return -1;
  }
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      goto fail;
    }
    p += n;
    len -= (size_t)n;
  }
  if (sync && fsync(fd) < 0) goto fail;
  if (close(fd) < 0) {
    fd = -1;
    goto fail;
  }
  fd = -1;
  if (rename(tmp, path) < 0) goto fail;
  return sync ? fsync_dir_of(path) : 0;
fail:
  saved = errno;
  if (fd >= 0) close(fd);
  unlink(tmp);
  errno = saved;
  return -1;
}

int mp_read_file(const char *path, char **out, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  char *buf;
  size_t got = 0;
  *out = NULL;
  if (fd < 0) return -1;
  if (fstat(fd, &st) < 0) {
    close(fd);
    return -1;
  }
  buf = malloc((size_t)st.st_size + 1);
  if (buf == NULL) {
    close(fd);
    errno = ENOMEM;
    return -1;
  }
  while (got < (size_t)st.st_size) {
    ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(fd);
  buf[got] = '\0';
  *out = buf;
  if (len) *len = got;
  return 0;
}

int mp_mkdirs(const char *path) {
  char buf[4096];
  size_t i, n = strlen(path);
  if (n == 0 || n >= sizeof buf) {
    errno = EINVAL;
    return -1;
  }
  memcpy(buf, path, n + 1);
  for (i = 1; i <= n; i++) {
    if (buf[i] == '/' || buf[i] == '\0') {
      char c = buf[i];
      struct stat st;
      buf[i] = '\0';
      if (mkdir(buf, 0755) < 0 && errno != EEXIST) return -1;
      if (stat(buf, &st) < 0 || !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
      }
      buf[i] = c;
    }
  }
  return 0;
}

static int remove_at(int parent, const char *name) {
  int fd;
  DIR *d;
  struct dirent *e;
  if (unlinkat(parent, name, 0) == 0 || errno == ENOENT) return 0;
  if (errno != EISDIR && errno != EPERM) return -1;
  fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  d = fdopendir(fd);
  if (d == NULL) {
    close(fd);
    return -1;
  }
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (remove_at(dirfd(d), e->d_name) < 0) {
      closedir(d);
      return -1;
    }
  }
  closedir(d);
  return unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -1;
}

int mp_remove_tree(const char *path) { return remove_at(AT_FDCWD, path); }

void mp_log(const char *fmt, ...) {
  char ts[32];
  va_list ap;
  mp_iso8601(mp_now_ms(), ts);
  fprintf(stderr, "%s mastra-platform: ", ts);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}
