-- The process-manager cases of upstream's sandbox conformance suite
-- (SBX-PROC-NN) against LocalSandbox.processes.
--
-- Lua has no AbortSignal and no Node streams:
--   * abort (SBX-PROC-14..16) maps to handle:kill();
--   * reader (SBX-PROC-35/36) maps to the onStdout callback;
--   * writer (SBX-PROC-37) maps to sendStdin + closeStdin.
-- The cases use node -e for long-running output; here they are sh.
local mastra = require "mastra"
local util = require "spec.support.util"
local tmpdir = util.tmpdir
local rm_rf = util.rm_rf
local trim = util.trim
local wait_until = util.wait_until
local collector = util.collector

-- {====== helpers ======

local function contains(s, sub)
  return s:find(sub, 1, true) ~= nil
end

local function find_entry(list, pid)
  for _, e in ipairs(list) do
    if e.pid == pid then return e end
  end
  return nil
end

-- }======

describe("LocalSandbox processes (SBX-PROC)", function()
  local dir, base, sb, procs
  local cleanup = {}

  -- spawn and remember, so that teardown can kill what a failed test left
  local function spawn(command, opts)
    local h = procs:spawn(command, opts)
    cleanup[#cleanup + 1] = h
    return h
  end

  setup(function()
    dir, base = tmpdir()
    sb = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd" }
    sb:start()
    procs = sb.processes
    assert.is_not_nil(procs)
  end)

  after_each(function()
    for i, h in ipairs(cleanup) do
      if h.exitCode == nil then
        h:kill()
        pcall(h.wait, h)
      end
      cleanup[i] = nil
    end
  end)

  teardown(function()
    if sb then sb:destroy() end
    rm_rf(dir, base)
  end)

  it("SBX-PROC-01 gives a handle with a non-empty string pid", function()
    local h = spawn("echo hello")
    assert.are.equal("string", type(h.pid))
    assert.is_true(#h.pid > 0)
    assert.are.equal("echo hello", h.command)
    h:wait()
  end)

  it("SBX-PROC-02 accumulates stdout for wait()", function()
    local r = spawn("echo hello"):wait()
    assert.is_true(r.success)
    assert.are.equal(0, r.exitCode)
    assert.are.equal("hello", trim(r.stdout))
  end)

  it("SBX-PROC-03 accumulates stderr for wait()", function()
    local r = spawn([[echo "error msg" >&2]]):wait()
    assert.is_truthy(contains(r.stderr, "error msg"))
    assert.are.equal("", r.stdout)
  end)

  it("SBX-PROC-04 reports a non-zero exit", function()
    local r = spawn("exit 42"):wait()
    assert.is_false(r.success)
    assert.are.equal(42, r.exitCode)
  end)

  it("SBX-PROC-05 takes an env option", function()
    local r = spawn("echo $MY_VAR", { env = { MY_VAR = "test_value" } }):wait()
    assert.are.equal("test_value", trim(r.stdout))
  end)

  it("SBX-PROC-06 calls onStdout", function()
    local chunks, on = collector()
    spawn("echo hello", { onStdout = on }):wait()
    assert.is_truthy(contains(table.concat(chunks), "hello"))
  end)

  it("SBX-PROC-07 calls onStderr", function()
    local chunks, on = collector()
    spawn([[echo "err" >&2]], { onStderr = on }):wait()
    assert.is_truthy(contains(table.concat(chunks), "err"))
  end)

  it("SBX-PROC-08 keeps stdout on the handle", function()
    local h = spawn("echo hello")
    h:wait()
    assert.are.equal("hello", trim(h.stdout))
  end)

  it("SBX-PROC-09 keeps stderr on the handle", function()
    local h = spawn([[echo "err" >&2]])
    h:wait()
    assert.is_truthy(contains(h.stderr, "err"))
  end)

  it("SBX-PROC-10 has exitCode nil while running, then 0", function()
    local h = spawn("sleep 0.05")
    assert.is_nil(h.exitCode)
    h:wait()
    assert.are.equal(0, h.exitCode)
  end)

  it("SBX-PROC-11 wait() is idempotent", function()
    local h = spawn("echo again")
    local r1 = h:wait()
    local r2 = h:wait()
    assert.are.equal(0, r1.exitCode)
    assert.are.equal(0, r2.exitCode)
    assert.are.equal(r1.stdout, r2.stdout)
    assert.are.equal("again\n", r2.stdout)
  end)

  it("SBX-PROC-12 kills a running process", function()
    local h = spawn("sleep 60")
    assert.is_nil(h.exitCode)
    local t0 = mastra.now()
    assert.is_true(h:kill())
    local r = h:wait()
    assert.is_false(r.success)
    assert.is_not_nil(h.exitCode)
    assert.is_true(mastra.now() - t0 < 5000)
  end)

  it("SBX-PROC-13 kill() of an exited process gives false", function()
    local h = spawn("echo done")
    h:wait()
    assert.is_false(h:kill())
    assert.are.equal(0, h.exitCode)
  end)

  it("SBX-PROC-14 (abort -> handle:kill() from onStdout) ends the process", function()
    local h
    local chunks = {}
    h = spawn("echo started; sleep 30", {
      onStdout = function(s)
        chunks[#chunks + 1] = s
        if contains(table.concat(chunks), "started") then h:kill() end
      end,
    })
    local t0 = mastra.now()
    local r = h:wait()
    assert.is_false(r.success)
    assert.is_true(mastra.now() - t0 < 5000)
  end)

  it("SBX-PROC-15 (already aborted -> kill() right after spawn) does not raise;"
    .. " wait() fails fast", function()
    local t0 = mastra.now()
    local ok, h = pcall(spawn, "sleep 60")
    assert.is_true(ok, tostring(h))
    assert.is_true(h:kill())
    local r = h:wait()
    local elapsed = mastra.now() - t0
    assert.is_false(r.success)
    assert.is_true(elapsed < 2000, "took " .. elapsed .. " ms")
  end)

  it("SBX-PROC-16 (abort -> handle:kill()) keeps the output from before the kill", function()
    local h
    local chunks = {}
    h = spawn("echo 'before abort'; sleep 30", {
      onStdout = function(s)
        chunks[#chunks + 1] = s
        if contains(table.concat(chunks), "before abort") then h:kill() end
      end,
    })
    local r = h:wait()
    assert.is_false(r.success)
    assert.is_truthy(contains(r.stdout, "before abort"))
    assert.is_truthy(contains(h.stdout, "before abort"))
  end)

  it("SBX-PROC-17 sends data to stdin", function()
    local h = spawn("head -1")
    h:sendStdin("hello from stdin\n")
    local r = h:wait()
    assert.are.equal(0, r.exitCode)
    assert.is_truthy(contains(r.stdout, "hello from stdin"))
  end)

  it("SBX-PROC-17 (extra) sends 1 MiB through stdin while stdout is read", function()
    local h = spawn("cat", { maxRetainedBytes = math.huge })
    local line = ("0123456789abcdef"):rep(63) .. "\n" -- 1009 bytes
    local data = line:rep(1040)                      -- > 1 MiB, more than a pipe holds
    h:sendStdin(data)
    h:closeStdin()
    local r = h:wait()
    assert.are.equal(0, r.exitCode)
    assert.are.equal(#data, #r.stdout)
    assert.is_true(r.stdout == data)
    assert.is_false(r.stdoutTruncated)
    assert.are.equal(0, r.stdoutDroppedBytes)
  end)

  it("keeps the newest 1 MiB of a spawned process's output by default (as upstream)", function()
    local h = spawn("cat")
    local line = ("0123456789abcdef"):rep(63) .. "\n" -- 1009 bytes
    local data = line:rep(1040)
    h:sendStdin(data)
    h:closeStdin()
    local r = h:wait()
    assert.are.equal(0, r.exitCode)
    assert.are.equal(1048576, #r.stdout)
    assert.is_true(r.stdout == data:sub(-1048576))
    assert.is_true(h.stdout == r.stdout)
    assert.is_true(r.stdoutTruncated)
    assert.are.equal(#data - 1048576, r.stdoutDroppedBytes)
    assert.is_false(r.stderrTruncated)
    assert.are.equal(0, r.stderrDroppedBytes)
  end)

  it("spawn keeps what maxRetainedBytes says, and refuses a bad value", function()
    local r = spawn("printf 0123456789; printf abc >&2", { maxRetainedBytes = 4 }):wait()
    assert.are.equal("6789", r.stdout)
    assert.are.equal(6, r.stdoutDroppedBytes)
    assert.are.equal("abc", r.stderr)
    assert.is_false(r.stderrTruncated)
    for _, bad in ipairs{ -1, 1.5, "10", 0 / 0 } do
      local ok, err = pcall(procs.spawn, procs, "true", { maxRetainedBytes = bad })
      assert.is_false(ok)
      assert.matches("processes:spawn: option 'maxRetainedBytes' must be an integer >= 0"
        .. " %(bytes%), or math.huge", err)
    end
  end)

  it("SBX-PROC-18 sendStdin to an exited process raises", function()
    local h = spawn("echo bye")
    h:wait()
    local ok, err = pcall(h.sendStdin, h, "data")
    assert.is_false(ok)
    assert.is_truthy(contains(tostring(err), "exited"), tostring(err))
  end)

  it("SBX-PROC-19 list() shows a running process", function()
    local h = spawn("sleep 60")
    local list = procs:list()
    assert.is_true(#list >= 1)
    local e = find_entry(list, h.pid)
    assert.is_not_nil(e)
    assert.is_true(e.running)
    assert.is_nil(e.exitCode)
    h:kill()
    h:wait()
  end)

  it("SBX-PROC-20 list() after exit: the entry, if present, is not running, exit 0", function()
    local h = spawn("echo done")
    h:wait()
    local e = find_entry(procs:list(), h.pid)
    if e then
      assert.is_false(e.running)
      assert.are.equal(0, e.exitCode)
    end
    assert.are.equal(0, h.exitCode)
  end)

  it("SBX-PROC-21 list() entries carry the command", function()
    local h = spawn("sleep 60")
    local e = find_entry(procs:list(), h.pid)
    assert.is_not_nil(e)
    if e.command then assert.is_truthy(contains(e.command, "sleep")) end
    h:kill()
    h:wait()
  end)

  it("SBX-PROC-22 get() finds a running process by pid", function()
    local h = spawn("sleep 60")
    local g = procs:get(h.pid)
    assert.is_not_nil(g)
    assert.are.equal(h.pid, g.pid)
    h:kill()
    h:wait()
  end)

  it("SBX-PROC-23 get() after exit keeps the output", function()
    local h = spawn("echo get-test")
    h:wait()
    local g = procs:get(h.pid)
    if g then assert.is_truthy(contains(g.stdout, "get-test")) end
    assert.is_truthy(contains(h.stdout, "get-test"))
  end)

  it("SBX-PROC-24 get() while running shows live output", function()
    local chunks, on = collector()
    local h = spawn("echo running-get-test; sleep 60", { onStdout = on })
    assert.is_true(wait_until(function() return #chunks > 0 end))
    local g = procs:get(h.pid)
    assert.is_not_nil(g)
    assert.is_nil(g.exitCode)
    assert.is_truthy(contains(g.stdout, "running-get-test"))
    h:kill()
    h:wait()
  end)

  it("SBX-PROC-25 spawn -> get -> manager kill", function()
    local chunks, on = collector()
    local h = spawn("echo spawn-get-kill; sleep 60", { onStdout = on })
    assert.is_true(wait_until(function() return #chunks > 0 end))
    local g = procs:get(h.pid)
    assert.is_not_nil(g)
    assert.is_truthy(contains(g.stdout, "spawn-get-kill"))
    assert.is_true(procs:kill(h.pid))
    local r = h:wait()
    assert.is_false(r.success)
  end)

  it("SBX-PROC-26 get() returns an exited process once, then forgets it", function()
    local chunks, on = collector()
    local h = spawn("echo prune-test", { onStdout = on })
    assert.is_true(wait_until(function() return #chunks > 0 end))
    assert.is_true(wait_until(function() return h.exitCode ~= nil end, 5000, 50))
    local g1 = procs:get(h.pid)
    assert.is_not_nil(g1)
    assert.is_truthy(contains(g1.stdout, "prune-test"))
    assert.is_not_nil(g1.exitCode)
    assert.is_nil(procs:get(h.pid))
    assert.is_nil(find_entry(procs:list(), h.pid))
  end)

  it("SBX-PROC-27 get() of an unknown pid is nil", function()
    assert.is_nil(procs:get("99999"))
  end)

  it("SBX-PROC-28 handle:kill() keeps the process tracked", function()
    local h = spawn("sleep 60")
    assert.is_true(h:kill())
    h:wait()
    local g = procs:get(h.pid)
    assert.is_not_nil(g) -- only the manager's kill releases tracking
    assert.are.equal(h.pid, g.pid)
  end)

  it("SBX-PROC-29 runs independent processes concurrently", function()
    local h1 = spawn("echo first")
    local h2 = spawn("echo second")
    local h3 = spawn("sleep 60")
    assert.are_not.equal(h1.pid, h2.pid)
    assert.are_not.equal(h1.pid, h3.pid)
    assert.are_not.equal(h2.pid, h3.pid)
    assert.are.equal("first", trim(h1:wait().stdout))
    assert.are.equal("second", trim(h2:wait().stdout))
    assert.is_nil(h3.exitCode)
    h3:kill()
    h3:wait()
  end)

  it("SBX-PROC-30 the manager kills a running process", function()
    local h = spawn("sleep 60")
    assert.is_true(procs:kill(h.pid))
    assert.is_false(h:wait().success)
  end)

  it("SBX-PROC-31 the manager kill of an unknown pid gives false", function()
    assert.is_false(procs:kill("99999"))
  end)

  it("SBX-PROC-32 get() after the manager's kill is nil", function()
    local h = spawn("sleep 60")
    assert.is_true(procs:kill(h.pid))
    assert.is_nil(procs:get(h.pid))
    assert.is_nil(find_entry(procs:list(), h.pid))
  end)

  it("SBX-PROC-33 spawn inherits the sandbox env", function()
    local s <close> = mastra.LocalSandbox.new{
      workingDirectory = dir .. "/wd33", env = { SANDBOX_VAR = "from-sandbox" },
    }
    s:start()
    local r = s.processes:spawn("printenv SANDBOX_VAR"):wait()
    assert.is_true(r.success)
    assert.are.equal("from-sandbox", trim(r.stdout))
  end)

  it("SBX-PROC-34 per-spawn env overrides and merges with the sandbox env", function()
    local s <close> = mastra.LocalSandbox.new{
      workingDirectory = dir .. "/wd34", env = { SANDBOX_VAR = "original", EXTRA = "kept" },
    }
    s:start()
    local r = s.processes:spawn("sh -c 'echo $SANDBOX_VAR $EXTRA $SPAWN_VAR'", {
      env = { SANDBOX_VAR = "overridden", SPAWN_VAR = "added" },
    }):wait()
    assert.are.equal("overridden kept added", trim(r.stdout))
  end)

  it("SBX-PROC-35 (reader data -> onStdout) streams the process's stdout", function()
    local chunks, on = collector()
    local h = spawn("echo stream-test", { onStdout = on })
    h:wait()
    mastra.sleep(50)
    assert.is_truthy(contains(table.concat(chunks), "stream-test"))
    assert.are.equal(h.stdout, table.concat(chunks))
  end)

  it("SBX-PROC-36 (reader end -> onStdout) delivers the last chunk before wait()"
    .. " returns, and nothing after", function()
    local chunks, on = collector()
    local h = spawn("echo one; sleep 0.1; echo two", { onStdout = on })
    local r = h:wait()
    local n = #chunks
    assert.are.equal("one\ntwo\n", table.concat(chunks))
    assert.are.equal(r.stdout, table.concat(chunks))
    mastra.sleep(200)
    assert.are.equal(n, #chunks)
  end)

  it("SBX-PROC-37 (writer -> sendStdin/closeStdin) feeds stdin", function()
    local h = spawn("cat")
    local ok, err = pcall(h.sendStdin, h, "writer-test\n")
    assert.is_true(ok, tostring(err))
    h:closeStdin()
    local r = h:wait()
    assert.are.equal(0, r.exitCode)
    assert.are.equal("writer-test\n", r.stdout)
  end)
end)
