/*
** Declarations shared by the C files of the runtime (prefix mastra__).
*/
#ifndef MASTRA_LMASTRA_H
#define MASTRA_LMASTRA_H

#include <stddef.h>

#include <lauxlib.h>
#include <lua.h>

#include "loop.h"

/* The loop of L, or NULL if mastra.core was never opened in L. */
mastra__loop *mastra__lua_loop(lua_State *L);

/* Register the metatable `name` (liolib's createmeta shape): gc serves as
** __gc and __close, tostring (or NULL) as __tostring, meth (or NULL)
** becomes __index (lcore.c). */
void mastra__createmeta(lua_State *L, const char *name, const luaL_Reg *meth,
                        lua_CFunction gc, lua_CFunction tostring);

/* Add jsonDecode, jsonEncode, jsonArray and null to the module table on
** the top of the stack (ljson.c). */
void mastra__open_json(lua_State *L);

/* lnet.c: add http() and websocket() to the module table below the
** loop (mastra.Loop userdata) on the stack top; pops the loop, which
** becomes their upvalue. */
void mastra__open_net(lua_State *L);

/* lfs.c: add the fs* filesystem primitives to the module table on the
** top of the stack. */
void mastra__open_fs(lua_State *L);

/* lregex.c: add regexCompile and regexMatch (PCRE2) to the module
** table on the top of the stack. */
void mastra__open_regex(lua_State *L);

/* The Lua sources of the facade, compiled into the library
** (generated from lua/mastra/ by cmake/embed_lua.cmake). */
typedef struct mastra__lua_module {
  const char *name;      /* "mastra", "mastra.task", ... */
  const char *chunkname; /* "@lua/mastra/init.lua", ... */
  const char *source;
  size_t len;
} mastra__lua_module;

extern const mastra__lua_module mastra__lua_modules[];

#endif
