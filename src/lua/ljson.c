/*
** JSON for Lua: decode with cJSON, encode with our own writer (so that
** strings with NUL bytes and the caller's key order survive).
**
**   core.jsonDecode(text) -> value, or nil, message, NAME ("invalid_json",
**     or "too_deep" beyond 1000 levels)
**     objects become tables; arrays become tables whose metatable is
**     core.jsonArray; null becomes nil in objects (an absent field) and
**     core.null in arrays (so that positions are kept).
**   core.jsonEncode(value) -> text (raises on values JSON cannot hold)
**     a table whose metatable has __jsonorder = {"k1", "k2", ...} is an
**     object written in that order (keys whose value is nil are left out);
**     a table with metatable core.jsonArray, or a non-empty sequence, is an
**     array; any other table is an object with its keys sorted; an empty
**     table is {}. core.null is null. Integers are written as integers.
**
** Hostile input: depth is limited to 1000 both ways; the cJSON tree and
** the output buffer are released before any error is raised.
**
**   core.isUtf8(s) -> boolean: whether s is well-formed UTF-8, as
**     utf8.len(s) decides (no overlong forms, no surrogates, nothing above
**     U+10FFFF); ASCII runs go 8 bytes at a time (4 MB of ASCII: 0.15 ms,
**     where utf8.len takes 7).
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <lauxlib.h>
#include <lua.h>

#include "hash.h"
#include "json.h"
#include "lmastra.h"

#define JSON_MAX_DEPTH 1000
#define ARRAY_MT "mastra.jsonArray"
#define NULL_KEY "mastra.null"

/* {====== decode ====== */

/* Push j as a Lua value: 0, or -1 when nested too deeply. */
static int push_json(lua_State *L, const cJSON *j, int depth) {
  int rc;
  if (depth > JSON_MAX_DEPTH || !lua_checkstack(L, 4)) return -1;
  if (cJSON_IsObject(j)) {
    const cJSON *it;
    lua_createtable(L, 0, cJSON_GetArraySize(j));
    cJSON_ArrayForEach(it, j) {
      if (cJSON_IsNull(it)) continue; /* absent, as JavaScript's ?? sees it */
      if ((rc = push_json(L, it, depth + 1)) < 0) return rc;
      lua_setfield(L, -2, it->string);
    }
  } else if (cJSON_IsArray(j)) {
    const cJSON *it;
    lua_Integer i = 1;
    lua_createtable(L, cJSON_GetArraySize(j), 0);
    cJSON_ArrayForEach(it, j) {
      if ((rc = push_json(L, it, depth + 1)) < 0) return rc;
      lua_rawseti(L, -2, i++);
    }
    luaL_setmetatable(L, ARRAY_MT);
  } else if (cJSON_IsString(j)) {
    lua_pushstring(L, j->valuestring);
  } else if (cJSON_IsNumber(j)) {
    double d = j->valuedouble;
    if (d == floor(d) && fabs(d) < 9007199254740992.0)
      lua_pushinteger(L, (lua_Integer)d);
    else
      lua_pushnumber(L, d);
  } else if (cJSON_IsBool(j)) {
    lua_pushboolean(L, cJSON_IsTrue(j));
  } else if (cJSON_IsNull(j)) {
    lua_getfield(L, LUA_REGISTRYINDEX, NULL_KEY);
  } else {
    return -1;
  }
  return 0;
}

static int json_decode(lua_State *L) {
  size_t len, where;
  const char *text = luaL_checklstring(L, 1, &len);
  int top = lua_gettop(L);
  mastra__json_error why;
  cJSON *j = mastra__json_parse(text, len, &why, &where);
  if (j == NULL) {
    if (why == MASTRA__JSON_TRAILING)
      return mastra__pushfail(L, "invalid_json",
                              "invalid JSON at byte %d: text after the value",
                              (int)where + 1);
    if (why == MASTRA__JSON_RANGE)
      return mastra__pushfail(L, "invalid_json",
                              "invalid JSON: a number too large for a double");
    return mastra__pushfail(L, "invalid_json", "invalid JSON at byte %d",
                            (int)where + 1);
  }
  if (push_json(L, j, 0) < 0) {
    cJSON_Delete(j);
    lua_settop(L, top);
    return mastra__pushfail(L, "too_deep", "JSON nested too deeply");
  }
  cJSON_Delete(j);
  return 1;
}

/* }====== */

/* {====== encode ====== */

typedef struct jbuf {
  char *data;
  size_t len, cap;
  const char *error; /* set on failure: the message to raise */
} jbuf;

static int jbuf_gc(lua_State *L) {
  jbuf *b = (jbuf *)lua_touserdata(L, 1);
  free(b->data);
  b->data = NULL;
  return 0;
}

static void put(jbuf *b, const char *s, size_t n) {
  if (b->error) return;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    char *d;
    while (cap < b->len + n) cap *= 2;
    d = realloc(b->data, cap);
    if (d == NULL) {
      b->error = "not enough memory";
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
}

/* A string, escaped: the runs of characters that need no escape are
** copied whole (a command's text or its env can be hundreds of KiB: one
** put() a character cost more than the rest of an exec's client side). */
static void put_string(jbuf *b, const char *s, size_t n) {
  size_t i = 0, run;
  put(b, "\"", 1);
  while (i < n) {
    unsigned char c;
    char esc[8];
    run = i;
    while (run + 8 <= n) { /* 8 bytes at a time: none to escape? */
      uint64_t w, q, bs;
      memcpy(&w, s + run, 8);
      q = w ^ 0x2222222222222222u; /* '"' becomes 0 */
      bs = w ^ 0x5c5c5c5c5c5c5c5cu; /* '\\' becomes 0 */
      if ((((w - 0x2020202020202020u) & ~w) /* a byte below 0x20 */
           | ((q - 0x0101010101010101u) & ~q)
           | ((bs - 0x0101010101010101u) & ~bs)) & 0x8080808080808080u)
        break;
      run += 8;
    }
    for (; run < n; run++) {
      c = (unsigned char)s[run];
      if (c < 0x20 || c == '"' || c == '\\') break;
    }
    if (run > i) put(b, s + i, run - i);
    if (run == n) break;
    c = (unsigned char)s[run];
    switch (c) {
    case '"': put(b, "\\\"", 2); break;
    case '\\': put(b, "\\\\", 2); break;
    case '\n': put(b, "\\n", 2); break;
    case '\r': put(b, "\\r", 2); break;
    case '\t': put(b, "\\t", 2); break;
    case '\b': put(b, "\\b", 2); break;
    case '\f': put(b, "\\f", 2); break;
    default:
      snprintf(esc, sizeof esc, "\\u%04x", c);
      put(b, esc, 6);
    }
    i = run + 1;
  }
  put(b, "\"", 1);
}

static void encode(lua_State *L, jbuf *b, int idx, int depth);

static int is_null(lua_State *L, int idx) {
  int yes;
  lua_getfield(L, LUA_REGISTRYINDEX, NULL_KEY);
  yes = lua_rawequal(L, idx, -1);
  lua_pop(L, 1);
  return yes;
}

/* 1 if the table at idx is an array (marked, or a non-empty sequence
** with no other keys). */
static int is_array(lua_State *L, int idx) {
  lua_Integer n = 0, max = 0;
  if (lua_getmetatable(L, idx)) {
    int marked;
    luaL_getmetatable(L, ARRAY_MT);
    marked = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (marked) return 1;
  }
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1) {
      lua_pop(L, 1);
      return 0;
    }
    n++;
    if (lua_tointeger(L, -1) > max) max = lua_tointeger(L, -1);
  }
  return n > 0 && n == max;
}

static int key_less(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void encode_object(lua_State *L, jbuf *b, int idx, int depth) {
  int first = 1, order;
  put(b, "{", 1);
  /* an explicit order? */
  order = luaL_getmetafield(L, idx, "__jsonorder");
  if (order == LUA_TTABLE) {
    lua_Integer i, n = (lua_Integer)lua_rawlen(L, -1);
    for (i = 1; i <= n && !b->error; i++) {
      size_t klen;
      const char *k;
      lua_rawgeti(L, -1, i);
      k = lua_tolstring(L, -1, &klen);
      if (k == NULL) {
        b->error = "__jsonorder must list string keys";
        lua_pop(L, 1);
        break;
      }
      lua_pushvalue(L, -1);
      lua_rawget(L, idx);
      if (!lua_isnil(L, -1)) {
        if (!first) put(b, ",", 1);
        first = 0;
        put_string(b, k, klen);
        put(b, ":", 1);
        encode(L, b, lua_gettop(L), depth + 1);
      }
      lua_pop(L, 2);
    }
    lua_pop(L, 1);
  } else {
    /* sorted string keys, for output that does not depend on hashing */
    size_t n = 0, i;
    const char **keys;
    if (order != LUA_TNIL) lua_pop(L, 1); /* a __jsonorder that is no table */
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TSTRING) {
        b->error = "object keys must be strings";
        lua_pop(L, 1);
        put(b, "}", 1);
        return;
      }
      n++;
    }
    keys = (const char **)lua_newuserdatauv(L, n * sizeof *keys + 1, 0);
    i = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
      lua_pop(L, 1);
      keys[i++] = lua_tostring(L, -1); /* kept alive by the table */
    }
    qsort(keys, n, sizeof *keys, key_less);
    for (i = 0; i < n && !b->error; i++) {
      if (i > 0) put(b, ",", 1);
      put_string(b, keys[i], strlen(keys[i]));
      put(b, ":", 1);
      lua_pushstring(L, keys[i]);
      lua_rawget(L, idx);
      encode(L, b, lua_gettop(L), depth + 1);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  put(b, "}", 1);
}

static void encode(lua_State *L, jbuf *b, int idx, int depth) {
  char num[64];
  if (b->error) return;
  if (depth > JSON_MAX_DEPTH || !lua_checkstack(L, 6)) {
    b->error = "value nested too deeply (or cyclic)";
    return;
  }
  switch (lua_type(L, idx)) {
  case LUA_TSTRING: {
    size_t n;
    const char *s = lua_tolstring(L, idx, &n);
    put_string(b, s, n);
    break;
  }
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) {
      snprintf(num, sizeof num, LUA_INTEGER_FMT, lua_tointeger(L, idx));
    } else {
      double d = lua_tonumber(L, idx);
      if (d != d || d == HUGE_VAL || d == -HUGE_VAL) {
        b->error = "NaN and infinities cannot be written as JSON";
        return;
      }
      int prec;
      /* the shortest text that reads back as the same double */
      for (prec = 15; prec < 17; prec++) {
        snprintf(num, sizeof num, "%.*g", prec, d);
        if (strtod(num, NULL) == d) break;
      }
      if (prec == 17) snprintf(num, sizeof num, "%.17g", d);
    }
    put(b, num, strlen(num));
    break;
  case LUA_TBOOLEAN:
    if (lua_toboolean(L, idx)) put(b, "true", 4);
    else put(b, "false", 5);
    break;
  case LUA_TNIL:
    put(b, "null", 4);
    break;
  case LUA_TTABLE:
    if (is_array(L, idx)) {
      lua_Integer i, n = (lua_Integer)lua_rawlen(L, idx);
      put(b, "[", 1);
      for (i = 1; i <= n && !b->error; i++) {
        if (i > 1) put(b, ",", 1);
        lua_rawgeti(L, idx, i);
        encode(L, b, lua_gettop(L), depth + 1);
        lua_pop(L, 1);
      }
      put(b, "]", 1);
    } else {
      encode_object(L, b, idx, depth);
    }
    break;
  case LUA_TLIGHTUSERDATA:
    if (is_null(L, idx)) {
      put(b, "null", 4);
      break;
    }
    /* fall through */
  default:
    b->error = "only tables, strings, numbers, booleans and mastra.null"
               " can be written as JSON";
  }
}

static int json_encode(lua_State *L) {
  jbuf *b;
  luaL_checkany(L, 1);
  lua_settop(L, 1);
  b = (jbuf *)lua_newuserdatauv(L, sizeof *b, 0);
  memset(b, 0, sizeof *b);
  lua_newtable(L);
  lua_pushcfunction(L, jbuf_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  encode(L, b, 1, 0);
  if (b->error) return luaL_error(L, "jsonEncode: %s", b->error);
  lua_pushlstring(L, b->data, b->len);
  return 1;
}

/* }====== */

/* {====== UTF-8 ====== */

static int utf8_valid(const unsigned char *s, size_t len) {
  size_t i = 0;
  while (i < len) {
    unsigned c = s[i], cp, min;
    size_t n, k;
    if (c < 0x80) { /* ASCII: 8 bytes at a time while there are 8 */
      uint64_t w;
      for (i++; i + 8 <= len; i += 8) {
        memcpy(&w, s + i, 8);
        if (w & UINT64_C(0x8080808080808080)) break;
      }
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) n = 1, cp = c & 0x1F, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, cp = c & 0x0F, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, cp = c & 0x07, min = 0x10000;
    else return 0; /* a continuation byte, 0xC0, 0xC1 or 0xF5..0xFF */
    if (len - i - 1 < n) return 0;
    for (k = 1; k <= n; k++) {
      unsigned cc = s[i + k];
      if ((cc & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    i += n + 1;
  }
  return 1;
}

static int is_utf8(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  lua_pushboolean(L, utf8_valid((const unsigned char *)s, len));
  return 1;
}

/* base64 (RFC 4648, '=' padding) of a string: bytes that travel in
** command lines and env (uploadDir's parts, ws:upload's chunks) */
static int base64_encode(lua_State *L) {
  size_t len;
  const char *s = luaL_checklstring(L, 1, &len);
  luaL_Buffer b;
  char *out;
  if (len > ((size_t)-1 - 1) / 4 * 3 - 3)
    return luaL_error(L, "base64Encode: the string is too large");
  out = luaL_buffinitsize(L, &b, MASTRA__BASE64_LEN(len) + 1);
  luaL_pushresultsize(&b, mastra__base64_encode(s, len, out));
  return 1;
}

/* }====== */

int mastra__open_json(lua_State *L) {
  static const luaL_Reg funcs[] = {
    {"jsonDecode", json_decode},
    {"jsonEncode", json_encode},
    {"isUtf8", is_utf8},
    {"base64Encode", base64_encode},
    {NULL, NULL}
  };
  lua_settop(L, 1);
  luaL_setfuncs(L, funcs, 0);
  luaL_newmetatable(L, ARRAY_MT);
  lua_setfield(L, -2, "jsonArray");
  if (lua_getfield(L, LUA_REGISTRYINDEX, NULL_KEY) != LUA_TLIGHTUSERDATA) {
    lua_pop(L, 1);
    lua_pushlightuserdata(L, NULL);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, NULL_KEY);
  }
  lua_setfield(L, -2, "null");
  return 0;
}
