-- What a process holds that could leak: its child processes (zombies
-- included) and its descriptors, read from /proc. Used by
-- spec/support/file-leaks.lua (after each spec file, in its process) and
-- spec/local_sandbox_leak_spec.lua (around a workload).
local lfs = require "lfs"
local mastra = require "mastra"
local util = require "spec.support.util"
local read_file = util.read_file

local leaks = {}

-- state, ppid, comm of a process (nil if it is gone)
local function stat(pid)
  local s = read_file("/proc/" .. tostring(pid) .. "/stat")
  if not s then return nil end
  local comm, state, ppid = s:match("^%d+ %((.*)%) (%S) (%d+)")
  return state, tonumber(ppid), comm
end

local PID = tonumber(assert(read_file("/proc/self/stat")):match("^(%d+)"))
local PPID = select(2, stat(PID))

--- "pid comm (state)" of every child of this process, zombies included.
function leaks.children()
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

--- fd number -> link target, for the open descriptors of pid ("self" too).
-- The directory stream that lists them is closed before the targets are
-- read, so it does not count.
function leaks.fds(pid)
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

function leaks.count(map)
  local n = 0
  for _ in pairs(map) do n = n + 1 end
  return n
end

function leaks.describe_fds(map)
  local nums = {}
  for n in pairs(map) do nums[#nums + 1] = n end
  table.sort(nums)
  local parts = {}
  for _, n in ipairs(nums) do parts[#parts + 1] = n .. " -> " .. map[n] end
  return table.concat(parts, ", ")
end

--- Let finished work settle: collect garbage (a dropped handle kills and
-- releases its process), run the loop, until done() holds or ms passed
-- (a process that ignores SIGTERM gets SIGKILL after a 2 s grace).
function leaks.settle(done, ms)
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

--- Descriptors that a child process leaves behind: pidfds, and pipes or
-- /dev/null that this process did not inherit (same number and target in
-- the parent). 0, 1 and 2 are the standard streams, not ours.
function leaks.child_fds()
  local mine, parent = leaks.fds("self"), (PPID and leaks.fds(PPID)) or {}
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

return leaks
