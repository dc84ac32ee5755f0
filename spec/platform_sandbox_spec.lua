-- PlatformSandbox against the real local platform (mastra-platform over
-- real sockets): the happy paths of the control plane, direct exec, the
-- process manager, identity, clone and status. The exact wire sequences and
-- the faults are in
-- platform_sandbox_wire_spec.lua, against the scripted fault server.
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local function trim(s) return (s:gsub("%s+$", "")) end

describe("PlatformSandbox on the local platform", function()
  local srv

  local function new(extra)
    return mastra.PlatformSandbox.new(srv:sandboxOptions(extra))
  end

  setup(function()
    srv = platform.start{}
  end)

  teardown(function()
    if srv then srv:stop() end
  end)

  it("starts (created), runs a command and is destroyed", function()
    local sb = new()
    assert.are.equal("pending", sb.status)
    assert.are.same({ outcome = "created" }, sb:start())
    assert.are.equal("running", sb.status)
    assert.matches("^sbx_%x+$", sb.sandboxId)
    local r = sb:executeCommand("echo", { "hello world", "it's" })
    assert.are.equal("hello world it's\n", r.stdout)
    assert.are.equal(0, r.exitCode)
    assert.is_true(r.success)
    assert.is_false(r.timedOut)
    assert.are.equal("echo 'hello world' 'it'\\''s'", r.command)
    local id = sb.sandboxId
    sb:destroy()
    assert.are.equal("destroyed", sb.status)
    assert.is_nil(sb.sandboxId)
    local rec = srv:curl("GET", "/v1/railway/projects/proj/sandbox/" .. id)
    assert.are.equal(200, rec.status)
    assert.is_string(rec.json.destroyedAt)
  end)

  it("is idempotent while running and reattaches by sandboxId", function()
    local sb = new()
    sb:start()
    assert.are.same({ outcome = "connected" }, sb:start())
    local again = new{ sandboxId = sb.sandboxId }
    assert.are.same({ outcome = "connected" }, again:start())
    assert.are.equal("ok\n", again:executeCommand("echo ok").stdout)
    local old = again.sandboxId
    sb:destroy()
    -- the platform destroyed it: the lease answers 410, the handle stops,
    -- and the next command provisions a new sandbox
    local ok, err = pcall(again.executeCommand, again, "echo gone")
    assert.is_false(ok)
    assert.is_true(mastra.errors.SandboxDestroyedError:is(err), tostring(err))
    assert.are.equal(old, err.sandboxId)
    assert.are.equal("stopped", again.status)
    assert.is_nil(again.sandboxId)
    assert.are.equal("back\n", again:executeCommand("echo back").stdout)
    assert.are_not.equal(old, again.sandboxId)
    again:destroy()
  end)

  it("shares one start among concurrent callers", function()
    local sb = new()
    local outcomes = mastra.all{
      function() return sb:start().outcome end,
      function() return sb:start().outcome end,
      function() return sb:start().outcome end,
    }
    assert.are.same({ "created", "created", "created" }, outcomes)
    sb:destroy()
  end)

  it("reports exit codes, stderr, and merges env (per call wins)", function()
    local sb = new{ env = { A = "sandbox", B = "kept" } }
    local r = sb:executeCommand('echo "$A $B $C"; echo oops >&2; exit 3', nil,
      { env = { A = "call", C = "added" } })
    assert.are.equal("call kept added\n", r.stdout)
    assert.are.equal("oops\n", r.stderr)
    assert.are.equal(3, r.exitCode)
    assert.is_false(r.success)
    assert.are.equal("sandbox kept\n", sb:executeCommand('echo "$A $B"').stdout)
    sb:destroy()
  end)

  it("runs in cwd (/workspace is the sandbox's own directory)", function()
    local sb = new()
    sb:executeCommand("mkdir -p sub")
    local r = sb:executeCommand("pwd", nil, { cwd = "/workspace/sub" })
    assert.matches("/workspace/sub\n$", r.stdout)
    sb:destroy()
  end)

  it("times out client-side: exit 124, timedOut, output so far, command killed", function()
    local sb = new()
    local t0 = mastra.now()
    local r = sb:executeCommand("echo before; echo $$ > pid; sleep 30", nil, { timeout = 500 })
    assert.is_true(mastra.now() - t0 < 5000)
    assert.are.equal(124, r.exitCode)
    assert.is_true(r.timedOut)
    assert.are.equal("before\n", r.stdout)
    local pid = trim(sb:executeCommand("cat pid").stdout)
    assert.is_true(util.wait_until(function()
      return sb:executeCommand("kill -0 " .. pid .. " 2>/dev/null").exitCode ~= 0
    end, 5000))
    sb:destroy()
  end)

  it("calls onStdout as frames arrive, before the command ends", function()
    local sb = new()
    local seen, t0 = {}, mastra.now()
    local r = sb:executeCommand("echo a; sleep 1; echo b", nil, {
      onStdout = function(chunk) seen[#seen + 1] = { chunk, mastra.now() - t0 } end,
    })
    assert.are.equal("a\nb\n", r.stdout)
    assert.are.equal("a\n", seen[1][1])
    assert.is_true(seen[1][2] < r.executionTimeMs - 500)
    sb:destroy()
  end)

  it("keeps the newest maxRetainedBytes of the output; onStdout still sees it all", function()
    local sb = new()
    util.checkRetainedOutput(sb)
    -- a background process keeps the newest 1 MiB unless told otherwise
    local h = sb.processes:spawn("head -c 1100000 /dev/zero | tr '\\0' y; printf z")
    local r = h:wait()
    assert.are.equal(1048576, #r.stdout)
    assert.are.equal("yyz", r.stdout:sub(-3))
    assert.is_true(r.stdoutTruncated)
    assert.are.equal(1100001 - 1048576, r.stdoutDroppedBytes)
    assert.is_true(h.stdout == r.stdout)
    r = sb.processes:spawn("printf abcdef", { maxRetainedBytes = 2 }):wait()
    assert.are.equal("ef", r.stdout)
    assert.are.equal(4, r.stdoutDroppedBytes)
    sb:destroy()
  end)

  it("keeps the checkpoint of a stable id across destroy and start", function()
    local sb = new{ id = "project-42" }
    sb:start()
    sb:executeCommand("echo kept > state.txt")
    sb:destroy()
    sb:start()
    assert.are.equal("kept\n", sb:executeCommand("cat state.txt").stdout)
    sb:destroy()
    local other = new{ id = "project-43" }
    assert.are_not.equal(0, other:executeCommand("cat state.txt").exitCode)
    other:destroy()
  end)

  it("runs 100 clones of one template at once, each with its own id", function()
    local template = new{ env = { ROLE = "clone" } }
    local ids = {}
    for i = 1, 100 do ids[i] = i end
    local outs = mastra.map(ids, function(i)
      local c = template:clone{ id = "clone-" .. i }
      assert.are.equal("pending", c.status)
      c:start()
      local r = c:executeCommand('echo "$ROLE"', { tostring(i) })
      c:destroy()
      return r.stdout
    end)
    for i = 1, 100 do assert.are.equal("clone " .. i .. "\n", outs[i]) end
  end)

  it("closes the socket when the task is cancelled, and the command dies", function()
    local sb = new()
    local t = mastra.spawn(function()
      return sb:executeCommand("echo $$ > pid; sleep 30")
    end)
    local pidfile
    assert.is_true(util.wait_until(function()
      pidfile = sb:executeCommand("cat pid 2>/dev/null").stdout
      return pidfile ~= ""
    end, 5000))
    t:cancel()
    assert.has_error(function() t:wait() end)
    local pid = trim(pidfile)
    assert.is_true(util.wait_until(function()
      return sb:executeCommand("kill -0 " .. pid .. " 2>/dev/null").exitCode ~= 0
    end, 3000))
    sb:destroy()
  end)

  it("runs background processes with honest state", function()
    local sb = new()
    local h = sb.processes:spawn("echo started; sleep 30")
    assert.matches("^platform%-proc%-", h.pid)
    assert.is_nil(h.exitCode)
    assert.is_true(util.wait_until(function() return h.stdout == "started\n" end, 5000))
    assert.is_true(sb.processes:list()[1].running)
    assert.is_true(h:kill())
    local r = h:wait()
    assert.is_false(r.success)
    assert.is_false(h:kill())
    local done = sb.processes:spawn("exit 4")
    assert.are.equal(4, done:wait().exitCode)
    local ok, err = pcall(done.sendStdin, done, "x")
    assert.is_false(ok)
    assert.are.equal("EPIPE", err.code)
    assert.matches("has exited; its stdin is closed", err.message, 1, true)
    sb:destroy()
  end)

  it("answers getInfo and getInstructions", function()
    local sb = new{ instructions = function(o) return o.defaultInstructions .. "!" end }
    local info = sb:getInfo()
    assert.are.equal(sb.id, info.id)
    assert.are.equal("pending", info.status)
    sb:start()
    info = sb:getInfo()
    assert.are.equal(sb.sandboxId, info.id)
    assert.are.equal("running", info.status)
    assert.are.equal(sb.sandboxId, info.metadata.sandboxId)
    assert.are.equal("ready", info.metadata.platformStatus)
    assert.are.equal("Platform sandbox " .. sb.sandboxId
      .. ". Execute commands with the sandbox command APIs.!", sb:getInstructions())
    sb:destroy()
  end)

  it("refuses bad options with messages that name them", function()
    local function err_of(fn, ...)
      local ok, e = pcall(fn, ...)
      assert.is_false(ok)
      return e
    end
    assert.matches("unknown option 'tiemout'", err_of(new, { tiemout = 1 }))
    assert.matches("option 'networkIsolation' must be \"ISOLATED\" or \"PRIVATE\"",
      err_of(new, { networkIsolation = "OPEN" }))
    assert.matches('sandboxProvider "e2b" is not supported %(',
      err_of(new, { sandboxProvider = "e2b" }))
    assert.matches("environmentId is required", err_of(mastra.PlatformSandbox.new,
      { accessToken = "t", proxyUrl = srv.url, projectId = "p" }))
  end)
end)
