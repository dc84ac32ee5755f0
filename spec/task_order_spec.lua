-- The scheduler's order (docs/api.md "Tasks", docs/decisions.md "Event loop
-- and tasks"): tasks woken by the same event resume in the order they began
-- to wait, on every run; the events of one loop turn wake in the order the
-- loop delivered them; cancellations go in the order the tasks were
-- spawned. Each case runs 20 times in this process: a set of waiters
-- iterated with pairs() (keyed by table address) gives another order on
-- almost every run.
local mastra = require "mastra"
local core = require "mastra.core"
local task = require "mastra.task"
local util = require "spec.support.util"

local RUNS = 20
local N = 8
-- how many scheduler rounds task i lets pass before it waits: the order of
-- the waits is not the order of the spawns
local ROUNDS = { 3, 0, 5, 1, 7, 2, 6, 4 }
local WAIT_ORDER = { 2, 4, 6, 1, 8, 3, 7, 5 }

-- Spawn N tasks that each call wait() after ROUNDS[i] rounds; fire() once
-- all of them wait. Returns the order they began to wait and the order
-- they resumed in.
local function waiters_of(wait, fire)
  local began, resumed = {}, {}
  mastra.run(function()
    local tasks = {}
    for i = 1, N do
      tasks[i] = mastra.spawn(function()
        for _ = 1, ROUNDS[i] do coroutine.yield() end -- run again next round
        began[#began + 1] = i
        wait(i)
        resumed[#resumed + 1] = i
      end)
    end
    while #began < N do coroutine.yield() end
    coroutine.yield() -- the last one is now suspended in wait()
    for i = 1, N do assert.equal("waiting", tasks[i]:status()) end
    fire()
    mastra.all(tasks)
  end)
  return began, resumed
end

local function repeated(name, make)
  it(name, function()
    for run = 1, RUNS do
      local wait, fire, after = make()
      local began, resumed = waiters_of(wait, fire)
      if after then after() end
      assert.are.same(WAIT_ORDER, began, "run " .. run .. ": the waits")
      assert.are.same(began, resumed, ("run %d: resumed in another order than they waited")
        :format(run))
    end
  end)
end

describe("the order of wake-ups", function()
  repeated("8 tasks waiting on one key resume in the order they waited, 20 runs",
    function()
      local gate = {}
      return function() task.wait(gate) end, function() task.wake(gate) end
    end)

  repeated("8 tasks waiting for the same task resume in the order they waited, 20 runs",
    function()
      local gate = {}
      local target = mastra.spawn(function() task.wait(gate) end)
      return function() target:wait() end, function() task.wake(gate) end
    end)

  repeated("8 tasks waiting on one loop timer resume in the order they waited, 20 runs",
    function()
      -- a C event: the loop signals the timer's id from poll()
      local timer = core.timer(30)
      local id = timer:id()
      return function() task.wait(id) end, function() end, function() timer:close() end
    end)

  describe("on a process", function()
    local dir, base, sb
    setup(function()
      dir, base = util.tmpdir()
      sb = mastra.LocalSandbox.new{ workingDirectory = dir }
    end)
    teardown(function()
      if sb then sb:destroy() end
      util.rm_rf(dir, base)
    end)

    repeated("8 tasks waiting for one process's exit resume in the order they waited,"
      .. " 20 runs", function()
      -- an I/O completion: the process's pipes close and the loop reaps it
      local h = sb.processes:spawn("read line; echo $line")
      return function() h:wait() end, function() h:sendStdin("go\n") end,
        function() assert.equal("go\n", h:wait().stdout) end
    end)
  end)

  it("events of one loop turn wake their tasks in the order the loop gave them", function()
    for run = 1, RUNS do
      local order = {}
      mastra.run(function()
        -- N timers due at once, fired in one turn: the loop signals them in
        -- the order they were made (due time, then creation)
        local timers = {}
        for i = 1, N do timers[i] = core.timer(20) end
        local tasks = {}
        for k = 1, N do
          local i = WAIT_ORDER[k] -- wait on them in another order
          tasks[k] = mastra.spawn(function()
            task.wait(timers[i]:id())
            order[#order + 1] = i
          end)
        end
        coroutine.yield() -- they run, and wait
        for k = 1, N do assert.equal("waiting", tasks[k]:status()) end
        -- keep the loop busy past the due time: every timer fires in the same poll
        local t0 = mastra.now()
        while mastra.now() - t0 < 40 do end
        mastra.all(tasks)
        for i = 1, N do timers[i]:close() end
      end)
      assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8 }, order, "run " .. run)
    end
  end)

  it("a failing mastra.run cancels the other tasks in the order they were spawned", function()
    for run = 1, RUNS do
      local unwound = {}
      local gate = {}
      local ok = pcall(mastra.run, function()
        for i = 1, N do
          mastra.spawn(function()
            for _ = 1, ROUNDS[i] do coroutine.yield() end
            local _ <close> = setmetatable({}, { __close = function()
              unwound[#unwound + 1] = i
            end })
            task.wait(gate)
          end)
        end
        for _ = 1, 10 do coroutine.yield() end
        error("the main task fails")
      end)
      assert.is_false(ok)
      assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8 }, unwound, "run " .. run)
    end
  end)
end)
