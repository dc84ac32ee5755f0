-- The HTTP and WebSocket client of mastra.core (core.http, core.websocket;
-- src/lua/lnet.c) against a real mastra-platform: the control plane over
-- HTTP, `echo hello` over the exec WebSocket (docs/platform.md: the lease,
-- `init_exec`, output frames, `exit`), concurrency in tasks, failures,
-- cancellation.
-- Needs MASTRA_PLATFORM (set by CTest).
local lfs = require "lfs"
local mastra = require "mastra"
local core = require "mastra.core"
local task = require "mastra.task"
local platform = require "spec.support.platform"

-- MASTRA_SPEC_FIGURES=1: print timings on stderr
local function figure(fmt, ...)
  if os.getenv("MASTRA_SPEC_FIGURES") then
    io.stderr:write(("[figures] " .. fmt .. "\n"):format(...))
  end
end

-- {====== helpers ======

-- One request, waiting for it: status, headers, body, or nil, message,
-- NAME (the failure triple of mastra.core).
local function fetch(spec)
  local req <close> = assert(core.http(spec))
  while true do
    local status, a, b = req:result()
    if status ~= nil then return status, a, b end
    if a ~= nil then return nil, a, b end
    task.wait(req:id())
  end
end

-- Wait until the socket has left `state` (or closed).
local function wait_state_change(ws, state)
  while ws:state() == state do task.wait(ws:id()) end
  return ws:state()
end

local function open_fds()
  local n = 0
  for name in lfs.dir("/proc/self/fd") do
    if name:match("^%d+$") then n = n + 1 end
  end
  return n - 1 -- the listing's own descriptor
end

local PREFIX = "/v1/railway/projects/proj-net"

-- }======

describe("core.http and core.websocket against mastra-platform", function()
  local srv, auth, sandboxId

  local function api(method, path, body, opts)
    opts = opts or {}
    local headers = { authorization = "Bearer " .. srv.token }
    if body then headers["content-type"] = "application/json" end
    return fetch{ method = method, url = srv.url .. PREFIX .. path, headers = headers,
      body = body, timeout = opts.timeout }
  end

  setup(function()
    srv = platform.start()
    auth = "Bearer " .. srv.token
    local status, headers, body = api("POST", "/sandbox", '{"environmentId":"env-net","env":{}}')
    assert.are.equal(201, status, body)
    assert.are.equal("application/json", headers["content-type"])
    sandboxId = platform.decode(body).id
    assert.is_string(sandboxId)
  end)

  teardown(function()
    if srv then srv:close() end
  end)

  describe("core.http", function()
    it("answers status, lower-cased headers and the body", function()
      local status, headers, body = api("GET", "/sandbox/" .. sandboxId)
      assert.are.equal(200, status)
      assert.are.equal(sandboxId, platform.decode(body).id)
      assert.are.equal(tostring(#body), headers["content-length"])
      for name in pairs(headers) do assert.are.equal(name:lower(), name) end
    end)

    it("reports a non-2xx answer as a result, with its body", function()
      local status, _, body = fetch{ url = srv.url .. PREFIX .. "/sandbox/" .. sandboxId }
      assert.are.equal(401, status)
      assert.are.equal("authentication_error", platform.decode(body).error.type)
    end)

    it("runs 50 concurrent requests in tasks (mastra.map), all complete", function()
      local ids = {}
      for i = 1, 50 do ids[i] = i end
      local t0 = core.now()
      local results = mastra.map(ids, function(i)
        local status, _, body = api("GET", "/sandbox/" .. sandboxId)
        return { i = i, status = status, id = body and platform.decode(body).id }
      end)
      local ms = core.now() - t0
      assert.are.equal(50, #results)
      for i, r in ipairs(results) do
        assert.are.equal(i, r.i)
        assert.are.equal(200, r.status)
        assert.are.equal(sandboxId, r.id)
      end
      figure("50 concurrent GET /sandbox/:id: %.0f ms", ms)
      t0 = core.now()
      for _ = 1, 200 do assert.are.equal(200, (api("GET", "/sandbox/" .. sandboxId))) end
      ms = core.now() - t0
      figure("200 sequential GET /sandbox/:id: %.0f ms (%.0f requests/s)", ms,
        200 * 1000 / math.max(ms, 1))
    end)

    it("fails with CURLE_COULDNT_CONNECT on a closed port", function()
      local other = platform.start()
      local url = other.url
      other:stop() -- nothing listens on its port any more
      local req <close> = assert(core.http{ url = url .. "/v1/projects/p/sandbox/x" })
      while select("#", req:result()) == 1 do task.wait(req:id()) end -- nil: running
      assert.are.equal(3, select("#", req:result()))
      local status, message, name = req:result()
      assert.is_nil(status)
      assert.are.equal("CURLE_COULDNT_CONNECT", name)
      assert.matches("connect", message)
    end)

    it("fails with CURLE_OPERATION_TIMEDOUT after its timeout", function()
      local t0 = core.now()
      local status, message, name = api("POST", "/sandbox/" .. sandboxId .. "/exec",
        '{"command":"sleep 3"}', { timeout = 300 })
      local ms = core.now() - t0
      assert.is_nil(status)
      assert.are.equal("CURLE_OPERATION_TIMEDOUT", name)
      assert.matches("[Tt]imeout", message)
      assert.is_true(ms >= 290 and ms < 2500, "took " .. ms .. " ms")
    end)

    it("closes the request of a cancelled task (no descriptor left)", function()
      api("GET", "/sandbox/" .. sandboxId) -- the shared multi exists
      local before = open_fds()
      local req
      local t = mastra.spawn(function()
        req = assert(core.http{ method = "POST", url = srv.url .. PREFIX .. "/sandbox/"
          .. sandboxId .. "/exec", headers = { authorization = auth,
          ["content-type"] = "application/json" }, body = '{"command":"sleep 3"}' })
        local r <close> = req
        while r:result() == nil do task.wait(r:id()) end
        return "finished"
      end)
      platform.waitUntil(function() return req ~= nil end, 2000)
      mastra.sleep(100) -- the request is on the wire
      assert.is_nil(req:result())
      assert.is_true(t:cancel())
      local ok, err = pcall(t.wait, t)
      assert.is_false(ok)
      assert.is_true(mastra.errors.CancelledError:is(err))
      assert.has_error(function() req:id() end, "attempt to use a closed mastra.HttpRequest")
      assert.matches("closed", tostring(req))
      assert.is_true(open_fds() <= before, "descriptors: " .. before .. " -> " .. open_fds())
    end)

    it("raises for bad arguments", function()
      assert.has_error(function() core.http{} end, "http: option 'url' is required")
      assert.has_error(function() core.http{ url = "http://x/", bogus = 1 } end,
        "http: unknown option 'bogus'")
      assert.has_error(function()
        core.http{ url = "http://x/", headers = { ["x-a"] = "1\r\nX-Injected: 2" } }
      end, "http: the value of header 'x-a' contains CR, LF or NUL")
      assert.has_error(function() core.http{ url = "http://x/", method = "GET X" } end,
        "http: 'GET X' is not a valid method")
      assert.has_error(function() core.http{ url = "http://x/", timeout = -1 } end,
        "http: option 'timeout' must be an integer >= 0")
    end)
  end)

  describe("core.websocket", function()
    local lease

    setup(function()
      local status, _, body = api("POST", "/sandbox/" .. sandboxId .. "/exec-lease")
      assert.are.equal(200, status, body)
      lease = platform.decode(body)
    end)

    local function exec(command)
      local ws <close> = assert(core.websocket{ url = lease.wsEndpoint,
        protocols = { lease.subprotocol, lease.jwt } })
      assert.are.equal("connecting", ws:state())
      assert.are.equal("open", wait_state_change(ws, "connecting"))
      assert.is_true(ws:opened())
      assert.are.equal("railway-shell", ws:protocol())
      assert.is_true(ws:send(platform.encode{ type = "init_exec",
        data = { command = command } }, "text"))
      assert.is_true(ws:send('{"type":"stdin_close"}', "text"))
      local out, err, exit = {}, {}, nil
      while exit == nil do
        local data, kind = ws:receive()
        if data == nil then
          assert.are_not.equal("closed", ws:state(), "closed before the exit frame")
          task.wait(ws:id())
        elseif kind == "binary" then
          local tag = data:byte(1)
          if tag == 1 then out[#out + 1] = data:sub(2) end
          if tag == 3 then err[#err + 1] = data:sub(2) end
        else
          local frame = platform.decode(data)
          if frame.type == "exit" then exit = frame.data.exit_code or 0 end
        end
      end
      ws:close(1000, "")
      assert.are.equal("closed", wait_state_change(ws, "closing"))
      local code, _, httpStatus, errtext = ws:closeInfo()
      assert.is_nil(httpStatus)
      assert.is_nil(errtext)
      return table.concat(out), table.concat(err), exit, code
    end

    it("runs `echo hello` over the exec protocol", function()
      local stdout, stderr, exit, code = exec("echo hello; echo oops >&2; exit 3")
      assert.are.equal("hello\n", stdout)
      assert.are.equal("oops\n", stderr)
      assert.are.equal(3, exit)
      assert.are.equal(1000, code)
    end)

    it("runs execs in concurrent tasks", function()
      local list = {}
      for i = 1, 10 do list[i] = i end
      local t0 = core.now()
      local results = mastra.map(list, function(i)
        return (exec("echo " .. i))
      end)
      figure("10 concurrent execs over WebSockets: %.0f ms", core.now() - t0)
      for i = 1, 10 do assert.are.equal(i .. "\n", results[i]) end
    end)

    it("reports an upgrade refused with 401: httpStatus 401, opened false", function()
      local ws <close> = assert(core.websocket{ url = lease.wsEndpoint,
        protocols = { lease.subprotocol, "not-the-jwt" } })
      assert.are.equal("closed", wait_state_change(ws, "connecting"))
      assert.is_false(ws:opened())
      local code, reason, httpStatus, errtext, body, errname = ws:closeInfo()
      assert.is_nil(code)
      assert.is_nil(reason)
      assert.are.equal(401, httpStatus)
      assert.matches("HTTP 401", errtext)
      assert.are.equal("http_status", errname)
      assert.are.equal("authentication_error", platform.decode(body).error.type)
      local ok, msg, name = ws:send("x")
      assert.is_nil(ok)
      assert.matches("closed", msg)
      assert.are.equal("ENOTCONN", name)
    end)

    it("fails the handshake after its timeout, never opened", function()
      -- a stopped server: the kernel completes the connection, nobody answers
      local other = platform.start()
      os.execute("kill -STOP " .. other.pid)
      local ok, err = pcall(function()
        local t0 = core.now()
        local ws <close> = assert(core.websocket{ url = other.url:gsub("^http", "ws")
          .. "/ws/exec", protocols = { "railway-shell", "jwt" }, timeout = 300 })
        assert.are.equal("closed", wait_state_change(ws, "connecting"))
        local ms = core.now() - t0
        assert.is_true(ms >= 290 and ms < 2500, "took " .. ms .. " ms")
        assert.is_false(ws:opened())
        local code, _, httpStatus, errtext, _, errname = ws:closeInfo()
        assert.is_nil(code)
        assert.is_nil(httpStatus)
        assert.are.equal("CURLE_OPERATION_TIMEDOUT", errname)
        assert.matches("did not complete within 300 ms", errtext)
      end)
      os.execute("kill -CONT " .. other.pid)
      other:stop()
      assert(ok, err)
    end)

    it("returns nil, message, NAME for a bad URL; raises for bad arguments", function()
      local ws, message, name = core.websocket{ url = "ftp://host/" }
      assert.is_nil(ws)
      assert.are.equal("CURLE_UNSUPPORTED_PROTOCOL", name)
      assert.matches("ws or wss", message)
      assert.has_error(function() core.websocket{ url = "ws://x/", protocols = { "a b" } } end,
        "websocket: protocols[1] ('a b') is not a valid subprotocol token")
      assert.has_error(function()
        core.websocket{ url = "ws://x/", headers = { ["Sec-WebSocket-Key"] = "k" } }
      end, "websocket: header 'Sec-WebSocket-Key' is set by the client itself")
      local w <close> = assert(core.websocket{ url = "ws://127.0.0.1:9/" })
      assert.has_error(function() w:close(1001) end)
      assert.has_error(function() w:send("x", "utf8") end)
    end)

    it("leaves no descriptor behind", function()
      api("GET", "/sandbox/" .. sandboxId)
      local before = open_fds()
      exec("true")
      do
        local ws <close> = assert(core.websocket{ url = lease.wsEndpoint,
          protocols = { lease.subprotocol, lease.jwt } })
        wait_state_change(ws, "connecting")
      end -- released while open: a best-effort close in the background
      platform.waitUntil(function() return open_fds() <= before end, 3000)
      assert.is_true(open_fds() <= before, "descriptors: " .. before .. " -> " .. open_fds())
    end)
  end)
end)
