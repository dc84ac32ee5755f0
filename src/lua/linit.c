/*
** The opener of mastra.core, in the shape of Lua's linit.c: one table of
** the binding's areas, each opened in turn into the module table. The
** areas (one file each) share only lmastra.h and the helpers of lutil.c;
** none calls another.
*/
#include <lauxlib.h>
#include <lua.h>

#include "lmastra.h"
#include "mastra.h"
#include "util.h"

static const luaL_Reg areas[] = {
  {"loop", mastra__open_loop},   /* poll, timers, now: lloop.c */
  {"proc", mastra__open_proc},   /* spawn, processes: lproc.c */
  {"sys", mastra__open_sys},     /* getcwd, lock, ids: lsys.c */
  {"fs", mastra__open_fs},       /* fs*: lfs.c */
  {"net", mastra__open_net},     /* http, websocket: lnet.c */
  {"json", mastra__open_json},   /* jsonDecode, jsonEncode: ljson.c */
  {"regex", mastra__open_regex}, /* regexCompile, regexMatch: lregex.c */
  {"retained", mastra__open_retained}, /* retained output: lretained.c */
  {NULL, NULL}
};

MASTRA_API int luaopen_mastra_core(lua_State *L) {
  const luaL_Reg *area;
  luaL_checkversion(L);
  mastra__raise_nofile(); /* many sandboxes at once need many descriptors */
  lua_newtable(L);
  for (area = areas; area->func != NULL; area++) {
    lua_pushcfunction(L, area->func);
    lua_pushvalue(L, -2);
    lua_call(L, 1, 0);
  }
  /* a host that embeds the library (mastra_openlibs) owns its signals; a
  ** plain interpreter gets SIGTERM and SIGHUP as the runner has them */
  if (lua_getfield(L, LUA_REGISTRYINDEX, MASTRA__EMBEDDED_KEY) == LUA_TNIL)
    mastra__catch_stop_signals(L);
  lua_pop(L, 1);
  lua_pushliteral(L, "mastra.core");
  lua_setfield(L, -2, "_NAME");
  lua_pushliteral(L, MASTRA_VERSION_STRING);
  lua_setfield(L, -2, "_VERSION");
  return 1;
}
