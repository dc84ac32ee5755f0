-- spec/support/fault_proxy.py, the fault proxy, between a PlatformSandbox
-- and the real local platform: it passes the API and the exec socket
-- through (the lease's wsEndpoint leads back to it), and each of its
-- faults strikes where the plan says. Run against a platform whose lease
-- does not list "exec-resume/1", these are also the cases of our client's
-- fallback (upstream's rule, docs/api.md): what is retried, what runs
-- twice.
local mastra = require "mastra"
local platform = require "spec.support.platform"
local fault_proxy = require "spec.support.fault_proxy"

describe("the fault proxy", function()
  local srv, px

  setup(function()
    -- --exec-stdin off: a lease without "exec-resume/1" (our fallback)
    srv = platform.start{ args = { "--exec-stdin", "off" } }
    px = fault_proxy.start(srv.url)
  end)
  teardown(function()
    if px then px:stop() end
    if srv then srv:stop() end
  end)

  local function sandbox()
    return mastra.PlatformSandbox.new(srv:sandboxOptions{ proxyUrl = px.url })
  end

  -- how many times the command that appends to file ran
  local function runs(sb, file)
    px:plan{}
    local r = sb:executeCommand("cat " .. file .. " 2>/dev/null | wc -l")
    return tonumber(r.stdout)
  end

  it("passes the API and the exec socket through", function()
    local sb <close> = sandbox()
    sb:start()
    px:plan{}
    local from = #px:events() + 1
    local r = sb:executeCommand("echo", { "through the proxy" })
    assert.are.equal(0, r.exitCode)
    assert.are.equal("through the proxy\n", r.stdout)
    assert.are.equal(1, px:count("ws", from))
    local paths = {}
    for _, ev in ipairs(px:only("http")) do paths[#paths + 1] = ev.path end
    assert.matches("/exec%-lease", table.concat(paths, " "))
  end)

  for _, code in ipairs{ 1001, 1006, 1012, 1013 } do
    it("refuses the upgrade with " .. code .. ": the server runs nothing, the retry once",
      function()
        local sb <close> = sandbox()
        sb:start()
        px:plan{ { refuse = code }, {} }
        local from = #px:events() + 1
        local r = sb:executeCommand("echo run >> refused; echo ok")
        assert.are.equal(0, r.exitCode)
        assert.are.equal("ok\n", r.stdout)
        local cuts = px:only("cut", from)
        assert.are.equal(1, #cuts)
        assert.are.equal("refuse", cuts[1].how)
        assert.are.equal(2, px:count("ws", from))
        assert.are.equal(1, runs(sb, "refused"))
      end)
  end

  it("cuts the client's way inside init_exec: nothing ran, the retry runs it once", function()
    local sb <close> = sandbox()
    sb:start()
    px:plan{ { cut = "up", at = 12 }, {} }
    local from = #px:events() + 1
    local r = sb:executeCommand("echo run >> upcut; echo ok")
    assert.are.equal("ok\n", r.stdout)
    local cuts = px:only("cut", from)
    assert.are.equal(1, #cuts)
    assert.are.equal(12, cuts[1].up)
    assert.are.equal(1, runs(sb, "upcut"))
  end)

  it("cuts the server's way at the chosen byte: without the extension the command runs"
    .. " twice (upstream's rule)", function()
    local sb <close> = sandbox()
    sb:start()
    px:plan{ { cut = "down", at = 5000 }, {} }
    local from = #px:events() + 1
    local r = sb:executeCommand("echo run >> downcut; head -c 200000 /dev/zero | tr '\\0' x")
    assert.are.equal(0, r.exitCode)
    assert.are.equal(200000, #r.stdout)
    local cuts = px:only("cut", from)
    assert.are.equal(1, #cuts)
    assert.are.equal(5000, cuts[1].down)
    assert.are.equal(2, runs(sb, "downcut"))
  end)

  it("cuts just before the exit frame: the command had run, and runs again", function()
    local sb <close> = sandbox()
    sb:start()
    px:plan{ { exit = true }, {} }
    local from = #px:events() + 1
    local r = sb:executeCommand("echo run >> exitcut")
    assert.are.equal(0, r.exitCode)
    assert.are.equal("exit", px:only("cut", from)[1].how)
    assert.are.equal(2, runs(sb, "exitcut"))
  end)

  it("with onStdout, a cut after output reached it is an error, not a second run", function()
    local sb <close> = sandbox()
    sb:start()
    -- the first frame ("first\n") goes through whole; the cut is in the next
    px:plan{ { cut = "down", at = 100 }, {} }
    local seen = 0
    local ok, err = pcall(sb.executeCommand, sb,
      "echo run >> seen; echo first; sleep 0.3; head -c 100000 /dev/zero | tr '\\0' y", nil,
      { onStdout = function(s) seen = seen + #s end })
    assert.is_false(ok)
    assert.is_true(mastra.errors.SandboxExecInterruptedError:is(err), tostring(err))
    assert.are.equal(6, seen)
    assert.are.equal(1, runs(sb, "seen"))
  end)

  it("holds a socket half-open, then lets it go", function()
    local sb <close> = sandbox()
    sb:start()
    px:plan{ { cut = "down", at = 0, hold = true, holdMs = 300 }, {} }
    local from = #px:events() + 1
    local r = sb:executeCommand("echo run >> held; echo ok")
    assert.are.equal("ok\n", r.stdout)
    local cuts = px:only("cut", from)
    assert.are.equal("hold", cuts[1].how)
    assert.are.equal(0, cuts[1].down)
    assert.are.equal(1, runs(sb, "held"))
  end)
end)
