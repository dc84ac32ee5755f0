/*
** A host that owns its frame loop and embeds the mastra runtime: the shape
** of a game engine or an editor. Each "frame" it does its own work, then
** gives mastra one non-blocking turn with mastra_step(L, 0). Between frames
** it sleeps in poll() on mastra_fd(), at most until mastra_timeout() or the
** next frame, whichever comes first.
**
**   build/embed_tick [script.lua]   (default: a small inline script)
*/
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "mastra.h"

#define FRAME_MS 16

static const char *default_script =
    "local mastra = require 'mastra'\n"
    "local dir = (os.getenv('TMPDIR') or '/tmp') .. '/mastra-embed-tick'\n"
    "local sb = mastra.LocalSandbox.new{ workingDirectory = dir }\n"
    "mastra.spawn(function()\n"
    "  local r = sb:executeCommand('sleep 0.1; echo', { 'hello from a task' })\n"
    "  io.write(r.stdout)\n"
    "  sb:destroy()\n"
    "end)\n";

/* The error on top of the stack, as text: failures are error objects
** (tables with __tostring), which lua_tostring would make NULL. */
static void report(lua_State *L) {
  fprintf(stderr, "embed_tick: %s\n", luaL_tolstring(L, -1, NULL));
  lua_pop(L, 2); /* the text and the error */
}

int main(int argc, char **argv) {
  lua_State *L = luaL_newstate();
  int frames = 0, live, status;
  if (L == NULL) return EXIT_FAILURE;
  luaL_openlibs(L);
  mastra_openlibs(L);
  status = argc > 1 ? luaL_dofile(L, argv[1])
                    : luaL_dostring(L, default_script);
  if (status != LUA_OK) {
    report(L);
    lua_close(L);
    return EXIT_FAILURE;
  }
  for (;;) {
    struct pollfd pfd;
    int wait = mastra_timeout(L);
    frames++; /* the host's own frame work would go here */
    live = mastra_step(L, 0);
    if (live < 0) {
      if (live == MASTRA_ELUA)
        report(L);
      else
        fprintf(stderr, "embed_tick: %s\n", mastra_strerror(live));
      lua_close(L);
      return EXIT_FAILURE;
    }
    if (live == 0) break;
    pfd.fd = mastra_fd(L);
    pfd.events = POLLIN;
    if (wait < 0 || wait > FRAME_MS) wait = FRAME_MS;
    poll(&pfd, 1, wait);
  }
  fprintf(stderr, "embed_tick: done after %d frames\n", frames);
  lua_close(L);
  return EXIT_SUCCESS;
}
