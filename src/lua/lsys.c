/*
** mastra.core: system helpers.
**
**   core.time()          -> wall-clock milliseconds since the epoch
**   core.newid()         -> a fresh id of the loop (for task.wait)
**   core.getcwd()        -> the current directory
**   core.lock(path [, nonblocking]) -> a lock object held until :close()
**                          (or collection); nonblocking: EAGAIN when held
**   core.pidAlive(pid)   -> whether a process with that pid exists
**   core.setenv(name, value) -> true: sets a variable of the process's
**                          environment (os.getenv and child processes see
**                          it); the .env loader (dotenv.lua) uses it
**
** Failures return nil, message, NAME (docs/core.md).
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "lmastra.h"
#include "loop.h"
#include "util.h"

#define LOCK_MT "mastra.Lock"

static int core_time(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)mastra__wall_ms());
  return 1;
}

static int core_newid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)mastra__loop_newid(mastra__checkloop(L)));
  return 1;
}

/* getcwd() -> the current directory, or nil, message, NAME */
static int core_getcwd(lua_State *L) {
  char buf[PATH_MAX];
  if (getcwd(buf, sizeof buf) == NULL)
    return mastra__pusherrno(L, errno, "cannot read the current directory");
  lua_pushstring(L, buf);
  return 1;
}

/* lock(path [, nonblocking]) -> a lock object held until :close() (or
** collection), or nil, message, NAME. Blocks until the lock is free
** (only for short sections), unless nonblocking: then a lock held
** elsewhere is nil, message, "EAGAIN" at once (a task retries after a
** sleep). */
static int lock_close(lua_State *L) {
  int *fd = (int *)luaL_checkudata(L, 1, LOCK_MT);
  if (*fd >= 0) {
    flock(*fd, LOCK_UN);
    close(*fd);
    *fd = -1;
  }
  return 0;
}

static int core_lock(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  int op = lua_toboolean(L, 2) ? LOCK_EX | LOCK_NB : LOCK_EX;
  int *fd = (int *)lua_newuserdatauv(L, sizeof(int), 0);
  *fd = -1;
  luaL_setmetatable(L, LOCK_MT);
  *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (*fd < 0 || flock(*fd, op) < 0) {
    int e = errno;
    if (*fd >= 0) { /* a retry loop must not pile descriptors up */
      close(*fd);
      *fd = -1;
    }
    return mastra__pusherrno(L, e, path);
  }
  return 1;
}

/* pidAlive(pid) -> whether a process with that pid exists */
static int core_pid_alive(lua_State *L) {
  lua_Integer pid = luaL_checkinteger(L, 1);
  lua_pushboolean(L, pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM));
  return 1;
}

/* setenv(name, value) -> true, or nil, message, NAME (EINVAL for a name
** that is empty or holds '=') */
static int core_setenv(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  const char *value = luaL_checkstring(L, 2);
  if (setenv(name, value, 1) < 0) return mastra__pusherrno(L, errno, "setenv");
  lua_pushboolean(L, 1);
  return 1;
}

int mastra__open_sys(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"time", core_time},
    {"newid", core_newid},
    {"getcwd", core_getcwd},
    {"lock", core_lock},
    {"pidAlive", core_pid_alive},
    {"setenv", core_setenv},
    {NULL, NULL}
  };
  static const luaL_Reg lock_meth[] = {
    {"close", lock_close},
    {NULL, NULL}
  };
  mastra__createmeta(L, LOCK_MT, lock_meth, lock_close, NULL);
  lua_settop(L, 1);
  mastra__setfuncs_loop(L, funcs);
  return 0;
}
