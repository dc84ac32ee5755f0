/*
** mastra-lua: the C embedding API.
**
** A host that embeds Lua 5.4 attaches the runtime to its lua_State with
** mastra_openlibs(), then either ticks it once per frame with
** mastra_step(L, 0), or folds it into its own poll loop with mastra_fd()
** and mastra_timeout(). Lua callbacks run only inside mastra_step() (or a
** blocking mastra call made from Lua), never from another thread.
**
** Return codes: MASTRA_OK (0) or a negative MASTRA_E* code; mastra_strerror()
** names them.
*/
#ifndef MASTRA_H
#define MASTRA_H

#include <lua.h>

#include "mastra_version.h" /* generated: MASTRA_VERSION_STRING and its parts */

/* MASTRA_API marks what libmastra exports; everything else stays hidden.
** A host on Windows that links libmastra statically defines MASTRA_STATIC
** (the CMake target mastra::mastra_static does). */
#if defined(_WIN32) || defined(__CYGWIN__)
#if defined(MASTRA_STATIC)
#define MASTRA_API
#elif defined(MASTRA_BUILDING)
#define MASTRA_API __declspec(dllexport)
#else
#define MASTRA_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) || defined(__clang__)
#define MASTRA_API __attribute__((visibility("default")))
#else
#define MASTRA_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define MASTRA_OK 0
#define MASTRA_ELUA (-1)      /* a Lua error: the error value is pushed */
#define MASTRA_ENOTLOADED (-2) /* mastra is not attached to this state */

typedef struct mastra__loop mastra_loop;

/* "0.1.0" */
MASTRA_API const char *mastra_version(void);
MASTRA_API const char *mastra_strerror(int code);

/* The C module behind require "mastra.core". */
MASTRA_API int luaopen_mastra_core(lua_State *L);

/* Preload "mastra.core" and the Lua modules ("mastra", "mastra.task", ...)
** into package.preload, so require "mastra" works without any file on
** disk. Call it after luaL_openlibs(). lua_close() of the state drains the
** teardown queue (at most 5 s: sandboxes the scripts started are destroyed)
** before it closes the loop and kills what is left of the child processes. */
MASTRA_API void mastra_openlibs(lua_State *L);

/* Run the tasks that are ready, wait at most timeout_ms for I/O (0: never
** block, -1: no limit), then run the tasks that became ready.
** Returns the number of live tasks (>= 0), or MASTRA_ELUA with the error
** value pushed onto L (for example an error raised by a task nobody waits
** for), or MASTRA_ENOTLOADED. Call it from the main thread only. */
MASTRA_API int mastra_step(lua_State *L, int timeout_ms);

/* A file descriptor that becomes readable when mastra_step() has work;
** poll it for POLLIN. MASTRA_ENOTLOADED if mastra was never loaded. */
MASTRA_API int mastra_fd(lua_State *L);

/* Milliseconds after which mastra_step() must be called even if mastra_fd()
** stays quiet: 0 when tasks are ready, -1 when nothing is scheduled. */
MASTRA_API int mastra_timeout(lua_State *L);

/* The loop of L (NULL if mastra.core is not loaded), for mastra_interrupt. */
MASTRA_API mastra_loop *mastra_get_loop(lua_State *L);

/* Async-signal-safe: wake the loop and make the scheduler raise an
** InterruptedError in the main task at the next step (the mastra-lua runner
** calls it from its SIGINT, SIGTERM and SIGHUP handler). */
MASTRA_API void mastra_interrupt(mastra_loop *loop);

#ifdef __cplusplus
}
#endif

#endif
