-- The client side of exec-resume/1 on the wire, against the scripted fault
-- server (spec/support/fault-platform.c): the exact init_exec frames (a
-- fresh start, then reattaches with the same exec_id and the offsets
-- held), replays dropped, a UTF-8 character split by a cut delivered
-- whole, an exit accepted only with its totals, the typed errors, and the
-- faults a correct server never produces (output after a hole nobody
-- announced). spec/exec_resume_spec.lua runs the same client against the
-- real platform through the fault proxy.
local core = require "mastra.core"
local mastra = require "mastra"
local fault = require "spec.support.fault"

local errors = mastra.errors
local P = "/v1/railway/projects/p"

local function out(tag, off, bytes)
  return string.char(tag) .. string.pack(">I8", off) .. bytes
end
local function stdout(off, bytes) return { binary = out(0x11, off, bytes) } end
local function stderr(off, bytes) return { binary = out(0x13, off, bytes) } end
local function json(t) return { json = t } end
local function exit(code, t1, t2)
  return json{ type = "exit", data = { exit_code = code, reason = "exited",
    stdout_total = t1, stderr_total = t2 } }
end
local function attached(id, state)
  return json{ type = "attached", data = { exec_id = id or "x", state = state or "running" } }
end

local function routes(sessions, caps)
  return {
    { method = "POST", path = P .. "/sandbox", responses = { { status = 201,
      json = { id = "sbx_1", status = "ready", createdAt = "2026-01-01T00:00:00.000Z" } } } },
    { method = "POST", path = P .. "/sandbox/sbx_1/exec-lease", responses = { { status = 200,
      json = { provider = "railway", sandboxId = "sbx_1", providerResourceId = "rw_1",
        jwt = "jwt-1", wsEndpoint = "$WS/ws/exec", subprotocol = "railway-shell",
        expiresAt = "2030-01-01T00:00:00.000Z",
        capabilities = caps or { "stdin", "exec-resume/1" } } } } },
    { method = "DELETE", path = P .. "/sandbox/sbx_1", responses = { { status = 200,
      json = { id = "sbx_1", status = "destroyed" } } } },
    { method = "GET", path = "/ws/exec", ws = sessions },
  }
end

-- the init_exec of each session, decoded, once n sessions are over
local function inits(srv, n)
  srv:waitFor(function() return #srv:sessions() >= n end, 10000)
  local list = {}
  for _, s in ipairs(srv:sessions()) do
    for _, m in ipairs(s.messages or {}) do
      local f = m.opcode == 1 and core.jsonDecode(m.data)
      if type(f) == "table" and f.type == "init_exec" then list[#list + 1] = f.data end
    end
  end
  return list
end

local function sent(srv, ty, sessions)
  srv:waitFor(function() return #srv:sessions() >= sessions end, 10000)
  local n = 0
  for _, s in ipairs(srv:sessions()) do
    for _, m in ipairs(s.messages or {}) do
      local f = m.opcode == 1 and core.jsonDecode(m.data)
      if type(f) == "table" and f.type == ty then n = n + 1 end
    end
  end
  return n
end

describe("exec-resume/1 on the wire (the client)", function()
  local srv

  local function sandbox()
    local sb = mastra.PlatformSandbox.new{ accessToken = "tok", proxyUrl = srv.url,
      projectId = "p", environmentId = "env1", handshakeTimeout = 2000 }
    sb:start()
    return sb
  end

  after_each(function()
    if srv then srv:stop() end
    srv = nil
  end)

  it("starts with a fresh exec_id, reattaches with it and the offsets held, drops the replay",
    function()
      srv = fault.start{ routes = routes{
        { afterMessages = 2, frames = { attached(), stdout(0, "hello "), stderr(0, "e1") },
          drop = true },
        { afterMessages = 2, frames = { attached(), stdout(0, "hello wor"), stdout(9, "ld"),
          stderr(2, "e2"), exit(0, 11, 4) }, close = 1000 },
      } }
      local sb <close> = sandbox()
      local chunks = {}
      local r = sb:executeCommand("echo hi", nil, {
        onStdout = function(s) chunks[#chunks + 1] = s end })
      assert.are.equal(0, r.exitCode)
      assert.are.equal("hello world", r.stdout)
      assert.are.equal("hello world", table.concat(chunks))
      assert.are.equal("e1e2", r.stderr)
      assert.are.equal(1, r.reattaches)
      local i = inits(srv, 2)
      assert.are.equal(2, #i)
      assert.are.equal("echo hi", i[1].command)
      assert.matches("^[A-Za-z0-9._:-]+$", i[1].exec_id)
      assert.is_true(#i[1].exec_id <= 128)
      assert.are.same({ stdout = 0, stderr = 0 }, i[1].resume)
      assert.are.equal(r.execId, i[1].exec_id)
      -- the reattach never starts: the same id, no command, the offsets held
      assert.are.same({ command = ":", durable_session_name = r.execId,
        resume = { stdout = 6, stderr = 2 } }, i[2])
    end)

  it("re-sends the same fresh start while the platform has not confirmed the exec", function()
    srv = fault.start{ routes = routes{
      { afterMessages = 1, drop = true },
      { afterMessages = 2, frames = { attached(), stdout(0, "ok"), exit(0, 2, 0) },
        close = 1000 },
    } }
    local sb <close> = sandbox()
    local r = sb:executeCommand("echo ok")
    assert.are.equal("ok", r.stdout)
    local i = inits(srv, 2)
    assert.are.equal(2, #i)
    assert.are.same(i[1], i[2])
  end)

  it("delivers a UTF-8 character split by a cut whole, each byte once", function()
    srv = fault.start{ routes = routes{
      { afterMessages = 2, frames = { attached(), stdout(0, "a\xC3") }, drop = true },
      { afterMessages = 2, frames = { attached(), stdout(1, "\xC3\xA9b"), exit(0, 4, 0) },
        close = 1000 },
    } }
    local sb <close> = sandbox()
    local chunks = {}
    local r = sb:executeCommand("x", nil, { onStdout = function(s) chunks[#chunks + 1] = s end })
    assert.are.equal("a\xC3\xA9b", r.stdout)
    assert.are.same({ "a", "\xC3\xA9b" }, chunks)
  end)

  it("takes an exit only with its totals held: otherwise it reattaches from what it holds",
    function()
      srv = fault.start{ routes = routes{
        { afterMessages = 2, frames = { attached(), stdout(0, "abc"), exit(3, 5, 0) },
          close = 1000 },
        { afterMessages = 2, frames = { attached(nil, "exited"), stdout(3, "de"), exit(3, 5, 0) },
          close = 1000 },
      } }
      local sb <close> = sandbox()
      local r = sb:executeCommand("x")
      assert.are.equal(3, r.exitCode)
      assert.are.equal("abcde", r.stdout)
      assert.are.equal(3, inits(srv, 2)[2].resume.stdout)
    end)

  it("counts an announced gap and fails loudly on one nobody announced (the command is"
    .. " killed)", function()
    srv = fault.start{ routes = routes{
      { afterMessages = 2, frames = { attached(), stdout(0, "abc"),
        json{ type = "output_gap", data = { stream = "stdout", from = 3, to = 10 } },
        stdout(10, "x"), exit(0, 11, 0) }, close = 1000 },
    } }
    local sb <close> = sandbox()
    assert.are.equal("abcx", sb:executeCommand("x").stdout)
    sb:destroy()
    srv:stop()
    srv = fault.start{ routes = routes{
      { afterMessages = 2, frames = { attached(), stdout(0, "abc"), stdout(10, "x"),
        { delayMs = 2000 } }, close = 1000 },
    } }
    local sb2 <close> = sandbox()
    local ok, err = pcall(sb2.executeCommand, sb2, "x")
    assert.is_false(ok)
    assert.is_true(errors.SandboxExecGapError:is(err), tostring(err))
    assert.are.equal("stdout", err.stream)
    assert.are.equal(3, err.held)
    assert.are.equal(10, err.offset)
    assert.are.equal(1, sent(srv, "signal", 1))
  end)

  it("raises the typed errors: exec_id_conflict, exec_lost; nothing runs again", function()
    srv = fault.start{ routes = routes{
      { afterMessages = 2, frames = { json{ type = "error",
        data = { code = "exec_id_conflict", message = "another command" } } }, close = 4000 },
    } }
    local sb <close> = sandbox()
    local ok, err = pcall(sb.executeCommand, sb, "x")
    assert.is_false(ok)
    assert.is_true(errors.SandboxExecConflictError:is(err), tostring(err))
    assert.is_string(err.execId)
    sb:destroy()
    srv:stop()
    srv = fault.start{ routes = routes{
      { afterMessages = 2, frames = { attached(), stdout(0, "partial") }, drop = true },
      { afterMessages = 2, frames = { json{ type = "error", data = { code = "exec_lost" } } },
        close = 4000 },
      { afterMessages = 2, frames = { exit(0, 0, 0) }, close = 1000 },
    } }
    local sb2 <close> = sandbox()
    ok, err = pcall(sb2.executeCommand, sb2, "x")
    assert.is_false(ok)
    assert.is_true(errors.SandboxExecLostError:is(err), tostring(err))
    assert.is_true(errors.SandboxExecTransportError:is(err))
    assert.are.equal("partial", err.stdout)
    assert.are.equal(2, #inits(srv, 2)) -- no third attempt, no fresh start
  end)

  it("backs off 0.25 s, then 0.5 s between reattaches", function()
    srv = fault.start{ routes = routes{
      { afterMessages = 2, frames = { attached() }, drop = true },
      { afterMessages = 2, drop = true },
      { afterMessages = 2, frames = { exit(0, 0, 0) }, close = 1000 },
    } }
    local sb <close> = sandbox()
    assert.are.equal(0, sb:executeCommand("x").exitCode)
    assert.are.equal(3, #inits(srv, 3))
    local s = srv:sessions()
    assert.is_true(s[2].t - s[1].tEnd >= 240, s[2].t - s[1].tEnd)
    assert.is_true(s[3].t - s[2].tEnd >= 490, s[3].t - s[2].tEnd)
  end)

  it("acknowledges what it holds", function()
    srv = fault.start{ routes = routes{
      { afterMessages = 2, frames = { attached(), stdout(0, ("z"):rep(1048576)),
        { delayMs = 1200 }, stdout(1048576, "end"), exit(0, 1048579, 0) }, close = 1000 },
    } }
    local sb <close> = sandbox()
    assert.are.equal(1048579, #sb:executeCommand("x").stdout)
    local acks = {}
    inits(srv, 1)
    for _, m in ipairs(srv:sessions()[1].messages) do
      local f = m.opcode == 1 and core.jsonDecode(m.data)
      if type(f) == "table" and f.type == "output_ack" then acks[#acks + 1] = f.data.stdout end
    end
    assert.are.equal(1048576, acks[1])
  end)

  it("asks for a new lease after a 401 on the reattach, and keeps the exec id", function()
    local r = routes{
      { afterMessages = 2, frames = { attached(), stdout(0, "one ") }, drop = true },
      { refuse = 401 },
      { afterMessages = 2, frames = { attached(), stdout(4, "two"), exit(0, 7, 0) },
        close = 1000 },
    }
    local first = r[2].responses[1]
    local second = { status = 200, json = {} }
    for k, v in pairs(first.json) do second.json[k] = v end
    second.json.jwt = "jwt-2"
    r[2].responses = { first, second }
    srv = fault.start{ routes = r }
    local sb <close> = sandbox()
    local res = sb:executeCommand("x")
    assert.are.equal("one two", res.stdout)
    local i = inits(srv, 3) -- the refused session has none
    assert.are.equal(2, #i)
    assert.are.equal(res.execId, i[2].durable_session_name)
    assert.matches("jwt%-2", srv:sessions()[3].protocol)
  end)

  it("fails in two attempts where no socket ever opened (nothing to reattach to)",
    function()
      srv = fault.start{ routes = routes{ { refuse = 503 } } }
      local sb <close> = sandbox()
      local ok, err = pcall(sb.executeCommand, sb, "x")
      assert.is_false(ok)
      assert.is_true(errors.SandboxExecTransportError:is(err), tostring(err))
      assert.are.equal(2, err.attempts)
      assert.is_false(err.opened)
    end)

  it("uses none of it where the lease does not list exec-resume/1", function()
    srv = fault.start{ routes = routes({
      { afterMessages = 2, frames = { { binary = "\1plain" },
        json{ type = "exit", data = { exit_code = 0 } } }, close = 1000 },
    }, { "stdin" }) }
    local sb <close> = sandbox()
    local r = sb:executeCommand("x")
    assert.are.equal("plain", r.stdout)
    assert.is_nil(r.execId)
    assert.are.same({ command = "x" }, inits(srv, 1)[1])
  end)
end)
