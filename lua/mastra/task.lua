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
--
-- Teardown that needs I/O (a sandbox's DELETE, waiting for a killed
-- process) is never done where a task cannot wait (a failing or cancelled
-- coroutine's <close>, a finalizer): it is queued (task.teardown,
-- task.teardownCollected) and runs in a fresh, shielded task. mastra.run,
-- the exit of the state (a registry sentinel's __gc, run by lua_close) and
-- a failing mastra.map/mastra.all outside tasks drain the queue, with a
-- deadline of TEARDOWN_DEADLINE_MS. See docs/decisions.md.
local core = require "mastra.core"
local errors = require "mastra.errors"

local task = {}

-- How long a drain waits for the teardown that remains (documented in
-- docs/api.md and docs/decisions.md).
local TEARDOWN_DEADLINE_MS = 5000
task.TEARDOWN_DEADLINE_MS = TEARDOWN_DEADLINE_MS

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
-- (its teardown job).
local Task = {}
Task.__index = Task
Task.__name = "mastra.Task"

local by_co = setmetatable({}, { __mode = "k" }) -- coroutine -> task
-- key -> its waiters in the order they began to wait: { n = slots used,
-- live = waiters, [1..n] = a waiter or false (one that left), at = {
-- [waiter] = slot } }. A list, never a set walked with pairs(): the tasks
-- that one wake makes ready resume in the order they waited, on every run
-- (docs/decisions.md "Event loop and tasks").
local waiters = {}
local spawned = 0       -- tasks made so far: a task's _seq is its rank
local queue, qhead, qtail = {}, 1, 0
local live = 0          -- tasks not finished
local depth = 0         -- > 0 while the scheduler runs tasks
-- failed tasks that nobody waited for -> the order they failed in; weak, so
-- that a collected task reports its error itself (Task.__gc)
local unobserved = setmetatable({}, { __mode = "k" })
local failures = 0      -- the order of the last failure
local interrupted = false
local poll_ids = {}
local collected = {}    -- teardown jobs queued by finalizers (only they append)
local shielded_live = 0 -- shielded tasks (teardown, a sandbox's start) not finished
local exit_deadline     -- the deadline of the drain at exit (or of one that gave up)
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
task.wake = wake

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

-- The tasks not collected yet, in the order they were spawned (never in
-- the order of pairs(): what is done to them happens in a fixed order).
local function all_tasks()
  local list = {}
  for _, t in pairs(by_co) do list[#list + 1] = t end
  table.sort(list, function(a, b) return a._seq < b._seq end)
  return list
end

-- Cancel every task but the shielded ones (teardown, a start whose result
-- a teardown needs), in the order they were spawned.
local function cancel_all()
  for _, t in ipairs(all_tasks()) do
    if not t.shielded then t:cancel() end
  end
end

local function can_progress()
  return queued() > 0 or #collected > 0 or core.alive() > 0
    or core.nextTimeout() == 0
end

-- Pump the loop once: run ready tasks, poll, run what became ready. The
-- poll does not block when tasks are ready, when done() already holds, or
-- when nothing could wake it.
local start_collected

local function step(timeout, done)
  run_ready()
  start_collected()
  if queued() > 0 or (done and done()) or not can_progress() then timeout = 0 end
  local n, intr = core.poll(timeout, poll_ids)
  for i = 1, n do wake(poll_ids[i]) end
  if intr then
    interrupted = true
    cancel_all()
  end
  run_ready()
  start_collected()
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

function task.spawn(fn, ...)
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
function task.spawnShielded(fn, ...)
  local t = new_task(fn, ...)
  t.shielded = true
  shielded_live = shielded_live + 1
  return t
end

-- {====== the teardown queue ======

local function describe(obj)
  local ok, s = pcall(tostring, obj)
  return ok and s or "an object"
end

local function run_teardown(job)
  local ok, err = pcall(job[1], job[2])
  if not ok and not job.superseded then
    stderr:write(("mastra: teardown of %s failed: %s\n"):format(describe(job[2]),
      tostring(err)))
  end
end

--- Run fn(obj) in a fresh shielded task: the teardown of obj, from where
-- the caller cannot wait (a <close> handler of a failing or cancelled
-- task). Its failure is reported on stderr.
function task.teardown(fn, obj)
  local job = { fn, obj }
  local t = task.spawnShielded(run_teardown, job)
  t.job = job
  return t
end

--- The same, from a finalizer (__gc): the job is only recorded here, and
-- the scheduler starts its task on its next turn.
function task.teardownCollected(fn, obj)
  collected[#collected + 1] = { fn, obj }
end

function start_collected()
  if #collected == 0 then return end
  local jobs = collected
  -- a finalizer run by the allocation of the new list still appends to
  -- jobs; from the assignment on, finalizers append to the new list
  collected = {}
  for _, job in ipairs(jobs) do task.teardown(job[1], job[2]) end
end

-- Whether teardown remains: queued jobs or shielded tasks not finished.
local function teardown_pending()
  return #collected > 0 or shielded_live > 0
end

-- Drive the loop while keep() holds, at most until deadline (core.now()
-- ms). False if the deadline passed first.
local function drive_until(keep, deadline)
  while keep() do
    local left = deadline - core.now()
    if left <= 0 then return false end
    if not can_progress() then return true end -- nothing can still happen
    step(math.ceil(left)) -- core.now() has a fractional part
  end
  return true
end

local function report_abandoned(what)
  stderr:write(("mastra: %s: gave up after %d ms on %d task(s) still running"
    .. " (%d of them teardown)\n"):format(what, TEARDOWN_DEADLINE_MS,
    live + #collected, shielded_live + #collected))
end

--- At the end (a failed or interrupted mastra.run, the exit of the state):
-- cancel every task that is not shielded, then drive the loop until every
-- task has finished and no teardown remains, or until deadline (core.now()
-- ms). True if all ended; false after a report on stderr.
local function drain_all(what, deadline)
  if depth > 0 then return false end
  local late = core.now() >= deadline -- a drain that gave up already said so
  cancel_all()
  local ok = drive_until(function()
    return live > 0 or #collected > 0
  end, deadline)
  if not ok then
    if not late then report_abandoned(what) end
    -- the exit of the state does not wait a second time
    exit_deadline = exit_deadline or deadline
  end
  return ok
end

-- The state's sentinel: lua_close runs its __gc after the finalizers of
-- everything created later (sandboxes hand themselves to the queue there)
-- and before the loop's, so the drain still has a loop. It covers a plain
-- lua5.4 script that ends, or fails, outside mastra.run, and an embedding
-- host's lua_close.
-- Before the drain at the close of the state:
-- * lua.c's SIGINT hook raises "interrupted!" at any instruction of the
--   main thread, so a plain lua5.4 script can stop the scheduler halfway (a
--   task resumed and its end not recorded); nothing runs now: put it
--   straight.
-- * lua_close has already finalized every timer, request and socket made
--   after this module loaded, so a task that waits on one never wakes:
--   every task is cancelled, and a teardown already under way is started
--   again in a fresh task (a DELETE is idempotent; what it makes now has no
--   finalizer and works to the end).
local function prepare_exit()
  depth = 0
  local tasks = all_tasks() -- first a list: what follows may spawn tasks
  local restart = {}
  for _, t in ipairs(tasks) do
    if t.state == "running" then
      if coroutine.status(t.co) == "dead" then
        finish(t, false, cancelled_error()) -- closes its <close> variables
      else
        make_ready(t)
      end
    end
    if t.state ~= "done" and not (t.job and t.state == "new") then
      if t.job and not t.job.superseded then
        t.job.superseded = true
        restart[#restart + 1] = t.job
      end
      t:cancel()
    end
  end
  for _, job in ipairs(restart) do task.teardown(job[1], job[2]) end
end

-- A plain lua5.4 script that spawns tasks and never waits for them: the
-- tasks would be cancelled silently when the state closes (nothing drives
-- the loop after the main chunk). Unless mastra.run or mastra.step drove
-- the loop (the runner, an embedding host), the state's close says so on
-- stderr (docs/api.md "Tasks under a plain lua5.4").
local driven = false

local function warn_unfinished()
  if driven then return end
  local n, unstarted = 0, 0
  for _, t in ipairs(all_tasks()) do
    if t.state ~= "done" and not t.shielded and not t.cancel_pending then
      n = n + 1
      if t.state == "new" then unstarted = unstarted + 1 end
    end
  end
  if n > 0 then
    stderr:write(("mastra: %d task(s) had not finished when Lua exited (%d never started):"
      .. " they are cancelled. Wait for them (task:wait, mastra.all), run the script"
      .. " in mastra.run, or run it with mastra-lua\n"):format(n, unstarted))
  end
end

local sentinel = setmetatable({}, {
  __name = "mastra.task.sentinel",
  __gc = function()
    warn_unfinished()
    prepare_exit()
    if live > 0 or #collected > 0 then
      exit_deadline = exit_deadline or core.now() + TEARDOWN_DEADLINE_MS
      local ok, err = pcall(drain_all, "closing the Lua state", exit_deadline)
      if not ok then
        stderr:write("mastra: teardown at exit failed: ", tostring(err), "\n")
      end
    end
    -- tasks that failed during the drain: their finalizers have run already
    local failed = {}
    for t, n in pairs(unobserved) do failed[#failed + 1] = { t, n } end
    table.sort(failed, function(a, b) return a[2] < b[2] end)
    for _, f in ipairs(failed) do Task.__gc(f[1]) end -- in the order they failed
  end,
})
debug.getregistry()[sentinel] = true

-- }======

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

-- The failed task nobody waited for that failed first, or nil.
local function first_unobserved()
  local first, order
  for t, n in pairs(unobserved) do
    if not t.observed and (order == nil or n < order) then first, order = t, n end
  end
  return first
end

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
    if #pending > 0 then task.wait(table.unpack(pending)) end
  end
  if failed then
    for _, t in ipairs(tasks) do t:cancel() end
    for _, t in ipairs(tasks) do
      while t.state ~= "done" do task.wait(t) end
    end
    settled = true
    if current("mastra.map") == nil then
      -- outside tasks nothing drives the loop after the raise: let the
      -- teardown of the cancelled items run now
      drive_until(teardown_pending, core.now() + TEARDOWN_DEADLINE_MS)
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

-- mastra.map's concurrency when none is given: enough to keep a platform
-- busy, few enough that the descriptors it takes (a socket or three pipes
-- per item) stay far below the usual 1024 (docs/decisions.md).
local DEFAULT_CONCURRENCY = 64
task.DEFAULT_CONCURRENCY = DEFAULT_CONCURRENCY

--- fn(item, index) for every item, at most `concurrency` at a time
-- (default: DEFAULT_CONCURRENCY). Results come back in the order of the list.
function task.map(list, fn, opts)
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
  -- what is left all the same: a sleep never ends early
  local deadline = core.now() + ms
  repeat
    local timer <close> = core.timer(math.ceil(deadline - core.now()))
    wait_as("mastra.sleep", timer:id())
  until core.now() >= deadline
end

-- Raise the error of the first failed task nobody waited for, if any.
local function raise_unobserved()
  local t = first_unobserved()
  if t then t:wait() end
end

--- Run fn(...) as a task and drive the loop until every task has finished.
-- Returns fn's results or raises its error. If fn fails or the process is
-- interrupted, the other tasks are cancelled and the loop runs until they
-- and the teardown they queued have finished, at most TEARDOWN_DEADLINE_MS
-- (the same bound as for teardown left when everything else has ended).
-- An error of a task that nobody waited for is raised after the others
-- are done.
function task.run(fn, ...)
  if depth > 0 then
    error("mastra.run: cannot be called from inside a task (use mastra.spawn"
      .. " and task:wait)", 2)
  end
  driven = true
  local main = task.spawn(fn, ...)
  main.observed = true
  local ending = false
  drive(function()
    if not ending and (interrupted or (main.state == "done"
        and (main.outcome ~= "ok" or (live > 0 and live == shielded_live)))) then
      -- failed or interrupted; or only teardown is left: drain it with
      -- the deadline
      ending = true
    end
    return ending or live == 0
  end, "mastra.run")
  if ending then drain_all("mastra.run", core.now() + TEARDOWN_DEADLINE_MS) end
  take_interrupt()
  unobserved[main] = nil
  if main.outcome == "ok" then raise_unobserved() end
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
  driven = true
  step(timeout_ms)
  interrupted = false
  raise_unobserved()
  return live
end

--- Milliseconds until step() has work: 0 if tasks are ready, -1 if idle.
function task.nextTimeout()
  if queued() > 0 or #collected > 0 then return 0 end
  return core.nextTimeout()
end

--- The number of tasks that have not finished.
function task.count()
  return live
end

-- }======

return task
