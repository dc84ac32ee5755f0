/*
** mastra.core: the Lua binding of the loop, timers and child processes.
**
** Every function here is non-blocking except poll(). The scheduler in
** lua/mastra/task.lua turns the ids that poll() returns into task wake-ups.
** Nothing here calls Lua from a loop callback: callbacks queue ids, and
** poll() hands them over after the dispatch has returned.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "mastra.h"
#include "lmastra.h"
#include "loop.h"
#include "proc.h"
#include "util.h"

#define LOOP_MT "mastra.Loop"
#define TIMER_MT "mastra.Timer"
#define PROC_MT "mastra.Process"
#define LOCK_MT "mastra.Lock"
#define LOOP_KEY "mastra.core.loop" /* registry: the loop of this state */

typedef struct ltimer {
  mastra__timer t;
  uint64_t id;
  int closed;
} ltimer;

/* {====== the loop ====== */

static mastra__loop **checkloopbox(lua_State *L, int idx) {
  return (mastra__loop **)luaL_checkudata(L, idx, LOOP_MT);
}

static mastra__loop *toloop(lua_State *L) {
  mastra__loop **box = checkloopbox(L, lua_upvalueindex(1));
  if (*box == NULL) luaL_error(L, "mastra: the event loop is closed");
  return *box;
}

static int loop_gc(lua_State *L) {
  mastra__loop **box = checkloopbox(L, 1);
  if (*box != NULL) {
    mastra__loop_close(*box);
    mastra__loop_unref(*box);
    *box = NULL;
  }
  return 0;
}

mastra__loop *mastra__lua_loop(lua_State *L) {
  mastra__loop *loop = NULL;
  if (lua_getfield(L, LUA_REGISTRYINDEX, LOOP_KEY) == LUA_TUSERDATA) {
    mastra__loop **box = luaL_testudata(L, -1, LOOP_MT);
    if (box != NULL) loop = *box;
  }
  lua_pop(L, 1);
  return loop;
}

/* poll(timeout_ms, out) -> n, interrupted: wait for I/O once, then store
** the signalled ids in out[1..n]. */
static int core_poll(lua_State *L) {
  mastra__loop *loop = toloop(L);
  lua_Integer timeout = luaL_checkinteger(L, 1);
  const uint64_t *ids;
  size_t n, i;
  int rc;
  luaL_checktype(L, 2, LUA_TTABLE);
  if (timeout > INT32_MAX) timeout = INT32_MAX;
  if (timeout < -1) timeout = -1;
  rc = mastra__loop_run_once(loop, (int)timeout);
  if (rc < 0) return luaL_error(L, "mastra: epoll_wait: %s", strerror(-rc));
  n = mastra__loop_take_signals(loop, &ids);
  for (i = 0; i < n; i++) {
    lua_pushinteger(L, (lua_Integer)ids[i]);
    lua_rawseti(L, 2, (lua_Integer)i + 1);
  }
  lua_pushinteger(L, (lua_Integer)n);
  lua_pushboolean(L, mastra__loop_take_interrupt(loop));
  return 2;
}

/* alive() -> number of armed timers and watched descriptors */
static int core_alive(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)mastra__loop_alive(toloop(L)));
  return 1;
}

/* nextTimeout() -> ms until the loop has something to do, -1: nothing */
static int core_next_timeout(lua_State *L) {
  lua_pushinteger(L, mastra__loop_next_timeout(toloop(L)));
  return 1;
}

static int core_now(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)mastra__now_ms());
  return 1;
}

/* time() -> wall-clock milliseconds since the epoch */
static int core_time(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  lua_pushinteger(L, (lua_Integer)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
  return 1;
}

/* getcwd() -> the current directory, or nil, message */
static int core_getcwd(lua_State *L) {
  char buf[PATH_MAX];
  if (getcwd(buf, sizeof buf) == NULL) {
    luaL_pushfail(L);
    lua_pushstring(L, strerror(errno));
    return 2;
  }
  lua_pushstring(L, buf);
  return 1;
}

/* mkdirs(path) -> true once path is a directory (parents are created as
** needed, like mkdir -p), or nil, message naming the part that failed */
static int core_mkdirs(lua_State *L) {
  size_t len, i;
  const char *path = luaL_checklstring(L, 1, &len);
  char *buf = (char *)lua_newuserdatauv(L, len + 1, 0);
  memcpy(buf, path, len + 1);
  for (i = 1; i <= len; i++) {
    struct stat st;
    char c = buf[i];
    if (c != '/' && c != '\0') continue;
    buf[i] = '\0';
    if (mkdir(buf, 0777) < 0
        && !(errno == EEXIST && stat(buf, &st) == 0 && S_ISDIR(st.st_mode))) {
      luaL_pushfail(L);
      lua_pushfstring(L, "%s: %s", buf,
                      errno == EEXIST ? "exists and is not a directory"
                                      : strerror(errno));
      return 2;
    }
    buf[i] = c;
  }
  lua_pushboolean(L, 1);
  return 1;
}

/* lock(path) -> a lock object held until :close() (or collection), or
** nil, message. Blocks until the lock is free: only for short sections. */
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
  int *fd = (int *)lua_newuserdatauv(L, sizeof(int), 0);
  *fd = -1;
  luaL_setmetatable(L, LOCK_MT);
  *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (*fd < 0 || flock(*fd, LOCK_EX) < 0) {
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", path, strerror(errno));
    return 2;
  }
  return 1;
}

/* daemon(command) -> true, or nil, message: run shell text detached from
** this process (its own session, not our child, not on our loop), with
** stdin from /dev/null; the command redirects its own output. */
static int core_daemon(lua_State *L) {
  const char *command = luaL_checkstring(L, 1);
  static char *const envp_none[] = {NULL};
  extern char **environ;
  posix_spawnattr_t attr;
  char *argv[4];
  pid_t pid;
  int rc, status;
  lua_pushfstring(L, "setsid %s </dev/null &", command);
  argv[0] = "sh";
  argv[1] = "-c";
  argv[2] = (char *)lua_tostring(L, -1);
  argv[3] = NULL;
  posix_spawnattr_init(&attr);
  rc = posix_spawn(&pid, "/bin/sh", NULL, &attr, argv,
                   environ ? environ : envp_none);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    luaL_pushfail(L);
    lua_pushfstring(L, "cannot start /bin/sh: %s", strerror(rc));
    return 2;
  }
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  lua_pushboolean(L, 1);
  return 1;
}

/* readlink(path) -> target, or nil, message */
static int core_readlink(lua_State *L) {
  const char *path = luaL_checkstring(L, 1);
  char buf[PATH_MAX];
  ssize_t n = readlink(path, buf, sizeof buf - 1);
  if (n < 0) {
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", path, strerror(errno));
    return 2;
  }
  lua_pushlstring(L, buf, (size_t)n);
  return 1;
}

/* pidAlive(pid) -> whether a process with that pid exists */
static int core_pid_alive(lua_State *L) {
  lua_Integer pid = luaL_checkinteger(L, 1);
  lua_pushboolean(L, pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM));
  return 1;
}

static int core_newid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)mastra__loop_newid(toloop(L)));
  return 1;
}

/* }====== */

/* {====== timers ====== */

static void on_timer(mastra__timer *t) {
  ltimer *lt = t->data;
  mastra__loop_signal(t->loop, lt->id);
}

static ltimer *checktimer(lua_State *L) {
  return (ltimer *)luaL_checkudata(L, 1, TIMER_MT);
}

static int timer_close(lua_State *L) {
  ltimer *lt = checktimer(L);
  if (!lt->closed) {
    lt->closed = 1;
    mastra__timer_stop(&lt->t);
    mastra__loop_unref(lt->t.loop);
  }
  return 0;
}

static int timer_id(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)checktimer(L)->id);
  return 1;
}

/* timer(ms) -> a one-shot timer that signals its id when due */
static int core_timer(lua_State *L) {
  mastra__loop *loop = toloop(L);
  lua_Integer ms = luaL_checkinteger(L, 1);
  ltimer *lt;
  luaL_argcheck(L, ms >= 0, 1, "delay must be >= 0");
  lt = (ltimer *)lua_newuserdatauv(L, sizeof *lt, 0);
  lt->closed = 1; /* born closed: __gc is safe until the timer is armed */
  luaL_setmetatable(L, TIMER_MT);
  mastra__timer_init(loop, &lt->t, on_timer, lt);
  lt->id = mastra__loop_newid(loop);
  if (mastra__timer_start(&lt->t, (uint64_t)ms) < 0)
    return luaL_error(L, "mastra: out of memory");
  mastra__loop_ref(loop);
  lt->closed = 0;
  return 1;
}

/* }====== */

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

/* write(data) -> bytes written (0: the pipe is full), or nil, message */
static int proc_write(lua_State *L) {
  mastra__proc *p = checkproc(L);
  size_t len;
  const char *data = luaL_checklstring(L, 2, &len);
  ssize_t n = mastra__proc_write(p, data, len);
  if (n >= 0) {
    lua_pushinteger(L, (lua_Integer)n);
    return 1;
  }
  luaL_pushfail(L);
  lua_pushstring(L, n == -EBADF ? "stdin is closed" : strerror((int)-n));
  return 2;
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

/* spawn{command=, cwd=, env=, stdin=, timeout=} -> process
** Raises "spawn: <reason>" when the process cannot be started. */
static int core_spawn(lua_State *L) {
  mastra__loop *loop = toloop(L);
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
  } else {
    static char *empty[] = {NULL};
    opts.envp = empty;
  }
  box = (mastra__proc **)lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL; /* born closed */
  luaL_setmetatable(L, PROC_MT);
  rc = mastra__proc_spawn(loop, &opts, box, err, sizeof err);
  if (rc < 0) return luaL_error(L, "spawn: %s", err);
  return 1;
}

/* }====== */

static const luaL_Reg core_funcs[] = {
  {"poll", core_poll},
  {"alive", core_alive},
  {"nextTimeout", core_next_timeout},
  {"now", core_now},
  {"newid", core_newid},
  {"time", core_time},
  {"getcwd", core_getcwd},
  {"mkdirs", core_mkdirs},
  {"lock", core_lock},
  {"daemon", core_daemon},
  {"pidAlive", core_pid_alive},
  {"readlink", core_readlink},
  {"timer", core_timer},
  {"spawn", core_spawn},
  {NULL, NULL}
};

static const luaL_Reg timer_meth[] = {
  {"id", timer_id},
  {"close", timer_close},
  {NULL, NULL}
};

static const luaL_Reg lock_meth[] = {
  {"close", lock_close},
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

void mastra__createmeta(lua_State *L, const char *name, const luaL_Reg *meth,
                        lua_CFunction gc, lua_CFunction tostring) {
  luaL_newmetatable(L, name);
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__close");
  if (tostring != NULL) {
    lua_pushcfunction(L, tostring);
    lua_setfield(L, -2, "__tostring");
  }
  if (meth != NULL) {
    lua_newtable(L);
    luaL_setfuncs(L, meth, 0);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
}

/* The loop of this state: created on first use, kept in the registry so
** that mastra_step() and mastra_fd() find it. Leaves it on the stack. */
static void push_loop(lua_State *L) {
  mastra__loop **box;
  if (lua_getfield(L, LUA_REGISTRYINDEX, LOOP_KEY) == LUA_TUSERDATA) return;
  lua_pop(L, 1);
  box = (mastra__loop **)lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, LOOP_MT);
  *box = mastra__loop_new();
  if (*box == NULL) luaL_error(L, "mastra: cannot create the event loop");
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, LOOP_KEY);
}

MASTRA_API int luaopen_mastra_core(lua_State *L) {
  luaL_checkversion(L);
  mastra__raise_nofile(); /* many sandboxes at once need many descriptors */
  mastra__createmeta(L, LOOP_MT, NULL, loop_gc, NULL);
  mastra__createmeta(L, TIMER_MT, timer_meth, timer_close, NULL);
  mastra__createmeta(L, PROC_MT, proc_meth, proc_close, proc_tostring);
  mastra__createmeta(L, LOCK_MT, lock_meth, lock_close, NULL);
  luaL_newlibtable(L, core_funcs);
  push_loop(L);
  luaL_setfuncs(L, core_funcs, 1);
  push_loop(L);
  mastra__open_net(L); /* http, websocket: src/lnet.c */
  mastra__open_json(L);
  mastra__open_regex(L); /* src/lregex.c */
  mastra__open_fs(L); /* fs*: src/lfs.c */
  lua_pushliteral(L, "mastra.core");
  lua_setfield(L, -2, "_NAME");
  lua_pushliteral(L, MASTRA_VERSION_STRING);
  lua_setfield(L, -2, "_VERSION");
  return 1;
}
