-- Bad input: every error names the function, the argument or option, and
-- the problem; it is blamed on the caller (this file), and it is raised
-- before anything starts. SBX-CFG-02 (a case of upstream's sandbox
-- conformance suite: bad options) is the constructor part of this.
local lfs = require "lfs"
local mastra = require "mastra"
local util = require "spec.support.util"
local tmpdir = util.tmpdir
local rm_rf = util.rm_rf

-- {====== helpers ======

-- Call fn(...), expect a string error containing every one of `subs`
-- (plain text), and the position of the call in this file.
local function raises(subs, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  assert.are.equal("string", type(err), tostring(err))
  for _, sub in ipairs(subs) do
    assert.is_truthy(err:find(sub, 1, true),
      ("error %q does not contain %q"):format(err, sub))
  end
  assert.is_truthy(err:find("local_sandbox_input_spec.lua:%d+:"),
    ("error %q is not blamed on the caller"):format(err))
  return err
end

-- }======

describe("LocalSandbox input checks", function()
  local dir, base, sb
  local LocalSandbox = mastra.LocalSandbox

  setup(function()
    dir, base = tmpdir()
    -- not started: a rejected call must not start it
    sb = LocalSandbox.new{ workingDirectory = dir .. "/wd" }
  end)

  teardown(function()
    if sb then sb:destroy() end
    rm_rf(dir, base)
  end)

  describe("LocalSandbox.new (SBX-CFG-02)", function()
    it("SBX-CFG-02 rejects an unknown option key", function()
      raises({ "LocalSandbox.new", "unknown option 'tiemout'", "timeout" },
        function() LocalSandbox.new{ tiemout = 5 } end)
    end)

    it("SBX-CFG-02 rejects a negative timeout", function()
      raises({ "LocalSandbox.new", "option 'timeout'", "-1" },
        function() LocalSandbox.new{ timeout = -1 } end)
    end)

    it("SBX-CFG-02 rejects a NaN timeout", function()
      raises({ "LocalSandbox.new", "option 'timeout'", "nan" },
        function() LocalSandbox.new{ timeout = 0 / 0 } end)
    end)

    it("SBX-CFG-02 rejects an infinite timeout", function()
      raises({ "LocalSandbox.new", "option 'timeout'", "inf" },
        function() LocalSandbox.new{ timeout = math.huge } end)
    end)

    it("SBX-CFG-02 rejects a string timeout", function()
      raises({ "LocalSandbox.new", "option 'timeout'", "string" },
        function() LocalSandbox.new{ timeout = "100" } end)
    end)

    it("SBX-CFG-02 rejects a non-string workingDirectory and id", function()
      raises({ "option 'workingDirectory'", "a string" },
        function() LocalSandbox.new{ workingDirectory = 42 } end)
      raises({ "option 'id'", "a string" },
        function() LocalSandbox.new{ id = {} } end)
    end)

    it("SBX-CFG-02 rejects env with a non-string value", function()
      raises({ "option 'env'", "FOO" },
        function() LocalSandbox.new{ env = { FOO = true } } end)
    end)

    it("SBX-CFG-02 rejects options that are not a table", function()
      raises({ "LocalSandbox.new", "options must be a table" },
        function() LocalSandbox.new("wd") end)
    end)

    it("SBX-CFG-01 accepts a full valid config", function()
      local ok, s = pcall(LocalSandbox.new, {
        id = "my-id", workingDirectory = dir .. "/cfg01", env = { A = "1", B = 2 },
        timeout = 0, instructions = "hi",
      })
      assert.is_true(ok, tostring(s))
      assert.are.equal("my-id", s.id)
      s:destroy()
    end)
  end)

  describe("executeCommand", function()
    it("rejects a non-string command (argument #1 (command))", function()
      raises({ "LocalSandbox:executeCommand", "argument #1 (command)", "a string", "number" },
        function() sb:executeCommand(42) end)
      raises({ "argument #1 (command)", "nil" },
        function() sb:executeCommand() end)
    end)

    it("rejects a non-string in args (argument #2 (args))", function()
      raises({ "LocalSandbox:executeCommand", "argument #2 (args)", "item 2", "number 5" },
        function() sb:executeCommand("echo", { "a", 5 }) end)
    end)

    it("rejects args that are not a list", function()
      raises({ "argument #2 (args)", "list of strings", "string" },
        function() sb:executeCommand("echo", "hello") end)
    end)

    it("rejects a negative timeout (option 'timeout')", function()
      raises({ "LocalSandbox:executeCommand", "option 'timeout'", "-5" },
        function() sb:executeCommand("echo", nil, { timeout = -5 }) end)
    end)

    it("rejects a NaN timeout (option 'timeout')", function()
      raises({ "option 'timeout'", "nan" },
        function() sb:executeCommand("echo", nil, { timeout = 0 / 0 }) end)
    end)

    it("rejects a string timeout (option 'timeout')", function()
      raises({ "option 'timeout'", "string" },
        function() sb:executeCommand("echo", nil, { timeout = "100" }) end)
    end)

    it("rejects an unknown option key", function()
      raises({ "LocalSandbox:executeCommand", "unknown option 'tiemout'", "timeout" },
        function() sb:executeCommand("echo", nil, { tiemout = 100 }) end)
    end)

    it("rejects a non-function onStdout / onStderr", function()
      raises({ "option 'onStdout'", "a function", "string" },
        function() sb:executeCommand("echo", nil, { onStdout = "print" }) end)
      raises({ "option 'onStderr'", "a function", "boolean" },
        function() sb:executeCommand("echo", nil, { onStderr = true }) end)
    end)

    it("rejects a non-string cwd and a bad env", function()
      raises({ "option 'cwd'", "a string" },
        function() sb:executeCommand("echo", nil, { cwd = 1 }) end)
      raises({ "option 'env'" },
        function() sb:executeCommand("echo", nil, { env = { [1] = "x" } }) end)
    end)

    it("names the mistake when called with '.' instead of ':'", function()
      raises({ "LocalSandbox:executeCommand", "call it with ':'" },
        function() sb.executeCommand("echo hi") end)
    end)

    it("starts nothing when it rejects its input", function()
      assert.is_false(pcall(sb.executeCommand, sb, "echo", nil, { tiemout = 1 }))
      assert.are.equal("pending", sb.status)
      assert.is_nil(lfs.attributes(dir .. "/wd"))
    end)
  end)

  describe("processes:spawn and handles", function()
    it("rejects a non-string command (argument #1 (command))", function()
      raises({ "processes:spawn", "argument #1 (command)", "table" },
        function() sb.processes:spawn({ "echo" }) end)
    end)

    it("rejects an unknown option key", function()
      raises({ "processes:spawn", "unknown option 'tiemout'" },
        function() sb.processes:spawn("echo", { tiemout = 1 }) end)
    end)

    it("rejects a negative / NaN / string timeout (option 'timeout')", function()
      raises({ "processes:spawn", "option 'timeout'", "-1" },
        function() sb.processes:spawn("echo", { timeout = -1 }) end)
      raises({ "option 'timeout'", "nan" },
        function() sb.processes:spawn("echo", { timeout = 0 / 0 }) end)
      raises({ "option 'timeout'", "string" },
        function() sb.processes:spawn("echo", { timeout = "1" }) end)
    end)

    it("rejects a non-function onStdout", function()
      raises({ "processes:spawn", "option 'onStdout'", "a function" },
        function() sb.processes:spawn("echo", { onStdout = 1 }) end)
    end)

    it("starts nothing when it rejects its input", function()
      assert.is_false(pcall(sb.processes.spawn, sb.processes, "echo", { tiemout = 1 }))
      assert.are.equal("pending", sb.status)
      assert.are.same({}, sb.processes:list())
    end)

    it("sendStdin rejects non-string data (argument #1 (data))", function()
      local s <close> = LocalSandbox.new{ workingDirectory = dir .. "/wd-stdin" }
      s:start()
      local h = s.processes:spawn("cat")
      raises({ "ProcessHandle:sendStdin", "argument #1 (data)", "a string", "number" },
        function() h:sendStdin(42) end)
      h:closeStdin()
      assert.are.equal(0, h:wait().exitCode)
    end)
  end)
end)
