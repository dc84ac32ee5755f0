/*
** mastra-lua: the REPL (repl.c).
*/
#ifndef MASTRA_REPL_H
#define MASTRA_REPL_H

#include <lua.h>

/* Read, run and print lines of stdin until its end or a SIGTERM/SIGHUP;
** returns that signal, or 0 at the end of the input (after the tasks still
** running have finished). */
int mr_repl(lua_State *L);

#endif
