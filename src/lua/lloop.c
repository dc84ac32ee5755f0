/*
** mastra.core: the loop and timers, for the scheduler of
** lua/mastra/task/scheduler.lua.
**
**   core.poll(timeout_ms, out) -> n, interrupted
**   core.alive()        -> armed timers and watched descriptors
**   core.nextTimeout()  -> ms until the loop has something to do, -1: never
**   core.now()          -> monotonic milliseconds, with a fractional part
**   core.timer(ms)      -> a one-shot timer: t:id(), t:close()
**
** Every function here is non-blocking except poll(). The scheduler turns
** the ids that poll() returns into task wake-ups. Nothing here calls Lua
** from a loop callback: callbacks queue ids, and poll() hands them over
** after the dispatch has returned.
*/
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lmastra.h"
#include "loop.h"
#include "util.h"

#define TIMER_MT "mastra.Timer"

typedef struct ltimer {
  mastra__timer t;
  uint64_t id;
  int closed;
} ltimer;

/* {====== the loop ====== */

/* poll(timeout_ms, out) -> n, interrupted: wait for I/O once, then store
** the signalled ids in out[1..n]. */
static int core_poll(lua_State *L) {
  mastra__loop *loop = mastra__checkloop(L);
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

static int core_alive(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)mastra__loop_alive(mastra__checkloop(L)));
  return 1;
}

static int core_next_timeout(lua_State *L) {
  lua_pushinteger(L, mastra__loop_next_timeout(mastra__checkloop(L)));
  return 1;
}

static int core_now(lua_State *L) {
  lua_pushnumber(L, (lua_Number)mastra__mono_msf());
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
  mastra__loop *loop = mastra__checkloop(L);
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

int mastra__open_loop(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"poll", core_poll},
    {"alive", core_alive},
    {"nextTimeout", core_next_timeout},
    {"now", core_now},
    {"timer", core_timer},
    {NULL, NULL}
  };
  static const luaL_Reg timer_meth[] = {
    {"id", timer_id},
    {"close", timer_close},
    {NULL, NULL}
  };
  mastra__createmeta(L, TIMER_MT, timer_meth, timer_close, NULL);
  lua_settop(L, 1);
  mastra__setfuncs_loop(L, funcs);
  return 0;
}
