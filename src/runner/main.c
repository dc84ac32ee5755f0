/*
** mastra-lua: run Lua with the mastra runtime, in the shape of lua.c (its
** options, its two passes over them, its `arg` table, its messages and exit
** codes), with tasks: every chunk it runs (LUA_INIT, -e, -l, the script)
** runs as the main task of mastra.run, so blocking calls at the top level
** yield to the event loop, and the runner waits for the tasks it spawned.
**
**   mastra-lua [options] [script [args]]
**     -e stat   run 'stat'          -i        the REPL after the rest
**     -l mod    require 'mod' into global 'mod' (-l g=mod: into 'g')
**     -v        print the version   -E        ignore LUA_INIT, LUA_PATH...
**     -W        turn warnings on    -h, --help  print the usage
**     --env-file FILE, --no-env-file: which .env file to read (dotenv.lua)
**     --        stop handling options   -   run stdin
** With no script and no -e or -v: the REPL on a terminal, else stdin.
**
** Exit status: 0, 1 after an uncaught error (message and traceback on
** stderr), 128 + the signal after SIGINT (130), SIGTERM (143) or SIGHUP
** (129): tasks cancelled, the teardown queue drained (at most
** TEARDOWN_DEADLINE_MS, lua/mastra/task/teardown.lua), child processes killed and
** reaped. A second such signal ends the process at once (run.c).
*/
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "mastra.h"
#include "repl.h"
#include "runner.h"

/* what collectargs finds */
#define has_error 1 /* a bad option */
#define has_i 2     /* -i */
#define has_v 4     /* -v */
#define has_e 8     /* -e */
#define has_E 16    /* -E */
#define has_h 32    /* -h, --help */

#define LUA_INITVARVERSION "LUA_INIT_5_4"

static const char *env_file = NULL; /* --env-file */
static int no_env_file = 0;         /* --no-env-file */

static void print_usage(FILE *f, const char *badoption) {
  if (badoption != NULL) {
    if (badoption[1] == 'e' || badoption[1] == 'l' || strcmp(badoption, "--env-file") == 0)
      fprintf(f, "%s: '%s' needs argument\n", mr_progname, badoption);
    else
      fprintf(f, "%s: unrecognized option '%s'\n", mr_progname, badoption);
  }
  fprintf(f,
          "usage: %s [options] [script [args]]\n"
          "Available options are:\n"
          "  -e CODE   run the string 'CODE' (as a task)\n"
          "  -i        enter interactive mode after running 'script'\n"
          "  -l mod    require library 'mod' into global 'mod'\n"
          "  -l g=mod  require library 'mod' into global 'g'\n"
          "  -v        show version information\n"
          "  -E        ignore environment variables (LUA_INIT, LUA_PATH, ...)\n"
          "  -W        turn warnings on\n"
          "  --env-file FILE  read FILE instead of ./.env\n"
          "  --no-env-file    read no .env file\n"
          "  -h, --help       show this help\n"
          "  --        stop handling options\n"
          "  -         stop handling options and run stdin\n",
          mr_progname);
  fflush(f);
}

static void print_version(void) {
  printf("mastra-lua %s (%s)\n", mastra_version(), LUA_RELEASE);
  fflush(stdout);
}

/* First pass: which options there are, and where the script is (0: none).
** Only checks them; nothing runs yet. */
static int collectargs(char **argv, int *first) {
  int args = 0, i;
  for (i = 1; argv[i] != NULL; i++) {
    *first = i;
    if (argv[i][0] != '-') return args; /* the script */
    switch (argv[i][1]) {
    case '-':
      if (argv[i][2] == '\0') { /* -- */
        *first = i + 1;
        return argv[i + 1] != NULL ? args : (*first = 0, args);
      }
      if (strcmp(argv[i], "--help") == 0) args |= has_h;
      else if (strcmp(argv[i], "--no-env-file") == 0) no_env_file = 1;
      else if (strcmp(argv[i], "--env-file") == 0) {
        if (argv[i + 1] == NULL) return has_error;
        env_file = argv[++i];
      } else {
        return has_error;
      }
      break;
    case '\0': /* - : stdin */
      return args;
    case 'E':
      if (argv[i][2] != '\0') return has_error;
      args |= has_E;
      break;
    case 'W':
      if (argv[i][2] != '\0') return has_error;
      break;
    case 'h':
      if (argv[i][2] != '\0') return has_error;
      args |= has_h;
      break;
    case 'i':
      args |= has_i; /* -i implies -v */
      /* FALLTHROUGH */
    case 'v':
      if (argv[i][2] != '\0') return has_error;
      args |= has_v;
      break;
    case 'e':
      args |= has_e;
      /* FALLTHROUGH */
    case 'l':
      if (argv[i][2] == '\0') { /* the argument is the next one */
        i++;
        if (argv[i] == NULL || argv[i][0] == '-') return has_error;
      }
      break;
    default:
      return has_error;
    }
  }
  *first = 0; /* no script */
  return args;
}

/* arg as in lua.c: arg[0] = the script, arg[-n..-1] what came before it,
** created before anything runs (-e sees it) */
static void createargtable(lua_State *L, char **argv, int argc, int script) {
  int i;
  /* no script: arg[0] is the runner, and the options follow it */
  lua_createtable(L, argc - script > 0 ? argc - script - 1 : 0, script + 1);
  for (i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i - script);
  }
  lua_setglobal(L, "arg");
}

/* the chunk on top runs as the main task */
static int dochunk(lua_State *L, int status) {
  if (status == LUA_OK) status = mr_run(L, 0, 0);
  return status;
}

static int dostring(lua_State *L, const char *s, const char *name) {
  return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

/* -l [g=]mod: g = require(mod), as a task; without '=', a '-suffix' of the
** name is not part of the global's name (lua.c's LUA_IGMARK) */
static int dolibrary(lua_State *L, const char *spec) {
  const char *eq = strchr(spec, '=');
  int status;
  if (eq != NULL) {
    lua_pushlstring(L, spec, (size_t)(eq - spec)); /* global name */
    lua_pushstring(L, eq + 1);
  } else {
    const char *dash = strchr(spec, '-');
    lua_pushlstring(L, spec, dash != NULL ? (size_t)(dash - spec) : strlen(spec));
    lua_pushstring(L, spec);
  }
  lua_getglobal(L, "require");
  lua_insert(L, -2);
  status = mr_run(L, 1, 1);
  if (status == LUA_OK) lua_setglobal(L, lua_tostring(L, -2));
  if (status == LUA_OK) lua_pop(L, 1);
  else lua_remove(L, -2); /* the global's name: the error stays on top */
  return status;
}

/* LUA_INIT_5_4, else LUA_INIT: "@file" runs the file, anything else is code */
static int handle_luainit(lua_State *L) {
  const char *name = "=" LUA_INITVARVERSION;
  const char *init = getenv(name + 1);
  if (init == NULL) {
    name = "=LUA_INIT";
    init = getenv(name + 1);
  }
  if (init == NULL) return LUA_OK;
  if (init[0] == '@') return dochunk(L, luaL_loadfile(L, init + 1));
  return dostring(L, init, name);
}

/* Second pass: -e, -l and -W in their order. */
static int runargs(lua_State *L, char **argv, int n) {
  int i;
  for (i = 1; i < n; i++) {
    int option = argv[i][1], status;
    const char *extra;
    if (strcmp(argv[i], "--env-file") == 0) {
      i++;
      continue;
    }
    switch (option) {
    case 'e':
    case 'l':
      extra = argv[i] + 2;
      if (*extra == '\0') extra = argv[++i];
      status = option == 'e' ? dostring(L, extra, "=(command line)") : dolibrary(L, extra);
      if (status != LUA_OK) return status;
      break;
    case 'W':
      lua_warning(L, "@on", 0);
      break;
    default:
      break;
    }
  }
  return LUA_OK;
}

/* the script (NULL: stdin) with the arguments after it, as the main task */
static int handle_script(lua_State *L, char **argv) {
  const char *fname = argv[0];
  int status, n = 0;
  if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0) fname = NULL;
  status = luaL_loadfile(L, fname);
  if (status == LUA_OK) {
    while (argv[n + 1] != NULL) n++;
    luaL_checkstack(L, n + 3, "too many arguments to the script");
    for (n = 1; argv[n] != NULL; n++) lua_pushstring(L, argv[n]);
    status = mr_run(L, n - 1, 0);
  }
  return status;
}

/* .env: --env-file, --no-env-file, else MASTRA_ENV_FILE or ./.env */
static int load_env(lua_State *L) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "mastra.dotenv");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "load");
  lua_remove(L, -2);
  if (no_env_file) lua_pushboolean(L, 0);
  else if (env_file != NULL) lua_pushstring(L, env_file);
  else lua_pushnil(L);
  return lua_pcall(L, 1, 0, 0);
}

/* The exit status after status, with the report of an error on top. */
static int exit_code(lua_State *L, int status) {
  if (status == LUA_OK) return EXIT_SUCCESS;
  if (mr_is_interrupt(L, -1)) {
    int sig = mr_signal() != 0 ? mr_signal() : SIGINT;
    const char *name = sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGINT";
    lua_pop(L, 1);
    mr_message(lua_pushfstring(L, "interrupted (%s)", name));
    return EXIT_SIGNAL_BASE + sig;
  }
  mr_report(L, status);
  return EXIT_FAILURE;
}

/* pmain(argc, argv) -> exit status */
static int pmain(lua_State *L) {
  int argc = (int)lua_tointeger(L, 1);
  char **argv = (char **)lua_touserdata(L, 2);
  int script = 0, status, sig;
  int args = collectargs(argv, &script);
  int optlim = script > 0 ? script : argc;
  luaL_checkversion(L);
  if (args == has_error) {
    print_usage(stderr, argv[script]);
    lua_pushinteger(L, EXIT_FAILURE);
    return 1;
  }
  if (args & has_h) {
    print_usage(stdout, NULL);
    lua_pushinteger(L, EXIT_SUCCESS);
    return 1;
  }
  if (args & has_E) { /* luaL_openlibs then ignores LUA_PATH and LUA_CPATH */
    lua_pushboolean(L, 1);
    lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
  }
  luaL_openlibs(L);
  mastra_openlibs(L);
  createargtable(L, argv, argc, script);
  lua_gc(L, LUA_GCRESTART);
  lua_gc(L, LUA_GCGEN, 0, 0);
  mr_init(L);
  status = load_env(L);
  if (status == LUA_OK && (args & has_v)) print_version();
  if (status == LUA_OK && !(args & has_E)) status = handle_luainit(L);
  if (status == LUA_OK) status = runargs(L, argv, optlim);
  if (status == LUA_OK && script > 0) status = handle_script(L, argv + script);
  if (status != LUA_OK) {
    lua_pushinteger(L, exit_code(L, status));
    return 1;
  }
  sig = 0;
  if (args & has_i) {
    sig = mr_repl(L);
  } else if (script == 0 && !(args & (has_e | has_v))) {
    if (isatty(STDIN_FILENO)) {
      print_version();
      sig = mr_repl(L);
    } else {
      status = dochunk(L, luaL_loadfile(L, NULL));
      lua_pushinteger(L, exit_code(L, status));
      return 1;
    }
  }
  if (sig != 0) {
    const char *name = sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGINT";
    mr_message(lua_pushfstring(L, "interrupted (%s)", name));
    lua_pushinteger(L, EXIT_SIGNAL_BASE + sig);
    return 1;
  }
  lua_pushinteger(L, EXIT_SUCCESS);
  return 1;
}

int main(int argc, char **argv) {
  int status, code;
  lua_State *L = luaL_newstate();
  if (argv[0] && argv[0][0]) mr_progname = argv[0];
  if (L == NULL) {
    fprintf(stderr, "%s: cannot create the Lua state: not enough memory\n", mr_progname);
    return EXIT_FAILURE;
  }
  lua_gc(L, LUA_GCSTOP);
  lua_pushcfunction(L, pmain);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  status = lua_pcall(L, 2, 1, 0);
  if (status != LUA_OK) {
    fprintf(stderr, "%s: %s\n", mr_progname, lua_tostring(L, -1));
    code = EXIT_FAILURE;
  } else {
    code = (int)lua_tointeger(L, -1);
  }
  /* the scheduler's sentinel drains what teardown is left, then the loop
  ** kills and reaps what is left of the child processes */
  lua_close(L);
  return code;
}
