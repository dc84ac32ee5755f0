/*
** libFuzzer driver for properties written in Lua: FUZZ_SCRIPT (a path, set
** by fuzz/CMakeLists.txt) returns a function that takes the input as a
** string and raises an error when the property does not hold. The state
** has the standard libraries and mastra (mastra_openlibs), as a script
** under mastra-lua has. An error raised by the property aborts, so
** libFuzzer keeps the input.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "mastra.h"

#ifndef FUZZ_SCRIPT
#error "FUZZ_SCRIPT must name the property script"
#endif

static lua_State *g_L;
static int g_prop = LUA_NOREF;

static int traceback(lua_State *L) {
  luaL_traceback(L, L, luaL_tolstring(L, 1, NULL), 1);
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (g_L == NULL) {
    g_L = luaL_newstate();
    if (g_L == NULL) abort();
    luaL_openlibs(g_L);
    mastra_openlibs(g_L);
    if (luaL_dofile(g_L, FUZZ_SCRIPT) != LUA_OK
        || lua_type(g_L, -1) != LUA_TFUNCTION) {
      fprintf(stderr, "%s: %s\n", FUZZ_SCRIPT,
              lua_isstring(g_L, -1) ? lua_tostring(g_L, -1)
                                    : "does not return a function");
      abort();
    }
    g_prop = luaL_ref(g_L, LUA_REGISTRYINDEX);
  }
  lua_pushcfunction(g_L, traceback);
  lua_rawgeti(g_L, LUA_REGISTRYINDEX, g_prop);
  lua_pushlstring(g_L, (const char *)data, size);
  if (lua_pcall(g_L, 1, 0, -3) != LUA_OK) {
    fprintf(stderr, "property failed: %s\n", lua_tostring(g_L, -1));
    abort();
  }
  lua_settop(g_L, 0);
  lua_gc(g_L, LUA_GCSTEP, 0);
  return 0;
}
