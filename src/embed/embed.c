/*
** The embedding API (include/mastra.h).
*/
#include <lauxlib.h>
#include <lua.h>

#include "mastra.h"
#include "lmastra.h"
#include "loop.h"

MASTRA_API const char *mastra_version(void) { return MASTRA_VERSION_STRING; }

MASTRA_API const char *mastra_strerror(int code) {
  switch (code) {
  case MASTRA_OK: return "success";
  case MASTRA_ELUA: return "a Lua error (the error value is on the stack)";
  case MASTRA_ENOTLOADED: return "mastra is not loaded in this lua_State";
  default: return "unknown error code";
  }
}

/* package.preload loader for an embedded module; upvalue: its index */
static int load_embedded(lua_State *L) {
  const mastra__lua_module *m =
      &mastra__lua_modules[lua_tointeger(L, lua_upvalueindex(1))];
  if (luaL_loadbufferx(L, m->source, m->len, m->chunkname, "t") != LUA_OK)
    return lua_error(L);
  lua_pushstring(L, m->name);
  lua_call(L, 1, 1);
  return 1;
}

MASTRA_API void mastra_openlibs(lua_State *L) {
  int i;
  lua_pushboolean(L, 1); /* the host owns the signals (lmastra.h) */
  lua_setfield(L, LUA_REGISTRYINDEX, MASTRA__EMBEDDED_KEY);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, luaopen_mastra_core);
  lua_setfield(L, -2, "mastra.core");
  for (i = 0; mastra__lua_modules[i].name != NULL; i++) {
    lua_pushinteger(L, i);
    lua_pushcclosure(L, load_embedded, 1);
    lua_setfield(L, -2, mastra__lua_modules[i].name);
  }
  lua_pop(L, 1);
}

/* Push the scheduler function `name` of the loaded "mastra.task" module. */
static int push_task_fn(lua_State *L, const char *name) {
  if (mastra__lua_loop(L) == NULL) return 0;
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  lua_getfield(L, -1, "mastra.task");
  lua_remove(L, -2);
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    return 0;
  }
  lua_getfield(L, -1, name);
  lua_remove(L, -2);
  return 1;
}

MASTRA_API int mastra_step(lua_State *L, int timeout_ms) {
  int n;
  if (!push_task_fn(L, "step")) return MASTRA_ENOTLOADED;
  lua_pushinteger(L, timeout_ms);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) return MASTRA_ELUA;
  n = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return n;
}

MASTRA_API int mastra_fd(lua_State *L) {
  mastra__loop *loop = mastra__lua_loop(L);
  return loop == NULL ? MASTRA_ENOTLOADED : mastra__loop_fd(loop);
}

MASTRA_API int mastra_timeout(lua_State *L) {
  int t;
  if (!push_task_fn(L, "nextTimeout")) return -1;
  if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
    lua_pop(L, 1);
    return 0; /* let mastra_step report it */
  }
  t = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  return t;
}

MASTRA_API mastra_loop *mastra_get_loop(lua_State *L) {
  return mastra__lua_loop(L);
}

MASTRA_API void mastra_interrupt(mastra_loop *loop) {
  if (loop != NULL) mastra__loop_interrupt(loop);
}
