/*
** mastra-lua: the stopping signals, error reports, and Lua code run as
** tasks (runner.h).
**
** SIGINT, SIGTERM, SIGHUP (sigaction): the first one wakes the loop and
** makes the scheduler cancel the tasks (mastra_interrupt); the main task
** then ends with an InterruptedError, and mastra.run drains the teardown.
** The handler puts the default action back, so a second one ends the
** process at once; the REPL catches them again after a Ctrl-C.
*/
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "mastra.h"
#include "runner.h"

const char *mr_progname = "mastra-lua";

static mastra_loop *volatile g_loop = NULL;
static volatile sig_atomic_t g_signal = 0; /* the first stopping signal */
static int run_ref = LUA_NOREF;            /* mastra.run */
static int task_ref = LUA_NOREF;           /* the helper of mr_run_task */

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define NSTOP ((int)(sizeof stop_signals / sizeof stop_signals[0]))

static void on_stop_signal(int sig) {
  struct sigaction dfl;
  int i;
  if (g_signal == 0) g_signal = sig;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (i = 0; i < NSTOP; i++) sigaction(stop_signals[i], &dfl, NULL);
  mastra_interrupt(g_loop);
}

void mr_rearm_signals(void) {
  struct sigaction sa;
  int i;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (i = 0; i < NSTOP; i++) sigaddset(&sa.sa_mask, stop_signals[i]);
  g_signal = 0;
  for (i = 0; i < NSTOP; i++) sigaction(stop_signals[i], &sa, NULL);
}

int mr_signal(void) {
  return (int)g_signal;
}

/* mr_run_task's helper: spawn fn as a task and wait for it (outside any
** task, task:wait drives the loop, and the other tasks progress). An
** interrupt cancels every task: the line's task is waited for once more, so
** that its <close> variables have run when the error comes back. */
static const char task_helper[] =
  "local mastra = ...\n"
  "local spawn, pack, unpack = mastra.spawn, table.pack, table.unpack\n"
  "return function(fn, ...)\n"
  "  local t = spawn(fn, ...)\n"
  "  local r = pack(pcall(t.wait, t))\n"
  "  if not r[1] then\n"
  "    if not t:done() then pcall(t.wait, t) end\n"
  "    error(r[2], 0)\n"
  "  end\n"
  "  return unpack(r, 2, r.n)\n"
  "end\n";

void mr_init(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "mastra");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "run");
  run_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  if (luaL_loadbuffer(L, task_helper, sizeof task_helper - 1, "=mastra-lua") != LUA_OK)
    lua_error(L);
  lua_insert(L, -2); /* the helper's chunk, then mastra */
  lua_call(L, 1, 1);
  task_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  g_loop = mastra_get_loop(L);
  mr_rearm_signals();
}

void mr_message(const char *msg) {
  if (mr_progname) fprintf(stderr, "%s: ", mr_progname);
  fprintf(stderr, "%s\n", msg);
  fflush(stderr);
}

const char *mr_error_text(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TSTRING || lua_type(L, idx) == LUA_TNUMBER) {
    lua_pushstring(L, lua_tostring(L, idx));
    return lua_tostring(L, -1);
  }
  if (luaL_callmeta(L, idx, "__tostring")) {
    if (lua_type(L, -1) != LUA_TSTRING) {
      lua_pop(L, 1);
      lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, idx));
    }
  } else {
    lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, idx));
  }
  if (lua_type(L, idx) == LUA_TTABLE) {
    if (lua_getfield(L, idx, "traceback") == LUA_TSTRING) {
      lua_pushliteral(L, "\n");
      lua_insert(L, -2);
      lua_concat(L, 3);
    } else {
      lua_pop(L, 1);
    }
  }
  return lua_tostring(L, -1);
}

int mr_is_interrupt(lua_State *L, int idx) {
  int yes = 0;
  if (lua_type(L, idx) == LUA_TTABLE) {
    lua_getfield(L, idx, "name");
    yes = lua_type(L, -1) == LUA_TSTRING
          && strcmp(lua_tostring(L, -1), "InterruptedError") == 0;
    lua_pop(L, 1);
  }
  return yes;
}

int mr_report(lua_State *L, int status) {
  if (status != LUA_OK) {
    int top = lua_gettop(L);
    mr_message(mr_error_text(L, -1));
    lua_settop(L, top - 1);
  }
  return status;
}

static int call_through(lua_State *L, int ref, int nargs, int nres) {
  int fn = lua_gettop(L) - nargs;
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  lua_insert(L, fn);
  return lua_pcall(L, nargs + 1, nres, 0);
}

int mr_run(lua_State *L, int nargs, int nres) {
  return call_through(L, run_ref, nargs, nres);
}

int mr_run_task(lua_State *L, int nargs, int nres) {
  return call_through(L, task_ref, nargs, nres);
}
