/*
** mastra-lua: what main.c and repl.c share (run.c): the signals, the
** reports, and running Lua code as tasks.
*/
#ifndef MASTRA_RUNNER_H
#define MASTRA_RUNNER_H

#include <signal.h>

#include <lua.h>

#define EXIT_SIGNAL_BASE 128 /* the shell's convention: 130 after SIGINT */

/* the program name in messages; NULL in the REPL (as lua.c does) */
extern const char *mr_progname;

/* Load "mastra", keep mastra.run and the task helper, and catch SIGINT,
** SIGTERM and SIGHUP (sigaction). Raises a Lua error on failure. */
void mr_init(lua_State *L);

/* Catch the stopping signals again and forget the one that arrived (the
** REPL after a Ctrl-C). */
void mr_rearm_signals(void);

/* The first stopping signal that arrived since the last rearm, or 0. */
int mr_signal(void);

/* "progname: msg" (or msg alone when progname is NULL) on stderr */
void mr_message(const char *msg);

/* The text of the error value at idx, pushed: a string as it is, an object
** through its __tostring, else "(error object is a T value)" as lua.c says;
** a table's `traceback` field (the task's) follows on a line of its own. */
const char *mr_error_text(lua_State *L, int idx);

/* Whether the error value at idx is an InterruptedError (a stopping signal). */
int mr_is_interrupt(lua_State *L, int idx);

/* Print the error on top of the stack (if status is not LUA_OK) and pop
** it; returns status. */
int mr_report(lua_State *L, int status);

/* Call the function below its nargs arguments on top of the stack as the
** main task, mastra.run(fn, ...): the loop runs until every task has
** finished. Leaves nres results (or the error value); returns the status
** of lua_pcall. */
int mr_run(lua_State *L, int nargs, int nres);

/* The same as a task of its own that is waited for (driving the loop) while
** the tasks spawned before go on: a REPL line. After an interrupt, the
** cancelled task is waited for before the error comes back. */
int mr_run_task(lua_State *L, int nargs, int nres);

#endif
