-- Leak checks. busted sorts the spec files by name (busted 2.1
-- modules/test_file_loader.lua: table.sort(fileList)), so this file runs
-- last and its first block sees what the whole suite left behind: child
-- processes (zombies included) and descriptors of children (pidfds, pipes).
-- The second block is self-contained: it measures around its own workload.
local lfs = require "lfs"
local mastra = require "mastra"
local util = require "spec.support.util"
local read_file = util.read_file

-- {====== helpers ======

-- state, ppid, comm of a process (nil if it is gone)
local function stat(pid)
  local s = read_file("/proc/" .. tostring(pid) .. "/stat")
  if not s then return nil end
  local comm, state, ppid = s:match("^%d+ %((.*)%) (%S) (%d+)")
  return state, tonumber(ppid), comm
end

local PID = tonumber(assert(read_file("/proc/self/stat")):match("^(%d+)"))
local PPID = select(2, stat(PID))

-- "pid comm (state)" of every child of this process, zombies included
local function children()
  local out = {}
  for name in lfs.dir("/proc") do
    if name:match("^%d+$") then
      local state, ppid, comm = stat(name)
      if ppid == PID then out[#out + 1] = ("%s %s (%s)"):format(name, comm, state) end
    end
  end
  table.sort(out)
  return out
end

-- fd number -> link target, for the open descriptors of pid ("self" too).
-- The directory stream that lists them is closed before the targets are
-- read, so it does not count.
local function fds(pid)
  local dir = "/proc/" .. tostring(pid) .. "/fd"
  local names = {}
  local ok = pcall(function()
    for name in lfs.dir(dir) do
      if name:match("^%d+$") then names[#names + 1] = name end
    end
  end)
  if not ok then return nil end
  local out = {}
  for _, name in ipairs(names) do
    local target = lfs.symlinkattributes(dir .. "/" .. name, "target")
    if target then out[tonumber(name)] = target end
  end
  return out
end

local function count(map)
  local n = 0
  for _ in pairs(map) do n = n + 1 end
  return n
end

local function describe_fds(map)
  local nums = {}
  for n in pairs(map) do nums[#nums + 1] = n end
  table.sort(nums)
  local parts = {}
  for _, n in ipairs(nums) do parts[#parts + 1] = n .. " -> " .. map[n] end
  return table.concat(parts, ", ")
end

-- Let finished work settle: collect garbage (a dropped handle kills and
-- releases its process), run the loop, until done() holds or ms passed
-- (a process that ignores SIGTERM gets SIGKILL after a 2 s grace).
local function settle(done, ms)
  local deadline = mastra.now() + (ms or 6000)
  repeat
    collectgarbage()
    collectgarbage()
    for _ = 1, 3 do pcall(mastra.step, 50) end
    if done() then return true end
    mastra.sleep(50)
  until mastra.now() > deadline
  return done()
end

-- Descriptors that a child process leaves behind: pidfds, and pipes or
-- /dev/null that this process did not inherit (same number and target in
-- the parent). 0, 1 and 2 are the standard streams, not ours.
local function child_fds()
  local mine, parent = fds("self"), (PPID and fds(PPID)) or {}
  local leaked = {}
  for n, target in pairs(mine) do
    if n > 2 then
      if target == "anon_inode:[pidfd]" then
        leaked[n] = target
      elseif (target:match("^pipe:") or target == "/dev/null") and parent[n] ~= target then
        leaked[n] = target
      end
    end
  end
  return leaked
end

-- }======

describe("leaks after the whole suite", function()
  it("no child process of this process is left, zombies included", function()
    settle(function() return #children() == 0 end)
    assert.are.same({}, children())
  end)

  it("no descriptor of a child process (pidfd, pipe, /dev/null) is left open", function()
    settle(function() return next(child_fds()) == nil end)
    local leaked = child_fds()
    assert.are.equal(0, count(leaked), "left open: " .. describe_fds(leaked))
  end)

  it("the event loop holds one epoll and one eventfd, no more", function()
    local epolls, eventfds = 0, 0
    for _, target in pairs(fds("self")) do
      if target == "anon_inode:[eventpoll]" then epolls = epolls + 1 end
      if target == "anon_inode:[eventfd]" then eventfds = eventfds + 1 end
    end
    assert.are.equal(1, epolls)
    assert.are.equal(1, eventfds)
  end)
end)

describe("leaks around a workload", function()
  local base, dir

  setup(function()
    base = os.tmpname()
    dir = base .. ".d"
    assert(lfs.mkdir(dir))
  end)

  teardown(function()
    os.execute("rm -rf -- " .. mastra.quote(dir) .. " " .. mastra.quote(base))
  end)

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
