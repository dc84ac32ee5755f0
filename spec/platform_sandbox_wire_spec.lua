-- PlatformSandbox on the wire, against the scripted fault server
-- (spec/support/fault-platform.c): the exact requests of the control plane
-- and of direct exec, the sequences the upstream client's tests pin down
-- (one lease for three execs, re-mint near expiry, 410 and 1006/1011
-- handling, the checkpoint delete before the sandbox delete, the exec
-- frames' edge cases), and the faults the real platform does not produce on
-- demand.
local core = require "mastra.core"
local mastra = require "mastra"
local fault = require "spec.support.fault"

local errors = mastra.errors
local P = "/v1/railway/projects/p"
local FAR = "2030-01-01T00:00:00.000Z"

local function created(id)
  return { status = 201, json = { id = id or "sbx_1", status = "ready",
    createdAt = "2026-01-01T00:00:00.000Z" } }
end

local function lease(jwt, expiresAt)
  return { status = 200, json = { provider = "railway", sandboxId = "sbx_1",
    providerResourceId = "rw_1", jwt = jwt, wsEndpoint = "$WS/ws/exec",
    subprotocol = "railway-shell", expiresAt = expiresAt or FAR } }
end

-- a session that waits for init_exec and stdin_close, then answers
local function exit_frames(out, code)
  return { afterMessages = 2, frames = { { binary = "\1" .. out },
    { json = { type = "exit", data = { exit_code = code or 0 } } } }, close = 1000 }
end

local function header(req, name)
  return req.header[name]
end

describe("PlatformSandbox on the wire", function()
  local srv

  local function sandbox(extra)
    local o = { accessToken = "tok", proxyUrl = srv.url, projectId = "p",
      environmentId = "env1", createRetryDelayMs = 50, handshakeTimeout = 500 }
    for k, v in pairs(extra or {}) do o[k] = v end
    return mastra.PlatformSandbox.new(o)
  end

  local function serve(routes)
    srv = fault.start{ routes = routes }
    return srv
  end

  after_each(function()
    if srv then srv:stop() end
    srv = nil
  end)

  it("creates with the body keys in order, undefined ones left out, and the headers", function()
    serve{ { method = "POST", path = P .. "/sandbox", responses = { created() } } }
    local sb = sandbox{ id = "mc-session-42", idleTimeoutMinutes = 30,
      networkIsolation = "PRIVATE", env = { BASE = "1" }, actingUserId = " user-7 ",
      sessionId = "s-1" }
    assert.are.same({ outcome = "created" }, sb:start())
    local reqs = srv:requests()
    assert.are.equal(1, #reqs)
    local r = reqs[1]
    assert.are.equal("POST", r.method)
    assert.are.equal(P .. "/sandbox", r.path)
    assert.are.equal('{"id":"mc-session-42","environmentId":"env1","idleTimeoutMinutes":30,'
      .. '"networkIsolation":"PRIVATE","env":{"BASE":"1"}}', r.body)
    assert.are.equal("Bearer tok", header(r, "authorization"))
    assert.are.equal("application/json", header(r, "content-type"))
    assert.are.equal("user-7", header(r, "x-acting-user-id"))
    assert.are.equal("s-1", header(r, "x-mastra-session-id"))
    assert.is_nil(header(r, "x-mastra-thread-id"))
    assert.are.equal("sbx_1", sb.sandboxId)
  end)

  it("sends env {} and no optional keys by default, and no acting user header", function()
    serve{ { method = "POST", path = P .. "/sandbox", responses = { created() } } }
    local sb = sandbox()
    sb:start()
    local r = srv:requests()[1]
    assert.are.equal(('{"id":"%s","environmentId":"env1","env":{}}'):format(sb.id), r.body)
    assert.is_nil(header(r, "x-acting-user-id"))
  end)

  it("shares one create among concurrent start() calls, and a failure among them", function()
    serve{ { method = "POST", path = P .. "/sandbox", responses = {
      { status = 400, delayMs = 100,
        json = { error = { message = "bad", type = "invalid_request" } } },
      { status = 201, delayMs = 100, json = { id = "sbx_1" } } } } }
    local sb = sandbox()
    local function try() return pcall(sb.start, sb) end
    local fails = mastra.all{ function() return select(2, try()).status end,
      function() return select(2, try()).status end }
    assert.are.same({ 400, 400 }, fails)
    assert.are.equal(1, #srv:requests())
    local outcomes = mastra.all{ function() return sb:start().outcome end,
      function() return sb:start().outcome end, function() return sb:start().outcome end }
    assert.are.same({ "created", "created", "created" }, outcomes)
    assert.are.equal(2, #srv:requests())
  end)

  it("retries a 5xx on create: 3 attempts, waiting 1x then 2x the delay", function()
    serve{ { method = "POST", path = P .. "/sandbox", responses = {
      { status = 503, json = { error = { message = "busy", type = "internal_error" } } },
      { status = 502, body = "<html>bad gateway</html>", contentType = "text/html" },
      created() } } }
    local t0 = mastra.now()
    assert.are.same({ outcome = "created" }, sandbox():start())
    assert.is_true(mastra.now() - t0 >= 150)
    assert.are.equal(3, #srv:requests())
  end)

  it("gives up after 3 failed creates with the last PlatformApiError", function()
    serve{ { method = "POST", path = P .. "/sandbox", responses = {
      { status = 502, body = "<html>bad gateway</html>", contentType = "text/html" } } } }
    local sb = sandbox()
    local ok, err = pcall(sb.start, sb)
    assert.is_false(ok)
    assert.is_true(errors.PlatformApiError:is(err))
    assert.are.equal(502, err.status)
    assert.is_nil(err.code)
    assert.are.equal("Platform proxy request failed with 502: <html>bad gateway</html>",
      err.message)
    assert.are.equal(3, #srv:requests())
    assert.are.equal("error", sb.status)
  end)

  it("does not retry a 4xx on create, and parses the error body", function()
    serve{ { method = "POST", path = P .. "/sandbox", responses = {
      { status = 404, json = { error = { message = "Project not found", type = "not_found" } } },
    } } }
    local sb = sandbox()
    local ok, err = pcall(sb.start, sb)
    assert.is_false(ok)
    assert.are.equal("not_found", err.code)
    assert.are.equal("Project not found", err.proxyMessage)
    assert.are.equal("Platform proxy request failed with 404: not_found: Project not found",
      err.message)
    assert.are.equal(1, #srv:requests())
  end)

  it("reuses one lease for three execs: one mint, three sockets, the init_exec frames", function()
    serve{
      { method = "POST", path = P .. "/sandbox", responses = { created() } },
      { method = "POST", path = P .. "/sandbox/sbx_1/exec-lease", responses = { lease("jwt-1") } },
      { method = "GET", path = "/ws/exec", ws = { exit_frames("ok\n") } },
    }
    local sb = sandbox{ env = { GH_TOKEN = "ghs_1" } }
    assert.are.equal("ok\n", sb:executeCommand("echo", { "ok" }).stdout)
    sb:executeCommand("echo ok", nil, { cwd = "/w", env = { A = "1" } })
    sb:executeCommand("echo ok", nil, { env = {} })
    srv:waitFor(function(log)
      local n = 0
      for _, e in ipairs(log) do if e.type == "ws" then n = n + 1 end end
      return n == 3
    end)
    local reqs, sessions = srv:requests(), srv:sessions()
    assert.are.equal(2, #reqs)
    local mint = reqs[2]
    assert.are.equal("POST", mint.method)
    assert.are.equal("", mint.body)
    assert.is_nil(header(mint, "content-type"))
    assert.are.equal(3, #sessions)
    for _, s in ipairs(sessions) do
      assert.are.equal("railway-shell, jwt-1", s.protocol)
      assert.are.equal(2, #s.messages)
      assert.are.equal('{"type":"stdin_close"}', s.messages[2].data)
      assert.are.equal(1000, s.closeCode)
    end
    assert.are.equal(
      '{"type":"init_exec","data":{"command":"echo ok","env":{"GH_TOKEN":"ghs_1"}}}',
      sessions[1].messages[1].data)
    assert.are.equal('{"type":"init_exec","data":{"command":"echo ok","cwd":"/w",'
      .. '"env":{"A":"1","GH_TOKEN":"ghs_1"}}}', sessions[2].messages[1].data)
  end)

  it("mints again when the lease expires within 60 s, and every time when it has no expiry",
    function()
      local soon = os.date("!%Y-%m-%dT%H:%M:%S.000Z", os.time() + 30)
      serve{
        { method = "POST", path = P .. "/sandbox", responses = { created() } },
        { method = "POST", path = P .. "/sandbox/sbx_1/exec-lease", responses = {
          lease("jwt-a", soon), lease("jwt-b", soon),
          { status = 200, json = { provider = "railway", jwt = "jwt-c",
            wsEndpoint = "$WS/ws/exec", subprotocol = "railway-shell" } } } },
        { method = "GET", path = "/ws/exec", ws = { exit_frames("x") } },
      }
      local sb = sandbox()
      for _ = 1, 4 do sb:executeCommand("true") end
      local mints = 0
      for _, r in ipairs(srv:requests()) do
        if r.path:find("exec%-lease") then mints = mints + 1 end
      end
      assert.are.equal(4, mints)
    end)

  it("shares one lease mint among 10 concurrent execs", function()
    serve{
      { method = "POST", path = P .. "/sandbox", responses = { created() } },
      { method = "POST", path = P .. "/sandbox/sbx_1/exec-lease",
        responses = { { status = 200, delayMs = 200, json = lease("jwt-1").json } } },
      { method = "GET", path = "/ws/exec", ws = { exit_frames("ok") } },
    }
    local sb = sandbox()
    sb:start()
    local list = {}
    for i = 1, 10 do list[i] = i end
    local outs = mastra.map(list, function() return sb:executeCommand("true").stdout end)
    for i = 1, 10 do assert.are.equal("ok", outs[i]) end
    assert.are.equal(2, #srv:requests())
  end)

  it("410 on the lease: SandboxDestroyedError, id cleared, stopped, next exec creates",
    function()
      serve{
        { method = "POST", path = P .. "/sandbox",
          responses = { created("sbx_1"), created("sbx_2") } },
        { method = "POST", path = P .. "/sandbox/sbx_1/exec-lease", responses = {
          { status = 410, json = { error = { message = "gone", type = "gone" } } } } },
        { method = "POST", path = P .. "/sandbox/sbx_2/exec-lease",
          responses = { lease("jwt-2") } },
        { method = "GET", path = "/ws/exec", ws = { exit_frames("back") } },
      }
      local sb = sandbox()
      local ok, err = pcall(sb.executeCommand, sb, "echo", { "x" })
      assert.is_false(ok)
      assert.is_true(errors.SandboxDestroyedError:is(err))
      assert.are.equal("Sandbox sbx_1 was destroyed; /exec-lease returned 410", err.message)
      assert.are.equal("sbx_1", err.sandboxId)
      assert.are.equal("echo x", err.command)
      assert.are.equal(1, err.attempts)
      assert.is_nil(sb.sandboxId)
      assert.are.equal("stopped", sb.status)
      assert.are.equal("back", sb:executeCommand("true").stdout)
      local reqs = srv:requests()
      assert.are.equal("POST", reqs[3].method)
      assert.are.equal(P .. "/sandbox", reqs[3].path)
    end)

  it("a 404 on the lease is a PlatformApiError and opens no socket", function()
    serve{
      { method = "POST", path = P .. "/sandbox", responses = { created() } },
      { method = "POST", path = P .. "/sandbox/sbx_1/exec-lease", responses = {
        { status = 404,
          json = { error = { message = "no such sandbox", type = "not_found" } } } } },
    }
    local sb = sandbox()
    local ok, err = pcall(sb.executeCommand, sb, "true")
    assert.is_false(ok)
    assert.matches("not_found", err.message)
    assert.are.equal(0, #srv:sessions())
  end)

  it("1006 then success: 3 fetches, 2 sockets with distinct jwts", function()
    serve{
      { method = "POST", path = P .. "/sandbox", responses = { created() } },
      { method = "POST", path = P .. "/sandbox/sbx_1/exec-lease",
        responses = { lease("jwt-1"), lease("jwt-2") } },
      { method = "GET", path = "/ws/exec", ws = { { drop = true }, exit_frames("ok") } },
    }
    local r = sandbox():executeCommand("true")
    assert.are.equal("ok", r.stdout)
    assert.are.equal(3, #srv:requests())
    srv:waitFor(function(log) return #log >= 5 end)
    local s = srv:sessions()
    assert.are.equal(2, #s)
    assert.are.equal("railway-shell, jwt-1", s[1].protocol)
    assert.are.equal("railway-shell, jwt-2", s[2].protocol)
  end)

  it("1011 twice: SandboxExecTransportError with every field; the lease is dropped", function()
    serve{
      { method = "POST", path = P .. "/sandbox", responses = { created() } },
      { method = "POST", path = P .. "/sandbox/sbx_1/exec-lease", responses = { lease("jwt-1") } },
      { method = "GET", path = "/ws/exec", ws = { { close = 1011, reason = "server_error" } } },
    }
    local sb = sandbox()
    local ok, err = pcall(sb.executeCommand, sb, "echo", { "hi" })
    assert.is_false(ok)
    assert.is_true(errors.SandboxExecTransportError:is(err), tostring(err))
    assert.are.equal("Direct-exec transport failed for sandbox sbx_1 after 2 attempt(s)"
      .. " (close 1011 server_error)", err.message)
    assert.are.equal(2, err.attempts)
    assert.is_true(err.opened)
    assert.are.equal(1011, err.closeCode)
    assert.are.equal("server_error", err.closeReason)
    assert.are.equal("echo hi", err.command)
    assert.are.equal("sbx_1", err.sandboxId)
    assert.matches("^ws://127%.0%.0%.1:%d+/ws/exec$", err.wsEndpoint)
    -- the same lease failed twice: it was minted again for attempt 2, and
    -- it is gone from the cache now (the next exec mints)
    pcall(sb.executeCommand, sb, "true")
    local mints = 0
    for _, r in ipairs(srv:requests()) do
      if r.path:find("exec%-lease") then mints = mints + 1 end
    end
    assert.are.equal(4, mints)
  end)

  it("a stalled handshake without a timeout ends at the handshake deadline", function()
    serve{
      { method = "POST", path = P .. "/sandbox", responses = { created() } },
      { method = "POST", path = P .. "/sandbox/sbx_1/exec-lease", responses = { lease("jwt-1") } },
      { method = "GET", path = "/ws/exec", ws = { { stall = true } } },
    }
    local t0 = mastra.now()
    local sb = sandbox()
    local ok, err = pcall(sb.executeCommand, sb, "true")
    assert.is_false(ok)
    assert.is_true(errors.SandboxExecTransportError:is(err))
    assert.is_false(err.opened)
    assert.is_nil(err.closeCode)
    assert.is_true(mastra.now() - t0 >= 1000) -- two attempts of 500 ms
  end)

  it("ignores tag-only, unknown-tag, malformed and durable_session frames;"
    .. " exit without a code is 0", function()
      serve{
        { method = "POST", path = P .. "/sandbox", responses = { created() } },
        { method = "POST", path = P .. "/sandbox/sbx_1/exec-lease",
          responses = { lease("jwt-1") } },
        { method = "GET", path = "/ws/exec", ws = { { frames = {
          { binaryHex = "01" }, { binary = "\2ignored" }, { text = "not-json" },
          { json = { type = "durable_session", data = { durable_session_name = "d" } } },
          { binary = "\1out" }, { binary = "\3err" }, { json = { type = "exit", data = {} } },
        }, close = 1000 } } },
      }
      local r = sandbox():executeCommand("true")
      assert.are.equal("out", r.stdout)
      assert.are.equal("err", r.stderr)
      assert.are.equal(0, r.exitCode)
    end)

  it("decodes UTF-8 split across frames: onStdout gets whole characters", function()
    serve{
      { method = "POST", path = P .. "/sandbox", responses = { created() } },
      { method = "POST", path = P .. "/sandbox/sbx_1/exec-lease", responses = { lease("jwt-1") } },
      { method = "GET", path = "/ws/exec", ws = { { frames = {
        { binaryHex = "0161c3" }, { binaryHex = "01a962" },
        { json = { type = "exit", data = { exit_code = 0 } } } }, close = 1000 } } },
    }
    local chunks = {}
    local r = sandbox():executeCommand("true", nil,
      { onStdout = function(c) chunks[#chunks + 1] = c end })
    assert.are.equal("a\xc3\xa9b", r.stdout)
    assert.are.same({ "a", "\xc3\xa9b" }, chunks)
  end)

  it("times out client-side with exit 124 and the output so far, and closes with 1000",
    function()
      serve{
        { method = "POST", path = P .. "/sandbox", responses = { created() } },
        { method = "POST", path = P .. "/sandbox/sbx_1/exec-lease",
          responses = { lease("jwt-1") } },
        { method = "GET", path = "/ws/exec", ws = { { frames = { { binary = "\1partial" } } } } },
      }
      local r = sandbox():executeCommand("sleep 10", nil, { timeout = 300 })
      assert.are.equal(124, r.exitCode)
      assert.is_true(r.timedOut)
      assert.are.equal("partial", r.stdout)
      srv:waitFor(function() return #srv:sessions() == 1 end)
      assert.are.equal(1000, srv:sessions()[1].closeCode)
      -- the timeout never travels on the wire
      assert.is_nil(srv:sessions()[1].messages[1].data:find("timeout", 1, true))
    end)

  it("destroy sends only DELETE /sandbox/:id, and getInfo after it makes no request", function()
    serve{
      { method = "POST", path = P .. "/sandbox", responses = { created() } },
      { method = "DELETE", path = P .. "/sandbox/sbx_1", responses = { { status = 204 } } },
    }
    local sb = sandbox{ id = "stable" }
    sb:start()
    sb:destroy()
    local info = sb:getInfo()
    assert.are.equal("stable", info.id)
    local reqs = srv:requests()
    assert.are.equal(2, #reqs)
    assert.are.equal("DELETE", reqs[2].method)
    assert.are.equal(P .. "/sandbox/sbx_1", reqs[2].path)
  end)

  it("reattaches with a GET, and provisions again when the record shows destroyedAt", function()
    serve{
      { method = "GET", path = P .. "/sandbox/sbx_old", responses = {
        { status = 200, json = { id = "sbx_old", status = "ready", destroyedAt = core.null } },
        { status = 200, json = { id = "sbx_old", destroyedAt = "2026-01-01T00:00:00.000Z" } } } },
      { method = "POST", path = P .. "/sandbox", responses = { created("sbx_new") } },
    }
    local sb = sandbox{ sandboxId = "sbx_old" }
    assert.are.same({ outcome = "connected" }, sb:start())
    local again = sandbox{ sandboxId = "sbx_old" }
    assert.are.same({ outcome = "created" }, again:start())
    assert.are.equal("sbx_new", again.sandboxId)
    local reqs = srv:requests()
    assert.are.same({ "GET", "GET", "POST" },
      { reqs[1].method, reqs[2].method, reqs[3].method })
  end)

  it("clones with no I/O, the env replaced and the rest inherited", function()
    serve{ { method = "POST", path = P .. "/sandbox", responses = { created() } } }
    local parent = sandbox{ actingUserId = "external-user-42", idleTimeoutMinutes = 30,
      networkIsolation = "PRIVATE", env = { BASE = "1" } }
    local c = parent:clone{ env = { GITHUB_TOKEN = "ghs_abc" }, idleTimeoutMinutes = 15 }
    assert.are.equal(0, #srv:requests())
    assert.are.equal("pending", c.status)
    c:start()
    local r = srv:requests()[1]
    assert.are.equal(('{"id":"%s","environmentId":"env1","idleTimeoutMinutes":15,'
      .. '"networkIsolation":"PRIVATE","env":{"GITHUB_TOKEN":"ghs_abc"}}'):format(c.id), r.body)
    assert.are.equal("external-user-42", header(r, "x-acting-user-id"))
  end)

  it("goes through a fetch function when one is given (and it may yield)", function()
    local seen = {}
    local sb = mastra.PlatformSandbox.new{
      accessToken = "t", proxyUrl = "https://proxy.test/",
      projectId = "proj 1", environmentId = "e",
      fetch = function(req)
        mastra.sleep(1)
        seen[#seen + 1] = req
        return { status = 201, body = '{"id":"sbx_f"}' }
      end }
    sb:start()
    assert.are.equal("https://proxy.test/v1/railway/projects/proj%201/sandbox", seen[1].url)
    assert.are.equal("POST", seen[1].method)
    assert.are.equal("Bearer t", seen[1].headers.authorization)
    assert.are.equal("sbx_f", sb.sandboxId)
  end)
end)
