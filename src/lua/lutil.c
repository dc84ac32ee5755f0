/*
** The helpers the files of the mastra.core binding share (lmastra.h): the
** loop of a state (and the signals that interrupt it), metatables, and the
** failure triple nil, message, NAME.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "lmastra.h"
#include "loop.h"

#define LOOP_MT "mastra.Loop"
#define LOOP_KEY "mastra.core.loop" /* registry: the loop of this state */

/* {====== the loop of a state ====== */

/* SIGTERM and SIGHUP under a plain interpreter (lua5.4 with the module
** from require): the loop of the first such state is interrupted, so the
** scheduler cancels the tasks and the script ends with an InterruptedError,
** after which lua_close drains the teardown queue. The default action is
** put back at once: a second signal ends the process. */
static const int stop_signals[] = {SIGTERM, SIGHUP};
#define NSTOP ((int)(sizeof stop_signals / sizeof stop_signals[0]))
static mastra__loop *volatile stop_loop; /* the loop the handler wakes */

static void on_stop_signal(int sig) {
  mastra__loop *loop = stop_loop;
  int i;
  (void)sig;
  for (i = 0; i < NSTOP; i++) signal(stop_signals[i], SIG_DFL);
  if (loop != NULL) mastra__loop_interrupt(loop);
}

void mastra__catch_stop_signals(lua_State *L) {
  int i;
  if (stop_loop != NULL) return; /* one state per process has them */
  for (i = 0; i < NSTOP; i++) {
    struct sigaction old;
    if (sigaction(stop_signals[i], NULL, &old) < 0 || old.sa_handler != SIG_DFL
        || (old.sa_flags & SA_SIGINFO))
      return; /* somebody else handles it: leave both alone */
  }
  stop_loop = mastra__lua_loop(L);
  if (stop_loop == NULL) return;
  for (i = 0; i < NSTOP; i++) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(stop_signals[i], &sa, NULL);
  }
}

/* The loop goes away: its signals go back to their default action. */
static void release_stop_signals(mastra__loop *loop) {
  int i;
  if (stop_loop != loop) return;
  for (i = 0; i < NSTOP; i++) signal(stop_signals[i], SIG_DFL);
  stop_loop = NULL;
}

static int loop_gc(lua_State *L) {
  mastra__loop **box = (mastra__loop **)luaL_checkudata(L, 1, LOOP_MT);
  if (*box != NULL) {
    release_stop_signals(*box);
    mastra__loop_close(*box);
    mastra__loop_unref(*box);
    *box = NULL;
  }
  return 0;
}

/* The loop of this state: created on first use, kept in the registry so
** that mastra_step() and mastra_fd() find it. Leaves it on the stack. */
static void push_loop(lua_State *L) {
  mastra__loop **box;
  if (lua_getfield(L, LUA_REGISTRYINDEX, LOOP_KEY) == LUA_TUSERDATA) return;
  lua_pop(L, 1);
  mastra__createmeta(L, LOOP_MT, NULL, loop_gc, NULL);
  box = (mastra__loop **)lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL;
  luaL_setmetatable(L, LOOP_MT);
  *box = mastra__loop_new();
  if (*box == NULL) luaL_error(L, "mastra: cannot create the event loop");
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, LOOP_KEY);
}

mastra__loop *mastra__lua_loop(lua_State *L) {
  mastra__loop *loop = NULL;
  if (lua_getfield(L, LUA_REGISTRYINDEX, LOOP_KEY) == LUA_TUSERDATA) {
    mastra__loop **box = luaL_testudata(L, -1, LOOP_MT);
    if (box != NULL) loop = *box;
  }
  lua_pop(L, 1);
  return loop;
}

void mastra__setfuncs_loop(lua_State *L, const luaL_Reg *l) {
  push_loop(L);
  luaL_setfuncs(L, l, 1);
}

mastra__loop *mastra__checkloop(lua_State *L) {
  mastra__loop **box =
      (mastra__loop **)luaL_checkudata(L, lua_upvalueindex(1), LOOP_MT);
  if (*box == NULL) luaL_error(L, "mastra: the event loop is closed");
  return *box;
}

/* }====== */

void mastra__createmeta(lua_State *L, const char *name, const luaL_Reg *meth,
                        lua_CFunction gc, lua_CFunction tostring) {
  luaL_newmetatable(L, name);
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, gc);
  lua_setfield(L, -2, "__close");
  if (tostring != NULL) {
    lua_pushcfunction(L, tostring);
    lua_setfield(L, -2, "__tostring");
  }
  if (meth != NULL) {
    lua_newtable(L);
    luaL_setfuncs(L, meth, 0);
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);
}

/* {====== the failure triple ====== */

#define ERRNO_NAME(e) {e, #e}

static const struct {
  int code;
  const char *name;
} errno_names[] = {
  ERRNO_NAME(EPERM), ERRNO_NAME(ENOENT), ERRNO_NAME(ESRCH),
  ERRNO_NAME(EINTR), ERRNO_NAME(EIO), ERRNO_NAME(ENXIO),
  ERRNO_NAME(E2BIG), ERRNO_NAME(ENOEXEC), ERRNO_NAME(EBADF),
  ERRNO_NAME(ECHILD), ERRNO_NAME(EAGAIN), ERRNO_NAME(ENOMEM),
  ERRNO_NAME(EACCES), ERRNO_NAME(EFAULT), ERRNO_NAME(EBUSY),
  ERRNO_NAME(EEXIST), ERRNO_NAME(EXDEV), ERRNO_NAME(ENODEV),
  ERRNO_NAME(ENOTDIR), ERRNO_NAME(EISDIR), ERRNO_NAME(EINVAL),
  ERRNO_NAME(ENFILE), ERRNO_NAME(EMFILE), ERRNO_NAME(ETXTBSY),
  ERRNO_NAME(EFBIG), ERRNO_NAME(ENOSPC), ERRNO_NAME(ESPIPE),
  ERRNO_NAME(EROFS), ERRNO_NAME(EMLINK), ERRNO_NAME(EPIPE),
  ERRNO_NAME(ERANGE), ERRNO_NAME(EDEADLK), ERRNO_NAME(ENAMETOOLONG),
  ERRNO_NAME(ENOLCK), ERRNO_NAME(ENOSYS), ERRNO_NAME(ENOTEMPTY),
  ERRNO_NAME(ELOOP), ERRNO_NAME(EOVERFLOW), ERRNO_NAME(ENOTSUP),
  ERRNO_NAME(EADDRINUSE), ERRNO_NAME(EADDRNOTAVAIL),
  ERRNO_NAME(ENETUNREACH), ERRNO_NAME(ECONNABORTED),
  ERRNO_NAME(ECONNRESET), ERRNO_NAME(ENOTCONN), ERRNO_NAME(ETIMEDOUT),
  ERRNO_NAME(ECONNREFUSED), ERRNO_NAME(EHOSTUNREACH),
  ERRNO_NAME(EALREADY), ERRNO_NAME(EINPROGRESS), ERRNO_NAME(EDQUOT),
  ERRNO_NAME(ECANCELED),
};

const char *mastra__errno_name(int e) {
  size_t i;
  for (i = 0; i < sizeof errno_names / sizeof errno_names[0]; i++)
    if (errno_names[i].code == e) return errno_names[i].name;
  return "EUNKNOWN";
}

int mastra__pushfail(lua_State *L, const char *name, const char *fmt, ...) {
  va_list ap;
  luaL_pushfail(L);
  va_start(ap, fmt);
  lua_pushvfstring(L, fmt, ap);
  va_end(ap);
  lua_pushstring(L, name);
  return 3;
}

int mastra__pusherrno(lua_State *L, int e, const char *what) {
  return mastra__pushfail(L, mastra__errno_name(e), "%s: %s", what,
                          strerror(e));
}

/* }====== */
