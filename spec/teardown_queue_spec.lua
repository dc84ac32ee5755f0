-- The teardown queue of the scheduler (lua/mastra/task/teardown.lua) in process:
-- where a <close> handler cannot wait it queues the work, which runs in a
-- fresh shielded task; mastra.map/mastra.all own the errors of their
-- items. The child-process cases are in spec/teardown_spec.lua.
local mastra = require "mastra"
local task = require "mastra.task"

local CancelledError = mastra.errors.CancelledError

-- A <close> value that, where it cannot wait, queues a teardown that
-- waits (as a sandbox does) and records when it has finished.
local function resource(log, name)
  return setmetatable({}, {
    __close = function()
      if task.canWait() then
        log[#log + 1] = name .. " closed inline"
      else
        task.teardown(function()
          mastra.sleep(20)
          log[#log + 1] = name .. " torn down"
        end)
      end
    end,
  })
end

-- Run the loop until every task has finished (what after_each expects).
local function settle()
  for _ = 1, 200 do
    if mastra.step(math.max(mastra.nextTimeout(), 0)) == 0 then return end
  end
  error("tasks still live")
end

describe("the teardown queue", function()
  after_each(settle)

  it("a failed task's <close> teardown runs in a task of its own, after it", function()
    local log = {}
    local t = mastra.spawn(function()
      local r <close> = resource(log, "r") -- luacheck: ignore 211
      mastra.sleep(5)
      error("fails", 0)
    end)
    local ok, err = pcall(t.wait, t)
    assert.is_false(ok)
    assert.matches("^fails", err)
    assert.same({}, log) -- queued, not run inside the failing coroutine
    settle()
    assert.same({ "r torn down" }, log)
  end)

  it("mastra.run drains the teardown of a failing main function", function()
    local log = {}
    local ok, err = pcall(mastra.run, function()
      local r <close> = resource(log, "main") -- luacheck: ignore 211
      mastra.spawn(function()
        local q <close> = resource(log, "other") -- luacheck: ignore 211
        mastra.sleep(10000)
      end)
      mastra.sleep(5)
      error("main fails", 0)
    end)
    assert.is_false(ok)
    assert.matches("main fails", err, 1, true)
    table.sort(log)
    assert.same({ "main torn down", "other torn down" }, log)
  end)

  it("a failure or an interrupt does not cancel a shielded task", function()
    local finished = false
    local ok = pcall(mastra.run, function()
      task.spawnShielded(function()
        mastra.sleep(30)
        finished = true
      end)
      error("main fails", 0)
    end)
    assert.is_false(ok)
    assert.is_true(finished)
  end)

  it("a failing map outside tasks returns after its items' teardown", function()
    local log = {}
    local ok, err = pcall(mastra.map, { 1, 2, 3 }, function(i)
      local r <close> = resource(log, "item " .. i) -- luacheck: ignore 211
      if i == 2 then
        mastra.sleep(5)
        error("item 2 failed", 0)
      end
      mastra.sleep(10000)
    end)
    assert.is_false(ok)
    assert.matches("item 2 failed", err, 1, true)
    table.sort(log)
    assert.same({ "item 1 torn down", "item 2 torn down", "item 3 torn down" }, log)
  end)

  it("a finalizer's job runs on the next turn of the loop", function()
    local ran = false
    do
      setmetatable({}, { __gc = function()
        task.teardownCollected(function() ran = true end, "a collected object")
      end })
    end
    collectgarbage()
    collectgarbage()
    assert.is_false(ran)
    settle()
    assert.is_true(ran)
  end)
end)

describe("errors of mastra.map and mastra.all", function()
  after_each(settle)

  it("pcall(mastra.all) contains every failure of its items: run raises nothing later",
    function()
      local caught
      local results = table.pack(pcall(mastra.run, function()
        local ok, err = pcall(mastra.all, {
          function() error("first", 0) end,
          function() error("second", 0) end,
          function() mastra.sleep(10000) end,
        })
        caught = { ok, err }
        mastra.sleep(20)
        return "went on"
      end))
      assert.same({ true, "went on", n = 2 }, results)
      assert.is_false(caught[1])
      assert.matches("first", caught[2], 1, true)
    end)

  it("the cancelled items have unwound when map raises", function()
    local unwound = {}
    mastra.run(function()
      pcall(mastra.map, { 1, 2, 3 }, function(i)
        local c <close> = setmetatable({}, { -- luacheck: ignore 211
          __close = function() unwound[#unwound + 1] = i end,
        })
        if i == 1 then error("one", 0) end
        mastra.sleep(10000)
      end)
      table.sort(unwound)
      assert.same({ 1, 2, 3 }, unwound)
    end)
  end)

  it("a cancelled caller cancels the items, whose later failure is not lost", function()
    local item
    local caller = mastra.spawn(function()
      mastra.map({ 1 }, function()
        item = mastra.currentTask()
        local ok, e = pcall(mastra.sleep, 10000)
        assert(not ok and CancelledError:is(e))
        error("failed while cancelled", 0)
      end)
    end)
    mastra.step(0)
    mastra.step(0)
    assert.is_true(caller:cancel())
    local ok, err = pcall(settle)
    -- the item's failure is an error nobody waited for: step raises it
    assert.is_false(ok)
    assert.matches("failed while cancelled", err, 1, true)
    assert.is_true(item:done())
  end)
end)
