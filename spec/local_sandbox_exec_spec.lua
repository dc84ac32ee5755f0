-- The executeCommand cases of upstream's sandbox conformance suite
-- (SBX-EXEC-NN) against LocalSandbox, plus the command-line rules (shell
-- text, args quoted one by one: lua/mastra/shell.lua) and the LocalSandbox
-- defaults.
--
-- There is no AbortSignal in Lua: the abort cases (SBX-EXEC-14..16) cancel
-- the task that runs executeCommand. The task then ends with a
-- CancelledError (instead of a result with success false), its process
-- group is killed, and onStdout has already seen the partial output.
local lfs = require "lfs"
local mastra = require "mastra"
local util = require "spec.support.util"
local trim = util.trim
local read_file = util.read_file
local alive = util.alive
local wait_until = util.wait_until
local collector = util.collector

local CancelledError = mastra.errors.CancelledError


describe("LocalSandbox executeCommand (SBX-EXEC)", function()
  local dir, base, wd, sb

  setup(function()
    sb, dir, base = util.tempSandbox()
    wd = sb.workingDirectory
  end)

  teardown(function()
    util.dropSandbox(sb, dir, base)
  end)

  it("SBX-EXEC-01 runs a simple command and returns the full result shape", function()
    local r = sb:executeCommand("echo", { "hello" })
    assert.are.equal(0, r.exitCode)
    assert.is_true(r.success)
    assert.are.equal("hello", trim(r.stdout))
    assert.are.equal("", r.stderr)
    assert.are.equal("number", type(r.executionTimeMs))
    assert.is_true(r.executionTimeMs >= 0)
    assert.is_false(r.timedOut)
    assert.is_false(r.killed)
    assert.are.equal("echo hello", r.command)
    assert.are.same({ "hello" }, r.args)
  end)

  it("SBX-EXEC-02 captures stdout (command used verbatim, no args field)", function()
    local r = sb:executeCommand('echo "stdout test"')
    assert.is_truthy(r.stdout:find("stdout test", 1, true))
    assert.are.equal('echo "stdout test"', r.command)
    assert.is_nil(r.args)
  end)

  it("SBX-EXEC-03 captures stderr", function()
    local r = sb:executeCommand([[sh -c 'echo "error message" >&2']])
    assert.is_truthy(r.stderr:find("error message", 1, true))
    assert.are.equal("", r.stdout)
  end)

  it("SBX-EXEC-04 reports a non-zero exit without raising", function()
    local ok, r = pcall(sb.executeCommand, sb, "sh -c 'exit 1'")
    assert.is_true(ok, tostring(r))
    assert.are.equal(1, r.exitCode)
    assert.is_false(r.success)
    assert.is_false(r.timedOut)
  end)

  it("SBX-EXEC-05 passes multiple args", function()
    local r = sb:executeCommand("echo", { "arg1", "arg2", "arg3" })
    assert.are.equal("arg1 arg2 arg3", trim(r.stdout))
    assert.are.equal("echo arg1 arg2 arg3", r.command)
  end)

  it("SBX-EXEC-06 keeps an arg containing a space as one argument", function()
    local r = sb:executeCommand("echo", { "hello world", "test" })
    assert.are.equal(0, r.exitCode)
    assert.are.equal("hello world test", trim(r.stdout))
    assert.are.equal("echo 'hello world' test", r.command)
    -- one argv entry each: printf repeats its format once per argument
    r = sb:executeCommand("printf", { "[%s]", "hello world", "test" })
    assert.are.equal("[hello world][test]", r.stdout)
  end)

  it("SBX-EXEC-06 (quoting, protocol 2.4) passes quotes, $, ; and empty args intact", function()
    local args = { [[%s\n]], "a b", "it's", "", "$HOME", "x;y", "`id`", "*" }
    local r = sb:executeCommand("printf", args)
    assert.are.equal(0, r.exitCode)
    assert.are.equal("a b\nit's\n\n$HOME\nx;y\n`id`\n*\n", r.stdout)
    assert.are.equal([[printf '%s\n' 'a b' 'it'\''s' '' '$HOME' 'x;y' '`id`' '*']], r.command)
  end)

  it("SBX-EXEC-06 (quoting, protocol 2.4) leaves safe words unquoted", function()
    local r = sb:executeCommand("echo", { "ok", "a=b", "user@host:/p-q_r.1" })
    assert.are.equal("echo ok a=b user@host:/p-q_r.1", r.command)
    assert.are.equal("ok a=b user@host:/p-q_r.1", trim(r.stdout))
  end)

  it("SBX-EXEC-07 sets a per-command env var", function()
    local r = sb:executeCommand("sh -c 'echo $TEST_VAR'", nil,
      { env = { TEST_VAR = "test_value" } })
    assert.are.equal("test_value", trim(r.stdout))
  end)

  it("SBX-EXEC-08 sets several env vars", function()
    local r = sb:executeCommand([[sh -c 'echo "$VAR1 $VAR2"']], nil,
      { env = { VAR1 = "first", VAR2 = "second" } })
    assert.are.equal("first second", trim(r.stdout))
  end)

  it("SBX-EXEC-09 passes an env value with special characters unmangled", function()
    local value = [[has spaces & "quotes"]]
    local r = sb:executeCommand("printenv SPECIAL", nil, { env = { SPECIAL = value } })
    assert.are.equal(0, r.exitCode)
    assert.is_truthy(r.stdout:find("has spaces", 1, true))
    assert.are.equal(value .. "\n", r.stdout)
  end)

  it("SBX-EXEC-10 runs in the given cwd", function()
    local r = sb:executeCommand("pwd", nil, { cwd = "/tmp" })
    assert.are.equal(0, r.exitCode)
    local out = trim(r.stdout)
    assert.is_true(out == "/tmp" or out == "/private/tmp", out)
  end)

  it("SBX-EXEC-11 kills a command on timeout and returns a result", function()
    local t0 = mastra.now()
    local ok, r = pcall(sb.executeCommand, sb, "sleep 10", nil, { timeout = 100 })
    local elapsed = mastra.now() - t0
    assert.is_true(ok, tostring(r))
    assert.are_not.equal(0, r.exitCode)
    assert.is_false(r.success)
    assert.is_true(r.timedOut)
    assert.are.equal(124, r.exitCode) -- protocol 2.4: a timeout maps to 124
    assert.is_true(elapsed < 5000, "took " .. elapsed .. " ms")
  end)

  it("SBX-EXEC-12 streams output until the timeout and keeps it", function()
    local chunks, on = collector()
    local r = sb:executeCommand(
      [[sh -c 'for i in $(seq 1 100); do echo "line $i"; sleep 0.5; done']],
      nil, { timeout = 2000, onStdout = on })
    assert.is_false(r.success)
    assert.is_true(r.timedOut)
    assert.is_true(#chunks >= 1)
    assert.is_truthy(table.concat(chunks):find("line 1\n", 1, true))
    assert.is_truthy(r.stdout:find("line 1\n", 1, true))
  end)

  it("SBX-EXEC-13 lets a fast command finish inside its timeout", function()
    local r = sb:executeCommand("echo fast", nil, { timeout = 10000 })
    assert.are.equal(0, r.exitCode)
    assert.is_truthy(r.stdout:find("fast", 1, true))
    assert.is_false(r.timedOut)
  end)

  it("SBX-EXEC-14 (abort -> task:cancel() from onStdout) ends the task quickly"
    .. " and kills the process group", function()
    local chunks = {}
    local t
    local t0 = mastra.now()
    t = mastra.spawn(function()
      return sb:executeCommand("sleep 30 & echo $! > abort14.pid; echo started; wait", nil, {
        onStdout = function(s)
          chunks[#chunks + 1] = s
          if table.concat(chunks):find("started", 1, true) then t:cancel() end
        end,
      })
    end)
    local ok, err = pcall(t.wait, t)
    local elapsed = mastra.now() - t0
    assert.is_false(ok)
    assert.is_true(CancelledError:is(err), tostring(err))
    assert.is_true(elapsed < 5000, "took " .. elapsed .. " ms")
    assert.is_truthy(table.concat(chunks):find("started", 1, true))
    local pid = trim(assert(read_file(wd .. "/abort14.pid")))
    assert.is_truthy(pid:match("^%d+$"))
    assert.is_true(wait_until(function() return not alive(pid) end, 3000),
      "the background sleep " .. pid .. " is still running")
  end)

  it("SBX-EXEC-15 (already aborted -> task cancelled before it runs) never starts"
    .. " the command", function()
    local t0 = mastra.now()
    local t = mastra.spawn(function()
      return sb:executeCommand("touch ran15; sleep 10")
    end)
    assert.is_true(t:cancel())
    local ok, err = pcall(t.wait, t)
    local elapsed = mastra.now() - t0
    assert.is_false(ok)
    assert.is_true(CancelledError:is(err), tostring(err))
    assert.is_true(elapsed < 2000, "took " .. elapsed .. " ms")
    assert.is_nil(lfs.attributes(wd .. "/ran15"))
  end)

  it("SBX-EXEC-16 (abort -> task:cancel() from outside) keeps the partial output"
    .. " seen by onStdout", function()
    local chunks, on = collector()
    local t0 = mastra.now()
    local t = mastra.spawn(function()
      return sb:executeCommand("sleep 30 & echo $! > abort16.pid; echo 'before abort'; wait",
        nil, { onStdout = on })
    end)
    assert.is_true(wait_until(function()
      return table.concat(chunks):find("before abort", 1, true) ~= nil
    end, 5000))
    assert.is_true(t:cancel())
    local ok, err = pcall(t.wait, t)
    local elapsed = mastra.now() - t0
    assert.is_false(ok)
    assert.is_true(CancelledError:is(err), tostring(err))
    assert.is_true(elapsed < 5000, "took " .. elapsed .. " ms")
    assert.is_truthy(table.concat(chunks):find("before abort", 1, true))
    local pid = trim(assert(read_file(wd .. "/abort16.pid")))
    assert.is_true(wait_until(function() return not alive(pid) end, 3000),
      "the background sleep " .. pid .. " is still running")
  end)

  it("SBX-EXEC-17 runs a pipeline", function()
    local r = sb:executeCommand(
      [[sh -c 'echo "cherry banana apple" | tr " " "\n" | sort | head -1']])
    assert.are.equal(0, r.exitCode)
    assert.are.equal("apple", trim(r.stdout))
  end)

  it("SBX-EXEC-18 passes a multi-line heredoc script intact", function()
    local script = "cat > heredoc-test.txt << 'EOF'\nline one\nline two\nEOF\ncat heredoc-test.txt"
    local r = sb:executeCommand("sh", { "-c", script })
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.is_truthy(r.stdout:find("line one", 1, true))
    assert.is_truthy(r.stdout:find("line two", 1, true))
    assert.are.equal("line one\nline two\n", read_file(wd .. "/heredoc-test.txt"))
  end)

  it("SBX-EXEC-19 returns a custom exit code", function()
    local r = sb:executeCommand("sh -c 'exit 42'")
    assert.are.equal(42, r.exitCode)
    assert.is_false(r.success)
  end)

  it("SBX-EXEC-20 captures stdout and stderr of one command", function()
    local r = sb:executeCommand([[sh -c 'echo "out" && echo "err" >&2']])
    assert.are.equal(0, r.exitCode)
    assert.are.equal("out\n", r.stdout)
    assert.are.equal("err\n", r.stderr)
  end)

  it("SBX-EXEC-21 keeps filesystem state between commands", function()
    local token = "roundtrip-" .. mastra.now()
    local w = sb:executeCommand("sh", { "-c", "echo " .. token .. " > roundtrip-test.txt" })
    assert.are.equal(0, w.exitCode, w.stderr)
    local r = sb:executeCommand("cat roundtrip-test.txt")
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.is_truthy(r.stdout:find(token, 1, true))
  end)

  it("SBX-EXEC-22 returns large output without truncation", function()
    local r = sb:executeCommand("sh -c 'seq 1 5000'")
    assert.are.equal(0, r.exitCode)
    local lines = {}
    for line in (trim(r.stdout) .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = line end
    assert.are.equal(5000, #lines)
    assert.are.equal("1", lines[1])
    assert.are.equal("5000", lines[5000])
  end)

  it("keeps the newest maxRetainedBytes of the output; onStdout still sees it all", function()
    util.checkRetainedOutput(sb)
    assert.has_error(function() sb:executeCommand("true", nil, { maxRetainedBytes = -1 }) end,
      "LocalSandbox:executeCommand: option 'maxRetainedBytes' must be an integer >= 0 (bytes),"
      .. " or math.huge (keep everything) (got number -1)")
  end)

  it("SBX-EXEC-23 streams stdout chunks and still buffers stdout", function()
    local chunks, on = collector()
    local r = sb:executeCommand(
      [[sh -c 'for i in 1 2 3; do echo "chunk $i"; sleep 0.3; done']], nil, { onStdout = on })
    assert.are.equal(0, r.exitCode)
    assert.is_truthy(r.stdout:find("chunk 3", 1, true))
    assert.is_true(#chunks >= 1)
    assert.are.equal(r.stdout, table.concat(chunks))
  end)

  it("SBX-EXEC-24 streams stderr chunks", function()
    local chunks, on = collector()
    local r = sb:executeCommand([[sh -c 'echo "err1" >&2; sleep 0.2; echo "err2" >&2']], nil,
      { onStderr = on })
    assert.are.equal(0, r.exitCode)
    assert.is_true(#chunks >= 1)
    assert.is_truthy(r.stderr:find("err", 1, true))
    assert.are.equal("err1\nerr2\n", r.stderr)
    assert.are.equal(r.stderr, table.concat(chunks))
  end)

  it("SBX-EXEC-25 lets per-command env override sandbox env without leaking", function()
    local sb2 <close> = mastra.LocalSandbox.new{
      workingDirectory = dir .. "/wd25", env = { MY_VAR = "initial" },
    }
    sb2:start()
    assert.are.equal("initial", trim(sb2:executeCommand("echo $MY_VAR").stdout))
    assert.are.equal("changed",
      trim(sb2:executeCommand("echo $MY_VAR", nil, { env = { MY_VAR = "changed" } }).stdout))
    assert.are.equal("initial", trim(sb2:executeCommand("echo $MY_VAR").stdout))
    sb2:destroy()
    assert.are.equal("destroyed", sb2.status)
  end)

  it("SBX-EXEC-26 merges per-command env with sandbox env", function()
    local sb2 <close> = mastra.LocalSandbox.new{
      workingDirectory = dir .. "/wd26", env = { VAR_A = "1", VAR_B = "2" },
    }
    sb2:start()
    local r = sb2:executeCommand("echo $VAR_A $VAR_B $VAR_C", nil,
      { env = { VAR_B = "override", VAR_C = "3" } })
    assert.are.equal("1 override 3", trim(r.stdout))
  end)

  it("SBX-EXEC-27 runs concurrent commands, each with its own output", function()
    local words = { "first", "second", "third" }
    local fns = {}
    for i, w in ipairs(words) do
      fns[i] = function() return sb:executeCommand("sleep 0.2; echo", { w }) end
    end
    local t0 = mastra.now()
    local results = mastra.all(fns)
    local elapsed = mastra.now() - t0
    for i, w in ipairs(words) do
      assert.are.equal(0, results[i].exitCode)
      assert.are.equal(w, trim(results[i].stdout))
    end
    assert.is_true(elapsed < 5000, "took " .. elapsed .. " ms")
  end)

  it("SBX-EXEC-28 isolates env between concurrent commands", function()
    local results = mastra.all{
      function() return sb:executeCommand("sh -c 'sleep 0.1; echo $VAR'", nil,
        { env = { VAR = "value1" } }) end,
      function() return sb:executeCommand("sh -c 'sleep 0.1; echo $VAR'", nil,
        { env = { VAR = "value2" } }) end,
    }
    assert.are.equal("value1", trim(results[1].stdout))
    assert.are.equal("value2", trim(results[2].stdout))
  end)

  describe("LocalSandbox defaults", function()
    it("7.5 runs commands in workingDirectory when no cwd is given", function()
      local r = sb:executeCommand("pwd -P")
      local p = io.popen("cd " .. mastra.quote(wd) .. " && pwd -P")
      local real = trim(p:read("a"))
      p:close()
      assert.are.equal(real, trim(r.stdout))
    end)

    it("7.5 gives commands PATH plus the configured env, not the parent environment", function()
      local sb2 <close> = mastra.LocalSandbox.new{
        workingDirectory = dir .. "/wd75", env = { ONLY_THIS = "yes" },
      }
      sb2:start()
      local r = sb2:executeCommand("env")
      local names = {}
      for name in r.stdout:gmatch("([^=\n]+)=[^\n]*\n") do names[name] = true end
      assert.is_true(names.PATH)
      assert.is_true(names.ONLY_THIS)
      -- the parent's HOME (if any) is not passed on
      if os.getenv("HOME") then assert.is_nil(names.HOME) end
    end)
  end)
end)
