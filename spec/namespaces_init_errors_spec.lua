-- A sandbox whose init fails says which step failed and its errno (issue 23
-- item 6; docs/platform.md, "The init's protocol"): on a base whose /proc
-- is a file, the init's mount of /proc fails, and the client's first
-- command (exit 127, on its stderr), the server's log and the warm pool's
-- failure name it: "mount /proc: ENOTDIR", with no host path. Before, the
-- command said "mount proc on <the data directory>/.../merged/proc: Not a
-- directory". Skipped without root.
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local trim = util.trim

local function skip_reason()
  local p = io.popen("id -u")
  local uid = trim(p:read("a"))
  p:close()
  if uid ~= "0" then
    return "the namespaces driver needs root here (uid " .. uid .. "): skipped"
  end
  return nil
end

describe("a namespaces sandbox whose init fails", function()
  local reason = skip_reason()
  if reason then
    pending(reason)
    return
  end

  local scratch = platform.tmpdir()
  local base = scratch .. "/base"
  local srv
  setup(function()
    -- a base in name only: its stamp, and a file where /proc goes
    assert(os.execute(("mkdir -p %s/etc && echo broken > %s/.mastra-base && : > %s/proc")
      :format(base, base, base)))
    srv = platform.start{ base = false,
      args = { "--driver", "namespaces", "--base", base, "--warm-pool", "1" } }
  end)
  teardown(function()
    if srv then srv:close() end
    platform.rm_rf(scratch)
  end)

  it("names the step and the errno to the first command and in the log", function()
    -- the pool's member fails first
    assert.is_true(platform.waitUntil(function()
      return srv.stderrTail:find("a warm sandbox failed: mount /proc: ENOTDIR", 1, true) ~= nil
    end, 5000), srv.stderrTail)
    local sb = srv:startSandbox()
    local r = sb:executeCommand("true")
    assert.are.equal(127, r.exitCode)
    assert.are.equal("mastra-platform: the sandbox did not start: mount /proc: ENOTDIR\n",
      r.stderr)
    assert.is_true(platform.waitUntil(function()
      return srv.stderrTail:find("did not start: mount /proc: ENOTDIR", 1, true) ~= nil
    end, 5000), srv.stderrTail)
    -- and again at the next command (a new init, which fails the same way)
    r = sb:executeCommand("true")
    assert.are.equal(127, r.exitCode)
    assert.matches("mount /proc: ENOTDIR", r.stderr, 1, true)
    sb:destroy()
  end)
end)
