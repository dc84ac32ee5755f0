-- Stress: many concurrent commands, a large output, processes that ignore
-- SIGTERM, and process-group cleanup.
local mastra = require "mastra"
local util = require "spec.support.util"
local trim = util.trim
local read_file = util.read_file
local alive = util.alive
local wait_until = util.wait_until


describe("LocalSandbox under stress", function()
  local dir, base, wd, sb

  setup(function()
    sb, dir, base = util.tempSandbox()
    wd = sb.workingDirectory
  end)

  teardown(function()
    util.dropSandbox(sb, dir, base)
  end)

  it("(a) runs 200 concurrent `sleep 0.2; echo $I` commands, overlapping", function()
    local N = 200
    local fns = {}
    for i = 1, N do
      fns[i] = function()
        return sb:executeCommand("sleep 0.2; echo $I", nil, { env = { I = tostring(i) } })
      end
    end
    local t0 = mastra.now()
    local results = mastra.all(fns)
    local elapsed = mastra.now() - t0
    print(("\n(a) %d commands of 0.2 s each took %.0f ms (serial: %d ms)")
      :format(N, elapsed, N * 200))
    assert.are.equal(N, #results)
    for i = 1, N do
      local r = results[i]
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.are.equal(tostring(i) .. "\n", r.stdout)
      assert.are.equal("", r.stderr)
    end
    assert.is_true(elapsed < 20000, "took " .. elapsed .. " ms")
  end)

  it("(a') runs 200 commands through mastra.map with concurrency 50", function()
    local list = {}
    for i = 1, 200 do list[i] = i end
    local outs = mastra.map(list, function(i)
      return sb:executeCommand("echo $I", nil, { env = { I = tostring(i * 7) } }).stdout
    end, { concurrency = 50 })
    for i = 1, 200 do assert.are.equal(tostring(i * 7) .. "\n", outs[i]) end
  end)

  it("(b) delivers 100 MB of output intact", function()
    local SIZE = 100 * 1024 * 1024
    -- the checksum is taken in the same command, of the bytes written to stdout
    local cmd = ("rm -f big.fifo && mkfifo big.fifo && "
      .. "{ sha256sum < big.fifo > big.sum & "
      .. "head -c %d /dev/urandom | tee big.fifo; wait; rm -f big.fifo; }"):format(SIZE)
    local expected
    do
      local t0 = mastra.now()
      local r = sb:executeCommand(cmd, nil, { timeout = 300000 })
      local elapsed = mastra.now() - t0
      print(("\n(b) 100 MB in %.0f ms"):format(elapsed))
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.are.equal("", r.stderr)
      assert.are.equal(SIZE, #r.stdout)
      expected = assert(read_file(wd .. "/big.sum")):match("^(%x+)")
      assert.are.equal(64, #expected)
      local f = assert(io.open(wd .. "/received.bin", "wb"))
      assert(f:write(r.stdout))
      assert(f:close())
    end
    collectgarbage()
    local got = sb:executeCommand("sha256sum received.bin; rm -f received.bin")
    assert.are.equal(0, got.exitCode, got.stderr)
    assert.are.equal(expected, got.stdout:match("^(%x+)"))
  end)

  it("(b') streams 100 MB through onStdout without losing a byte", function()
    local SIZE = 100 * 1024 * 1024
    local total, calls, bad = 0, 0, 0
    local r = sb:executeCommand(("head -c %d /dev/zero | tr '\\0' x"):format(SIZE), nil, {
      timeout = 300000,
      onStdout = function(s)
        calls = calls + 1
        total = total + #s
        if s:find("[^x]") then bad = bad + 1 end
      end,
    })
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal(SIZE, total)
    assert.are.equal(0, bad)
    assert.is_true(calls > 1)
    assert.are.equal(SIZE, #r.stdout)
    assert.is_nil(r.stdout:find("[^x]"))
  end)

  it("(c) ends a command that ignores SIGTERM on timeout, well before 30 s", function()
    local t0 = mastra.now()
    local r = sb:executeCommand("trap '' TERM; sleep 30 & echo $! > c1.pid; wait", nil,
      { timeout = 300 })
    local elapsed = mastra.now() - t0
    print(("\n(c) TERM-ignoring command timed out after %.0f ms"):format(elapsed))
    assert.is_true(r.timedOut)
    assert.is_false(r.success)
    assert.are.equal(124, r.exitCode)
    assert.is_true(elapsed < 10000, "took " .. elapsed .. " ms")
    local pid = trim(assert(read_file(wd .. "/c1.pid")))
    assert.is_true(wait_until(function() return not alive(pid) end, 3000),
      "the background sleep " .. pid .. " is still running")
  end)

  it("(c) ends a spawned process that ignores SIGTERM on handle:kill(), well before 30 s",
    function()
      local ready = false
      local h = sb.processes:spawn("trap '' TERM; sleep 30 & echo $! > c2.pid; echo ready; wait",
        { onStdout = function(s) if s:find("ready", 1, true) then ready = true end end })
      assert.is_true(wait_until(function() return ready end))
      local t0 = mastra.now()
      assert.is_true(h:kill())
      local r = h:wait()
      local elapsed = mastra.now() - t0
      print(("\n(c) TERM-ignoring process ended %.0f ms after kill()"):format(elapsed))
      assert.is_false(r.success)
      assert.are.equal(128 + 9, r.exitCode) -- only SIGKILL ends it
      assert.is_true(elapsed < 10000, "took " .. elapsed .. " ms")
      local pid = trim(assert(read_file(wd .. "/c2.pid")))
      assert.is_true(wait_until(function() return not alive(pid) end, 3000),
        "the background sleep " .. pid .. " is still running")
    end)

  it("(c) ends a command that ignores SIGTERM when its task is cancelled", function()
    local ready = false
    local t = mastra.spawn(function()
      return sb:executeCommand("trap '' TERM; sleep 30 & echo $! > c3.pid; echo ready; wait",
        nil, { onStdout = function(s) if s:find("ready", 1, true) then ready = true end end })
    end)
    assert.is_true(wait_until(function() return ready end))
    local t0 = mastra.now()
    t:cancel()
    assert.is_false(pcall(t.wait, t))
    local pid = trim(assert(read_file(wd .. "/c3.pid")))
    assert.is_true(wait_until(function() return not alive(pid) end, 10000),
      "the background sleep " .. pid .. " is still running")
    assert.is_true(mastra.now() - t0 < 10000)
  end)

  it("(d) kills the whole process group on timeout", function()
    local t0 = mastra.now()
    local r = sb:executeCommand("sh -c 'sleep 30 & echo $! > d.pid; wait'", nil,
      { timeout = 300 })
    local elapsed = mastra.now() - t0
    assert.is_true(r.timedOut)
    assert.is_true(elapsed < 10000, "took " .. elapsed .. " ms")
    local pid = trim(assert(read_file(wd .. "/d.pid")))
    assert.is_truthy(pid:match("^%d+$"))
    assert.is_true(wait_until(function() return not alive(pid) end, 3000),
      "the background sleep " .. pid .. " is still running")
    -- kill -0 agrees (a zombie left to PID 1 still counts as gone)
    local k = sb:executeCommand(("if kill -0 %s 2>/dev/null && ! grep -q '^State:.*Z'"
      .. " /proc/%s/status; then echo alive; else echo gone; fi"):format(pid, pid))
    assert.are.equal("gone\n", k.stdout)
  end)
end)
