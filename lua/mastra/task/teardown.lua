-- The teardown queue of mastra.task and its drain (docs/decisions.md
-- "Teardown and errors"), and mastra.run, which ends with the drain.
--
-- Teardown that needs I/O (a sandbox's DELETE, waiting for a killed
-- process) is never done where a task cannot wait (a failing or cancelled
-- coroutine's <close>, a finalizer): it is queued (teardown,
-- teardownCollected) and runs in a fresh, shielded task. mastra.run, the
-- exit of the state (a registry sentinel's __gc, run by lua_close) and a
-- failing mastra.map/mastra.all outside tasks (task/groups.lua) drain the
-- queue, with a deadline of TEARDOWN_DEADLINE_MS.
local core = require "mastra.core"
local scheduler = require "mastra.task.scheduler"

local teardown = {}

-- How long a drain waits for the teardown that remains (documented in
-- docs/api.md and docs/decisions.md).
local TEARDOWN_DEADLINE_MS = 5000
teardown.TEARDOWN_DEADLINE_MS = TEARDOWN_DEADLINE_MS

local exit_deadline     -- the deadline of the drain at exit (or of one that gave up)
local stderr = io.stderr

-- {====== the queue ======

local function run_teardown(job)
  local ok, err = pcall(job[1], job[2])
  if not ok and not job.superseded then
    stderr:write(("mastra: teardown of %s failed: %s\n"):format(
      scheduler.describe(job[2]), tostring(err)))
  end
end

--- Run fn(obj) in a fresh shielded task: the teardown of obj, from where
-- the caller cannot wait (a <close> handler of a failing or cancelled
-- task). Its failure is reported on stderr. Returns the task.
function teardown.teardown(fn, obj)
  local job = { fn, obj }
  local t = scheduler.spawnShielded(run_teardown, job)
  t.job = job
  return t
end

local function start_collected(job)
  teardown.teardown(job[1], job[2])
end

--- The same, from a finalizer (__gc): the job is only recorded here, and
-- the scheduler starts its task on its next turn.
function teardown.teardownCollected(fn, obj)
  scheduler.later(start_collected, { fn, obj })
end

--- Outside tasks, after a failing mastra.map/mastra.all: nothing drives the
-- loop after the raise, so let the teardown of the cancelled items run now
-- (at most TEARDOWN_DEADLINE_MS).
function teardown.runPending()
  return scheduler.driveUntil(scheduler.shieldedPending, core.now() + TEARDOWN_DEADLINE_MS)
end

-- }======

-- {====== the drain ======

local function report_abandoned(what)
  local recorded = scheduler.laterCount()
  stderr:write(("mastra: %s: gave up after %d ms on %d task(s) still running"
    .. " (%d of them teardown)\n"):format(what, TEARDOWN_DEADLINE_MS,
    scheduler.live() + recorded, scheduler.shieldedLive() + recorded))
end

local function work_left()
  return scheduler.live() > 0 or scheduler.laterCount() > 0
end

--- At the end (a failed or interrupted mastra.run, the exit of the state):
-- cancel every task that is not shielded, then drive the loop until every
-- task has finished and no teardown remains, or until deadline (core.now()
-- ms). True if all ended; false after a report on stderr.
local function drain_all(what, deadline)
  if scheduler.depth() > 0 then return false end
  local late = core.now() >= deadline -- a drain that gave up already said so
  scheduler.cancelAll()
  local ok = scheduler.driveUntil(work_left, deadline)
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
--   every task is cancelled (in the order they were spawned), and a
--   teardown already under way is started again in a fresh task (a DELETE
--   is idempotent; what it makes now has no finalizer and works to the end).
local function prepare_exit()
  scheduler.abandonRun()
  local tasks = scheduler.allTasks() -- first a list: what follows may spawn tasks
  local restart = {}
  for _, t in ipairs(tasks) do
    if t.state == "running" then
      if coroutine.status(t.co) == "dead" then
        -- closes its <close> variables
        scheduler.finish(t, false, scheduler.cancelledError())
      else
        scheduler.makeReady(t)
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
  for _, job in ipairs(restart) do teardown.teardown(job[1], job[2]) end
end

-- A plain lua5.4 script that spawns tasks and never waits for them: the
-- tasks would be cancelled silently when the state closes (nothing drives
-- the loop after the main chunk). Unless mastra.run or mastra.step drove
-- the loop (the runner, an embedding host), the state's close says so on
-- stderr (docs/api.md "Tasks under a plain lua5.4").
local function warn_unfinished()
  if scheduler.driven() then return end
  local n, unstarted = 0, 0
  for _, t in ipairs(scheduler.allTasks()) do
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
    if work_left() then
      exit_deadline = exit_deadline or core.now() + TEARDOWN_DEADLINE_MS
      local ok, err = pcall(drain_all, "closing the Lua state", exit_deadline)
      if not ok then
        stderr:write("mastra: teardown at exit failed: ", tostring(err), "\n")
      end
    end
    -- tasks that failed during the drain: their finalizers have run already
    scheduler.reportUnobserved()
  end,
})
debug.getregistry()[sentinel] = true

-- }======

-- {====== mastra.run ======

--- Run fn(...) as a task and drive the loop until every task has finished.
-- Returns fn's results or raises its error. If fn fails or the process is
-- interrupted, the other tasks are cancelled and the loop runs until they
-- and the teardown they queued have finished, at most TEARDOWN_DEADLINE_MS
-- (the same bound as for teardown left when everything else has ended).
-- An error of a task that nobody waited for is raised after the others
-- are done.
function teardown.run(fn, ...)
  if scheduler.depth() > 0 then
    error("mastra.run: cannot be called from inside a task (use mastra.spawn"
      .. " and task:wait)", 2)
  end
  scheduler.setDriven()
  local main = scheduler.spawn(fn, ...)
  main.observed = true
  local ending = false
  scheduler.drive(function()
    local live = scheduler.live()
    if not ending and (scheduler.interrupted() or (main.state == "done"
        and (main.outcome ~= "ok" or (live > 0 and live == scheduler.shieldedLive())))) then
      -- failed or interrupted; or only teardown is left: drain it with
      -- the deadline
      ending = true
    end
    return ending or live == 0
  end, "mastra.run")
  if ending then drain_all("mastra.run", core.now() + TEARDOWN_DEADLINE_MS) end
  scheduler.takeInterrupt()
  scheduler.claim(main)
  if main.outcome == "ok" then scheduler.raiseUnobserved() end
  return main:wait()
end

-- }======

return teardown
