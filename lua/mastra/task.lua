-- Tasks: coroutines scheduled over the C event loop (docs/decisions.md
-- "Event loop and tasks").
--
-- A task waits with task.wait(key, ...): it is suspended until one of the
-- keys is woken. Keys are the integer ids that the C loop signals (timers,
-- processes, HTTP transfers, WebSockets) or other tasks (woken when they
-- finish). Every waiting task is resumed exactly once per wait: by a wake,
-- or by a cancellation, which wait() turns into a CancelledError.
--
-- Outside any task (a plain lua5.4 main chunk), wait() drives the loop
-- itself until its keys are woken, so blocking calls work unchanged.
local core = require "mastra.core"
local errors = require "mastra.errors"

local task = {}

local WAIT = setmetatable({}, { __name = "mastra.task.WAIT" })

local Task = {}
Task.__index = Task
Task.__name = "mastra.Task"

local by_co = setmetatable({}, { __mode = "k" }) -- coroutine -> task
local waiters = {}      -- key -> { [waiter] = true }
local queue, qhead, qtail = {}, 1, 0
local live = 0          -- tasks not finished
local depth = 0         -- > 0 while the scheduler runs tasks
local unobserved = {}   -- failed tasks that nobody waited for, in order
local interrupted = false
local poll_ids = {}

-- {====== waiting and waking ======

local function enqueue(t)
  qtail = qtail + 1
  queue[qtail] = t
end

local function queued()
  return qtail - qhead + 1
end

local function unregister(w)
  for _, key in ipairs(w.keys) do
    local set = waiters[key]
    if set then
      set[w] = nil
      if next(set) == nil then waiters[key] = nil end
    end
  end
  w.keys = nil
end

local function make_ready(w)
  if w.keys then unregister(w) end
  w.state = "ready"
  if w.co then enqueue(w) end -- a blocking caller outside tasks polls its state
end

-- Wake everything that waits on key.
local function wake(key)
  local set = waiters[key]
  if set == nil then return end
  waiters[key] = nil
  for w in pairs(set) do
    if w.state == "waiting" then make_ready(w) end
  end
end
task.wake = wake

local function register(w, ...)
  local n = select("#", ...)
  if n == 0 then error("mastra.task.wait: nothing to wait for", 3) end
  local keys = { ... }
  for i = 1, n do
    local key = keys[i]
    local set = waiters[key]
    if set == nil then
      set = {}
      waiters[key] = set
    end
    set[w] = true
  end
  w.keys = keys
  w.state = "waiting"
end

local function cancelled_error()
  return errors.CancelledError:new{ message = "the task was cancelled" }
end

-- The running task, or nil outside tasks. A coroutine that is not a task,
-- resumed by a task, cannot wait: its yield would go to that task.
local function current(what)
  local co, ismain = coroutine.running()
  local t = by_co[co]
  if t then
    if not coroutine.isyieldable() then
      error(what .. ": cannot wait here: the call comes through a C function"
        .. " or metamethod that cannot yield (move it out of that callback)", 3)
    end
    return t
  end
  if not ismain and depth > 0 then
    error(what .. ": called in a coroutine that is not a mastra task; call"
      .. " it from the task itself, or run the work with mastra.spawn", 3)
  end
  return nil
end
task.current = function()
  return by_co[coroutine.running()]
end

-- Whether a blocking call may wait here: in a task that can yield, or
-- outside the scheduler. False inside a <close> handler run by an error.
function task.canWait()
  local co, ismain = coroutine.running()
  if by_co[co] then return coroutine.isyieldable() end
  return ismain or depth == 0
end

-- }======

-- {====== running tasks ======

local function finish(t, ok, ...)
  t.state = "done"
  live = live - 1
  if ok then
    t.ok = true
    t.results = table.pack(...)
  else
    local err = ...
    t.ok = false
    t.err = err
    t.cancelled = errors.CancelledError:is(err)
    if not t.cancelled then t.traceback = debug.traceback(t.co) end
    -- an error does not unwind a coroutine: close its <close> variables
    coroutine.close(t.co)
    if not t.cancelled and waiters[t] == nil then
      unobserved[#unobserved + 1] = t
    end
  end
  wake(t)
end

local function run(t)
  if t.cancel_pending and not t.started then
    t.cancel_pending = false
    t.started = true
    finish(t, false, cancelled_error())
    return
  end
  local args = t.args
  t.args = nil
  t.started = true
  t.state = "running"
  depth = depth + 1
  local r
  if args then
    r = table.pack(coroutine.resume(t.co, table.unpack(args, 1, args.n)))
  else
    r = table.pack(coroutine.resume(t.co))
  end
  depth = depth - 1
  if coroutine.status(t.co) == "dead" then
    finish(t, table.unpack(r, 1, r.n))
  elseif r[2] ~= WAIT then
    make_ready(t) -- a bare coroutine.yield(): run again on the next round
  end
end

-- Run the tasks that are ready now; those they make ready run next round.
local function run_ready()
  local n = queued()
  for _ = 1, n do
    local t = queue[qhead]
    queue[qhead] = nil
    qhead = qhead + 1
    if t.state == "ready" then run(t) end
  end
  if qhead > qtail then qhead, qtail = 1, 0 end
end

local function cancel_all()
  for _, t in pairs(by_co) do t:cancel() end
end

local function can_progress()
  return queued() > 0 or core.alive() > 0 or core.nextTimeout() == 0
end

-- Pump the loop once: run ready tasks, poll, run what became ready. The
-- poll does not block when tasks are ready, when done() already holds, or
-- when nothing could wake it.
local function step(timeout, done)
  run_ready()
  if queued() > 0 or (done and done()) or not can_progress() then timeout = 0 end
  local n, intr = core.poll(timeout, poll_ids)
  for i = 1, n do wake(poll_ids[i]) end
  if intr then
    interrupted = true
    cancel_all()
  end
  run_ready()
end

local function deadlock()
  error(("mastra: deadlock: %d task(s) wait for something that can never"
    .. " happen (a task waiting for itself or for a task that waits for it?)")
    :format(live), 0)
end

local function take_interrupt()
  if interrupted then
    interrupted = false
    errors.InterruptedError:raise({ message = "interrupted" }, 3)
  end
end

-- Drive the loop until done() holds.
local function drive(done, what)
  if depth > 0 then
    error(what .. ": cannot drive the loop from inside a running task", 3)
  end
  while not done() do
    if not can_progress() then deadlock() end
    step(-1, done)
  end
end

-- }======

-- {====== public API ======

-- Suspend until one of the keys is woken; `what` names the public call in
-- error messages.
local function wait_as(what, ...)
  local t = current(what)
  if t then
    if t.cancel_pending then
      t.cancel_pending = false
      error(cancelled_error(), 2)
    end
    register(t, ...)
    coroutine.yield(WAIT)
    if t.cancel_pending then
      t.cancel_pending = false
      error(cancelled_error(), 2)
    end
    return
  end
  local w = {}
  register(w, ...)
  local ok, err = pcall(drive, function()
    return w.state ~= "waiting" or interrupted
  end, what)
  if w.keys then unregister(w) end
  if not ok then error(err, 0) end
  take_interrupt()
end

--- Suspend until one of the keys is woken. Raises CancelledError if the
-- task is cancelled while it waits.
function task.wait(...)
  return wait_as("mastra.task.wait", ...)
end
task.waitAs = wait_as

function task.spawn(fn, ...)
  if type(fn) ~= "function" then
    local mt = getmetatable(fn)
    if not (mt and mt.__call) then
      error(("mastra.spawn: expected a function (got %s)"):format(type(fn)), 2)
    end
  end
  local t = setmetatable({
    co = coroutine.create(fn),
    args = table.pack(...),
    state = "ready",
  }, Task)
  by_co[t.co] = t
  live = live + 1
  enqueue(t)
  return t
end

function task.isTask(v)
  return getmetatable(v) == Task
end

local function check_task(self, what)
  if getmetatable(self) ~= Task then
    error(("%s: expected a task as self (call it as task:%s())")
      :format(what, what:match("[%w]+$")), 3)
  end
end

--- The results of the task, once it has finished. Re-raises its error; a
-- string error gets the task's traceback appended, an error object gets
-- a `traceback` field.
function Task:wait()
  check_task(self, "task:wait")
  if self.state ~= "done" and current("task:wait") == self then
    error("task:wait: a task cannot wait for itself", 2)
  end
  while self.state ~= "done" do task.wait(self) end
  self.observed = true
  for i, t in ipairs(unobserved) do
    if t == self then table.remove(unobserved, i) break end
  end
  if self.ok then return table.unpack(self.results, 1, self.results.n) end
  local err = self.err
  if self.traceback then
    if type(err) == "string" then
      err = err .. "\n" .. self.traceback
    elseif type(err) == "table" and err.traceback == nil then
      err.traceback = self.traceback
    end
  end
  error(err, 0)
end

--- Cancel the task: if it waits, it is resumed once with a CancelledError
-- (its <close> variables then release what it held). Returns false if it
-- had already finished.
function Task:cancel()
  check_task(self, "task:cancel")
  if self.state == "done" then return false end
  self.cancel_pending = true
  if self.state == "waiting" then make_ready(self) end
  return true
end

function Task:done()
  return self.state == "done"
end

function Task:status()
  return self.state
end

function Task.__tostring(t)
  return ("mastra.Task (%s)"):format(t.state)
end

--- Finish the first failed task among `tasks` or all of them; on a failure
-- the others are cancelled and the error is raised.
local function gather(tasks)
  local results = {}
  local cancel_rest <close> = setmetatable({}, { -- luacheck: ignore 211
    __close = function(_, err)
      if err ~= nil then
        for _, t in ipairs(tasks) do t:cancel() end
      end
    end,
  })
  local pending = {}
  for i, t in ipairs(tasks) do pending[i] = t end
  while #pending > 0 do
    local still = {}
    for _, t in ipairs(pending) do
      if t.state == "done" then
        if not t.ok then t:wait() end -- raises; the guard cancels the rest
      else
        still[#still + 1] = t
      end
    end
    pending = still
    if #pending > 0 then task.wait(table.unpack(pending)) end
  end
  for i, t in ipairs(tasks) do results[i] = t.results[1] end
  return results
end

--- Run functions (or wait for tasks) concurrently; returns their first
-- results in order. The first error cancels the others and is raised.
function task.all(list)
  if type(list) ~= "table" then
    error(("mastra.all: expected a list of functions or tasks (got %s)")
      :format(type(list)), 2)
  end
  for i, f in ipairs(list) do
    if not task.isTask(f) and type(f) ~= "function" then
      error(("mastra.all: item %d is a %s, not a function or task")
        :format(i, type(f)), 2)
    end
  end
  local tasks = {}
  for i, f in ipairs(list) do
    tasks[i] = task.isTask(f) and f or task.spawn(f)
  end
  return gather(tasks)
end

--- fn(item, index) for every item, at most `concurrency` at a time
-- (default: all at once). Results come back in the order of the list.
function task.map(list, fn, opts)
  if type(list) ~= "table" then
    error(("mastra.map: list must be a table (got %s)"):format(type(list)), 2)
  end
  if type(fn) ~= "function" then
    error(("mastra.map: fn must be a function (got %s)"):format(type(fn)), 2)
  end
  local n = #list
  local concurrency = n
  if opts ~= nil then
    if type(opts) ~= "table" then
      error(("mastra.map: options must be a table (got %s)"):format(type(opts)), 2)
    end
    for k, v in pairs(opts) do
      if k ~= "concurrency" then
        error(("mastra.map: unknown option '%s' (known options: concurrency)")
          :format(tostring(k)), 2)
      end
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
  for w = 1, concurrency do workers[w] = task.spawn(worker) end
  gather(workers)
  return results
end

local MAX_SLEEP_MS = 2 ^ 53

function task.sleep(ms)
  if type(ms) ~= "number" or ms ~= ms or ms < 0 or ms > MAX_SLEEP_MS then
    error(("mastra.sleep: ms must be a number of milliseconds between 0 and"
      .. " 2^53 (got %s)"):format(tostring(ms)), 2)
  end
  current("mastra.sleep")
  local timer <close> = core.timer(math.ceil(ms))
  wait_as("mastra.sleep", timer:id())
end

--- Run fn(...) as a task and drive the loop until every task has finished.
-- Returns fn's results or raises its error. If fn fails, the other tasks
-- are cancelled. An error of a task that nobody waited for is raised after
-- the others are done.
function task.run(fn, ...)
  if depth > 0 then
    error("mastra.run: cannot be called from inside a task (use mastra.spawn"
      .. " and task:wait)", 2)
  end
  local main = task.spawn(fn, ...)
  main.observed = true
  drive(function()
    if main.state == "done" and not main.ok and not main.cancelled_others then
      main.cancelled_others = true
      cancel_all()
    end
    return live == 0
  end, "mastra.run")
  take_interrupt()
  for i, t in ipairs(unobserved) do
    if t == main then table.remove(unobserved, i) break end
  end
  if main.ok and #unobserved > 0 then
    local t = table.remove(unobserved, 1)
    t:wait()
  end
  return main:wait()
end

--- One turn of the loop for hosts that own the frame loop (mastra_step):
-- run ready tasks, wait at most timeout_ms (0: never block) for I/O, run
-- the tasks that became ready. Returns the number of live tasks.
-- An error of a task that nobody waits for is raised here.
function task.step(timeout_ms)
  if timeout_ms == nil then timeout_ms = 0 end
  if math.type(timeout_ms) ~= "integer" or timeout_ms < -1 then
    error(("mastra.step: timeout_ms must be an integer >= -1 (got %s)")
      :format(tostring(timeout_ms)), 2)
  end
  if depth > 0 then
    error("mastra.step: cannot be called from inside a task", 2)
  end
  step(timeout_ms)
  interrupted = false
  if #unobserved > 0 then
    local t = table.remove(unobserved, 1)
    t:wait()
  end
  return live
end

--- Milliseconds until step() has work: 0 if tasks are ready, -1 if idle.
function task.nextTimeout()
  if queued() > 0 then return 0 end
  return core.nextTimeout()
end

--- The number of tasks that have not finished.
function task.count()
  return live
end

-- }======

return task
