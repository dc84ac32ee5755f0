/*
** Small helpers without Lua, shared by the runtime, the runner and the
** server: clocks, randomness, descriptors and durable files. Every function
** that can fail returns -1 with errno set, and 0 on success.
*/
#ifndef MASTRA_UTIL_H
#define MASTRA_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* {====== clocks ====== */

/* wall-clock milliseconds since the epoch */
int64_t mastra__wall_ms(void);
/* monotonic milliseconds with a fractional part (sub-millisecond) */
double mastra__mono_msf(void);

/* }====== */

/* {====== randomness ====== */

/* len bytes from the kernel's CSPRNG */
int mastra__random_bytes(void *out, size_t len);
/* nbytes (at most 64) random bytes, hex-encoded into out (2 * nbytes + 1) */
int mastra__random_hex(char *out, size_t nbytes);
/* equality of two byte strings in a time that depends on blen only (b is
** the secret) */
int mastra__secure_equal(const char *a, size_t alen, const char *b,
                         size_t blen);

/* }====== */

/* {====== descriptors and files ====== */

/* Raise the soft RLIMIT_NOFILE to the hard limit, as servers do; returns
** the soft limit in force afterwards (or -1 if it cannot be read). */
long mastra__raise_nofile(void);

/* write all of data to fd (restarting after EINTR and short writes) */
int mastra__write_all(int fd, const void *data, size_t len);
/* read exactly len bytes at off (EIO if the file is shorter) */
int mastra__pread_all(int fd, void *data, size_t len, off_t off);
/* fsync a directory descriptor (restarting after EINTR) */
int mastra__fsync_fd(int fd);

/* Write data to path atomically: a temporary file beside path (named
** MASTRA__TMP_PREFIX + random hex, so that listings can skip it), renamed
** over it. mode is the new file's (before the umask). flags:
** MASTRA__ATOMIC_SYNC: durably too (the file is fsync'd before the rename,
**   the directory after it);
** MASTRA__ATOMIC_KEEP_MODE: a regular file that is replaced keeps its mode;
** MASTRA__ATOMIC_EXCLUSIVE: linked instead of renamed, so EEXIST if path
**   exists (no overwrite, no race).
** A directory at path is EISDIR. */
#define MASTRA__TMP_PREFIX ".mastra-tmp-"
#define MASTRA__ATOMIC_SYNC 1
#define MASTRA__ATOMIC_KEEP_MODE 2
#define MASTRA__ATOMIC_EXCLUSIVE 4
int mastra__write_file_atomic(const char *path, const void *data, size_t len,
                              int mode, int flags);
/* read a whole file; *out is malloc'd and NUL-terminated */
int mastra__read_file(const char *path, char **out, size_t *len);

/* mkdir -p with mode: every missing part of path is created. ENOTDIR when a
** part exists and is not a directory; *failed_len (if not NULL) gets the
** length of the prefix of path that failed. */
int mastra__mkdirs(const char *path, int mode, size_t *failed_len);
/* rm -rf path (no symlink is followed); a missing path is not an error */
int mastra__remove_tree(const char *path);

/* }====== */

#endif
