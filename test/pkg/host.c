/*
** An embedding host built against an installed mastra: with
** `pkg-config --cflags --libs mastra` or with find_package(mastra).
** It prints mastra._VERSION, the library's mastra_version(), and the word a
** task writes after a sleep driven by mastra_step().
*/
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <mastra.h>

static const char *script =
    "local mastra = require 'mastra'\n"
    "io.write('mastra ', mastra._VERSION, ' ')\n"
    "mastra.spawn(function() mastra.sleep(10); word = 'stepped' end)\n";

static int fail(lua_State *L, const char *what) {
  fprintf(stderr, "host: %s: %s\n", what, lua_tostring(L, -1));
  lua_close(L);
  return EXIT_FAILURE;
}

int main(void) {
  lua_State *L = luaL_newstate();
  int live;
  if (L == NULL) return EXIT_FAILURE;
  luaL_openlibs(L);
  mastra_openlibs(L);
  if (luaL_dostring(L, script) != LUA_OK) return fail(L, "script");
  while ((live = mastra_step(L, 100)) > 0) {
  }
  if (live < 0) {
    if (live == MASTRA_ELUA) return fail(L, "step");
    fprintf(stderr, "host: %s\n", mastra_strerror(live));
    lua_close(L);
    return EXIT_FAILURE;
  }
  lua_getglobal(L, "word");
  printf("%s %s\n", mastra_version(), lua_tostring(L, -1));
  lua_close(L);
  return EXIT_SUCCESS;
}
