/*
** mastra-lua: run a Lua script with the mastra runtime, in the shape of
** lua.c. The main chunk runs as a task (mastra.run), so blocking calls at
** the top level yield to the event loop and spawned tasks progress.
**
**   mastra-lua [options] [script [args]]
**     -e CODE   run CODE (as a task) before the script
**     -v        print the version
**     -h        print this help
**
** Exit status: 0, 1 after an uncaught error (message and traceback on
** stderr), 128 + the signal after SIGINT (130), SIGTERM (143) or SIGHUP
** (129): tasks cancelled, the teardown queue drained (at most
** TEARDOWN_DEADLINE_MS, lua/mastra/task.lua), child processes killed and
** reaped. A second such signal ends the process at once.
*/
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "mastra.h"

#define EXIT_SIGNAL_BASE 128 /* the shell's convention: 130 after SIGINT */

static const char *progname = "mastra-lua";
static mastra_loop *volatile g_loop = NULL;
static volatile sig_atomic_t g_signal = 0; /* the first stopping signal */

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define NSTOP ((int)(sizeof stop_signals / sizeof stop_signals[0]))

/* SIGINT, SIGTERM, SIGHUP: cancel the tasks and tear down (the scheduler
** does it, woken through the loop's eventfd). A second one of any of them
** ends the process at once: the default action is back. */
static void on_stop_signal(int sig) {
  int i;
  if (g_signal == 0) g_signal = sig;
  for (i = 0; i < NSTOP; i++) signal(stop_signals[i], SIG_DFL);
  mastra_interrupt(g_loop);
}

static void catch_stop_signals(void) {
  struct sigaction sa;
  int i;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  for (i = 0; i < NSTOP; i++) sigaddset(&sa.sa_mask, stop_signals[i]);
  for (i = 0; i < NSTOP; i++) sigaction(stop_signals[i], &sa, NULL);
}

static const char *signal_name(int sig) {
  switch (sig) {
  case SIGTERM: return "SIGTERM";
  case SIGHUP: return "SIGHUP";
  default: return "SIGINT";
  }
}

static void print_usage(FILE *f) {
  fprintf(f,
          "usage: %s [options] [script [args]]\n"
          "  -e CODE  run CODE before the script\n"
          "  -v       print the version and exit\n"
          "  -h       print this help and exit\n"
          "  --       stop handling options\n",
          progname);
}

/* Message and traceback of an error value, as text (like lua.c msghandler,
** but the traceback is the task's, which the scheduler attached). */
static const char *error_text(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_type(L, idx) == LUA_TTABLE) {
    luaL_tolstring(L, idx, NULL);
    if (lua_getfield(L, idx, "traceback") == LUA_TSTRING) {
      lua_pushliteral(L, "\n");
      lua_insert(L, -2);
      lua_concat(L, 3);
    } else {
      lua_pop(L, 1);
    }
    return lua_tostring(L, -1);
  }
  return luaL_tolstring(L, idx, NULL);
}

static int is_interrupt(lua_State *L, int idx) {
  int yes = 0;
  if (lua_type(L, idx) == LUA_TTABLE) {
    lua_getfield(L, idx, "name");
    yes = lua_isstring(L, -1)
          && strcmp(lua_tostring(L, -1), "InterruptedError") == 0;
    lua_pop(L, 1);
  }
  return yes;
}

/* Run the function on top of the stack, with nargs arguments below it
** pushed after, as the main task: mastra.run(fn, ...). */
static int run_main(lua_State *L, int nargs) {
  int fn = lua_gettop(L) - nargs;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "mastra");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "run");
  lua_remove(L, -2);
  lua_insert(L, fn);
  if (g_loop == NULL) {
    g_loop = mastra_get_loop(L);
    catch_stop_signals();
  }
  return lua_pcall(L, nargs + 1, 0, 0);
}

/* arg table as in lua.c: arg[0] = script, arg[-n..-1] = what came before */
static void create_arg_table(lua_State *L, char **argv, int argc, int script) {
  int i;
  lua_createtable(L, argc - script - 1, script + 1);
  for (i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

/* pmain(argc, argv) -> exit status */
static int pmain(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  int i, script = 0, status = LUA_OK, nargs;
  luaL_openlibs(L);
  mastra_openlibs(L);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCGEN, 0, 0);

  /* options: -e runs at once (in order), -v, -h */
  for (i = 1; i < argc && status == LUA_OK; i++) {
    const char *a = argv[i];
    if (a[0] != '-' || strcmp(a, "-") == 0) break;
    if (strcmp(a, "--") == 0) { i++; break; }
    if (strcmp(a, "-v") == 0) {
      printf("mastra-lua %s (%s)\n", mastra_version(), LUA_RELEASE);
      lua_pushinteger(L, EXIT_SUCCESS);
      return 1;
    }
    if (strcmp(a, "-h") == 0) {
      print_usage(stdout);
      lua_pushinteger(L, EXIT_SUCCESS);
      return 1;
    }
    if (strcmp(a, "-e") == 0) {
      const char *code = argv[i + 1];
      if (code == NULL) {
        fprintf(stderr, "%s: '-e' needs an argument\n", progname);
        print_usage(stderr);
        lua_pushinteger(L, EXIT_FAILURE);
        return 1;
      }
      i++;
      status = luaL_loadbuffer(L, code, strlen(code), "=(command line)");
      if (status == LUA_OK) status = run_main(L, 0);
      script = -1; /* something ran */
      continue;
    }
    fprintf(stderr, "%s: unrecognized option '%s'\n", progname, a);
    print_usage(stderr);
    lua_pushinteger(L, EXIT_FAILURE);
    return 1;
  }
  if (status == LUA_OK && i < argc) {
    script = i;
    create_arg_table(L, argv, argc, script);
    status = luaL_loadfile(L, strcmp(argv[script], "-") == 0 ? NULL
                                                             : argv[script]);
    if (status == LUA_OK) {
      nargs = argc - script - 1;
      luaL_checkstack(L, nargs, "too many arguments to the script");
      for (i = script + 1; i < argc; i++) lua_pushstring(L, argv[i]);
      status = run_main(L, nargs);
    }
  } else if (status == LUA_OK && script == 0) {
    print_usage(stderr);
    lua_pushinteger(L, EXIT_FAILURE);
    return 1;
  }
  if (status != LUA_OK) {
    int interrupted = is_interrupt(L, -1);
    const char *msg = error_text(L, -1);
    int sig = g_signal != 0 ? (int)g_signal : SIGINT;
    if (interrupted)
      fprintf(stderr, "%s: interrupted (%s)\n", progname, signal_name(sig));
    else
      fprintf(stderr, "%s: %s\n", progname, msg);
    fflush(stderr);
    lua_pushinteger(L, interrupted ? EXIT_SIGNAL_BASE + sig : EXIT_FAILURE);
    return 1;
  }
  lua_pushinteger(L, EXIT_SUCCESS);
  return 1;
}

int main(int argc, char **argv) {
  int status, code;
  lua_State *L = luaL_newstate();
  if (argv[0] && argv[0][0]) progname = argv[0];
  if (L == NULL) {
    fprintf(stderr, "%s: cannot create the Lua state: not enough memory\n",
            progname);
    return EXIT_FAILURE;
  }
  lua_gc(L, LUA_GCSTOP);
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  status = lua_pcall(L, 2, 1, 0);
  if (status != LUA_OK) {
    fprintf(stderr, "%s: %s\n", progname, lua_tostring(L, -1));
    code = EXIT_FAILURE;
  } else {
    code = (int)lua_tointeger(L, -1);
  }
  g_loop = NULL;
  /* the scheduler's sentinel drains what teardown is left, then the loop
  ** kills and reaps what is left of the child processes */
  lua_close(L);
  return code;
}
