/*
** Tests of the embedding API (include/mastra.h), used the way a game engine
** would: its own lua_State, its own frame loop that polls mastra_fd() with
** mastra_timeout(), and mastra_step(L, 0) once per frame. No framework:
** the last line of stdout is "N passed, N failed".
*/
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "mastra.h"

#include "check.h"

/* {====== helpers ====== */

static char tmpdir[64];

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}


/* Children of this process (zombies included); with kill_them, SIGKILL and
** reap them (the safety net after a failed check). */
static int children(int kill_them) {
  DIR *d = opendir("/proc");
  struct dirent *e;
  int n = 0;
  if (d == NULL) return -1;
  while ((e = readdir(d)) != NULL) {
    char path[300], buf[1024], *rp, st;
    FILE *f;
    size_t len;
    int ppid;
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
    f = fopen(path, "r");
    if (f == NULL) continue;
    len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    rp = strrchr(buf, ')');
    if (rp == NULL || sscanf(rp + 1, " %c %d", &st, &ppid) != 2) continue;
    if (ppid != (int)getpid()) continue;
    n++;
    if (kill_them) {
      kill((pid_t)atoi(e->d_name), SIGKILL);
      waitpid((pid_t)atoi(e->d_name), NULL, 0);
    }
  }
  closedir(d);
  return n;
}

static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  if (L == NULL) abort();
  luaL_openlibs(L);
  mastra_openlibs(L);
  return L;
}

/* Run `code` with the temp dir as its argument; returns a registry
** reference to its first result, or LUA_NOREF after an error. */
static int run_chunk(lua_State *L, const char *code) {
  int top = lua_gettop(L);
  if (luaL_loadstring(L, code) != LUA_OK) {
    fprintf(stderr, "  load: %s\n", lua_tostring(L, -1));
    lua_settop(L, top);
    return LUA_NOREF;
  }
  lua_pushstring(L, tmpdir);
  if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
    fprintf(stderr, "  run: %s\n", luaL_tolstring(L, -1, NULL));
    lua_settop(L, top);
    return LUA_NOREF;
  }
  return luaL_ref(L, LUA_REGISTRYINDEX);
}

/* Field `name` of the table behind ref, as a string (NULL if not one);
** valid while the table holds it. */
static const char *field_str(lua_State *L, int ref, const char *name) {
  const char *s = NULL;
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  if (lua_istable(L, -1) && lua_getfield(L, -1, name) == LUA_TSTRING)
    s = lua_tostring(L, -1); /* the table keeps it alive */
  lua_settop(L, top);
  return s;
}

static lua_Integer field_int(lua_State *L, int ref, const char *name) {
  lua_Integer v = -9999;
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  if (lua_istable(L, -1)) {
    lua_getfield(L, -1, name);
    if (lua_isinteger(L, -1)) v = lua_tointeger(L, -1);
    else if (lua_isboolean(L, -1)) v = lua_toboolean(L, -1);
  }
  lua_settop(L, top);
  return v;
}

/* Frames in which poll() returned because mastra_fd() became readable. */
static int g_fd_wakes;

/* The host's frame loop: step without blocking, then sleep in poll() on
** mastra_fd() for at most mastra_timeout() ms (and at most 3 s, so that a
** lost wake-up shows as a slow run rather than a hang). Stops at 0 live
** tasks, an error (left on the stack, *rc set) or after ms. Returns the
** frame count. */
static int frame_loop(lua_State *L, int ms, int *rc) {
  uint64_t deadline = now_ms() + (uint64_t)ms;
  int frames = 0;
  g_fd_wakes = 0;
  for (;;) {
    struct pollfd pfd;
    int n = mastra_step(L, 0), t;
    frames++;
    *rc = n;
    if (n <= 0 || now_ms() >= deadline) break;
    pfd.fd = mastra_fd(L);
    pfd.events = POLLIN;
    pfd.revents = 0;
    t = mastra_timeout(L);
    if (t < 0 || t > 3000) t = 3000;
    if (poll(&pfd, 1, t) > 0 && (pfd.revents & POLLIN)) g_fd_wakes++;
  }
  return frames;
}

/* }====== */

static void test_version(void) {
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", MASTRA_VERSION_MAJOR,
           MASTRA_VERSION_MINOR, MASTRA_VERSION_PATCH);
  CHECK(mastra_version() != NULL);
  CHECK(strcmp(mastra_version(), MASTRA_VERSION_STRING) == 0);
  CHECK(strcmp(mastra_version(), want) == 0);
}

static void test_strerror(void) {
  const char *ok = mastra_strerror(MASTRA_OK);
  const char *elua = mastra_strerror(MASTRA_ELUA);
  const char *enl = mastra_strerror(MASTRA_ENOTLOADED);
  const char *unk = mastra_strerror(-12345);
  CHECK(ok != NULL && elua != NULL && enl != NULL && unk != NULL);
  if (ok == NULL || elua == NULL || enl == NULL || unk == NULL) return;
  CHECK(*ok && *elua && *enl && *unk);
  CHECK(strcmp(ok, elua) != 0 && strcmp(ok, enl) != 0
        && strcmp(elua, enl) != 0);
  CHECK(strcmp(unk, ok) != 0 && strcmp(unk, elua) != 0
        && strcmp(unk, enl) != 0);
  CHECK(strstr(elua, "Lua") != NULL);
  CHECK(strstr(enl, "not loaded") != NULL);
}

static void test_not_loaded(void) {
  lua_State *L = luaL_newstate();
  int top;
  if (!CHECK(L != NULL)) return;
  luaL_openlibs(L);
  top = lua_gettop(L);
  CHECK(mastra_step(L, 0) == MASTRA_ENOTLOADED);
  CHECK(mastra_step(L, -1) == MASTRA_ENOTLOADED); /* must not block */
  CHECK(mastra_fd(L) == MASTRA_ENOTLOADED);
  CHECK(mastra_timeout(L) == -1);
  CHECK(mastra_get_loop(L) == NULL);
  mastra_interrupt(NULL); /* harmless */
  CHECK(lua_gettop(L) == top);
  /* preloaded but never required: still not loaded */
  mastra_openlibs(L);
  CHECK(mastra_step(L, 0) == MASTRA_ENOTLOADED);
  CHECK(mastra_fd(L) == MASTRA_ENOTLOADED);
  CHECK(mastra_get_loop(L) == NULL);
  CHECK(lua_gettop(L) == top);
  lua_close(L);
}

static const char *tasks_chunk =
  "local dir = ...\n"
  "local mastra = require 'mastra'\n"
  "local res = { order = '' }\n"
  "local sb = mastra.LocalSandbox.new{ workingDirectory = dir }\n"
  "mastra.spawn(function()\n"
  "  mastra.sleep(40)\n"
  "  res.order = res.order .. 'b'\n"
  "  res.slept = true\n"
  "end)\n"
  "mastra.spawn(function()\n"
  "  mastra.sleep(5)\n"
  "  res.order = res.order .. 'a'\n"
  "end)\n"
  "mastra.spawn(function()\n"
  "  local r = sb:executeCommand('echo tick')\n"
  "  res.stdout, res.exitCode = r.stdout, r.exitCode\n"
  "  local p = sb:executeCommand('pwd')\n"
  "  res.pwd = p.stdout\n"
  "  res.inTask = mastra.currentTask() ~= nil\n"
  "end)\n"
  "local t = mastra.spawn(function(x, y) return x + y end, 2, 3)\n"
  "mastra.spawn(function() res.sum = t:wait() end)\n"
  "return res\n";

static void test_frame_loop(void) {
  lua_State *L = new_state();
  int ref, rc = -99, frames, top;
  uint64_t t0, dt;
  const char *s;
  char pwd[128];
  ref = run_chunk(L, tasks_chunk);
  if (!CHECK(ref != LUA_NOREF)) {
    lua_close(L);
    return;
  }
  CHECK(mastra_get_loop(L) != NULL);
  CHECK(mastra_fd(L) >= 0);
  CHECK(mastra_timeout(L) == 0); /* spawned tasks are ready */
  top = lua_gettop(L);
  t0 = now_ms();
  frames = frame_loop(L, 10000, &rc);
  dt = now_ms() - t0;
  if (!CHECK(rc == 0)) {
    if (rc == MASTRA_ELUA)
      fprintf(stderr, "  error: %s\n", luaL_tolstring(L, -1, NULL));
    lua_settop(L, top);
  }
  CHECK(lua_gettop(L) == top);
  /* mastra_timeout() bounded the sleeps, mastra_fd() woke the host for
  ** the process output: no 3 s poll ran out */
  if (!CHECK(dt >= 40 && dt < 2500))
    fprintf(stderr, "  %llu ms\n", (unsigned long long)dt);
  CHECK(g_fd_wakes > 0);
  /* the host slept in poll(): a handful of frames, not a busy loop */
  if (!CHECK(frames > 1 && frames < 300))
    fprintf(stderr, "  %d frames\n", frames);
  s = field_str(L, ref, "stdout");
  CHECK(s != NULL && strcmp(s, "tick\n") == 0);
  CHECK(field_int(L, ref, "exitCode") == 0);
  snprintf(pwd, sizeof pwd, "%s\n", tmpdir);
  s = field_str(L, ref, "pwd");
  CHECK(s != NULL && strcmp(s, pwd) == 0);
  CHECK(field_int(L, ref, "inTask") == 1);
  CHECK(field_int(L, ref, "slept") == 1);
  s = field_str(L, ref, "order");
  CHECK(s != NULL && strcmp(s, "ab") == 0);
  CHECK(field_int(L, ref, "sum") == 5);
  CHECK(mastra_timeout(L) == -1); /* nothing scheduled */
  CHECK(mastra_step(L, 0) == 0);
  CHECK(mastra_step(L, -1) == 0); /* nothing to wait for: returns */
  luaL_unref(L, LUA_REGISTRYINDEX, ref);
  lua_close(L);
}

/* mastra_step(L, -1) blocks until something happens. */
static void test_blocking_step(void) {
  lua_State *L = new_state();
  int ref, calls = 0, n = -99;
  uint64_t t0, dt;
  ref = run_chunk(L,
    "local mastra = require 'mastra'\n"
    "local res = {}\n"
    "mastra.spawn(function() mastra.sleep(60) res.done = true end)\n"
    "return res\n");
  if (!CHECK(ref != LUA_NOREF)) {
    lua_close(L);
    return;
  }
  t0 = now_ms();
  while (calls < 50) {
    n = mastra_step(L, -1);
    calls++;
    if (n <= 0) break;
  }
  dt = now_ms() - t0;
  CHECK(n == 0);
  CHECK(calls <= 3);
  CHECK(dt >= 60 && dt < 2000);
  CHECK(field_int(L, ref, "done") == 1);
  luaL_unref(L, LUA_REGISTRYINDEX, ref);
  lua_close(L);
}

static void test_unobserved_error(void) {
  lua_State *L = new_state();
  int ref, rc = -99, top;
  const char *msg;
  ref = run_chunk(L,
    "local mastra = require 'mastra'\n"
    "local res = {}\n"
    "mastra.spawn(function() mastra.sleep(1) error('boom from a task') end)\n"
    "mastra.spawn(function() mastra.sleep(20) res.other = true end)\n"
    "return res\n");
  if (!CHECK(ref != LUA_NOREF)) {
    lua_close(L);
    return;
  }
  top = lua_gettop(L);
  frame_loop(L, 5000, &rc);
  CHECK(rc == MASTRA_ELUA);
  if (rc == MASTRA_ELUA) {
    CHECK(lua_gettop(L) == top + 1); /* exactly the error value */
    msg = lua_tostring(L, -1);
    CHECK(msg != NULL && strstr(msg, "boom from a task") != NULL);
    CHECK(msg != NULL && strstr(msg, "stack traceback") != NULL);
    lua_settop(L, top);
  }
  /* reported once; the other task goes on */
  frame_loop(L, 5000, &rc);
  CHECK(rc == 0);
  CHECK(lua_gettop(L) == top);
  CHECK(field_int(L, ref, "other") == 1);
  luaL_unref(L, LUA_REGISTRYINDEX, ref);

  /* an error object comes back as the object */
  ref = run_chunk(L,
    "local mastra = require 'mastra'\n"
    "mastra.spawn(function()\n"
    "  error(mastra.errors.TimeoutError:new{ message = 'too late' })\n"
    "end)\n"
    "return true\n");
  CHECK(ref != LUA_NOREF);
  top = lua_gettop(L);
  frame_loop(L, 5000, &rc);
  CHECK(rc == MASTRA_ELUA);
  if (rc == MASTRA_ELUA) {
    CHECK(lua_gettop(L) == top + 1);
    CHECK(lua_istable(L, -1));
    msg = luaL_tolstring(L, -1, NULL);
    CHECK(strcmp(msg, "TimeoutError: too late") == 0);
    lua_settop(L, top);
  }
  CHECK(mastra_step(L, 0) == 0);
  luaL_unref(L, LUA_REGISTRYINDEX, ref);
  lua_close(L);
}

/* mastra_interrupt() (a host's ^C) cancels what the tasks wait for. */
static void test_interrupt(void) {
  lua_State *L = new_state();
  int ref, rc = -99;
  uint64_t t0;
  ref = run_chunk(L,
    "local mastra = require 'mastra'\n"
    "local res = {}\n"
    "mastra.spawn(function()\n"
    "  local ok, e = pcall(mastra.sleep, 20000)\n"
    "  res.woke = true\n"
    "  res.cancelled = not ok and mastra.errors.CancelledError:is(e)\n"
    "end)\n"
    "return res\n");
  if (!CHECK(ref != LUA_NOREF)) {
    lua_close(L);
    return;
  }
  CHECK(mastra_step(L, 0) == 1); /* the task sleeps */
  CHECK(mastra_timeout(L) > 1000);
  t0 = now_ms();
  mastra_interrupt(mastra_get_loop(L));
  CHECK(mastra_timeout(L) == 0);
  frame_loop(L, 5000, &rc);
  CHECK(rc == 0);
  CHECK(now_ms() - t0 < 2000);
  CHECK(field_int(L, ref, "woke") == 1);
  CHECK(field_int(L, ref, "cancelled") == 1);
  luaL_unref(L, LUA_REGISTRYINDEX, ref);
  lua_close(L);
}

/* Run fn in a child process with a 5 s alarm, so that a hang is one
** failed check rather than the end of the suite. Returns fn's result, or
** -1 if the child did not exit normally. */
static int forked(int (*fn)(void)) {
  int status;
  pid_t pid;
  fflush(NULL);
  pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    alarm(5);
    _exit(fn());
  }
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (WIFSIGNALED(status))
    fprintf(stderr, "  the child died of signal %d (%s)\n", WTERMSIG(status),
            WTERMSIG(status) == SIGALRM ? "it hung" : "crash");
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* mastra_step(L, -1) after tasks that finish without waiting: nothing is
** left to wait for, so it returns. */
static int step_after_quick_task(void) {
  lua_State *L = new_state();
  int ref = run_chunk(L,
    "local mastra = require 'mastra'\n"
    "local res = {}\n"
    "mastra.spawn(function() res.ran = true end)\n"
    "return res\n");
  int n = mastra_step(L, -1), ok;
  ok = ref != LUA_NOREF && n == 0 && field_int(L, ref, "ran") == 1;
  lua_close(L);
  return ok ? 0 : 1;
}

/* mastra.run of a function that never waits returns its results. */
static int run_quick_main(void) {
  lua_State *L = new_state();
  int ok = luaL_dostring(L,
    "return require('mastra').run(function(a) return a * 6 end, 7)") == LUA_OK
    && lua_tointeger(L, -1) == 42;
  lua_close(L);
  return ok ? 0 : 1;
}

/* task:wait() from outside any task, for a task that does not wait. */
static int wait_quick_task(void) {
  lua_State *L = new_state();
  int ok = luaL_dostring(L,
    "local mastra = require 'mastra'\n"
    "return mastra.spawn(function() return 'done' end):wait()") == LUA_OK
    && lua_type(L, -1) == LUA_TSTRING
    && strcmp(lua_tostring(L, -1), "done") == 0;
  lua_close(L);
  return ok ? 0 : 1;
}

static void test_no_hang(void) {
  CHECK(forked(step_after_quick_task) == 0);
  CHECK(forked(run_quick_main) == 0);
  CHECK(forked(wait_quick_task) == 0);
}

/* lua_close() with child processes still running kills and reaps them. */
static void test_close_kills(void) {
  lua_State *L = new_state();
  int ref, i;
  lua_Integer bg, fg;
  uint64_t t0;
  ref = run_chunk(L,
    "local dir = ...\n"
    "local mastra = require 'mastra'\n"
    "local res = {}\n"
    "local sb = mastra.LocalSandbox.new{ workingDirectory = dir }\n"
    "res.bg = math.tointeger(sb.processes:spawn('exec sleep 30').pid)\n"
    "mastra.spawn(function()\n"
    "  sb:executeCommand('echo $$; exec sleep 30', nil, {\n"
    "    onStdout = function(s) res.fg = math.tointeger(tonumber(s)) end })\n"
    "end)\n"
    "return res\n");
  if (!CHECK(ref != LUA_NOREF)) {
    lua_close(L);
    return;
  }
  /* until the foreground command has printed its pid (at most 3 s) */
  for (i = 0; i < 300 && field_int(L, ref, "fg") <= 0; i++)
    mastra_step(L, 10);
  bg = field_int(L, ref, "bg");
  fg = field_int(L, ref, "fg");
  CHECK(bg > 0);
  CHECK(fg > 0 && fg != bg);
  CHECK(children(0) == 2);
  CHECK(bg > 0 && kill((pid_t)bg, 0) == 0);
  CHECK(fg > 0 && kill((pid_t)fg, 0) == 0);
  t0 = now_ms();
  lua_close(L);
  CHECK(now_ms() - t0 < 1000); /* SIGKILL, no grace period at exit */
  CHECK(children(0) == 0);
  if (bg > 0) {
    CHECK(waitpid((pid_t)bg, NULL, WNOHANG) < 0 && errno == ECHILD);
    CHECK(kill((pid_t)bg, 0) < 0 && errno == ESRCH);
  }
  if (fg > 0) {
    CHECK(waitpid((pid_t)fg, NULL, WNOHANG) < 0 && errno == ECHILD);
    CHECK(kill((pid_t)fg, 0) < 0 && errno == ESRCH);
  }
}

typedef void (*test_fn)(void);

static void run_test(const char *name, test_fn fn) {
  int fails = g_fail, fds = count_fds(), fds_after, kids;
  fn();
  fds_after = count_fds();
  if (!CHECK(fds_after == fds))
    fprintf(stderr, "  %s: %d descriptors before, %d after\n", name, fds,
            fds_after);
  kids = children(0);
  if (!CHECK(kids == 0)) {
    fprintf(stderr, "  %s: %d child processes left\n", name, kids);
    children(1);
  }
  fprintf(stderr, "%s %s\n", g_fail == fails ? "ok  " : "FAIL", name);
}

static int is_default(int sig) {
  struct sigaction sa;
  return sigaction(sig, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL;
}

/* A host that embeds the library owns its signals; the module opened by a
** plain interpreter (as require does) catches SIGTERM and SIGHUP until its
** state closes. */
static void test_signals(void) {
  lua_State *L = new_state();
  int top = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "mastra");
  CHECK(lua_pcall(L, 1, 1, 0) == LUA_OK);
  lua_settop(L, top);
  CHECK(is_default(SIGTERM));
  CHECK(is_default(SIGHUP));
  lua_close(L);

  L = luaL_newstate();
  if (!CHECK(L != NULL)) return;
  luaL_openlibs(L);
  luaL_requiref(L, "mastra.core", luaopen_mastra_core, 0);
  CHECK(!is_default(SIGTERM));
  CHECK(!is_default(SIGHUP));
  lua_close(L);
  CHECK(is_default(SIGTERM));
  CHECK(is_default(SIGHUP));
}

int main(void) {
  alarm(120); /* a hang is a failure */
  snprintf(tmpdir, sizeof tmpdir, "/tmp/mastra-test-embed-XXXXXX");
  if (mkdtemp(tmpdir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  run_test("version", test_version);
  run_test("strerror", test_strerror);
  run_test("not loaded", test_not_loaded);
  run_test("frame loop", test_frame_loop);
  run_test("blocking step", test_blocking_step);
  run_test("no wait without anything to wait for", test_no_hang);
  run_test("unobserved task error", test_unobserved_error);
  run_test("interrupt", test_interrupt);
  run_test("lua_close kills children", test_close_kills);
  run_test("signals: the host's, or the module's under an interpreter",
           test_signals);
  CHECK(rmdir(tmpdir) == 0); /* the tests left nothing in it */
  printf("%d passed, %d failed\n", g_pass, g_fail);
  return g_fail == 0 ? 0 : 1;
}
