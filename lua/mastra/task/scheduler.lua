-- The core of mastra.task: tasks (coroutines) scheduled over the C event
-- loop, waiting and waking, running the ready ones, one turn of the loop
-- (docs/decisions.md "Event loop and tasks"). lua/mastra/task/init.lua
-- makes the module mastra.task of this, the teardown queue
-- (task/teardown.lua) and the groups (task/groups.lua).
--
-- A task waits with wait(key, ...): it is suspended until one of the keys
-- is woken. Keys are the integer ids that the C loop signals (timers,
-- processes, HTTP transfers, WebSockets), other tasks (woken when they
-- finish), or any value that code of the facade wakes. Every waiting task
-- is resumed exactly once per wait: by a wake, or by a cancellation, which
-- wait() turns into a CancelledError.
--
-- The order is fixed: the tasks that one wake makes ready resume in the
-- order they began to wait, the ids of one poll wake in the order the loop
-- signalled them, the ready tasks run first in, first out, and a
-- cancellation of many goes in the order they were spawned.
--
-- Outside any task (a plain lua5.4 main chunk), wait() drives the loop
-- itself until its keys are woken, so blocking calls work unchanged.
local core = require "mastra.core"
local errors = require "mastra.errors"

local scheduler = {}

local WAIT = setmetatable({}, { __name = "mastra.task.WAIT" })

-- A task's state is one field, `state`:
--   "new"      spawned, not run yet (task:status() says "ready")
--   "ready"    in the run queue, to be resumed
--   "running"  resumed now
--   "waiting"  suspended in wait() until one of its keys is woken
--   "done"     finished; `outcome` says how: "ok" (its `results`), "failed"
--              (its `err` and `traceback`) or "cancelled" (its `err`)
-- Besides: `cancel_pending` (a cancel() that the task has not seen yet), and
-- what the task is to others: `shielded` (a cancel_all spares it), `grouped`
-- (mastra.all/map raise its error), `observed` (task:wait saw its end), `job`
-- (its teardown job, task/teardown.lua).
local Task = {}
Task.__index = Task
Task.__name = "mastra.Task"
scheduler.Task = Task

local by_co = setmetatable({}, { __mode = "k" }) -- coroutine -> task
-- key -> its waiters in the order they began to wait: { n = slots used,
-- live = waiters, [1..n] = a waiter or false (one that left), at = {
-- [waiter] = slot } }. A list, never a set walked with pairs(): the tasks
-- that one wake makes ready resume in the order they waited, on every run.
local waiters = {}
local spawned = 0       -- tasks made so far: a task's _seq is its rank
local queue, qhead, qtail = {}, 1, 0
local live = 0          -- tasks not finished
local shielded_live = 0 -- shielded tasks (teardown, a sandbox's start) not finished
local depth = 0         -- > 0 while the scheduler runs tasks
-- failed tasks that nobody waited for -> the order they failed in; weak, so
-- that a collected task reports its error itself (Task.__gc)
local unobserved = setmetatable({}, { __mode = "k" })
local failures = 0      -- the order of the last failure
local interrupted = false
local driven = false    -- mastra.run or mastra.step drove the loop
local poll_ids = {}
local later = {}        -- {fn, arg}: calls recorded by finalizers (only they append)
local stderr = io.stderr

-- {====== waiting and waking ======

local function enqueue(t)
  qtail = qtail + 1
  queue[qtail] = t
end

local function queued()
  return qtail - qhead + 1
end

local function add_waiter(key, w)
  local list = waiters[key]
  if list == nil then
    list = { n = 0, live = 0, at = {} }
    waiters[key] = list
  end
  if list.at[w] then return end -- the same key twice in one wait
  local i = list.n + 1
  list.n, list[i], list.at[w], list.live = i, w, i, list.live + 1
end

-- Drop the slots of waiters that left, keeping the order of the others.
local function compact(list)
  local j = 0
  for i = 1, list.n do
    local w = list[i]
    list[i] = nil
    if w then
      j = j + 1
      list[j], list.at[w] = w, j
    end
  end
  list.n = j
end

local function remove_waiter(key, w)
  local list = waiters[key]
  local i = list and list.at[w]
  if i == nil then return end
  list[i], list.at[w], list.live = false, nil, list.live - 1
  if list.live == 0 then
    waiters[key] = nil
  elseif list.n > 2 * list.live + 16 then
    compact(list)
  end
end

local function unregister(w)
  for _, key in ipairs(w.keys) do remove_waiter(key, w) end
  w.keys = nil
end

local function make_ready(w)
  if w.keys then unregister(w) end
  w.state = "ready"
  if w.co then enqueue(w) end -- a blocking caller outside tasks polls its state
end
scheduler.makeReady = make_ready

-- Wake everything that waits on key, in the order it began to wait: the
-- run queue is first in, first out, so they resume in that order.
local function wake(key)
  local list = waiters[key]
  if list == nil then return end
  waiters[key] = nil
  for i = 1, list.n do
    local w = list[i]
    if w and w.state == "waiting" then make_ready(w) end
  end
end
scheduler.wake = wake

local function register(w, ...)
  local n = select("#", ...)
  if n == 0 then error("mastra.task.wait: nothing to wait for", 3) end
  local keys = { ... }
  for i = 1, n do add_waiter(keys[i], w) end
  w.keys = keys
  w.state = "waiting"
end

local function cancelled_error()
  return errors.CancelledError:new{ message = "the task was cancelled" }
end
scheduler.cancelledError = cancelled_error

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
scheduler.currentAs = current

function scheduler.current()
  return by_co[coroutine.running()]
end

-- Whether a blocking call may wait here: in a task that can yield, or
-- outside the scheduler. False inside a <close> handler run by an error.
function scheduler.canWait()
  local co, ismain = coroutine.running()
  if by_co[co] then return coroutine.isyieldable() end
  return ismain or depth == 0
end

-- }======

-- {====== running tasks ======

local function finish(t, ok, ...)
  t.state = "done"
  live = live - 1
  if t.shielded then shielded_live = shielded_live - 1 end
  if ok then
    t.outcome = "ok"
    t.results = table.pack(...)
  else
    local err = ...
    t.err = err
    if errors.CancelledError:is(err) then
      t.outcome = "cancelled"
    else
      t.outcome = "failed"
      t.traceback = debug.traceback(t.co)
    end
    -- an error does not unwind a coroutine: close its <close> variables
    coroutine.close(t.co)
    if t.outcome == "failed" and waiters[t] == nil and not t.grouped then
      failures = failures + 1
      unobserved[t] = failures
    end
  end
  wake(t)
end
scheduler.finish = finish

local function run(t)
  if t.state == "new" and t.cancel_pending then -- it never runs
    t.cancel_pending = false
    finish(t, false, cancelled_error())
    return
  end
  local args = t.args
  t.args = nil
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
    if t.state == "ready" or t.state == "new" then run(t) end
  end
  if qhead > qtail then qhead, qtail = 1, 0 end
end

-- Call what finalizers recorded (scheduler.later).
local function run_later()
  if #later == 0 then return end
  local calls = later
  -- a finalizer run by the allocation of the new list still appends to
  -- calls; from the assignment on, finalizers append to the new list
  later = {}
  for _, c in ipairs(calls) do c[1](c[2]) end
end

--- From a finalizer (__gc), where nothing may be spawned: call fn(arg) on
-- the scheduler's next turn (task/teardown.lua starts a teardown so).
function scheduler.later(fn, arg)
  later[#later + 1] = { fn, arg }
end

--- The calls recorded by finalizers and not made yet.
function scheduler.laterCount()
  return #later
end

-- The tasks not collected yet, in the order they were spawned (never in
-- the order of pairs(): what is done to them happens in a fixed order).
local function all_tasks()
  local list = {}
  for _, t in pairs(by_co) do list[#list + 1] = t end
  table.sort(list, function(a, b) return a._seq < b._seq end)
  return list
end
scheduler.allTasks = all_tasks

-- Cancel every task but the shielded ones (teardown, a start whose result
-- a teardown needs), in the order they were spawned.
local function cancel_all()
  for _, t in ipairs(all_tasks()) do
    if not t.shielded then t:cancel() end
  end
end
scheduler.cancelAll = cancel_all

local function can_progress()
  return queued() > 0 or #later > 0 or core.alive() > 0
    or core.nextTimeout() == 0
end
scheduler.canProgress = can_progress

-- Pump the loop once: run ready tasks, poll, run what became ready. The
-- poll does not block when tasks are ready, when done() already holds, or
-- when nothing could wake it. The ids of one poll wake in the order the
-- loop signalled them.
local function step(timeout, done)
  run_ready()
  run_later()
  if queued() > 0 or (done and done()) or not can_progress() then timeout = 0 end
  local n, intr = core.poll(timeout, poll_ids)
  for i = 1, n do wake(poll_ids[i]) end
  if intr then
    interrupted = true
    cancel_all()
  end
  run_ready()
  run_later()
end
scheduler.turn = step

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
scheduler.takeInterrupt = take_interrupt

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
scheduler.drive = drive

-- Drive the loop while keep() holds, at most until deadline (core.now()
-- ms). False if the deadline passed first.
function scheduler.driveUntil(keep, deadline)
  while keep() do
    local left = deadline - core.now()
    if left <= 0 then return false end
    if not can_progress() then return true end -- nothing can still happen
    step(math.ceil(left)) -- core.now() has a fractional part
  end
  return true
end

--- Counts and flags for task/teardown.lua.
function scheduler.live() return live end
function scheduler.shieldedLive() return shielded_live end
function scheduler.depth() return depth end
function scheduler.interrupted() return interrupted end
function scheduler.driven() return driven end
function scheduler.setDriven() driven = true end

--- At the close of the state: nothing runs any more (lua.c's SIGINT hook
-- may have stopped the scheduler halfway through a resume).
function scheduler.abandonRun()
  depth = 0
end

-- }======

-- {====== waiting, spawning ======

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
scheduler.waitAs = wait_as

--- Suspend until one of the keys is woken. Raises CancelledError if the
-- task is cancelled while it waits.
function scheduler.wait(...)
  return wait_as("mastra.task.wait", ...)
end

local function new_task(fn, ...)
  spawned = spawned + 1
  local t = setmetatable({
    co = coroutine.create(fn),
    args = table.pack(...),
    state = "new",
    _seq = spawned,
  }, Task)
  by_co[t.co] = t
  live = live + 1
  enqueue(t)
  return t
end

function scheduler.spawn(fn, ...)
  if type(fn) ~= "function" then
    local mt = getmetatable(fn)
    if not (mt and mt.__call) then
      error(("mastra.spawn: expected a function (got %s)"):format(type(fn)), 2)
    end
  end
  return new_task(fn, ...)
end

--- A task that a failure or an interrupt does not cancel (mastra.run, the
-- exit drain): teardown, or work whose result a teardown needs (a
-- sandbox's start). A drain waits for it up to its deadline.
function scheduler.spawnShielded(fn, ...)
  local t = new_task(fn, ...)
  t.shielded = true
  shielded_live = shielded_live + 1
  return t
end

--- Whether teardown remains: calls recorded by finalizers, or shielded
-- tasks not finished.
function scheduler.shieldedPending()
  return #later > 0 or shielded_live > 0
end

-- }======

-- {====== tasks ======

function scheduler.isTask(v)
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
  while self.state ~= "done" do scheduler.wait(self) end
  self.observed = true
  unobserved[self] = nil
  if self.outcome == "ok" then return table.unpack(self.results, 1, self.results.n) end
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
  local state = self.state
  return state == "new" and "ready" or state
end

function Task.__tostring(t)
  return ("mastra.Task (%s)"):format(Task.status(t))
end

local function describe(obj)
  local ok, s = pcall(tostring, obj)
  return ok and s or "an object"
end
scheduler.describe = describe

-- The error of a failed task that nobody waited for and that nothing
-- raised (mastra.run, mastra.step) is printed once, when the task is
-- collected (at the latest when the Lua state closes).
function Task.__gc(t)
  if unobserved[t] ~= nil and not t.observed then
    t.observed = true
    stderr:write(("mastra: a task that nobody waited for failed: %s\n%s\n")
      :format(describe(t.err), t.traceback or ""))
  end
end

--- Print the errors of the failed tasks nobody waited for, in the order
-- they failed (at the close of the state: their finalizers have run).
function scheduler.reportUnobserved()
  local failed = {}
  for t, n in pairs(unobserved) do failed[#failed + 1] = { t, n } end
  table.sort(failed, function(a, b) return a[2] < b[2] end)
  for _, f in ipairs(failed) do Task.__gc(f[1]) end
end

--- t's error is its caller's to raise (mastra.run's main task).
function scheduler.claim(t)
  unobserved[t] = nil
end

-- Raise the error of the first failed task nobody waited for, if any.
function scheduler.raiseUnobserved()
  local first, order
  for t, n in pairs(unobserved) do
    if not t.observed and (order == nil or n < order) then first, order = t, n end
  end
  if first then first:wait() end
end

-- }======

-- {====== sleep, step ======

local MAX_SLEEP_MS = 2 ^ 53

function scheduler.sleep(ms)
  if type(ms) ~= "number" or ms ~= ms or ms < 0 or ms > MAX_SLEEP_MS then
    local got = type(ms) == "number" and tostring(ms) or type(ms)
    if type(ms) == "string" then
      got = ("a string, %q"):format(ms)
      if tonumber(ms) then got = got .. (": pass a number, mastra.sleep(%s)"):format(ms) end
    end
    error(("mastra.sleep: ms must be a number of milliseconds between 0 and"
      .. " 2^53 (got %s)"):format(got), 2)
  end
  current("mastra.sleep")
  -- a loop timer never fires before its delay as mastra.now() measures it
  -- (loop.c counts it on the untruncated clock); the loop waits again for
  -- what is left all the same: a sleep never ends early. A task that the
  -- machine kept from running between two reads of the clock may find the
  -- deadline passed at the second: a timer of 0, one turn, then the end
  local deadline = core.now() + ms
  repeat
    local timer <close> = core.timer(math.max(0, math.ceil(deadline - core.now())))
    wait_as("mastra.sleep", timer:id())
  until core.now() >= deadline
end

--- One turn of the loop for hosts that own the frame loop (mastra_step):
-- run ready tasks, wait at most timeout_ms (0: never block) for I/O, run
-- the tasks that became ready. Returns the number of live tasks.
-- An error of a task that nobody waits for is raised here.
function scheduler.step(timeout_ms)
  if timeout_ms == nil then timeout_ms = 0 end
  if math.type(timeout_ms) ~= "integer" or timeout_ms < -1 then
    error(("mastra.step: timeout_ms must be an integer >= -1 (got %s)")
      :format(tostring(timeout_ms)), 2)
  end
  if depth > 0 then
    error("mastra.step: cannot be called from inside a task", 2)
  end
  driven = true
  step(timeout_ms)
  interrupted = false
  scheduler.raiseUnobserved()
  return live
end

--- Milliseconds until step() has work: 0 if tasks are ready, -1 if idle.
function scheduler.nextTimeout()
  if queued() > 0 or #later > 0 then return 0 end
  return core.nextTimeout()
end

--- The number of tasks that have not finished.
function scheduler.count()
  return live
end

-- }======

return scheduler
