/*
** mastra.core: the retained output of a stream (src/core/retained.h; the
** Lua side is lua/mastra/output.lua).
**
**   core.retained(max)  -> a buffer that keeps the newest max bytes (an
**                          integer >= 0, or math.huge: everything)
**   buf:append(s)       -> the bytes dropped so far; raises when out of
**                          memory (s is then counted as dropped)
**   buf:text()          -> the retained bytes, as one string
**   buf:size()          -> how many bytes are retained
**   buf:dropped()       -> how many bytes were dropped, oldest first
**   buf:capacity()      -> the size of its block
**   buf:free()          -> frees the block; the buffer is empty afterwards
**                          (also __gc and __close)
*/
#include <math.h>
#include <stdint.h>

#include <lauxlib.h>
#include <lua.h>

#include "lmastra.h"
#include "retained.h"

#define RETAINED_MT "mastra.core.retained"

static mastra__retained *checkbuf(lua_State *L) {
  return (mastra__retained *)luaL_checkudata(L, 1, RETAINED_MT);
}

static int core_retained(lua_State *L) {
  mastra__retained *r;
  size_t max = SIZE_MAX;
  if (!(lua_type(L, 1) == LUA_TNUMBER && lua_tonumber(L, 1) == HUGE_VAL)) {
    lua_Integer n = luaL_checkinteger(L, 1);
    luaL_argcheck(L, n >= 0, 1, "must be 0 or more, or math.huge");
    if ((lua_Unsigned)n < SIZE_MAX) max = (size_t)n;
  }
  r = (mastra__retained *)lua_newuserdatauv(L, sizeof *r, 0);
  mastra__retained_init(r, max);
  luaL_setmetatable(L, RETAINED_MT);
  return 1;
}

static int buf_append(lua_State *L) {
  mastra__retained *r = checkbuf(L);
  size_t n;
  const char *s = luaL_checklstring(L, 2, &n);
  if (mastra__retained_append(r, s, n) < 0)
    return luaL_error(L, "not enough memory to keep %I more bytes of output"
                      " (pass maxRetainedBytes to keep fewer)",
                      (lua_Integer)n);
  lua_pushinteger(L, (lua_Integer)r->dropped);
  return 1;
}

static int buf_text(lua_State *L) {
  mastra__retained *r = checkbuf(L);
  lua_pushlstring(L, r->len > 0 ? r->data + r->start : "", r->len);
  return 1;
}

static int buf_size(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)checkbuf(L)->len);
  return 1;
}

static int buf_dropped(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)checkbuf(L)->dropped);
  return 1;
}

static int buf_capacity(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)checkbuf(L)->cap);
  return 1;
}

static int buf_free(lua_State *L) {
  mastra__retained_free(checkbuf(L));
  return 0;
}

int mastra__open_retained(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"retained", core_retained},
    {NULL, NULL}
  };
  static const luaL_Reg meth[] = {
    {"append", buf_append},
    {"text", buf_text},
    {"size", buf_size},
    {"dropped", buf_dropped},
    {"capacity", buf_capacity},
    {"free", buf_free},
    {NULL, NULL}
  };
  mastra__createmeta(L, RETAINED_MT, meth, buf_free, NULL);
  lua_settop(L, 1);
  luaL_setfuncs(L, funcs, 0);
  return 0;
}
