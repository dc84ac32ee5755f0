/*
** Regular expressions for Lua: a small binding of PCRE2 (8-bit, UTF).
**
**   core.regexCompile(pattern [, caseless]) -> regex, or nil, message,
**     "invalid_regex"
**     compiles with PCRE2_UTF (falling back to bytes when the pattern is
**     not valid UTF-8); the message names the offset of the error.
**   regex:match(subject [, init]) -> start, end, or nil
**     1-based, inclusive byte positions of the first match at or after
**     init (default 1); an empty match gives end = start - 1. A subject
**     that is not valid UTF-8 is matched byte by byte.
**   core.regexMatch(regex, subject [, init]): the same as a function.
**
** Matching is bounded (a match limit and a depth limit) so that a hostile
** pattern cannot hang the loop; hitting a limit raises an error.
*/
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <lauxlib.h>
#include <lua.h>
#include <pcre2.h>

#include "lmastra.h"

#define REGEX_MT "mastra.Regex"
#define MATCH_LIMIT 10000000u
#define DEPTH_LIMIT 100000u

typedef struct {
  pcre2_code *code;   /* compiled with UTF when the pattern allows */
  pcre2_code *bytes;  /* compiled without UTF, for invalid UTF-8 subjects */
  int utf;
} regex_ud;

static regex_ud *check_regex(lua_State *L, int idx) {
  regex_ud *re = (regex_ud *)luaL_checkudata(L, idx, REGEX_MT);
  if (re->code == NULL) luaL_argerror(L, idx, "regex was released");
  return re;
}

static pcre2_code *compile(const char *pat, size_t len, uint32_t opts,
                           int *errcode, PCRE2_SIZE *erroff) {
  return pcre2_compile((PCRE2_SPTR)pat, len, opts, errcode, erroff, NULL);
}

static int regex_compile(lua_State *L) {
  size_t len;
  const char *pat = luaL_checklstring(L, 1, &len);
  int caseless = lua_toboolean(L, 2);
  uint32_t opts = caseless ? PCRE2_CASELESS : 0;
  int errcode = 0;
  PCRE2_SIZE erroff = 0;
  regex_ud *re = (regex_ud *)lua_newuserdatauv(L, sizeof(regex_ud), 0);
  re->code = NULL;
  re->bytes = NULL;
  re->utf = 0;
  luaL_setmetatable(L, REGEX_MT);
  re->code = compile(pat, len, opts | PCRE2_UTF | PCRE2_UCP, &errcode, &erroff);
  if (re->code != NULL) {
    re->utf = 1;
    re->bytes = compile(pat, len, opts, &errcode, &erroff); /* may be NULL */
  } else {
    /* not valid UTF-8 (or an error): try bytes, and report that error */
    re->code = compile(pat, len, opts, &errcode, &erroff);
  }
  if (re->code == NULL) {
    PCRE2_UCHAR buf[256];
    if (pcre2_get_error_message(errcode, buf, sizeof buf) < 0)
      strcpy((char *)buf, "unknown error");
    return mastra__pushfail(L, "invalid_regex", "%s at offset %d",
                            (const char *)buf, (int)erroff);
  }
  return 1;
}

static int is_utf_error(int rc) {
  return (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21) ||
         rc == PCRE2_ERROR_BADUTFOFFSET;
}

static int run(pcre2_code *code, const char *s, size_t len, size_t start,
               pcre2_match_data **mdp) {
  pcre2_match_context *mc = pcre2_match_context_create(NULL);
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(code, NULL);
  int rc;
  *mdp = md;
  if (md == NULL || mc == NULL) {
    pcre2_match_context_free(mc);
    return PCRE2_ERROR_NOMEMORY;
  }
  pcre2_set_match_limit(mc, MATCH_LIMIT);
  pcre2_set_depth_limit(mc, DEPTH_LIMIT);
  rc = pcre2_match(code, (PCRE2_SPTR)s, len, start, 0, md, mc);
  pcre2_match_context_free(mc);
  return rc;
}

static int regex_match(lua_State *L) {
  regex_ud *re = check_regex(L, 1);
  size_t len;
  const char *s = luaL_checklstring(L, 2, &len);
  lua_Integer init = luaL_optinteger(L, 3, 1);
  pcre2_match_data *md = NULL;
  PCRE2_SIZE *ov;
  int rc;
  if (init < 1) init = 1;
  if ((size_t)init > len + 1) {
    lua_pushnil(L);
    return 1;
  }
  rc = run(re->code, s, len, (size_t)init - 1, &md);
  if (is_utf_error(rc) && re->bytes != NULL) {
    /* a subject that is not valid UTF-8: match its bytes */
    pcre2_match_data_free(md);
    rc = run(re->bytes, s, len, (size_t)init - 1, &md);
  }
  if (rc < 0) {
    PCRE2_UCHAR buf[256];
    pcre2_match_data_free(md);
    if (rc == PCRE2_ERROR_NOMATCH || is_utf_error(rc)) {
      lua_pushnil(L);
      return 1;
    }
    if (pcre2_get_error_message(rc, buf, sizeof buf) < 0)
      strcpy((char *)buf, "unknown error");
    return luaL_error(L, "regex: %s", (const char *)buf);
  }
  ov = pcre2_get_ovector_pointer(md);
  lua_pushinteger(L, (lua_Integer)ov[0] + 1);
  lua_pushinteger(L, (lua_Integer)ov[1]);
  pcre2_match_data_free(md);
  return 2;
}

static int regex_gc(lua_State *L) {
  regex_ud *re = (regex_ud *)luaL_checkudata(L, 1, REGEX_MT);
  pcre2_code_free(re->code);
  pcre2_code_free(re->bytes);
  re->code = NULL;
  re->bytes = NULL;
  return 0;
}

static int regex_tostring(lua_State *L) {
  lua_pushfstring(L, "mastra.Regex: %p", lua_touserdata(L, 1));
  return 1;
}

int mastra__open_regex(lua_State *L) {
  static const luaL_Reg meth[] = {
    {"match", regex_match},
    {NULL, NULL}
  };
  lua_settop(L, 1);
  if (luaL_newmetatable(L, REGEX_MT)) {
    luaL_newlib(L, meth);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, regex_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushcfunction(L, regex_tostring);
    lua_setfield(L, -2, "__tostring");
  }
  lua_pop(L, 1);
  lua_pushcfunction(L, regex_compile);
  lua_setfield(L, -2, "regexCompile");
  lua_pushcfunction(L, regex_match);
  lua_setfield(L, -2, "regexMatch");
  return 0;
}
