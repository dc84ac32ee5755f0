-- fault-platform (spec/support/fault-platform.c, driven by
-- spec/support/fault.lua): the scripted fault server the PlatformSandbox
-- specs use. Checked over the wire with curl and spec/support/ws-exec.
-- Needs MASTRA_FAULT_PLATFORM and MASTRA_WS_EXEC (set by CTest).
--
-- Every case starts its own server and stops it at the end: stop() raises
-- unless the server exits with status 0 (so a sanitizer report fails the
-- case).
local core = require "mastra.core"
local fault = require "spec.support.fault"
local platform = require "spec.support.platform"

local LEASE_PATH = "/v1/railway/projects/p/sandbox/sbx_1/exec-lease"

local function exit_frame(code)
  return { json = { type = "exit", data = { exit_code = code } } }
end

local servers = {}

local function start(script)
  local srv = fault.start(script)
  servers[#servers + 1] = srv
  return srv
end

-- ws-exec against srv's /ws/exec (opts: jwt, cwd, env, closeAfterMs,
-- path); the result of platform.wsResult plus timeMs
local function ws_exec(srv, command, opts)
  opts = opts or {}
  local lease = { wsEndpoint = srv.ws .. (opts.path or "/ws/exec"), jwt = opts.jwt or "jwt-1" }
  local r = srv:sh(platform.wsExecCommandLine(lease, command, opts), nil, { timeout = 60000 })
  local res = platform.wsResult(r.stdout, r.stderr, r.exitCode)
  res.timeMs = r.executionTimeMs
  return res
end

-- the WebSocket sessions, once n of them are logged
local function sessions(srv, n)
  srv:waitFor(function()
    return #srv:sessions() >= n
  end, 5000)
  return srv:sessions()
end

local function index_of(headers, name)
  for i, pair in ipairs(headers) do
    if pair[1] == name then return i end
  end
  return nil
end

-- curl's upgrade request, for what ws-exec cannot show quickly
local UPGRADE_ARGS = { "-H", "Upgrade: websocket", "-H", "Connection: Upgrade",
  "-H", "Sec-WebSocket-Version: 13", "-H", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
  "-H", "Sec-WebSocket-Protocol: railway-shell, jwt-9" }

describe("fault-platform", function()
  after_each(function()
    for _, srv in ipairs(servers) do srv.close() end
    servers = {}
  end)

  describe("HTTP", function()
    it("prints its URL, and exits with status 0 on SIGTERM", function()
      local srv = start{ routes = {} }
      assert.matches("^http://127%.0%.0%.1:%d+$", srv.url)
      assert.equals("ws://127.0.0.1:" .. srv.port, srv.ws)
      assert.equals(0, srv:stop())
    end)

    it("answers a route's responses in order, the last one repeating", function()
      local srv = start{ routes = {
        { method = "POST", path = "/v1/railway/projects/p/sandbox", responses = {
          { status = 503, body = '{"error":{"message":"busy","type":"internal_error"}}' },
          { status = 201, json = { id = "sbx_1", status = "ready" } },
        } },
      } }
      local statuses, bodies = {}, {}
      for i = 1, 4 do
        local r = srv:curl("POST", "/v1/railway/projects/p/sandbox", { body = "{}" })
        statuses[i], bodies[i] = r.status, r
      end
      assert.same({ 503, 201, 201, 201 }, statuses)
      assert.equals('{"error":{"message":"busy","type":"internal_error"}}', bodies[1].body)
      assert.is_nil(bodies[1].headers["content-type"])
      assert.same({ id = "sbx_1", status = "ready" }, bodies[2].json)
      assert.equals("application/json", bodies[2].headers["content-type"])
      local used = {}
      for i, ev in ipairs(srv:requests()) do used[i] = ev.response end
      assert.same({ 1, 2, 2, 2 }, used)
      assert.equals(0, srv:stop())
    end)

    it("serves raw bodies with their content type, bytes as they are", function()
      local html = "<html><body><h1>502 Bad Gateway</h1></body></html>\n"
      local srv = start{ routes = {
        { path = "/gw", responses = { { status = 502, contentType = "text/html", body = html,
          headers = { ["X-Upstream"] = "down" } } } },
        { path = "/bin", responses = { { body = "a\0b\255" } } },
        { path = "/hex", responses = { { status = 500, bodyHex = "7b7d00" } } },
      } }
      local r = srv:curl("GET", "/gw")
      assert.equals(502, r.status)
      assert.equals("text/html", r.headers["content-type"])
      assert.equals("down", r.headers["x-upstream"])
      assert.equals(html, r.body)
      assert.equals("a\0b\255", srv:curl("GET", "/bin").body)
      r = srv:curl("GET", "/hex")
      assert.equals(500, r.status)
      assert.equals("{}\0", r.body)
      assert.equals(0, srv:stop())
    end)

    it("replaces $WS and $URL in the script's strings", function()
      local srv = start{ routes = {
        { method = "POST", path = LEASE_PATH, responses = { { json = {
          provider = "railway", sandboxId = "sbx_1", jwt = "jwt-1",
          wsEndpoint = "$WS/ws/exec", subprotocol = "railway-shell",
          expiresAt = "2030-01-01T00:00:00.000Z", self = "$URL/x",
        } } } },
      } }
      local r = srv:curl("POST", LEASE_PATH)
      assert.equals(200, r.status)
      assert.equals(srv.ws .. "/ws/exec", r.json.wsEndpoint)
      assert.matches("^ws://127%.0%.0%.1:%d+/ws/exec$", r.json.wsEndpoint)
      assert.equals(srv.url .. "/x", r.json.self)
      assert.equals(0, srv:stop())
    end)

    it("delays an answer by delayMs, and records the request on arrival", function()
      local srv = start{ routes = {
        { path = "/slow", responses = { { status = 204, delayMs = 1500 } } },
      } }
      local h = srv.sandbox.processes:spawn(
        "curl -s -o /dev/null -w '%{http_code} %{time_total}' " .. srv.url .. "/slow")
      srv:waitFor(function(log) return #log == 1 end, 1200)
      assert.is_nil(h.exitCode) -- logged, not answered yet
      local res = h:wait()
      local code, secs = res.stdout:match("^(%d+) ([%d.]+)$")
      assert.equals("204", code)
      assert.is_true(tonumber(secs) >= 1.45, "answered after " .. secs .. " s")
      assert.equals("answered", srv:requests()[1].outcome)
      assert.equals(0, srv:stop())
    end)

    it("answers unknown routes with 404 not_found 'no route'", function()
      local srv = start{ routes = {
        { method = "POST", path = "/only-post", responses = { { status = 200 } } },
      } }
      for _, req in ipairs{ { "GET", "/nope" }, { "GET", "/only-post" },
          { "POST", "/only-post/more" } } do
        local r = srv:curl(req[1], req[2])
        assert.equals(404, r.status)
        assert.same({ error = { message = "no route", type = "not_found" } }, r.json)
      end
      for _, ev in ipairs(srv:requests()) do
        assert.is_nil(ev.route)
        assert.equals(404, ev.status)
      end
      assert.equals(0, srv:stop())
    end)

    it("records method, path with query, lower-cased headers in order, and the exact body",
      function()
        local srv = start{ routes = {
          { method = "PUT", path = "/rec", responses = { { status = 201 } } },
          { path = "/rec?only=this", responses = { { status = 202 } } },
        } }
        local body = "line\r\n\0\255{\"k\":\"v\"}"
        local r = srv:curl("PUT", "/rec?q=a+b&s=%2F&flag", { body = body, args = {
          "-H", "X-First: 1", "-H", "X-Mixed-CASE: Value Two", "-H", "Authorization: Bearer tok",
          "-H", "Content-Type: application/json",
        } })
        assert.equals(201, r.status)
        assert.equals(202, srv:curl("GET", "/rec?only=this").status)
        local reqs = srv:requests()
        assert.equals(2, #reqs)
        local ev = reqs[1]
        assert.equals("http", ev.type)
        assert.equals("PUT", ev.method)
        assert.equals("/rec?q=a+b&s=%2F&flag", ev.path)
        assert.equals(body, ev.body)
        for _, pair in ipairs(ev.headers) do assert.equals(pair[1]:lower(), pair[1]) end
        assert.equals("1", ev.header["x-first"])
        assert.equals("Value Two", ev.header["x-mixed-case"])
        assert.equals("Bearer tok", ev.header["authorization"])
        assert.equals("application/json", ev.header["content-type"])
        assert.equals(tostring(#body), ev.header["content-length"])
        assert.is_true(index_of(ev.headers, "host") < index_of(ev.headers, "x-first"))
        assert.is_true(index_of(ev.headers, "x-first") < index_of(ev.headers, "x-mixed-case"))
        assert.is_true(index_of(ev.headers, "x-mixed-case") < index_of(ev.headers, "authorization"))
        assert.same({ 1, 1, 201 }, { ev.route, ev.response, ev.status })
        assert.same({ "GET", "/rec?only=this", 2, "" }, { reqs[2].method, reqs[2].path,
          reqs[2].route, reqs[2].body })
        assert.is_true(reqs[1].seq < reqs[2].seq)
        assert.equals(0, srv:stop())
      end)

    it("drops a connection without an answer, or stalls it", function()
      local srv = start{ routes = {
        { path = "/drop", responses = { { drop = true } } },
        { path = "/stall", responses = { { stall = true } } },
      } }
      local r = srv:curl("GET", "/drop", { allowFail = true })
      assert.equals(52, r.curlExit) -- empty reply from server
      r = srv:curl("GET", "/stall", { allowFail = true, maxTime = 1 })
      assert.equals(28, r.curlExit) -- timed out
      local reqs = srv:requests()
      assert.same({ "dropped", "stalled" }, { reqs[1].outcome, reqs[2].outcome })
      assert.is_nil(reqs[1].status)
      assert.equals(0, srv:stop()) -- with the stalled request still open
    end)

    it("refuses a bad script with a message that names the place", function()
      local ok, err = pcall(fault.start, { routes = {
        { path = "/x", responses = { { stauts = 200 } } } } })
      assert.is_false(ok)
      assert.matches('routes%[1%]%.responses%[1%]: unknown key "stauts"', err)
      ok, err = pcall(fault.start, { routes = {
        { path = "/ws", ws = { { frames = { { text = "a", binaryHex = "0" } } } } } } })
      assert.is_false(ok)
      assert.matches("exclude each other", err)
    end)

    it("says what to set when MASTRA_FAULT_PLATFORM is missing", function()
      local ok, err = pcall(fault.binary, function() return nil end)
      assert.is_false(ok)
      assert.matches("MASTRA_FAULT_PLATFORM is not set", err)
    end)
  end)

  describe("WebSocket", function()
    it("runs a scripted exchange: tagged frames, ignorable frames, exit", function()
      local srv = start{ routes = {
        -- like the real server: output once init_exec and stdin_close are in
        -- (frames sent at once may meet a client that closes before its init)
        { method = "GET", path = "/ws/exec", ws = { { afterMessages = 2, frames = {
          { binary = "\1hello\n" },
          { binary = "\3oops\n" },
          { binary = "\1" },                    -- only the tag byte
          { binary = "\2unknown tag\n" },
          { text = "not-json" },
          { json = { type = "durable_session", data = { durable_session_name = "d1" } } },
          { binary = "\1\226\130" },            -- a UTF-8 character split in two
          { binaryHex = "01ac0a" },
          exit_frame(7),
        } } } },
      } }
      local r = ws_exec(srv, "echo hi", { cwd = "/w", env = { A = "1" } })
      assert.equals("hello\n€\n", r.stdout)
      assert.equals("oops\n", r.stderr)
      assert.same({ 7, 1000, true }, { r.summary.exit, r.summary.close, r.summary.opened })
      assert.equals(7, r.status)
      local s = sessions(srv, 1)[1]
      assert.equals("ws", s.type)
      assert.same({ "GET", "/ws/exec", 1, 1 }, { s.method, s.path, s.route, s.entry })
      assert.equals("railway-shell, jwt-1", s.protocol)
      assert.equals("railway-shell", s.selected)
      assert.same({ 101, "upgraded", "closed" }, { s.status, s.outcome, s["end"] })
      -- what ws-exec sent: init_exec, then stdin_close, both text
      assert.equals(2, #s.messages)
      assert.equals(1, s.messages[1].opcode)
      local init = core.jsonDecode(s.messages[1].data)
      assert.equals("init_exec", init.type)
      assert.same({ command = "echo hi", cwd = "/w", env = { A = "1" } }, init.data)
      assert.same({ 1, '{"type":"stdin_close"}' }, { s.messages[2].opcode, s.messages[2].data })
      assert.equals(1000, s.closeCode) -- ws-exec closes with 1000 after the exit
      assert.equals(0, srv:stop())
    end)

    it("closes with a code and reason, before any exit", function()
      local srv = start{ routes = {
        { path = "/ws/exec", ws = { { close = 1011, reason = "server_error" } } },
      } }
      local r = ws_exec(srv, "true")
      assert.is_nil(r.summary.exit)
      assert.same({ 1011, "server_error", true }, { r.summary.close, r.summary.reason,
        r.summary.opened })
      assert.equals(101, r.status) -- ws-exec: transport failure
      local s = sessions(srv, 1)[1]
      assert.equals("closed", s["end"])
      assert.equals(1011, s.closeCode) -- the client echoed ours
      assert.equals(0, srv:stop())
    end)

    it("refuses the upgrade with an HTTP status", function()
      local srv = start{ routes = {
        { path = "/ws/exec", ws = {
          { refuse = 401 },
          { refuse = 503, body = "upstream down", contentType = "text/plain" },
        } },
      } }
      local r = ws_exec(srv, "true")
      assert.same({ 401, false, 100 }, { r.summary.httpStatus, r.summary.opened, r.status })
      assert.matches('"type":"authentication_error"', r.summary.httpBody)
      r = ws_exec(srv, "true")
      assert.equals(503, r.summary.httpStatus)
      assert.equals("upstream down", r.summary.httpBody)
      local ss = sessions(srv, 2)
      assert.same({ "refused", 401, 1 }, { ss[1].outcome, ss[1].status, ss[1].entry })
      assert.same({ "refused", 503, 2 }, { ss[2].outcome, ss[2].status, ss[2].entry })
      assert.equals(0, srv:stop())
    end)

    it("drops the connection without a close frame (the client sees 1006)", function()
      local srv = start{ routes = {
        { path = "/ws/exec", ws = { { afterMessages = 2, frames = { { binary = "\1partial" } },
          drop = true } } },
      } }
      local r = ws_exec(srv, "true")
      assert.equals("partial", r.stdout)
      assert.is_nil(r.summary.exit)
      assert.is_nil(r.summary.close) -- no close frame came
      assert.is_true(r.summary.opened)
      assert.equals(101, r.status)
      local s = sessions(srv, 1)[1]
      assert.equals("dropped", s["end"])
      assert.equals(2, #s.messages) -- init_exec and stdin_close, before the drop
      assert.equals(0, srv:stop())
    end)

    it("resets the connection", function()
      local srv = start{ routes = { { path = "/ws/exec", ws = { { reset = true } } } } }
      local r = ws_exec(srv, "true")
      assert.same({ true, 101 }, { r.summary.opened, r.status })
      assert.is_nil(r.summary.close)
      assert.equals("reset", sessions(srv, 1)[1]["end"])
      assert.equals(0, srv:stop())
    end)

    it("stalls: never answers the upgrade", function()
      local srv = start{ routes = { { path = "/ws/exec", ws = { { stall = true } } } } }
      local args = { "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "1" }
      for _, a in ipairs(UPGRADE_ARGS) do args[#args + 1] = a end
      args[#args + 1] = srv.url .. "/ws/exec"
      local r = srv:sh("curl", args)
      assert.equals(28, r.exitCode) -- curl timed out waiting for an answer
      assert.equals("000", r.stdout)
      local s = srv:sessions()[1] -- logged at once
      assert.same({ "stalled", "railway-shell, jwt-9" }, { s.outcome, s.protocol })
      assert.is_nil(s.status)
      assert.equals(0, srv:stop())
    end)

    it("answers a request that is no handshake with 400, using no entry", function()
      local srv = start{ routes = {
        { path = "/ws/exec", ws = { { frames = { exit_frame(0) } } } } } }
      local r = srv:curl("GET", "/ws/exec")
      assert.equals(400, r.status)
      assert.equals("invalid_request", r.json.error.type)
      local ok = ws_exec(srv, "true")
      assert.equals(0, ok.summary.exit)
      local ss = sessions(srv, 2)
      assert.same({ "bad-handshake", nil }, { ss[1].outcome, ss[1].entry })
      assert.same({ "upgraded", 1 }, { ss[2].outcome, ss[2].entry })
      assert.equals(0, srv:stop())
    end)

    it("waits for the client's first N messages (afterMessages)", function()
      local srv = start{ routes = { { path = "/ws/exec", ws = {
        { afterMessages = 3, frames = { { binary = "\1never\n" }, exit_frame(0) } },
        { afterMessages = 2, frames = { { binary = "\1after two\n" },
          { afterMessages = 2, delayMs = 100, binary = "\1then\n" }, exit_frame(0) } },
      } } } }
      -- ws-exec sends two messages: the first entry never gets going
      local r = ws_exec(srv, "true", { closeAfterMs = 500 })
      assert.equals("", r.stdout)
      assert.is_nil(r.summary.exit)
      assert.equals(1000, r.summary.close) -- the echo of ws-exec's own close
      r = ws_exec(srv, "true")
      assert.equals("after two\nthen\n", r.stdout)
      assert.equals(0, r.summary.exit)
      assert.equals(0, srv:stop())
    end)

    it("uses entries in order (times counts one several times), the last repeating;"
      .. " delayMs delays the handshake", function()
      local srv = start{ routes = { { path = "/ws/exec", ws = {
        { refuse = 500, times = 2 },
        { delayMs = 400, frames = { exit_frame(0) } },
      } } } }
      local got = {}
      for i = 1, 4 do
        local r = ws_exec(srv, "true", { jwt = "jwt-" .. i })
        got[i] = r.summary.httpStatus or r.summary.exit
        if i >= 3 then
          assert.is_true(r.timeMs >= 400, "handshake after " .. r.timeMs .. " ms")
        end
      end
      assert.same({ 500, 500, 0, 0 }, got)
      local entries, jwts = {}, {}
      for i, s in ipairs(sessions(srv, 4)) do
        entries[i] = s.entry
        jwts[i] = s.protocol:match(", (.*)$")
      end
      assert.same({ 1, 1, 2, 2 }, entries)
      assert.same({ "jwt-1", "jwt-2", "jwt-3", "jwt-4" }, jwts)
      assert.equals(0, srv:stop())
    end)

    it("selects the protocol the entry names, or none", function()
      local srv = start{ routes = { { path = "/ws/exec", ws = {
        { protocol = "other" }, { protocol = false } } } } }
      local r = ws_exec(srv, "true")
      assert.is_false(r.summary.opened) -- ws-exec refuses a protocol it did not offer
      r = ws_exec(srv, "true")
      assert.is_false(r.summary.opened)
      local ss = sessions(srv, 2)
      assert.equals("other", ss[1].selected)
      assert.is_nil(ss[2].selected)
      assert.equals(0, srv:stop())
    end)

    it("logs a session still open at stop() with end 'shutdown'", function()
      local srv = start{ routes = { { path = "/ws/exec", ws = { { afterMessages = 2, frames = {
        { binary = "\1started\n" } } } } } } } -- then stays open
      local h = srv.sandbox.processes:spawn(platform.wsExecCommandLine(
        { wsEndpoint = srv.ws .. "/ws/exec", jwt = "jwt-1" }, "sleep 100"))
      assert.is_true(platform.waitUntil(function() return h.stdout == "started\n" end, 5000))
      assert.equals(0, #srv:sessions()) -- not over yet
      assert.equals(0, srv:stop())
      local s = srv:sessions()[1] -- the final log, after stop
      assert.same({ "shutdown", 2 }, { s["end"], #s.messages })
    end)

    it("splits the log: requests() are HTTP, sessions() WebSocket, by arrival", function()
      local srv = start{ routes = {
        { method = "POST", path = LEASE_PATH, responses = { { json = {
          jwt = "jwt-1", wsEndpoint = "$WS/ws/exec", subprotocol = "railway-shell" } } } },
        { path = "/ws/exec", ws = { { frames = { exit_frame(0) } } } },
      } }
      local lease = srv:curl("POST", LEASE_PATH).json
      local r = srv:sh(platform.wsExecCommandLine(lease, "true"))
      assert.equals(0, r.exitCode)
      local log = srv:waitFor(function(l) return #l == 2 end)
      assert.same({ "http", "ws" }, { log[1].type, log[2].type })
      assert.same({ 1, 2 }, { log[1].seq, log[2].seq })
      assert.equals(1, #srv:requests())
      assert.equals(1, #srv:sessions())
      assert.equals(0, srv:stop())
    end)
  end)
end)
