-- LocalSandbox leaves nothing behind: descriptors and child processes are
-- counted before and after a workload of commands, timeouts, cancels and
-- background processes (spec/support/leaks.lua reads them from /proc).
local mastra = require "mastra"
local leaks = require "spec.support.leaks"
local util = require "spec.support.util"

local children, fds, count = leaks.children, leaks.fds, leaks.count
local describe_fds, settle = leaks.describe_fds, leaks.settle

describe("leaks around a workload", function()
  local dir, base

  setup(function() dir, base = util.tmpdir() end)
  teardown(function() util.rm_rf(dir, base) end)

  local function workload()
    local sb <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd" }
    sb:start()
    -- plain commands, some concurrent
    for i = 1, 20 do
      assert(sb:executeCommand("echo", { tostring(i) }).stdout == i .. "\n")
    end
    local rs = mastra.all{
      function() return sb:executeCommand("echo a; echo b >&2") end,
      function() return sb:executeCommand("sleep 0.1; exit 3") end,
      function() return sb:executeCommand("head -c 3000000 /dev/zero") end,
    }
    assert(rs[2].exitCode == 3 and #rs[3].stdout == 3000000)
    -- timeouts, one of them ignoring SIGTERM
    assert(sb:executeCommand("sleep 10", nil, { timeout = 50 }).timedOut)
    assert(sb:executeCommand("trap '' TERM; sleep 10 & wait", nil, { timeout = 50 }).timedOut)
    -- cancels: running, already cancelled, and from inside onStdout
    local running = {}
    for i = 1, 5 do
      running[i] = mastra.spawn(function() return sb:executeCommand("sleep 10 & wait") end)
    end
    mastra.sleep(100)
    for _, t in ipairs(running) do t:cancel() end
    for _, t in ipairs(running) do assert(not pcall(t.wait, t)) end
    local early = mastra.spawn(function() return sb:executeCommand("sleep 10") end)
    early:cancel()
    assert(not pcall(early.wait, early))
    local inner
    inner = mastra.spawn(function()
      return sb:executeCommand("echo go; sleep 10", nil,
        { onStdout = function() inner:cancel() end })
    end)
    assert(not pcall(inner.wait, inner))
    -- a failing callback
    assert(not pcall(sb.executeCommand, sb, "echo x; sleep 10",
      nil, { onStdout = function() error("callback failed") end }))
    -- background processes: wait, handle kill, manager kill, stdin, prune
    local procs = sb.processes
    assert(procs:spawn("echo bg"):wait().exitCode == 0)
    local h1 = procs:spawn("sleep 60")
    assert(h1:kill())
    h1:wait()
    local h2 = procs:spawn("sleep 60")
    assert(procs:kill(h2.pid))
    local h3 = procs:spawn("cat")
    h3:sendStdin("data\n")
    h3:closeStdin()
    assert(h3:wait().stdout == "data\n")
    local h4 = procs:spawn("trap '' TERM; sleep 60 & wait", { timeout = 50 })
    h4:wait()
    local h5 = procs:spawn("echo prune")
    h5:wait()
    assert(procs:get(h5.pid) and procs:get(h5.pid) == nil)
    -- left running: the sandbox's destroy (<close>) ends them
    procs:spawn("sleep 60")
    procs:spawn("cat") -- waits on its stdin
    mastra.spawn(function() return sb:executeCommand("sleep 60") end)
    mastra.sleep(50)
  end

  it("executeCommand, timeouts, cancels and processes leave no descriptor"
    .. " and no child behind", function()
    settle(function() return #children() == 0 end)
    local before_fds = fds("self")
    local before_children = children()
    assert.are.same({}, before_children)

    workload()

    local function same()
      local now = fds("self")
      if count(now) ~= count(before_fds) then return false end
      for n, target in pairs(before_fds) do
        if now[n] ~= target then return false end
      end
      return #children() == 0
    end
    settle(same)
    local after_fds = fds("self")
    assert.are.same({}, children())
    assert.are.equal(count(before_fds), count(after_fds),
      "before: " .. describe_fds(before_fds) .. "\nafter: " .. describe_fds(after_fds))
    assert.are.same(before_fds, after_fds)
  end)
end)
