/*
** mastra.core: child processes (src/core/proc.h).
**
**   core.spawn{command=, cwd=, env=, stdin=, timeout=} -> process, or nil,
**                                                         message, NAME
**   p:id()  p:pid()  p:read()  p:result()  p:write(data)  p:wantWrite()
**   p:closeStdin()  p:kill()  p:close()
**
** A process signals its id when output arrives, when stdin drains (after
** wantWrite) and when it has finished; Lua waits for the id and reads.
*/
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lmastra.h"
#include "loop.h"
#include "proc.h"

#define PROC_MT "mastra.Process"

/* {====== processes ====== */

static mastra__proc **checkprocbox(lua_State *L) {
  return (mastra__proc **)luaL_checkudata(L, 1, PROC_MT);
}

static mastra__proc *checkproc(lua_State *L) {
  mastra__proc *p = *checkprocbox(L);
  if (p == NULL) luaL_error(L, "attempt to use a closed mastra.Process");
  return p;
}

static int proc_close(lua_State *L) {
  mastra__proc **box = checkprocbox(L);
  if (*box != NULL) {
    mastra__proc_release(*box);
    *box = NULL;
  }
  return 0;
}

static int proc_tostring(lua_State *L) {
  mastra__proc *p = *checkprocbox(L);
  if (p == NULL)
    lua_pushliteral(L, "mastra.Process (closed)");
  else
    lua_pushfstring(L, "mastra.Process: pid %d", (int)p->pid);
  return 1;
}

static int proc_id(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)checkproc(L)->id);
  return 1;
}

static int proc_pid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)checkproc(L)->pid);
  return 1;
}

static void push_output(lua_State *L, mastra__proc *p, mastra__buf *b) {
  if (b->len == 0) {
    lua_pushnil(L);
    return;
  }
  lua_pushlstring(L, b->data, b->len);
  mastra__proc_consumed(p, b);
}

/* read() -> stdout bytes or nil, stderr bytes or nil, finished */
static int proc_read(lua_State *L) {
  mastra__proc *p = checkproc(L);
  int done = p->done; /* before draining: done implies all output is in */
  push_output(L, p, &p->out);
  push_output(L, p, &p->err);
  lua_pushboolean(L, done);
  return 3;
}

/* result() -> exitCode, signal or nil, timedOut, killed (nil if running) */
static int proc_result(lua_State *L) {
  mastra__proc *p = checkproc(L);
  if (!p->done) return 0;
  lua_pushinteger(L, p->exit_code);
  if (p->term_signal)
    lua_pushinteger(L, p->term_signal);
  else
    lua_pushnil(L);
  lua_pushboolean(L, p->timed_out);
  lua_pushboolean(L, p->kill_requested);
  return 4;
}

/* write(data [, init]) -> bytes written (0: the pipe is full), or nil,
** message, NAME. init (default 1) is the first byte of data to write, so
** that a caller that wrote part of a large string goes on from where the
** pipe stopped without copying the rest of it. */
static int proc_write(lua_State *L) {
  mastra__proc *p = checkproc(L);
  size_t len;
  const char *data = luaL_checklstring(L, 2, &len);
  lua_Integer init = luaL_optinteger(L, 3, 1);
  ssize_t n;
  luaL_argcheck(L, init >= 1 && (lua_Unsigned)init - 1 <= (lua_Unsigned)len, 3,
                "init out of range (1 to #data + 1)");
  n = mastra__proc_write(p, data + (init - 1), len - (size_t)(init - 1));
  if (n >= 0) {
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
  }
  if (n == -EBADF) return mastra__pushfail(L, "EBADF", "stdin is closed");
  return mastra__pusherrno(L, (int)-n, "cannot write to stdin");
}

static int proc_want_write(lua_State *L) {
  int rc = mastra__proc_want_write(checkproc(L));
  lua_pushboolean(L, rc == 0);
  return 1;
}

static int proc_close_stdin(lua_State *L) {
  mastra__proc_close_stdin(checkproc(L));
  return 0;
}

/* kill() -> true if it was running (SIGTERM now, SIGKILL after a grace) */
static int proc_kill(lua_State *L) {
  lua_pushboolean(L, mastra__proc_kill(checkproc(L)));
  return 1;
}

/* Build a NULL-terminated "K=V" array from the table at idx, in one block
** owned by a userdata left on the stack (freed by the GC, even on error). */
static char **build_envp(lua_State *L, int idx) {
  size_t count = 0, bytes = 0, off;
  char **envp;
  char *strings;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    size_t kl, vl;
    if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "spawn: env keys and values must be strings");
    lua_tolstring(L, -2, &kl);
    lua_tolstring(L, -1, &vl);
    bytes += kl + vl + 2;
    count++;
    lua_pop(L, 1);
  }
  envp = (char **)lua_newuserdatauv(L, (count + 1) * sizeof(char *) + bytes,
                                     0);
  strings = (char *)(envp + count + 1);
  off = 0;
  count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    size_t kl, vl;
    const char *k = lua_tolstring(L, -2, &kl);
    const char *v = lua_tolstring(L, -1, &vl);
    envp[count++] = strings + off;
    memcpy(strings + off, k, kl);
    strings[off + kl] = '=';
    memcpy(strings + off + kl + 1, v, vl);
    strings[off + kl + 1 + vl] = '\0';
    off += kl + vl + 2;
    lua_pop(L, 1);
  }
  envp[count] = NULL;
  return envp;
}

/* spawn{command=, cwd=, env=, stdin=, timeout=} -> process, or nil,
** message, NAME when the process cannot be started (ENOENT, ENOTDIR or
** EACCES: the cwd; EMFILE: out of descriptors; ...) */
static int core_spawn(lua_State *L) {
  mastra__loop *loop = mastra__checkloop(L);
  mastra__proc_opts opts;
  mastra__proc **box;
  char err[256];
  int rc, top;
  luaL_checktype(L, 1, LUA_TTABLE);
  memset(&opts, 0, sizeof opts);
  lua_getfield(L, 1, "command");
  opts.command = luaL_checkstring(L, -1);
  lua_getfield(L, 1, "cwd");
  opts.cwd = luaL_optstring(L, -1, NULL);
  lua_getfield(L, 1, "stdin");
  opts.stdin_pipe = lua_toboolean(L, -1);
  lua_getfield(L, 1, "timeout");
  if (!lua_isnil(L, -1)) {
    lua_Integer t = luaL_checkinteger(L, -1);
    opts.timeout_ms = t > 0 ? (uint64_t)t : 0;
  }
  if (lua_getfield(L, 1, "env") == LUA_TTABLE) {
    top = lua_gettop(L);
    opts.envp = build_envp(L, top);
  } else if (lua_toboolean(L, -1)) { /* env = true: this process's own */
    extern char **environ;
    static char *empty[] = {NULL};
    opts.envp = environ ? environ : empty;
  } else {
    static char *empty[] = {NULL};
    opts.envp = empty;
  }
  box = (mastra__proc **)lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL; /* born closed */
  luaL_setmetatable(L, PROC_MT);
  rc = mastra__proc_spawn(loop, &opts, box, err, sizeof err);
  if (rc < 0) return mastra__pushfail(L, mastra__errno_name(-rc), "%s", err);
  return 1;
}

/* }====== */

int mastra__open_proc(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"spawn", core_spawn},
    {NULL, NULL}
  };
  static const luaL_Reg proc_meth[] = {
    {"id", proc_id},
    {"pid", proc_pid},
    {"read", proc_read},
    {"result", proc_result},
    {"write", proc_write},
    {"wantWrite", proc_want_write},
    {"closeStdin", proc_close_stdin},
    {"kill", proc_kill},
    {"close", proc_close},
    {NULL, NULL}
  };
  mastra__createmeta(L, PROC_MT, proc_meth, proc_close, proc_tostring);
  lua_settop(L, 1);
  mastra__setfuncs_loop(L, funcs);
  return 0;
}
