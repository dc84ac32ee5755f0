-- The lifecycle cases of upstream's sandbox conformance suite (SBX-LIFE-NN)
-- against LocalSandbox, plus the status rules of @mastra/core's sandbox
-- (docs/api.md) and the LocalSandbox defaults.
local lfs = require "lfs"
local mastra = require "mastra"
local util = require "spec.support.util"
local tmpdir = util.tmpdir
local rm_rf = util.rm_rf
local trim = util.trim

local SandboxNotReadyError = mastra.errors.SandboxNotReadyError

-- {====== helpers ======

local function is_dir(path)
  return lfs.attributes(path, "mode") == "directory"
end

-- }======

describe("LocalSandbox lifecycle (SBX-LIFE)", function()
  local dir, base, sb
  local n = 0

  -- a fresh, not started sandbox in its own directory under dir
  local function fresh(opts)
    n = n + 1
    opts = opts or {}
    opts.workingDirectory = opts.workingDirectory or (dir .. "/fresh" .. n)
    return mastra.LocalSandbox.new(opts)
  end

  setup(function()
    dir, base = tmpdir()
    sb = mastra.LocalSandbox.new{ workingDirectory = dir .. "/shared" }
    sb:start()
  end)

  teardown(function()
    if sb then sb:destroy() end
    rm_rf(dir, base)
  end)

  it("SBX-LIFE-01 exposes id, name, provider and status as strings", function()
    assert.are.equal("string", type(sb.id))
    assert.is_true(#sb.id > 0)
    assert.are.equal("LocalSandbox", sb.name)
    assert.are.equal("local", sb.provider)
    assert.are.equal("string", type(sb.status))
  end)

  it("SBX-LIFE-02 gives each instance its own id; destroying a never-started one works",
    function()
      local other = fresh()
      assert.are_not.equal(sb.id, other.id)
      local ok, err = pcall(other.destroy, other)
      assert.is_true(ok, tostring(err))
      assert.are.equal("destroyed", other.status)
      assert.is_false(is_dir(other.workingDirectory)) -- never started: nothing created
    end)

  it("SBX-LIFE-02 (extra) gives 50 instances 50 different ids", function()
    local seen, count = {}, 0
    for _ = 1, 50 do
      local s = fresh()
      if not seen[s.id] then count = count + 1 end
      seen[s.id] = true
      s:destroy()
    end
    assert.are.equal(50, count)
  end)

  it("SBX-LIFE-03 is pending (or stopped) before start", function()
    local s <close> = fresh()
    assert.is_true(s.status == "pending" or s.status == "stopped", s.status)
  end)

  it("SBX-LIFE-04 is running after start", function()
    assert.are.equal("running", sb.status)
    assert.is_true(is_dir(sb.workingDirectory))
  end)

  it("SBX-LIFE-05 start() is idempotent", function()
    local ok, err = pcall(sb.start, sb)
    assert.is_true(ok, tostring(err))
    assert.are.equal("running", sb.status)
    ok, err = pcall(sb.start, sb)
    assert.is_true(ok, tostring(err))
    assert.are.equal("running", sb.status)
    assert.are.equal(0, sb:executeCommand("true").exitCode)
  end)

  it("SBX-LIFE-06 stop() gives stopped", function()
    local s <close> = fresh()
    s:start()
    assert.are.equal("running", s.status)
    s:stop()
    assert.are.equal("stopped", s.status)
    s:destroy()
    assert.are.equal("destroyed", s.status)
  end)

  it("SBX-LIFE-07 is not running before start", function()
    local s <close> = fresh()
    assert.are_not.equal("running", s.status)
  end)

  it("SBX-LIFE-08 getInfo() matches the sandbox", function()
    local info = sb:getInfo()
    assert.are.equal(sb.id, info.id)
    assert.are.equal(sb.name, info.name)
    assert.are.equal(sb.provider, info.provider)
    assert.are.equal("running", info.status)
    assert.are.equal("number", type(info.createdAt))
  end)

  it("SBX-LIFE-09 getInfo().status equals status", function()
    assert.are.equal(sb.status, sb:getInfo().status)
    local s <close> = fresh()
    assert.are.equal(s.status, s:getInfo().status)
    s:start()
    assert.are.equal(s.status, s:getInfo().status)
    s:stop()
    assert.are.equal(s.status, s:getInfo().status)
  end)

  it("SBX-LIFE-10 rejects start() cleanly with an invalid config", function()
    -- base is a regular file: nothing can be created under it
    local bad = fresh{ workingDirectory = base .. "/wd" }
    local t0 = mastra.now()
    local ok, err = pcall(bad.start, bad)
    local elapsed = mastra.now() - t0
    assert.is_false(ok)
    assert.is_truthy(tostring(err):find("working directory", 1, true), tostring(err))
    assert.is_true(elapsed < 5000, "took " .. elapsed .. " ms")
    assert.are_not.equal("running", bad.status)
    pcall(bad.destroy, bad) -- may raise: tolerated
  end)

  it("SBX-LIFE-11 a fresh valid sandbox runs after a failed start", function()
    local bad = fresh{ workingDirectory = base .. "/wd" }
    assert.is_false(pcall(bad.start, bad))
    pcall(bad.destroy, bad)
    local good <close> = fresh()
    good:start()
    assert.are.equal("running", good.status)
    local r = good:executeCommand("echo recovery")
    assert.are.equal(0, r.exitCode)
    assert.is_truthy(r.stdout:find("recovery", 1, true))
  end)

  describe("status rules", function()
    it("6.4 a destroyed sandbox refuses start() and executeCommand with"
      .. " SandboxNotReadyError", function()
      local s = fresh()
      s:start()
      s:destroy()
      assert.are.equal("destroyed", s.status)
      local ok, err = pcall(s.start, s)
      assert.is_false(ok)
      assert.is_true(SandboxNotReadyError:is(err), tostring(err))
      ok, err = pcall(s.executeCommand, s, "echo no")
      assert.is_false(ok)
      assert.is_true(SandboxNotReadyError:is(err), tostring(err))
      assert.are.equal("destroyed", s.status)
    end)

    it("6.4 destroy() is idempotent", function()
      local s = fresh()
      s:start()
      s:destroy()
      local ok, err = pcall(s.destroy, s)
      assert.is_true(ok, tostring(err))
      assert.are.equal("destroyed", s.status)
    end)

    it("6.4 `local sb <close>` destroys the sandbox at the end of the scope", function()
      local outer
      do
        local s <close> = fresh()
        s:start()
        outer = s
      end
      assert.are.equal("destroyed", outer.status)
    end)

    it("6.4 stop() ends running processes and commands; files stay; start() works again",
      function()
        local s <close> = fresh()
        s:start()
        assert.are.equal(0, s:executeCommand("echo kept > kept.txt").exitCode)
        local h = s.processes:spawn("sleep 60")
        local t = mastra.spawn(function() return s:executeCommand("sleep 60") end)
        mastra.sleep(100)
        assert.is_nil(h.exitCode)
        local t0 = mastra.now()
        s:stop()
        assert.are.equal("stopped", s.status)
        assert.is_false(h:wait().success)
        local r = t:wait()
        assert.is_false(r.success)
        assert.is_true(mastra.now() - t0 < 5000)
        s:start()
        assert.are.equal("running", s.status)
        assert.are.equal("kept", trim(s:executeCommand("cat kept.txt").stdout))
      end)
  end)

  describe("LocalSandbox defaults", function()
    it("7.5 workingDirectory defaults to <cwd>/.sandbox (not created before start)",
      function()
        local s <close> = mastra.LocalSandbox.new()
        assert.are.equal(lfs.currentdir() .. "/.sandbox", s.workingDirectory)
        assert.are.equal("pending", s.status)
      end)

    it("7.5 creates a missing workingDirectory (with parents) on start()", function()
      local s <close> = fresh{ workingDirectory = dir .. "/deep/er/wd" }
      assert.is_false(is_dir(dir .. "/deep"))
      s:start()
      assert.is_true(is_dir(dir .. "/deep/er/wd"))
    end)

    it("7.5 resolves a relative workingDirectory against the current directory", function()
      local s <close> = mastra.LocalSandbox.new{ workingDirectory = "rel/wd" }
      assert.are.equal(lfs.currentdir() .. "/rel/wd", s.workingDirectory)
    end)

    it("7.5 default timeout is 30000 ms and default instructions name the directory",
      function()
        local s <close> = fresh()
        assert.are.equal(30000, s.timeout)
        assert.are.equal(('Local command execution. Working directory: "%s".')
          :format(s.workingDirectory), s:getInstructions())
      end)

    it("7.5 instructions may be a string or a function of the default", function()
      local s1 <close> = fresh{ instructions = "custom text" }
      assert.are.equal("custom text", s1:getInstructions())
      local s2 <close> = fresh{
        instructions = function(ctx) return ctx.defaultInstructions .. " More." end,
      }
      assert.are.equal(('Local command execution. Working directory: "%s". More.')
        :format(s2.workingDirectory), s2:getInstructions())
    end)
  end)
end)
