/* require "mastra_bench_clock": monotonic milliseconds as a float (ns
 * resolution), because mastra.now() counts whole milliseconds. Built by
 * bench/run; only the bench uses it. */
#include <lauxlib.h>
#include <lua.h>
#include <time.h>

static int clock_now(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushnumber(L, (lua_Number)ts.tv_sec * 1e3 + (lua_Number)ts.tv_nsec / 1e6);
  return 1;
}

int luaopen_mastra_bench_clock(lua_State *L) {
  lua_newtable(L);
  lua_pushcfunction(L, clock_now);
  lua_setfield(L, -2, "now");
  return 1;
}
