/*
** mastra.core: HTTP requests and WebSockets (src/core/http_client.h, src/core/ws_client.h).
**
**   core.http{method=, url=, headers={name=value}, body=, timeout=,
**             followRedirects=, caFile=, bodyStream=, bodyLength=,
**             streamResponse=}                       -> request
**   req:id()      the id signalled when the request finishes (and, when
**                 streamed, when bytes arrive or the send queue drains)
**   req:result()  nil while running; then status, headers, body, or
**                 nil, message, NAME
**   req:write(data), req:finish(), req:bufferedAmount()  (bodyStream)
**   req:head()    status, headers once the response's body began
**   req:read()    (streamResponse) the bytes received, or nil
**   req:close()   cancel (also __close and __gc)
**
**   core.websocket{url=, protocols={...}, headers={name=value}, timeout=,
**                  closeTimeout=, maxMessage=, caFile=} -> socket
**   ws:id()  ws:state()  ws:opened()  ws:protocol()  ws:bufferedAmount()
**   ws:send(data, "text"|"binary")  -> true, or nil, message, NAME
**   ws:receive()   -> data, "text"|"binary", or nil when none is queued
**   ws:closeInfo() -> code, reason, httpStatus, error, httpBody, errname
**   ws:close(code, reason)  start the closing handshake
**
** Every call returns at once: Lua waits for the object's id (task.wait)
** and tries again. Bad arguments raise; failures of the network are
** results: nil, message, NAME (the names are listed in docs/core.md). No Lua runs inside a libcurl or wslay callback: those only
** change C state and signal ids.
*/
#include <string.h>
#include <strings.h>

#include <lauxlib.h>
#include <lua.h>

#include "http_client.h"
#include "lmastra.h"
#include "loop.h"
#include "ws_client.h"

#define REQ_MT "mastra.HttpRequest"
#define WS_MT "mastra.WebSocket"

/* {====== options ====== */

/* Raise unless every key of the table at idx is in `known` (NULL-ended). */
static void check_keys(lua_State *L, int idx, const char *what,
                       const char *const *known) {
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    const char *const *k;
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) {
      const char *key = lua_tostring(L, -1);
      for (k = known; *k != NULL; k++)
        if (strcmp(*k, key) == 0) break;
      if (*k != NULL) continue;
    }
    luaL_error(L, "%s: unknown option '%s'", what,
               luaL_tolstring(L, -1, NULL));
  }
}

static const char *opt_string(lua_State *L, int idx, const char *what,
                              const char *key, size_t *len) {
  const char *s = NULL;
  int t = lua_getfield(L, idx, key);
  if (t == LUA_TSTRING)
    s = lua_tolstring(L, -1, len);
  else if (t != LUA_TNIL)
    luaL_error(L, "%s: option '%s' must be a string (got %s)", what, key,
               luaL_typename(L, -1));
  lua_pop(L, 1); /* the table still holds the string */
  return s;
}

/* An integer >= 0 (milliseconds, bytes). */
static uint64_t opt_count(lua_State *L, int idx, const char *what,
                          const char *key, uint64_t dflt) {
  uint64_t v = dflt;
  int t = lua_getfield(L, idx, key);
  if (t != LUA_TNIL) {
    lua_Integer n;
    int ok;
    n = lua_tointegerx(L, -1, &ok);
    if (!ok || n < 0)
      luaL_error(L, "%s: option '%s' must be an integer >= 0", what, key);
    v = (uint64_t)n;
  }
  lua_pop(L, 1);
  return v;
}

/* RFC 9110 token characters */
static int is_token(const char *s, size_t len) {
  size_t i;
  if (len == 0) return 0;
  for (i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c <= 32 || c >= 127 || strchr("\"(),/:;<=>?@[\\]{}", c) != NULL)
      return 0;
  }
  return 1;
}

static int field_value_ok(const char *s, size_t len) {
  size_t i;
  for (i = 0; i < len; i++)
    if (s[i] == '\r' || s[i] == '\n' || s[i] == '\0') return 0;
  return 1;
}

/* The headers option as "Name: value" lines: a userdata array of
** pointers into strings of a table, both left on the stack (they live
** until the call returns). `reserved` names are refused. An empty value
** is written "Name;" for libcurl (curl_syntax), "Name: " otherwise. */
static const char **opt_headers(lua_State *L, int idx, const char *what,
                                const char *const *reserved, int curl_syntax,
                                size_t *n) {
  const char **lines;
  int tbl, t;
  size_t count = 0, i = 0;
  *n = 0;
  t = lua_getfield(L, idx, "headers");
  if (t == LUA_TNIL) {
    lua_pop(L, 1);
    lua_newtable(L);
  } else if (t != LUA_TTABLE) {
    luaL_error(L, "%s: option 'headers' must be a table of name = value"
               " (got %s)", what, luaL_typename(L, -1));
  }
  tbl = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, tbl) != 0) {
    count++;
    lua_pop(L, 1);
  }
  lines = (const char **)lua_newuserdatauv(L, (count + 1) * sizeof *lines, 0);
  lua_newtable(L); /* keeps the lines alive */
  lua_pushnil(L);
  while (lua_next(L, tbl) != 0) {
    size_t klen, vlen;
    const char *k, *v;
    const char *const *r;
    if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING)
      luaL_error(L, "%s: headers must map string names to string values",
                 what);
    k = lua_tolstring(L, -2, &klen);
    v = lua_tolstring(L, -1, &vlen);
    if (!is_token(k, klen))
      luaL_error(L, "%s: '%s' is not a valid header name", what, k);
    if (!field_value_ok(v, vlen))
      luaL_error(L, "%s: the value of header '%s' contains CR, LF or NUL",
                 what, k);
    for (r = reserved; r != NULL && *r != NULL; r++)
      if (strcasecmp(*r, k) == 0)
        luaL_error(L, "%s: header '%s' is set by the client itself", what, k);
    if (vlen == 0)
      lua_pushfstring(L, curl_syntax ? "%s;" : "%s: ", k);
    else
      lua_pushfstring(L, "%s: %s", k, v);
    lines[i] = lua_tostring(L, -1);
    lua_rawseti(L, -4, (lua_Integer)++i);
    lua_pop(L, 1); /* the value */
  }
  lines[i] = NULL;
  *n = i;
  return lines;
}

/* }====== */

/* {====== HTTP requests ====== */

static mastra__http_req **checkreqbox(lua_State *L) {
  return (mastra__http_req **)luaL_checkudata(L, 1, REQ_MT);
}

static mastra__http_req *checkreq(lua_State *L) {
  mastra__http_req *r = *checkreqbox(L);
  if (r == NULL) luaL_error(L, "attempt to use a closed " REQ_MT);
  return r;
}

static int req_close(lua_State *L) {
  mastra__http_req **box = checkreqbox(L);
  if (*box != NULL) {
    mastra__http_release(*box);
    *box = NULL;
  }
  return 0;
}

static int req_tostring(lua_State *L) {
  mastra__http_req *r = *checkreqbox(L);
  if (r == NULL)
    lua_pushliteral(L, REQ_MT " (closed)");
  else
    lua_pushfstring(L, REQ_MT ": %s", r->done ? "finished" : "running");
  return 1;
}

static int req_id(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)checkreq(L)->id);
  return 1;
}

static void push_headers(lua_State *L, const mastra__http_req *r);

static int req_result(lua_State *L) {
  mastra__http_req *r = checkreq(L);
  if (!r->done) {
    lua_pushnil(L);
    return 1;
  }
  if (r->result != CURLE_OK) {
    char msg[CURL_ERROR_SIZE + 256];
    mastra__http_error_message(r, msg, sizeof msg);
    return mastra__pushfail(L, mastra__http_error_name(r), "%s", msg);
  }
  lua_pushinteger(L, (lua_Integer)r->status);
  push_headers(L, r);
  /* streamed: the body went through req:read() */
  if (r->stream_response)
    lua_pushliteral(L, "");
  else
    lua_pushlstring(L, r->body ? r->body : "", r->body_len);
  return 3;
}

/* bytes of a request body written; false (and the reason) when it cannot
** be: the request finished (ENOTCONN), its body was finished (EPIPE),
** more than bodyLength (EFBIG) */
static int req_write(lua_State *L) {
  mastra__http_req *r = checkreq(L);
  size_t len;
  const char *data = luaL_checklstring(L, 2, &len);
  const char *why = NULL;
  if (!r->stream_body)
    luaL_error(L, "req:write: the request was not made with bodyStream = true");
  if (mastra__http_write(r, data, len, &why) < 0)
    return mastra__pushfail(L, why, "%s",
                            strcmp(why, "ENOTCONN") == 0
                                ? "the request has finished: see req:result()"
                            : strcmp(why, "EPIPE") == 0
                                ? "the request body was finished"
                            : strcmp(why, "EFBIG") == 0
                                ? "more bytes than bodyLength"
                                : "out of memory");
  lua_pushboolean(L, 1);
  return 1;
}

static int req_finish(lua_State *L) {
  mastra__http_req *r = checkreq(L);
  const char *why = NULL;
  if (!r->stream_body)
    luaL_error(L, "req:finish: the request was not made with bodyStream = true");
  if (mastra__http_finish(r, &why) < 0)
    return mastra__pushfail(L, why, "%s",
                            strcmp(why, "ENOTCONN") == 0
                                ? "the request has finished: see req:result()"
                            : strcmp(why, "EPIPE") == 0
                                ? "the request body was finished already"
                                : "fewer bytes than bodyLength");
  lua_pushboolean(L, 1);
  return 1;
}

static int req_buffered(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)mastra__http_buffered(checkreq(L)));
  return 1;
}

static void push_headers(lua_State *L, const mastra__http_req *r) {
  size_t i;
  lua_createtable(L, 0, (int)r->nheaders);
  for (i = 0; i < r->nheaders; i++) {
    const mastra__http_header *h = &r->headers[i];
    if (lua_getfield(L, -1, h->name) == LUA_TSTRING) {
      lua_pushliteral(L, ", ");
      lua_pushstring(L, h->value);
      lua_concat(L, 3);
    } else {
      lua_pop(L, 1);
      lua_pushstring(L, h->value);
    }
    lua_setfield(L, -2, h->name);
  }
}

/* status, headers once the response's body began (or the request ended
** with a response); nil before */
static int req_head(lua_State *L) {
  mastra__http_req *r = checkreq(L);
  if (!r->head || r->status == 0 || (r->done && r->result != CURLE_OK)) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushinteger(L, (lua_Integer)r->status);
  push_headers(L, r);
  return 2;
}

/* streamResponse: the bytes received so far, or nil when none wait */
static int req_read(lua_State *L) {
  mastra__http_req *r = checkreq(L);
  size_t len;
  const char *p;
  if (!r->stream_response)
    luaL_error(L, "req:read: the request was not made with streamResponse = true");
  p = mastra__http_take(r, &len);
  if (len == 0) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushlstring(L, p, len);
  mastra__http_taken(r);
  return 1;
}

/* a boolean option of core.http, dflt when absent */
static int opt_bool(lua_State *L, int idx, const char *key, int dflt) {
  int t = lua_getfield(L, idx, key), v;
  if (t != LUA_TNIL && t != LUA_TBOOLEAN)
    luaL_error(L, "http: option '%s' must be a boolean", key);
  v = t == LUA_TNIL ? dflt : lua_toboolean(L, -1);
  lua_pop(L, 1);
  return v;
}

static const char *const http_keys[] = {
  "method", "url", "headers", "body", "timeout", "followRedirects", "caFile",
  "freshConnection", "bodyStream", "bodyLength", "streamResponse", NULL
};

static int core_http(lua_State *L) {
  mastra__loop *loop = mastra__checkloop(L);
  mastra__http_opts o;
  mastra__http_req **box;
  char err[256];
  size_t mlen;
  luaL_checktype(L, 1, LUA_TTABLE);
  check_keys(L, 1, "http", http_keys);
  memset(&o, 0, sizeof o);
  o.method = opt_string(L, 1, "http", "method", &mlen);
  if (o.method != NULL && !is_token(o.method, mlen))
    luaL_error(L, "http: '%s' is not a valid method", o.method);
  o.url = opt_string(L, 1, "http", "url", NULL);
  if (o.url == NULL) luaL_error(L, "http: option 'url' is required");
  o.body = opt_string(L, 1, "http", "body", &o.body_len);
  o.ca_file = opt_string(L, 1, "http", "caFile", NULL);
  o.timeout_ms = opt_count(L, 1, "http", "timeout",
                        MASTRA__HTTP_DEFAULT_TIMEOUT_MS);
  o.no_follow = !opt_bool(L, 1, "followRedirects", 1);
  o.fresh_connection = opt_bool(L, 1, "freshConnection", 0);
  o.stream_body = opt_bool(L, 1, "bodyStream", 0);
  o.stream_response = opt_bool(L, 1, "streamResponse", 0);
  o.body_size = -1;
  if (lua_getfield(L, 1, "bodyLength") != LUA_TNIL) {
    lua_pop(L, 1);
    if (!o.stream_body)
      luaL_error(L, "http: option 'bodyLength' goes with bodyStream = true");
    o.body_size = (int64_t)opt_count(L, 1, "http", "bodyLength", 0);
  } else {
    lua_pop(L, 1);
  }
  if (o.stream_body && o.body != NULL)
    luaL_error(L, "http: options 'body' and 'bodyStream' exclude each other"
               " (with bodyStream, write the body with req:write)");
  o.headers = opt_headers(L, 1, "http", NULL, 1, &o.nheaders);
  box = (mastra__http_req **)lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL; /* born closed */
  luaL_setmetatable(L, REQ_MT);
  if (mastra__http_start(loop, &o, box, err, sizeof err) < 0)
    return mastra__pushfail(L, mastra__loop_closed(loop) ? "closed"
                                                         : "CURLE_OUT_OF_MEMORY",
                            "%s", err);
  return 1;
}

/* }====== */

/* {====== WebSockets ====== */

static mastra__ws **checkwsbox(lua_State *L) {
  return (mastra__ws **)luaL_checkudata(L, 1, WS_MT);
}

static mastra__ws *checkws(lua_State *L) {
  mastra__ws *ws = *checkwsbox(L);
  if (ws == NULL) luaL_error(L, "attempt to use a closed " WS_MT);
  return ws;
}

static int ws_gc(lua_State *L) {
  mastra__ws **box = checkwsbox(L);
  if (*box != NULL) {
    mastra__ws_release(*box);
    *box = NULL;
  }
  return 0;
}

static int ws_tostring(lua_State *L) {
  mastra__ws *ws = *checkwsbox(L);
  if (ws == NULL)
    lua_pushliteral(L, WS_MT " (released)");
  else
    lua_pushfstring(L, WS_MT ": %s (%s)", ws->target,
                    mastra__ws_state_name(ws->state));
  return 1;
}

static int ws_id(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)checkws(L)->id);
  return 1;
}

static int ws_state(lua_State *L) {
  lua_pushstring(L, mastra__ws_state_name(checkws(L)->state));
  return 1;
}

static int ws_opened(lua_State *L) {
  lua_pushboolean(L, checkws(L)->opened);
  return 1;
}

static int ws_protocol(lua_State *L) {
  mastra__ws *ws = checkws(L);
  if (ws->protocol)
    lua_pushstring(L, ws->protocol);
  else
    lua_pushnil(L);
  return 1;
}

static int ws_buffered(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)mastra__ws_buffered(checkws(L)));
  return 1;
}

static int ws_send(lua_State *L) {
  static const char *const kinds[] = {"text", "binary", NULL};
  mastra__ws *ws = checkws(L);
  size_t len;
  const char *data = luaL_checklstring(L, 2, &len);
  int binary = luaL_checkoption(L, 3, "text", kinds);
  char err[256];
  if (mastra__ws_send(ws, data, len, binary, err, sizeof err) < 0)
    return mastra__pushfail(L, ws->state == MASTRA__WS_OPEN ? "ENOMEM"
                                                            : "ENOTCONN",
                            "%s", err);
  lua_pushboolean(L, 1);
  return 1;
}

static int ws_receive(lua_State *L) {
  mastra__ws *ws = checkws(L);
  const mastra__ws_msg *m = mastra__ws_peek(ws);
  if (m == NULL) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushlstring(L, m->data, m->len);
  lua_pushstring(L, m->binary ? "binary" : "text");
  mastra__ws_pop(ws); /* after the copy: pushing may raise */
  return 2;
}

static void push_str_or_nil(lua_State *L, const char *s) {
  if (s != NULL)
    lua_pushstring(L, s);
  else
    lua_pushnil(L);
}

/* code (the peer's, 1005 for a close frame without one, 1006 when an
** opened socket ended without a close frame), reason, httpStatus, error,
** httpBody, errname */
static int ws_close_info(lua_State *L) {
  mastra__ws *ws = checkws(L);
  if (ws->close_received)
    lua_pushinteger(L, ws->close_code);
  else if (ws->opened && ws->state == MASTRA__WS_CLOSED)
    lua_pushinteger(L, 1006);
  else
    lua_pushnil(L);
  push_str_or_nil(L, ws->close_reason);
  if (ws->http_status)
    lua_pushinteger(L, ws->http_status);
  else
    lua_pushnil(L);
  push_str_or_nil(L, ws->error);
  if (ws->http_body)
    lua_pushlstring(L, ws->http_body, ws->http_body_len);
  else
    lua_pushnil(L);
  push_str_or_nil(L, ws->errname);
  return 6;
}

static int ws_close(lua_State *L) {
  mastra__ws *ws = *checkwsbox(L);
  lua_Integer code = luaL_optinteger(L, 2, 1000);
  size_t rlen = 0;
  const char *reason = luaL_optlstring(L, 3, "", &rlen);
  luaL_argcheck(L, code == 1000 || (code >= 3000 && code <= 4999), 2,
                "the close code must be 1000 or in 3000-4999");
  luaL_argcheck(L, rlen <= 123, 3, "the reason must be at most 123 bytes");
  if (ws != NULL) mastra__ws_close(ws, (int)code, reason, rlen);
  return 0;
}

static const char *const ws_keys[] = {
  "url", "protocols", "headers", "timeout", "closeTimeout", "maxMessage",
  "caFile", "keepalive", NULL
};

static const char *const ws_reserved[] = {
  "Host", "Upgrade", "Connection", "Sec-WebSocket-Key",
  "Sec-WebSocket-Version", "Sec-WebSocket-Protocol",
  "Sec-WebSocket-Extensions", NULL
};

static int core_websocket(lua_State *L) {
  mastra__loop *loop = mastra__checkloop(L);
  mastra__ws_opts o;
  mastra__ws **box;
  const char *errname;
  const char **protocols = NULL;
  char err[512];
  int t;
  luaL_checktype(L, 1, LUA_TTABLE);
  check_keys(L, 1, "websocket", ws_keys);
  memset(&o, 0, sizeof o);
  o.url = opt_string(L, 1, "websocket", "url", NULL);
  if (o.url == NULL) luaL_error(L, "websocket: option 'url' is required");
  o.ca_file = opt_string(L, 1, "websocket", "caFile", NULL);
  o.handshake_timeout_ms = opt_count(L, 1, "websocket", "timeout",
                                  MASTRA__WS_DEFAULT_HANDSHAKE_MS);
  o.close_timeout_ms = opt_count(L, 1, "websocket", "closeTimeout",
                              MASTRA__WS_DEFAULT_CLOSE_MS);
  o.max_message = opt_count(L, 1, "websocket", "maxMessage",
                         MASTRA__WS_DEFAULT_MAX_MESSAGE);
  o.keepalive_ms = opt_count(L, 1, "websocket", "keepalive", 0);
  t = lua_getfield(L, 1, "protocols");
  if (t == LUA_TTABLE) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, -1), i;
    int tbl = lua_gettop(L);
    protocols = (const char **)lua_newuserdatauv(
        L, ((size_t)n + 1) * sizeof *protocols, 0);
    for (i = 1; i <= n; i++) {
      size_t plen;
      const char *p;
      if (lua_rawgeti(L, tbl, i) != LUA_TSTRING)
        luaL_error(L, "websocket: protocols[%d] must be a string", (int)i);
      p = lua_tolstring(L, -1, &plen);
      if (!is_token(p, plen))
        luaL_error(L, "websocket: protocols[%d] ('%s') is not a valid"
                   " subprotocol token", (int)i, p);
      protocols[i - 1] = p; /* the protocols table keeps it */
      lua_pop(L, 1);
    }
    o.protocols = protocols;
    o.nprotocols = (size_t)n;
  } else if (t != LUA_TNIL) {
    luaL_error(L, "websocket: option 'protocols' must be a list of strings"
               " (got %s)", luaL_typename(L, -1));
  }
  o.headers = opt_headers(L, 1, "websocket", ws_reserved, 0, &o.nheaders);
  box = (mastra__ws **)lua_newuserdatauv(L, sizeof *box, 0);
  *box = NULL; /* born closed */
  luaL_setmetatable(L, WS_MT);
  if (mastra__ws_connect(loop, &o, box, &errname, err, sizeof err) < 0)
    return mastra__pushfail(L, errname, "%s", err);
  return 1;
}

/* }====== */

static const luaL_Reg net_funcs[] = {
  {"http", core_http},
  {"websocket", core_websocket},
  {NULL, NULL}
};

static const luaL_Reg req_meth[] = {
  {"id", req_id},
  {"result", req_result},
  {"head", req_head},
  {"read", req_read},
  {"write", req_write},
  {"finish", req_finish},
  {"bufferedAmount", req_buffered},
  {"close", req_close},
  {NULL, NULL}
};

static const luaL_Reg ws_meth[] = {
  {"id", ws_id},
  {"state", ws_state},
  {"opened", ws_opened},
  {"protocol", ws_protocol},
  {"bufferedAmount", ws_buffered},
  {"send", ws_send},
  {"receive", ws_receive},
  {"closeInfo", ws_close_info},
  {"close", ws_close},
  {NULL, NULL}
};

int mastra__open_net(lua_State *L) {
  mastra__createmeta(L, REQ_MT, req_meth, req_close, req_tostring);
  mastra__createmeta(L, WS_MT, ws_meth, ws_gc, ws_tostring);
  lua_settop(L, 1);
  mastra__setfuncs_loop(L, net_funcs);
  return 0;
}
