/*
** Small helpers without Lua (see util.h).
*/
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

/* {====== clocks ====== */

int64_t mastra__wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

double mastra__mono_msf(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* }====== */

/* {====== randomness ====== */

int mastra__random_bytes(void *out, size_t len) {
  unsigned char *p = out;
  while (len > 0) {
    ssize_t n = getrandom(p, len, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int mastra__random_hex(char *out, size_t nbytes) {
  static const char hex[] = "0123456789abcdef";
  unsigned char buf[64];
  size_t i;
  if (nbytes > sizeof buf) {
    errno = EINVAL;
    return -1;
  }
  if (mastra__random_bytes(buf, nbytes) < 0) return -1;
  for (i = 0; i < nbytes; i++) {
    out[2 * i] = hex[buf[i] >> 4];
    out[2 * i + 1] = hex[buf[i] & 15];
  }
  out[2 * nbytes] = '\0';
  return 0;
}

int mastra__secure_equal(const char *a, size_t alen, const char *b,
                         size_t blen) {
  unsigned char diff = (unsigned char)(alen != blen);
  size_t i;
  for (i = 0; i < blen; i++) {
    unsigned char ca = i < alen ? (unsigned char)a[i] : 0;
    diff |= (unsigned char)(ca ^ (unsigned char)b[i]);
  }
  return diff == 0;
}

/* }====== */

/* {====== descriptors and files ====== */

long mastra__raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0) return -1;
  if (rl.rlim_cur < rl.rlim_max) {
    rlim_t want = rl.rlim_max;
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || getrlimit(RLIMIT_NOFILE, &rl) < 0)
      return -1;
  }
  return rl.rlim_cur == RLIM_INFINITY ? -1 : (long)rl.rlim_cur;
}

/* writes and reads go in chunks of at most 1 GiB (Linux caps one call
** below 2 GiB anyway) */
#define IO_CHUNK ((size_t)1 << 30)

int mastra__write_all(int fd, const void *data, size_t len) {
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len > IO_CHUNK ? IO_CHUNK : len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int mastra__pread_all(int fd, void *data, size_t len, off_t off) {
  char *p = data;
  while (len > 0) {
    ssize_t n = pread(fd, p, len > IO_CHUNK ? IO_CHUNK : len, off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n == 0) {
      errno = EIO;
      return -1;
    }
    p += n;
    off += n;
    len -= (size_t)n;
  }
  return 0;
}

int mastra__fsync_fd(int fd) {
  while (fsync(fd) < 0) {
    if (errno != EINTR) return -1;
  }
  return 0;
}

static int fsync_dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  char *dir;
  int fd, rc, saved;
  if (slash == NULL) {
    dir = strdup(".");
  } else {
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    dir = strndup(path, n);
  }
  if (dir == NULL) return -1;
  fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  free(dir);
  if (fd < 0) return -1;
  rc = mastra__fsync_fd(fd);
  saved = errno;
  close(fd);
  errno = saved;
  return rc;
}

int mastra__write_file_atomic(const char *path, const void *data, size_t len,
                              int mode, int flags) {
  const char *slash = strrchr(path, '/');
  size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
  size_t n = dirlen + sizeof MASTRA__TMP_PREFIX + 16;
  struct stat st;
  char rnd[17];
  char *tmp;
  int fd = -1, saved, keep = 0;
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      errno = EISDIR; /* the rename would fail less clearly */
      return -1;
    }
    keep = (flags & MASTRA__ATOMIC_KEEP_MODE) && S_ISREG(st.st_mode);
  }
  if (mastra__random_hex(rnd, 8) < 0) return -1;
  tmp = malloc(n);
  if (tmp == NULL) return -1;
  snprintf(tmp, n, "%.*s" MASTRA__TMP_PREFIX "%s", (int)dirlen, path, rnd);
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
  if (fd < 0) goto fail;
  /* the umask applies to open's mode, not to a kept one */
  if (keep && fchmod(fd, st.st_mode & 07777) < 0) goto fail;
  if (mastra__write_all(fd, data, len) < 0) goto fail;
  if ((flags & MASTRA__ATOMIC_SYNC) && mastra__fsync_fd(fd) < 0) goto fail;
  if (close(fd) < 0) {
    fd = -1;
    goto fail;
  }
  fd = -1;
  if (flags & MASTRA__ATOMIC_EXCLUSIVE) {
    if (link(tmp, path) < 0) goto fail;
    unlink(tmp);
  } else if (rename(tmp, path) < 0) {
    goto fail;
  }
  free(tmp);
  return (flags & MASTRA__ATOMIC_SYNC) ? fsync_dir_of(path) : 0;
fail:
  saved = errno;
  if (fd >= 0) close(fd);
  unlink(tmp);
  free(tmp);
  errno = saved;
  return -1;
}

int mastra__read_file(const char *path, char **out, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  char *buf;
  size_t got = 0;
  *out = NULL;
  if (fd < 0) return -1;
  if (fstat(fd, &st) < 0) {
    int saved = errno;
    close(fd);
    errno = saved;
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

int mastra__mkdirs(const char *path, int mode, size_t *failed_len) {
  size_t i, n = strlen(path);
  char *buf;
  if (n == 0) {
    errno = ENOENT;
    return -1;
  }
  buf = strdup(path);
  if (buf == NULL) return -1;
  for (i = 1; i <= n; i++) {
    struct stat st;
    char c = buf[i];
    if (c != '/' && c != '\0') continue;
    buf[i] = '\0';
    if (mkdir(buf, (mode_t)mode) < 0) {
      int e = errno;
      if (e != EEXIST || stat(buf, &st) < 0 || !S_ISDIR(st.st_mode)) {
        if (failed_len) *failed_len = i;
        free(buf);
        errno = e == EEXIST ? ENOTDIR : e;
        return -1;
      }
    }
    buf[i] = c;
  }
  free(buf);
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
      int saved = errno;
      closedir(d);
      errno = saved;
      return -1;
    }
  }
  closedir(d);
  return unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -1;
}

int mastra__remove_tree(const char *path) { return remove_at(AT_FDCWD, path); }

/* }====== */
