-- The task scheduler (docs/api.md "Tasks", docs/decisions.md "Event loop
-- and tasks"):
-- mastra.spawn, task:wait, task:cancel, mastra.all, mastra.map,
-- mastra.sleep, mastra.run, mastra.step and mastra.nextTimeout.
--
-- The scheduler is one per Lua state: every test leaves it idle (no live
-- task, no unobserved error), which after_each checks. Timing asserts are
-- loose on purpose (a shared 2-core machine): lower bounds are what a
-- timer guarantees, upper bounds are at least 10x the expected time.
local mastra = require "mastra"

local errors = mastra.errors
local CancelledError = errors.CancelledError

-- pcall(fn, ...) that must fail; returns the error.
local function catch(fn, ...)
  local ok, err = pcall(fn, ...)
  assert(not ok, "expected an error, the call succeeded")
  return err
end

local function is_cancelled(err)
  return CancelledError:is(err)
end

-- Spin (without the loop) until ms have passed: timers become due but
-- nothing polls them.
local function busy_wait(ms)
  local t0 = mastra.now()
  while mastra.now() - t0 < ms do end
end

-- A value whose __close records that it ran.
local function closer(fn)
  return setmetatable({}, { __close = fn })
end

-- Run the loop until no task is live; raise the errors it met and complain
-- about tasks that cannot finish, so that one test cannot break the next.
local function drain()
  local errs = {}
  local live
  for _ = 1, 500 do
    -- never block for ever here, whatever step(-1) does: wait at most
    -- until the next timer
    local ok, n = pcall(mastra.step, math.max(mastra.nextTimeout(), 0))
    if not ok then
      errs[#errs + 1] = tostring(n)
    else
      live = n
      if n == 0 then break end
    end
  end
  if live ~= 0 then
    errs[#errs + 1] = ("%s task(s) still live after the test"):format(tostring(live))
  end
  if #errs > 0 then
    error("the test left the scheduler busy:\n" .. table.concat(errs, "\n"), 0)
  end
end

describe("mastra tasks", function()
  after_each(drain)

  describe("mastra.spawn and task:wait", function()
    it("passes the arguments to the function, nils included", function()
      local got
      local t = mastra.spawn(function(...)
        got = table.pack(...)
        return "ok"
      end, 1, nil, "three", nil)
      assert.equal("ok", t:wait())
      assert.equal(4, got.n)
      assert.same({ 1, nil, "three", nil, n = 4 }, got)
    end)

    it("starts the task on the next turn of the loop, not inside spawn", function()
      local ran = false
      local t = mastra.spawn(function() ran = true end)
      assert.is_false(ran)
      assert.equal("ready", t:status())
      assert.is_false(t:done())
      t:wait()
      assert.is_true(ran)
      assert.is_true(t:done())
      assert.equal("done", t:status())
    end)

    it("wait returns all the results, nils in the middle and at the end", function()
      local t = mastra.spawn(function()
        mastra.sleep(1)
        return 1, nil, "three", nil
      end)
      local r = table.pack(t:wait())
      assert.equal(4, r.n)
      assert.same({ 1, nil, "three", nil, n = 4 }, r)
    end)

    it("wait returns nothing for a task that returns nothing", function()
      local t = mastra.spawn(function() end)
      assert.equal(0, select("#", t:wait()))
    end)

    it("wait is repeatable and does not run the task again", function()
      local calls = 0
      local t = mastra.spawn(function()
        calls = calls + 1
        return "a", nil, "c"
      end)
      local r1 = table.pack(t:wait())
      local r2 = table.pack(t:wait())
      assert.same({ "a", nil, "c", n = 3 }, r1)
      assert.same(r1, r2)
      assert.equal(1, calls)
    end)

    it("is a task: mastra.isTask and mastra.currentTask", function()
      local inside
      local t = mastra.spawn(function() inside = mastra.currentTask() end)
      t:wait()
      assert.is_true(mastra.isTask(t))
      assert.is_false(mastra.isTask({}))
      assert.equal(t, inside)
      assert.is_nil(mastra.currentTask())
    end)

    it("rejects a value that is not a function with a message naming mastra.spawn", function()
      local err = catch(mastra.spawn, 42)
      assert.matches("mastra.spawn", err, 1, true)
      assert.matches("number", err, 1, true)
    end)

    it("rejects a wait or cancel called without the task as self", function()
      local t = mastra.spawn(function() end)
      assert.matches("task:wait", catch(t.wait, {}), 1, true)
      assert.matches("task:cancel", catch(t.cancel, 1), 1, true)
      t:wait()
    end)
  end)

  describe("interleaving", function()
    it("two sleeping tasks make progress concurrently", function()
      local log = {}
      local a = mastra.spawn(function()
        log[#log + 1] = "a1"
        mastra.sleep(80)
        log[#log + 1] = "a2"
      end)
      local b = mastra.spawn(function()
        log[#log + 1] = "b1"
        mastra.sleep(10)
        log[#log + 1] = "b2"
      end)
      a:wait()
      b:wait()
      assert.same({ "a1", "b1", "b2", "a2" }, log)
    end)

    it("100 tasks sleeping 100 ms each finish together, not one after the other", function()
      local t0 = mastra.now()
      local tasks = {}
      for i = 1, 100 do
        tasks[i] = mastra.spawn(function()
          mastra.sleep(100)
          return i
        end)
      end
      for i = 1, 100 do assert.equal(i, tasks[i]:wait()) end
      local elapsed = mastra.now() - t0
      assert.is_true(elapsed >= 100, "finished after " .. elapsed .. " ms")
      assert.is_true(elapsed < 5000, "took " .. elapsed .. " ms")
    end)
  end)

  describe("errors in tasks", function()
    it("wait re-raises a string error with the task's traceback appended", function()
      local function exploding_helper() error("task exploded") end
      local t = mastra.spawn(function()
        mastra.sleep(1)
        exploding_helper()
      end)
      local err = catch(t.wait, t)
      assert.is_string(err)
      assert.matches("task exploded", err, 1, true)
      assert.matches("stack traceback", err, 1, true)
      -- the traceback is the task's: it shows where the error happened
      assert.matches("exploding_helper", err, 1, true)
      -- the message comes first, the traceback after it
      assert.is_true(err:find("task exploded", 1, true) < err:find("stack traceback", 1, true))
    end)

    it("wait re-raises the same error every time", function()
      local t = mastra.spawn(function() error("again and again", 0) end)
      local e1 = catch(t.wait, t)
      local e2 = catch(t.wait, t)
      assert.matches("^again and again", e1)
      assert.matches("^again and again", e2)
    end)

    it("an error object keeps its identity and gains a traceback field", function()
      local obj = errors.TimeoutError:new{ message = "too slow" }
      local t = mastra.spawn(function()
        mastra.sleep(1)
        error(obj)
      end)
      local err = catch(t.wait, t)
      assert.is_true(rawequal(obj, err))
      assert.is_true(errors.TimeoutError:is(err))
      assert.equal("too slow", err.message)
      assert.is_string(err.traceback)
      assert.matches("stack traceback", err.traceback, 1, true)
      assert.is_true(rawequal(obj, catch(t.wait, t)))
    end)

    it("closes the <close> variables of a task that fails", function()
      local closed = false
      local t = mastra.spawn(function()
        local _ <close> = closer(function() closed = true end)
        mastra.sleep(1)
        error("failing with a resource", 0)
      end)
      assert.matches("failing with a resource", catch(t.wait, t), 1, true)
      assert.is_true(closed)
    end)
  end)

  describe("task:cancel", function()
    it("resumes a sleeping task once with a CancelledError", function()
      local seen = {}
      local t = mastra.spawn(function()
        local ok, err = pcall(mastra.sleep, 10000)
        seen[#seen + 1] = { ok = ok, err = err }
        return "after the cancellation"
      end)
      mastra.step(0) -- the task now sleeps
      assert.equal("waiting", t:status())
      local t0 = mastra.now()
      assert.is_true(t:cancel())
      assert.equal("after the cancellation", t:wait())
      assert.is_true(mastra.now() - t0 < 5000, "the sleep was not cut short")
      assert.equal(1, #seen)
      assert.is_false(seen[1].ok)
      assert.is_true(is_cancelled(seen[1].err))
    end)

    it("closes the <close> variables of the cancelled task", function()
      local closed = false
      local t = mastra.spawn(function()
        local _ <close> = closer(function() closed = true end)
        mastra.sleep(10000)
      end)
      mastra.step(0)
      assert.is_false(closed)
      assert.is_true(t:cancel())
      assert.is_true(is_cancelled(catch(t.wait, t)))
      assert.is_true(closed)
    end)

    it("returns false for a finished task, which keeps its results", function()
      local t = mastra.spawn(function() return "finished" end)
      assert.equal("finished", t:wait())
      assert.is_false(t:cancel())
      assert.equal("finished", t:wait())
    end)

    it("before the task starts: its body never runs", function()
      local ran = false
      local t = mastra.spawn(function() ran = true end)
      assert.is_true(t:cancel())
      assert.is_true(is_cancelled(catch(t.wait, t)))
      assert.is_false(ran)
      assert.equal(0, mastra.step(0))
      assert.is_false(ran)
    end)

    it("wait on a cancelled task raises CancelledError, every time", function()
      local t = mastra.spawn(function() mastra.sleep(10000) end)
      mastra.step(0)
      t:cancel()
      local e1 = catch(t.wait, t)
      local e2 = catch(t.wait, t)
      assert.is_true(is_cancelled(e1))
      assert.is_true(is_cancelled(e2))
      assert.equal("CancelledError", e1.name)
    end)

    it("a task that catches the cancellation with pcall goes on", function()
      local t = mastra.spawn(function()
        local ok = pcall(mastra.sleep, 10000)
        mastra.sleep(5) -- it can still wait
        return ok, "went on"
      end)
      mastra.step(0)
      t:cancel()
      local ok, msg = t:wait()
      assert.is_false(ok)
      assert.equal("went on", msg)
    end)

    it("a task cancelled twice while waiting sees one CancelledError", function()
      local cancellations, completed = 0, 0
      local t = mastra.spawn(function()
        for _ = 1, 2 do
          local ok, err = pcall(mastra.sleep, 50)
          if ok then
            completed = completed + 1
          elseif is_cancelled(err) then
            cancellations = cancellations + 1
          else
            error(err, 0)
          end
        end
      end)
      mastra.step(0)
      assert.is_true(t:cancel())
      assert.is_true(t:cancel())
      t:wait()
      assert.equal(1, cancellations)
      assert.equal(1, completed)
    end)
  end)

  describe("exactly-once resumption", function()
    it("a task cancelled while its timer is pending is resumed once", function()
      local resumed, first, second = 0, nil, nil
      local t = mastra.spawn(function()
        local _, err = pcall(mastra.sleep, 30)
        resumed = resumed + 1
        first = err
        local t0 = mastra.now()
        mastra.sleep(100)
        second = mastra.now() - t0
        return "done"
      end)
      mastra.step(0) -- sleeping 30 ms
      assert.is_true(t:cancel())
      assert.equal("done", t:wait())
      assert.equal(1, resumed)
      assert.is_true(is_cancelled(first))
      -- the cancelled timer (due at 30 ms) did not cut the next sleep short
      assert.is_true(second >= 100, "second sleep lasted " .. tostring(second) .. " ms")
    end)

    it("a task whose timer fired and that is cancelled in the same turn is resumed once",
      function()
        local resumed, cancellations, completed = 0, 0, 0
        local second
        local victim
        local cancel_result
        local canceller = mastra.spawn(function()
          mastra.sleep(5)
          cancel_result = victim:cancel()
        end)
        victim = mastra.spawn(function()
          local ok, err = pcall(mastra.sleep, 10)
          resumed = resumed + 1
          if ok then completed = completed + 1 end
          if is_cancelled(err) then cancellations = cancellations + 1 end
          local t0 = mastra.now()
          ok, err = pcall(mastra.sleep, 100)
          if ok then
            completed = completed + 1
            second = mastra.now() - t0
          end
          if is_cancelled(err) then cancellations = cancellations + 1 end
          return "victim done"
        end)
        mastra.step(0) -- both sleep
        busy_wait(30)  -- both timers are due; the next poll signals both
        assert.equal("victim done", victim:wait())
        canceller:wait()
        assert.is_true(cancel_result)
        assert.equal(1, resumed)
        assert.equal(1, cancellations)
        assert.equal(1, completed)
        if second then
          assert.is_true(second >= 100, "second sleep lasted " .. second .. " ms")
        end
      end)
  end)

  describe("mastra.all", function()
    it("returns the first results in the order of the list", function()
      local r = mastra.all{
        function()
          mastra.sleep(30)
          return "slow", "ignored"
        end,
        function()
          mastra.sleep(1)
          return "fast"
        end,
        function() return "instant" end,
      }
      assert.same({ "slow", "fast", "instant" }, r)
    end)

    it("runs the functions concurrently", function()
      local t0 = mastra.now()
      local fns = {}
      for i = 1, 20 do
        fns[i] = function()
          mastra.sleep(100)
          return i
        end
      end
      local r = mastra.all(fns)
      assert.equal(20, #r)
      assert.equal(20, r[20])
      assert.is_true(mastra.now() - t0 < 1000)
    end)

    it("accepts tasks as well as functions", function()
      local t = mastra.spawn(function()
        mastra.sleep(10)
        return "from a task"
      end)
      local r = mastra.all{ t, function() return "from a function" end }
      assert.same({ "from a task", "from a function" }, r)
    end)

    it("returns an empty list for an empty list", function()
      assert.same({}, mastra.all{})
    end)

    it("raises the first error and cancels the others", function()
      local saw, finished, caught
      mastra.run(function()
        local ok, err = pcall(mastra.all, {
          function()
            mastra.sleep(200)
            error("late failure", 0)
          end,
          function()
            mastra.sleep(5)
            error("first failure", 0)
          end,
          function()
            local ok2, e = pcall(mastra.sleep, 10000)
            saw = e
            if not ok2 then error(e, 0) end
            finished = true
          end,
        })
        assert(not ok, "mastra.all did not raise")
        caught = err
      end)
      assert.matches("first failure", caught, 1, true)
      assert.not_matches("late failure", caught, 1, true)
      assert.is_true(is_cancelled(saw))
      assert.is_nil(finished)
    end)

    it("cancels the tasks it was given when one fails", function()
      local t = mastra.spawn(function() mastra.sleep(10000) end)
      local err = catch(mastra.all, {
        t,
        function() error("boom in all", 0) end,
      })
      assert.matches("boom in all", err, 1, true)
      assert.is_true(is_cancelled(catch(t.wait, t)))
    end)

    it("rejects a value that is not a table", function()
      local err = catch(mastra.all, 42)
      assert.matches("mastra.all", err, 1, true)
      assert.matches("number", err, 1, true)
    end)

    it("rejects an item that is not a function or a task, naming it", function()
      local err = catch(mastra.all, { function() end, 42 })
      assert.matches("mastra.all", err, 1, true)
      assert.matches("item 2", err, 1, true)
      assert.matches("number", err, 1, true)
      err = catch(mastra.all, { "text" })
      assert.matches("item 1", err, 1, true)
      assert.matches("string", err, 1, true)
    end)

    it("starts none of the functions when an item is bad", function()
      local ran = false
      catch(mastra.all, { function() ran = true end, 42 })
      mastra.sleep(10) -- let anything that was started run
      assert.is_false(ran)
    end)
  end)

  describe("mastra.map", function()
    it("calls fn(item, index) and returns the results in list order", function()
      local r = mastra.map({ "a", "b", "c", "d" }, function(item, i)
        mastra.sleep((5 - i) * 5)
        return item .. i
      end)
      assert.same({ "a1", "b2", "c3", "d4" }, r)
    end)

    it("never runs more than n at once", function()
      local inflight, max = 0, 0
      local list = {}
      for i = 1, 12 do list[i] = i end
      local r = mastra.map(list, function(x)
        inflight = inflight + 1
        if inflight > max then max = inflight end
        mastra.sleep(5)
        inflight = inflight - 1
        return x * 2
      end, { concurrency = 3 })
      assert.equal(3, max)
      assert.equal(0, inflight)
      for i = 1, 12 do assert.equal(i * 2, r[i]) end
    end)

    it("runs all items at once by default", function()
      local inflight, max = 0, 0
      local r = mastra.map({ 1, 2, 3, 4, 5 }, function(x)
        inflight = inflight + 1
        if inflight > max then max = inflight end
        mastra.sleep(5)
        inflight = inflight - 1
        return x
      end)
      assert.equal(5, max)
      assert.same({ 1, 2, 3, 4, 5 }, r)
    end)

    it("returns an empty list for an empty list", function()
      assert.same({}, mastra.map({}, function() error("not called") end, { concurrency = 2 }))
    end)

    it("raises the first error and cancels the rest", function()
      local started, finished, cancelled = {}, {}, {}
      local caught
      mastra.run(function()
        local ok, err = pcall(mastra.map, { 1, 2, 3, 4, 5, 6, 7, 8 }, function(x)
          started[#started + 1] = x
          if x == 2 then
            mastra.sleep(5)
            error("item 2 failed", 0)
          end
          local ok2, e = pcall(mastra.sleep, 10000)
          if not ok2 then
            if is_cancelled(e) then cancelled[#cancelled + 1] = x end
            error(e, 0)
          end
          finished[#finished + 1] = x
        end, { concurrency = 3 })
        assert(not ok, "mastra.map did not raise")
        caught = err
      end)
      assert.matches("item 2 failed", caught, 1, true)
      table.sort(started)
      table.sort(cancelled)
      assert.same({ 1, 2, 3 }, started)
      assert.same({ 1, 3 }, cancelled)
      assert.same({}, finished)
    end)

    it("rejects an unknown option, naming it", function()
      local err = catch(mastra.map, { 1 }, function() end, { concurency = 2 })
      assert.matches("mastra.map", err, 1, true)
      assert.matches("concurency", err, 1, true)
    end)

    it("rejects a concurrency that is not an integer >= 1", function()
      for _, bad in ipairs{ 0, -1, 1.5, "2", 0 / 0 } do
        local err = catch(mastra.map, { 1 }, function() end, { concurrency = bad })
        assert.matches("mastra.map", err, 1, true)
        assert.matches("concurrency", err, 1, true)
      end
    end)

    it("rejects a list or fn of the wrong type", function()
      assert.matches("mastra.map", catch(mastra.map, "list", function() end), 1, true)
      assert.matches("mastra.map", catch(mastra.map, {}, "fn"), 1, true)
      assert.matches("mastra.map", catch(mastra.map, {}, function() end, 3), 1, true)
    end)
  end)

  describe("mastra.sleep", function()
    it("rejects bad durations at the call site with a message naming mastra.sleep", function()
      for _, bad in ipairs{ -1, 0 / 0, "10", math.huge, false } do
        local err = catch(function() mastra.sleep(bad) end)
        assert.is_string(err)
        assert.matches("task_spec%.lua:%d+: mastra%.sleep", err)
      end
      local err = catch(function() mastra.sleep() end)
      assert.matches("task_spec%.lua:%d+: mastra%.sleep", err)
    end)

    it("rejects bad durations inside a task too", function()
      local t = mastra.spawn(function()
        return pcall(function() mastra.sleep(-5) end)
      end)
      local ok, err = t:wait()
      assert.is_false(ok)
      assert.matches("task_spec%.lua:%d+: mastra%.sleep", err)
    end)

    it("sleep(0) yields to the other tasks and returns", function()
      local log = {}
      local a = mastra.spawn(function()
        log[#log + 1] = "a1"
        mastra.sleep(0)
        log[#log + 1] = "a2"
      end)
      local b = mastra.spawn(function() log[#log + 1] = "b" end)
      a:wait()
      b:wait()
      assert.same({ "a1", "b", "a2" }, log)
    end)

    it("sleeps at least ms milliseconds", function()
      local t0 = mastra.now()
      mastra.sleep(50)
      assert.is_true(mastra.now() - t0 >= 50)
    end)

    -- under load a task can lose the CPU for a millisecond or more between
    -- two reads of the clock (spec_destroy_storm met it): a clock that moves
    -- 5 ms at each read puts the deadline behind every later read
    it("ends when its deadline passed between two reads of the clock", function()
      local core = require "mastra.core"
      local real, skew = core.now, 0
      core.now = function()
        skew = skew + 5
        return real() + skew
      end
      local ok, err = pcall(mastra.sleep, 3)
      local inside = mastra.spawn(function() return pcall(mastra.sleep, 3) end)
      local ok2, err2 = inside:wait()
      core.now = real
      assert(ok, err)
      assert(ok2, err2)
    end)

    -- direct_exec waits on one timer for its deadline: a timer that fired
    -- before it (the loop counted its due time from the truncated clock)
    -- left it waiting again on a timer that would never fire again
    it("a core timer never fires before its delay as mastra.now() measures it", function()
      local core = require "mastra.core"
      local task = require "mastra.task"
      for _ = 1, 20 do
        -- start late in a millisecond, poll just after its end: a due time
        -- of floor(now) + 1 is reached then, 0.8 ms before the deadline
        local t0 = mastra.now()
        while t0 % 1 < 0.8 do t0 = mastra.now() end
        local timer <close> = core.timer(1)
        local boundary = math.floor(t0) + 1
        while mastra.now() < boundary do end
        task.wait(timer:id())
        local now = mastra.now()
        assert.is_true(now >= t0 + 1, ("fired %.3f ms early"):format(t0 + 1 - now))
      end
    end)
  end)

  describe("blocking calls outside any task", function()
    it("mastra.sleep(0) at the top level returns", function()
      mastra.sleep(0)
      assert.equal(0, mastra.step(0))
    end)

    it("drive the loop: a task spawned earlier progresses meanwhile", function()
      local log = {}
      local t = mastra.spawn(function()
        log[#log + 1] = "started"
        mastra.sleep(10)
        log[#log + 1] = "finished"
        return "r"
      end)
      local t0 = mastra.now()
      mastra.sleep(100)
      assert.is_true(mastra.now() - t0 >= 100)
      assert.same({ "started", "finished" }, log)
      assert.is_true(t:done())
      assert.equal("r", t:wait())
    end)

    it("task:wait returns as soon as the task finishes, while another task sleeps", function()
      local sleeper = mastra.spawn(function() mastra.sleep(10000) end)
      local quick = mastra.spawn(function() return "quick" end)
      local t0 = mastra.now()
      assert.equal("quick", quick:wait())
      assert.is_true(mastra.now() - t0 < 5000, "waited for the other task's timer")
      sleeper:cancel()
      assert.is_true(is_cancelled(catch(sleeper.wait, sleeper)))
    end)
  end)

  describe("mastra.run", function()
    it("returns fn's results and passes it the arguments", function()
      local r = table.pack(mastra.run(function(a, b)
        mastra.sleep(1)
        return a + b, nil, "x"
      end, 1, 2))
      assert.same({ 3, nil, "x", n = 3 }, r)
    end)

    it("waits for the tasks that are still running", function()
      local done = false
      local r = mastra.run(function()
        mastra.spawn(function()
          mastra.sleep(30)
          mastra.spawn(function()
            mastra.sleep(10)
            done = true
          end)
        end)
        return "main returned"
      end)
      assert.equal("main returned", r)
      assert.is_true(done)
      assert.equal(0, mastra.step(0))
    end)

    it("an error in fn cancels the other tasks and is raised", function()
      local saw
      local t0 = mastra.now()
      local err = catch(mastra.run, function()
        mastra.spawn(function()
          local _, e = pcall(mastra.sleep, 10000)
          saw = e
        end)
        mastra.sleep(5)
        error("main failed", 0)
      end)
      assert.matches("main failed", err, 1, true)
      assert.is_true(is_cancelled(saw))
      assert.is_true(mastra.now() - t0 < 5000)
    end)

    it("raises the error of a task nobody waited for, after the others finish", function()
      local other_done = false
      local err = catch(mastra.run, function()
        mastra.spawn(function()
          mastra.sleep(5)
          error("orphan failed", 0)
        end)
        mastra.spawn(function()
          mastra.sleep(60)
          other_done = true
        end)
        return "main result"
      end)
      assert.matches("orphan failed", err, 1, true)
      assert.is_true(other_done)
    end)

    it("raises a clear error when called inside a task", function()
      local ran = false
      local ok, err = mastra.run(function()
        return pcall(mastra.run, function() ran = true end)
      end)
      assert.is_false(ok)
      assert.matches("mastra.run", err, 1, true)
      assert.matches("inside a task", err, 1, true)
      assert.is_false(ran)
    end)
  end)

  describe("waits that cannot work", function()
    it("a plain coroutine resumed in a task gets a clear error from mastra.sleep", function()
      local t = mastra.spawn(function()
        local co = coroutine.create(function()
          mastra.sleep(10)
          return "unreachable"
        end)
        return coroutine.resume(co)
      end)
      local ok, err = t:wait()
      assert.is_false(ok)
      assert.matches("not a mastra task", err, 1, true)
    end)

    it("that error names mastra.sleep, the call that cannot wait", function()
      local t = mastra.spawn(function()
        local co = coroutine.create(function() mastra.sleep(10) end)
        return coroutine.resume(co)
      end)
      local _, err = t:wait()
      assert.matches("mastra.sleep", err, 1, true)
    end)

    it("a task waiting for itself raises", function()
      local t
      t = mastra.spawn(function()
        return pcall(function() return t:wait() end)
      end)
      local ok, err = t:wait()
      assert.is_false(ok)
      assert.matches("itself", err, 1, true)
    end)

    it("a deadlock raises an error mentioning deadlock instead of hanging", function()
      local a, b
      a = mastra.spawn(function() return b:wait() end)
      b = mastra.spawn(function() return a:wait() end)
      local err = catch(a.wait, a)
      assert.matches("deadlock", tostring(err), 1, true)
      -- cancelling one of them frees both
      assert.is_true(a:cancel())
      assert.is_true(is_cancelled(catch(a.wait, a)))
      assert.is_true(is_cancelled(catch(b.wait, b)))
    end)
  end)

  describe("mastra.step", function()
    it("runs the ready tasks and returns the number of live tasks", function()
      local ran = false
      local quick = mastra.spawn(function() ran = true end)
      local slow = mastra.spawn(function() mastra.sleep(10000) end)
      assert.equal(1, mastra.step(0))
      assert.is_true(ran)
      assert.is_true(quick:done())
      assert.equal("waiting", slow:status())
      slow:cancel()
      assert.equal(0, mastra.step(0))
      assert.is_true(is_cancelled(catch(slow.wait, slow)))
    end)

    it("returns 0 when idle, without blocking", function()
      assert.equal(0, mastra.step(0))
      assert.equal(0, mastra.step())
      local t0 = mastra.now()
      assert.equal(0, mastra.step(-1))
      assert.equal(0, mastra.step(200))
      assert.is_true(mastra.now() - t0 < 2000)
    end)

    it("step(-1) runs the ready tasks and returns when nothing else is scheduled", function()
      local ran = false
      mastra.spawn(function() ran = true end)
      assert.equal(0, mastra.step(-1))
      assert.is_true(ran)
    end)

    it("waits for a timer when asked to block", function()
      local t = mastra.spawn(function() mastra.sleep(30) end)
      local n
      local t0 = mastra.now()
      for _ = 1, 100 do
        n = mastra.step(-1)
        if n == 0 then break end
      end
      assert.equal(0, n)
      assert.is_true(t:done())
      assert.is_true(mastra.now() - t0 >= 30)
    end)

    it("raises the error of a task nobody waits for, once", function()
      local t = mastra.spawn(function() error("nobody waits for me", 0) end)
      local err = catch(mastra.step, 0)
      assert.matches("nobody waits for me", err, 1, true)
      assert.matches("stack traceback", err, 1, true)
      assert.equal(0, mastra.step(0))
      assert.matches("nobody waits for me", catch(t.wait, t), 1, true)
    end)

    it("rejects a bad timeout", function()
      for _, bad in ipairs{ -2, 1.5, "0", 0 / 0, {} } do
        local err = catch(mastra.step, bad)
        assert.matches("mastra.step", err, 1, true)
      end
    end)

    it("raises when called inside a task", function()
      local t = mastra.spawn(function() return pcall(mastra.step, 0) end)
      local ok, err = t:wait()
      assert.is_false(ok)
      assert.matches("mastra.step", err, 1, true)
    end)
  end)

  describe("mastra.nextTimeout", function()
    it("is 0 when tasks are ready", function()
      local t = mastra.spawn(function() end)
      assert.equal(0, mastra.nextTimeout())
      t:wait()
    end)

    it("is about the sleep delay with one sleeping task", function()
      local t = mastra.spawn(function() mastra.sleep(2000) end)
      mastra.step(0)
      local ms = mastra.nextTimeout()
      assert.is_true(ms > 200 and ms <= 2000, "nextTimeout() = " .. tostring(ms))
      t:cancel()
      assert.is_true(is_cancelled(catch(t.wait, t)))
    end)

    it("is -1 when idle", function()
      assert.equal(-1, mastra.nextTimeout())
    end)
  end)
end)
