/*
** mastra.core: filesystem primitives for LocalFilesystem
** (lua/mastra/local_filesystem.lua).
**
**   core.fsStat(path)       -> {type, size, mtime, ctime, mode}
**   core.fsLstat(path)      -> the same without following a symlink
**   core.fsReaddir(path)    -> {name, ...} (no "." and "..")
**   core.fsRealpath(path)   -> the canonical absolute path
**   core.fsReadlink(path)   -> the target of a symlink
**   core.fsReadFile(path)   -> the bytes of a regular file
**   core.fsWriteAtomic(path, data, exclusive [, mode]) -> true
**       mastra__write_file_atomic (src/core/util.h), durable: a temporary
**       file beside path (".mastra-tmp-..."), written, fsynced, then
**       renamed over path (or, with exclusive, linked: EEXIST if path
**       exists), so a reader never sees a torn file; an overwritten file
**       keeps its mode, unless mode (an integer: 384 is 0600) is given:
**       then the file has that mode (less the umask)
**   core.fsChmod(path, mode) -> true
**   core.fsAppend(path, data) -> true (O_APPEND, created if missing)
**   core.fsRename(from, to)  core.fsUnlink(path)  core.fsRmdir(path)
**   core.fsMkdir(path [, parents]) -> true
**       without parents: mkdir(2), EEXIST if path exists; with parents:
**       mkdir -p (mastra__mkdirs): every missing part is created, an
**       existing directory is success, ENOTDIR when a part is a file
**
** Type is "file", "directory", "symlink" or "other"; times are
** milliseconds since the epoch. Every failure returns nil, message,
** errno name ("ENOENT", "EEXIST", ...; docs/core.md). Calls block (local
** disk).
*/
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "lmastra.h"
#include "util.h"

static int fail(lua_State *L, const char *path, int e) {
  return mastra__pusherrno(L, e, path);
}

static lua_Integer ms_of(const struct timespec *ts) {
  return (lua_Integer)ts->tv_sec * 1000 + ts->tv_nsec / 1000000;
}

static int push_stat(lua_State *L, const struct stat *st) {
  const char *type = S_ISREG(st->st_mode)   ? "file"
                     : S_ISDIR(st->st_mode) ? "directory"
                     : S_ISLNK(st->st_mode) ? "symlink"
                                            : "other";
  lua_createtable(L, 0, 5);
  lua_pushstring(L, type);
  lua_setfield(L, -2, "type");
  lua_pushinteger(L, (lua_Integer)st->st_size);
  lua_setfield(L, -2, "size");
  lua_pushinteger(L, ms_of(&st->st_mtim));
  lua_setfield(L, -2, "mtime");
  lua_pushinteger(L, ms_of(&st->st_ctim));
  lua_setfield(L, -2, "ctime");
  lua_pushinteger(L, (lua_Integer)(st->st_mode & 07777));
  lua_setfield(L, -2, "mode");
  return 1;
}

static int fs_stat(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat st;
  if (stat(path, &st) < 0) return fail(L, path, errno);
  return push_stat(L, &st);
}

static int fs_lstat(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  struct stat st;
  if (lstat(path, &st) < 0) return fail(L, path, errno);
  return push_stat(L, &st);
}

static int fs_readdir(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  DIR *d = opendir(path);
  struct dirent *e;
  lua_Integer n = 0;
  if (d == NULL) return fail(L, path, errno);
  lua_newtable(L);
  errno = 0;
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    lua_pushstring(L, e->d_name);
    lua_rawseti(L, -2, ++n);
  }
  if (errno != 0) {
    int err = errno;
    closedir(d);
    return fail(L, path, err);
  }
  closedir(d);
  return 1;
}

static int fs_realpath(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  char *r = realpath(path, NULL);
  if (r == NULL) return fail(L, path, errno);
  lua_pushstring(L, r);
  free(r);
  return 1;
}

static int fs_readlink(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  char buf[PATH_MAX];
  ssize_t n = readlink(path, buf, sizeof buf);
  if (n < 0) return fail(L, path, errno);
  lua_pushlstring(L, buf, (size_t)n);
  return 1;
}

static int fs_readfile(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  luaL_Buffer b;
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(L, path, errno);
  if (fstat(fd, &st) < 0) {
    int err = errno;
    close(fd);
    return fail(L, path, err);
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    return fail(L, path, EISDIR);
  }
  luaL_buffinit(L, &b);
  for (;;) {
    char *p = luaL_prepbuffsize(&b, 65536);
    ssize_t n = read(fd, p, 65536);
    if (n < 0) {
      int err = errno;
      if (err == EINTR) continue;
      close(fd);
      return fail(L, path, err);
    }
    if (n == 0) break;
    luaL_addsize(&b, (size_t)n);
  }
  close(fd);
  luaL_pushresult(&b);
  return 1;
}

static int fs_write_atomic(lua_State *L) {
  size_t len;
  const char *path = luaL_checkstring(L, 1);
  const char *data = luaL_checklstring(L, 2, &len);
  int flags = MASTRA__ATOMIC_SYNC | MASTRA__ATOMIC_KEEP_MODE;
  lua_Integer mode = luaL_optinteger(L, 4, 0666);
  if (lua_toboolean(L, 3)) flags |= MASTRA__ATOMIC_EXCLUSIVE;
  luaL_argcheck(L, mode >= 0 && mode <= 07777, 4, "a file mode (0 to 4095)");
  if (!lua_isnoneornil(L, 4)) flags &= ~MASTRA__ATOMIC_KEEP_MODE;
  if (mastra__write_file_atomic(path, data, len, (mode_t)mode, flags) < 0)
    return fail(L, path, errno);
  lua_pushboolean(L, 1);
  return 1;
}

static int fs_chmod(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  lua_Integer mode = luaL_checkinteger(L, 2);
  luaL_argcheck(L, mode >= 0 && mode <= 07777, 2, "a file mode (0 to 4095)");
  if (chmod(path, (mode_t)mode) < 0) return fail(L, path, errno);
  lua_pushboolean(L, 1);
  return 1;
}

static int fs_append(lua_State *L) {
  size_t len;
  const char *path = luaL_checkstring(L, 1);
  const char *data = luaL_checklstring(L, 2, &len);
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return fail(L, path, errno);
  if (mastra__write_all(fd, data, len) < 0) {
    int err = errno;
    close(fd);
    return fail(L, path, err);
  }
  if (close(fd) < 0) return fail(L, path, errno);
  lua_pushboolean(L, 1);
  return 1;
}

static int fs_rename(lua_State *L) {
  const char *from = luaL_checkstring(L, 1);
  const char *to = luaL_checkstring(L, 2);
  if (rename(from, to) < 0) return fail(L, from, errno);
  lua_pushboolean(L, 1);
  return 1;
}

static int fs_unlink(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  if (unlink(path) < 0) return fail(L, path, errno);
  lua_pushboolean(L, 1);
  return 1;
}

static int fs_rmdir(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  if (rmdir(path) < 0) return fail(L, path, errno);
  lua_pushboolean(L, 1);
  return 1;
}

static int fs_mkdir(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  if (lua_toboolean(L, 2)) {
    size_t failed = 0;
    if (mastra__mkdirs(path, 0777, &failed) < 0) {
      int e = errno;
      lua_pushlstring(L, path, failed > 0 ? failed : strlen(path));
      return fail(L, lua_tostring(L, -1), e);
    }
  } else if (mkdir(path, 0777) < 0) {
    return fail(L, path, errno);
  }
  lua_pushboolean(L, 1);
  return 1;
}

static const luaL_Reg fs_funcs[] = {
  {"fsStat", fs_stat},
  {"fsLstat", fs_lstat},
  {"fsReaddir", fs_readdir},
  {"fsRealpath", fs_realpath},
  {"fsReadlink", fs_readlink},
  {"fsReadFile", fs_readfile},
  {"fsWriteAtomic", fs_write_atomic},
  {"fsChmod", fs_chmod},
  {"fsAppend", fs_append},
  {"fsRename", fs_rename},
  {"fsUnlink", fs_unlink},
  {"fsRmdir", fs_rmdir},
  {"fsMkdir", fs_mkdir},
  {NULL, NULL}
};

int mastra__open_fs(lua_State *L) {
  lua_settop(L, 1);
  luaL_setfuncs(L, fs_funcs, 0);
  return 0;
}
