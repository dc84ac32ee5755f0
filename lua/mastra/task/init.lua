-- mastra.task: tasks, coroutines scheduled over the C event loop
-- (docs/decisions.md "Event loop and tasks", docs/api.md "Tasks"). Split by
-- job:
--   task/scheduler.lua  tasks, waiting and waking, running, one turn of
--                       the loop, sleep, step
--   task/teardown.lua   the teardown queue, its drain (at mastra.run's end
--                       and at the close of the state), mastra.run
--   task/groups.lua     mastra.all, mastra.map, shared (one task for
--                       concurrent callers)
-- This file only gathers their public functions into the one module that
-- the facade, the runner and the embedding API (src/embed/embed.c) use.
local scheduler = require "mastra.task.scheduler"
local teardown = require "mastra.task.teardown"
local groups = require "mastra.task.groups"

return {
  TEARDOWN_DEADLINE_MS = teardown.TEARDOWN_DEADLINE_MS,
  DEFAULT_CONCURRENCY = groups.DEFAULT_CONCURRENCY,

  -- waiting and waking (the facade's blocking calls)
  wait = scheduler.wait,
  waitAs = scheduler.waitAs,
  wake = scheduler.wake,
  current = scheduler.current,
  canWait = scheduler.canWait,

  -- tasks
  spawn = scheduler.spawn,
  spawnShielded = scheduler.spawnShielded,
  isTask = scheduler.isTask,
  sleep = scheduler.sleep,
  step = scheduler.step,
  nextTimeout = scheduler.nextTimeout,
  count = scheduler.count,

  -- teardown and the end
  teardown = teardown.teardown,
  teardownCollected = teardown.teardownCollected,
  run = teardown.run,

  -- groups
  all = groups.all,
  map = groups.map,
  shared = groups.shared,
}
