-- The groups of mastra.task: mastra.all and mastra.map (docs/api.md
-- "Tasks"). A group waits for its tasks in the order of its list; the
-- first failure cancels the others (in that order), waits until they have
-- unwound, and is raised once, by the group.
local scheduler = require "mastra.task.scheduler"
local teardown = require "mastra.task.teardown"

local groups = {}
--- Finish the first failed task among `tasks` or all of them. On a
-- failure the others are cancelled and waited for (their <close> variables
-- have run when it returns), and the first error is raised: once, here.
-- The errors of the group belong to this call, never to the unobserved
-- ones that mastra.run or mastra.step raise.
local function gather(tasks)
  for _, t in ipairs(tasks) do t.grouped = true end
  local settled = false
  local abandon <close> = setmetatable({}, { -- luacheck: ignore 211
    __close = function()
      if settled then return end
      -- the caller itself failed or was cancelled: the group goes too, and
      -- a failure it meets from now on is nobody's to raise
      for _, t in ipairs(tasks) do
        if t.state ~= "done" then
          t.grouped = nil
          t:cancel()
        end
      end
    end,
  })
  local failed
  local pending = {}
  for i, t in ipairs(tasks) do pending[i] = t end
  while #pending > 0 do
    local still = {}
    for _, t in ipairs(pending) do
      if t.state ~= "done" then
        still[#still + 1] = t
      elseif t.outcome ~= "ok" and failed == nil then
        failed = t
      end
    end
    pending = still
    if failed then break end
    if #pending > 0 then scheduler.wait(table.unpack(pending)) end
  end
  if failed then
    for _, t in ipairs(tasks) do t:cancel() end
    for _, t in ipairs(tasks) do
      while t.state ~= "done" do scheduler.wait(t) end
    end
    settled = true
    if scheduler.currentAs("mastra.map") == nil then
      -- outside tasks nothing drives the loop after the raise: let the
      -- teardown of the cancelled items run now
      teardown.runPending()
    end
    failed:wait() -- raises
  end
  settled = true
  local results = {}
  for i, t in ipairs(tasks) do results[i] = t.results[1] end
  return results
end

--- Run functions (or wait for tasks) concurrently; returns their first
-- results in order. The first error cancels the others and is raised.
function groups.all(list)
  if type(list) ~= "table" then
    error(("mastra.all: expected a list of functions or tasks (got %s)")
      :format(type(list)), 2)
  end
  for i, f in ipairs(list) do
    if not scheduler.isTask(f) and type(f) ~= "function" then
      error(("mastra.all: item %d is a %s, not a function or task")
        :format(i, type(f)), 2)
    end
  end
  local tasks = {}
  for i, f in ipairs(list) do
    tasks[i] = scheduler.isTask(f) and f or scheduler.spawn(f)
  end
  return gather(tasks)
end

-- mastra.map's concurrency when none is given: enough to keep a platform
-- busy, few enough that the descriptors it takes (a socket or three pipes
-- per item) stay far below the usual 1024 (docs/decisions.md).
local DEFAULT_CONCURRENCY = 64
groups.DEFAULT_CONCURRENCY = DEFAULT_CONCURRENCY

--- fn(item, index) for every item, at most `concurrency` at a time
-- (default: DEFAULT_CONCURRENCY). Results come back in the order of the list.
function groups.map(list, fn, opts)
  if type(list) ~= "table" then
    error(("mastra.map: list must be a table (got %s)"):format(type(list)), 2)
  end
  if type(fn) ~= "function" then
    error(("mastra.map: fn must be a function (got %s)"):format(type(fn)), 2)
  end
  local n = #list
  local concurrency = math.min(DEFAULT_CONCURRENCY, n)
  if opts ~= nil then
    if type(opts) ~= "table" then
      error(("mastra.map: options must be a table (got %s)"):format(type(opts)), 2)
    end
    local unknown = {}
    for k in pairs(opts) do
      if k ~= "concurrency" then unknown[#unknown + 1] = tostring(k) end
    end
    if #unknown > 0 then
      table.sort(unknown) -- the same key named on every run
      error(("mastra.map: unknown option '%s' (known options: concurrency)")
        :format(unknown[1]), 2)
    end
    local v = opts.concurrency
    if v ~= nil then
      if math.type(v) ~= "integer" or v < 1 then
        error(("mastra.map: option 'concurrency' must be an integer >= 1 (got %s)")
          :format(tostring(v)), 2)
      end
      concurrency = math.min(v, n)
    end
  end
  local results, nexti = {}, 1
  local function worker()
    while nexti <= n do
      local i = nexti
      nexti = nexti + 1
      results[i] = fn(list[i], i)
    end
  end
  local workers = {}
  for w = 1, concurrency do workers[w] = scheduler.spawn(worker) end
  gather(workers)
  return results
end

--- Run fn once for every concurrent caller: the callers that arrive while
-- it runs (holder[slot] holds its task) wait for the same task and get the
-- same results or error. spawn: scheduler.spawn, or spawnShielded for work
-- that a teardown needs to see finish.
function groups.shared(holder, slot, fn, spawn)
  local t = holder[slot]
  if t == nil then
    t = (spawn or scheduler.spawn)(fn)
    holder[slot] = t
  end
  local ok, a = pcall(t.wait, t)
  if holder[slot] == t then holder[slot] = nil end
  if not ok then error(a, 0) end
  return a
end

return groups
