/*
** The private header of the mastra.core binding (src/lua/): what its
** files share. Every area file includes only this header of the binding
** and defines one opener; linit.c calls the openers, lutil.c defines the
** shared helpers.
*/
#ifndef MASTRA_LMASTRA_H
#define MASTRA_LMASTRA_H

#include <stddef.h>

#include <lauxlib.h>
#include <lua.h>

#include "loop.h"

/* {====== the openers (linit.c calls them) ======
** Each is a lua_CFunction called with the module table as argument 1: it
** registers its metatables and adds its functions to that table. */

int mastra__open_loop(lua_State *L);  /* lloop.c: poll, timers, now */
int mastra__open_proc(lua_State *L);  /* lproc.c: spawn, processes */
int mastra__open_sys(lua_State *L);   /* lsys.c: getcwd, lock, daemon... */
int mastra__open_fs(lua_State *L);    /* lfs.c: the fs* primitives */
int mastra__open_net(lua_State *L);   /* lnet.c: http, websocket */
int mastra__open_json(lua_State *L);  /* ljson.c: jsonDecode, ... */
int mastra__open_regex(lua_State *L); /* lregex.c: regexCompile, ... */
int mastra__open_retained(lua_State *L); /* lretained.c: retained output */

/* }====== */

/* {====== shared helpers (lutil.c) ====== */

/* The loop of L, or NULL if mastra.core was never opened in L. */
mastra__loop *mastra__lua_loop(lua_State *L);

/* Add the functions of l to the table on the top of the stack, each with
** the loop of L (created on first use) as its upvalue 1. */
void mastra__setfuncs_loop(lua_State *L, const luaL_Reg *l);

/* The loop in upvalue 1 of the running function; raises if it is closed. */
mastra__loop *mastra__checkloop(lua_State *L);

/* Under a plain interpreter: SIGTERM and SIGHUP interrupt the loop of L
** (once per process, and only while their action is the default one). */
void mastra__catch_stop_signals(lua_State *L);

/* registry key set by mastra_openlibs: the host owns the signals */
#define MASTRA__EMBEDDED_KEY "mastra.embedded"

/* Register the metatable `name` (liolib's createmeta shape): gc serves as
** __gc and __close, tostring (or NULL) as __tostring, meth (or NULL)
** becomes __index. */
void mastra__createmeta(lua_State *L, const char *name, const luaL_Reg *meth,
                        lua_CFunction gc, lua_CFunction tostring);

/* The failure convention of mastra.core (docs/core.md): push nil, the
** message, and NAME; return 3. mastra__pushfail takes the name and a
** lua_pushfstring format; mastra__pusherrno names errno e and says
** "<what>: <strerror(e)>". */
int mastra__pushfail(lua_State *L, const char *name, const char *fmt, ...);
int mastra__pusherrno(lua_State *L, int e, const char *what);

/* The symbol of errno e ("ENOENT", ...), or "EUNKNOWN". */
const char *mastra__errno_name(int e);

/* }====== */

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
