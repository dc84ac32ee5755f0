/*
** mastra-lua: the REPL (-i, or no script on a terminal), lua.c's with tasks.
**
** Each line is compiled as lua.c does ("return " .. line first, so that an
** expression prints its values; a line that ends before its statement does
** asks for more with _PROMPT2), then runs as a task of its own, waited for
** while the loop runs: a line can call sb:executeCommand and print what it
** returns, and the tasks spawned by earlier lines go on. While the REPL
** waits for input it waits on stdin and on the loop's descriptor together
** (poll of mastra_fd, with mastra_timeout) and steps the loop, so the
** tasks keep running between lines. There is no line editing beyond the
** terminal's own.
**
** Ctrl-C (SIGINT) cancels the running tasks (the line's and the others)
** and comes back to the prompt; SIGTERM and SIGHUP end the REPL (the
** caller exits with 128 + the signal after the teardown). At the end of
** the input the REPL waits for the tasks that are still running, as the
** runner does after a script.
*/
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "mastra.h"
#include "repl.h"
#include "runner.h"

#define EOFMARK "<eof>"
#define MARKLEN (sizeof(EOFMARK) / sizeof(char) - 1)
#define READ_CHUNK 4096

/* what read_line returns besides LUA_OK */
#define LINE_EOF (-1)
#define LINE_SIGNAL (-2)

/* bytes read from stdin and not yet handed out as lines */
static struct {
  char *buf;
  size_t len, cap;
  int eof;
} in;

/* the error of a task nobody waited for, raised by mastra_step */
static void step_loop(lua_State *L, int timeout_ms) {
  if (mastra_step(L, timeout_ms) == MASTRA_ELUA) mr_report(L, LUA_ERRRUN);
}

/* Step the loop until stdin has something to read. */
static int wait_input(lua_State *L) {
  for (;;) {
    struct pollfd p[2];
    int n, timeout;
    if (mr_signal() != 0) return LINE_SIGNAL;
    timeout = mastra_timeout(L);
    p[0].fd = STDIN_FILENO;
    p[0].events = POLLIN;
    p[0].revents = 0;
    p[1].fd = mastra_fd(L);
    p[1].events = POLLIN;
    p[1].revents = 0;
    n = poll(p, 2, timeout < 0 ? -1 : timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      return LINE_EOF;
    }
    if (n == 0 || p[1].revents != 0) step_loop(L, 0);
    if (p[0].revents != 0) return LUA_OK;
  }
}

/* Print the prompt and push the next line of stdin (without its newline). */
static int read_line(lua_State *L, const char *prompt) {
  fputs(prompt, stdout);
  fflush(stdout);
  for (;;) {
    char *nl = in.len > 0 ? memchr(in.buf, '\n', in.len) : NULL;
    ssize_t k;
    int r;
    if (nl != NULL || (in.eof && in.len > 0)) {
      size_t n = nl != NULL ? (size_t)(nl - in.buf) : in.len;
      size_t used = nl != NULL ? n + 1 : n;
      lua_pushlstring(L, in.buf, n);
      memmove(in.buf, in.buf + used, in.len - used);
      in.len -= used;
      return LUA_OK;
    }
    if (in.eof) return LINE_EOF;
    r = wait_input(L);
    if (r != LUA_OK) return r;
    if (in.cap - in.len < READ_CHUNK) {
      size_t cap = in.cap * 2 + READ_CHUNK;
      char *b = realloc(in.buf, cap);
      if (b == NULL) luaL_error(L, "not enough memory for the input line");
      in.buf = b;
      in.cap = cap;
    }
    k = read(STDIN_FILENO, in.buf + in.len, READ_CHUNK);
    if (k > 0) in.len += (size_t)k;
    else if (k == 0 || (errno != EINTR && errno != EAGAIN)) in.eof = 1;
  }
}

static const char *get_prompt(lua_State *L, int firstline) {
  if (lua_getglobal(L, firstline ? "_PROMPT" : "_PROMPT2") == LUA_TNIL)
    return firstline ? "> " : ">> ";
  return luaL_tolstring(L, -1, NULL);
}

/* Push a line, as lua.c's pushline: '=' at the start means 'return '. */
static int push_line(lua_State *L, int firstline) {
  int top = lua_gettop(L), r;
  const char *prompt = get_prompt(L, firstline);
  r = read_line(L, prompt);
  if (r != LUA_OK) {
    lua_settop(L, top);
    return r;
  }
  lua_remove(L, top + 1); /* the prompt (and its tostring) */
  if (lua_gettop(L) > top + 1) lua_remove(L, top + 1);
  if (firstline && lua_tostring(L, -1)[0] == '=') {
    lua_pushfstring(L, "return %s", lua_tostring(L, -1) + 1);
    lua_remove(L, -2);
  }
  return LUA_OK;
}

static int incomplete(lua_State *L, int status) {
  if (status == LUA_ERRSYNTAX) {
    size_t lmsg;
    const char *msg = lua_tolstring(L, -1, &lmsg);
    if (lmsg >= MARKLEN && strcmp(msg + lmsg - MARKLEN, EOFMARK) == 0) {
      lua_pop(L, 1);
      return 1;
    }
  }
  return 0;
}

/* "return " .. line: an expression prints its values */
static int add_return(lua_State *L) {
  const char *line = lua_tostring(L, -1);
  const char *retline = lua_pushfstring(L, "return %s;", line);
  int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");
  if (status == LUA_OK) lua_remove(L, -2);
  else lua_pop(L, 2);
  return status;
}

/* Read more lines while the chunk is incomplete. */
static int multiline(lua_State *L) {
  for (;;) {
    size_t len;
    const char *line = lua_tolstring(L, 1, &len);
    int status = luaL_loadbuffer(L, line, len, "=stdin"), r;
    if (!incomplete(L, status)) return status;
    r = push_line(L, 0);
    if (r != LUA_OK) return r;
    lua_pushliteral(L, "\n");
    lua_insert(L, -2);
    lua_concat(L, 3);
  }
}

/* Leave the compiled chunk (or an error message) on the stack; LINE_EOF or
** LINE_SIGNAL when there is no line. */
static int load_line(lua_State *L) {
  int status;
  lua_settop(L, 0);
  status = push_line(L, 1);
  if (status != LUA_OK) return status;
  if ((status = add_return(L)) != LUA_OK) status = multiline(L);
  if (status == LINE_EOF || status == LINE_SIGNAL) return status;
  lua_remove(L, 1); /* the line */
  return status;
}

/* print the values on the stack, as lua.c's l_print */
static void print_values(lua_State *L) {
  int n = lua_gettop(L);
  if (n > 0) {
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    lua_getglobal(L, "print");
    lua_insert(L, 1);
    if (lua_pcall(L, n, 0, 0) != LUA_OK)
      mr_message(lua_pushfstring(L, "error calling 'print' (%s)", lua_tostring(L, -1)));
  }
}

/* A stopping signal arrived: SIGINT comes back to the prompt (the step
** cancels the tasks); returns the signal that ends the REPL, or 0. */
static int handle_signal(lua_State *L) {
  int sig = mr_signal();
  if (sig == 0 || sig != SIGINT) return sig;
  step_loop(L, 0);
  mr_rearm_signals();
  return 0;
}

int mr_repl(lua_State *L) {
  const char *oldprogname = mr_progname;
  int status, sig = 0;
  mr_progname = NULL;
  while ((status = load_line(L)) != LINE_EOF) {
    if (status == LINE_SIGNAL) {
      fputc('\n', stdout);
      fflush(stdout);
    } else {
      if (status == LUA_OK) status = mr_run_task(L, 0, LUA_MULTRET);
      if (status == LUA_OK) print_values(L);
      else mr_report(L, status);
    }
    lua_settop(L, 0);
    if ((sig = handle_signal(L)) != 0) break;
  }
  lua_settop(L, 0);
  if (sig == 0) {
    fputc('\n', stdout);
    fflush(stdout);
    /* the end of the input: wait for the tasks still running */
    for (;;) {
      int n = mastra_step(L, -1);
      if (n == MASTRA_ELUA) mr_report(L, LUA_ERRRUN);
      else if (n <= 0) break;
      if ((sig = handle_signal(L)) != 0) break;
    }
  }
  free(in.buf);
  in.buf = NULL;
  in.len = in.cap = 0;
  mr_progname = oldprogname;
  return sig;
}
