-- A cold start of the local platform (lua/mastra/local_platform.lua): many
-- first users at once, in several processes, on one fresh state directory.
-- Within a process concurrent callers share one attempt; across processes
-- the state lock is taken without blocking the thread (LOCK_NB, retried
-- after a sleep), so nothing deadlocks and one server is started.
local mastra = require "mastra"
local platform = require "spec.support.platform"
local child = require "spec.support.child"

local MASTRA_LUA = child.binary("mastra-lua")
local quote = mastra.quote

describe("a cold start of the local platform", function()
  local ctx, dir, sb

  setup(function()
    platform.binary() -- MASTRA_PLATFORM is set
    ctx = child.context()
    dir, sb = ctx.dir, ctx.sb
  end)

  teardown(function()
    if ctx then ctx:close() end
  end)

  local function env(state)
    return ctx:env{
      HOME = dir,
      MASTRA_PLATFORM_STATE_DIR = state,
      MASTRA_PLATFORM_BIN = platform.binary(),
    }
  end

  -- Stop the server a state directory names, if any, and wait until it is
  -- gone (it is a daemon: not our child).
  local function stop_server(state)
    local pid = (platform.readFile(state .. "/platform.state") or ""):match("pid=(%d+)")
    if pid == nil then return end
    sb:executeCommand("kill " .. pid .. " 2>/dev/null; true")
    platform.waitUntil(function()
      return sb:executeCommand("kill -0 " .. pid .. " 2>/dev/null").exitCode ~= 0
    end, 10000)
  end

  it("4 processes x 4 tasks on a fresh state directory: all succeed, one server starts",
    function()
      local state = dir .. "/state-cold"
      local script = dir .. "/cold.lua"
      platform.writeFile(script, [[
local mastra = require "mastra"
local urls = mastra.map({ 1, 2, 3, 4 }, function()
  mastra.PlatformFilesystem.new{}
  return mastra.localPlatform().url
end, { concurrency = 4 })
for _, url in ipairs(urls) do print(url) end
]])
      finally(function() stop_server(state) end)
      local handles = {}
      for i = 1, 4 do
        local bin = i % 2 == 1 and MASTRA_LUA or "lua5.4"
        handles[i] = sb.processes:spawn(("exec %s %s"):format(quote(bin), quote(script)),
          { env = env(state), timeout = 60000 })
      end
      local t0 = mastra.now()
      local urls, started = {}, 0
      for i, h in ipairs(handles) do
        local r = h:wait()
        assert.are.equal(0, r.exitCode, ("process %d: %s"):format(i, r.stderr))
        assert.is_false(r.timedOut)
        for url in r.stdout:gmatch("[^\n]+") do urls[#urls + 1] = url end
        local _, n = r.stderr:gsub("started it", "")
        started = started + n
      end
      assert.is_true(mastra.now() - t0 < 30000, "the cold start took too long")
      assert.are.equal(16, #urls)
      for _, url in ipairs(urls) do assert.are.equal(urls[1], url) end
      assert.are.equal(1, started, "want exactly one process to start the server")
      local pid = tonumber(platform.readFile(state .. "/platform.state"):match("pid=(%d+)"))
      assert.are.equal(0, sb:executeCommand("kill -0 " .. pid).exitCode)
      -- one server on this data directory (the bracket keeps the pattern
      -- from matching the shell that runs pgrep; "serve" from matching the
      -- keepers of its warm sandboxes, whose paths are in its data
      -- directory)
      local ps = sb:executeCommand("pgrep -f -c " .. quote("serv[e] .*" .. state
        .. "/platform-data"))
      assert.are.equal("1\n", ps.stdout)
    end)

  it("a lock held elsewhere is waited for without blocking the thread, then named", function()
    local state = dir .. "/state-held"
    assert(os.execute("mkdir -p " .. quote(state)))
    -- the holder writes its pid into the lock file, as local_platform does
    local holder = sb.processes:spawn(("cd %s && echo $$ > platform.lock && exec flock"
      .. " platform.lock sleep 20"):format(quote(state)))
    finally(function()
      holder:kill()
      holder:wait()
    end)
    assert.is_true(platform.waitUntil(function()
      return sb:executeCommand("flock -n " .. quote(state .. "/platform.lock") .. " true")
        .exitCode ~= 0
    end, 5000), "the holder did not take the lock")
    local script = dir .. "/held.lua"
    platform.writeFile(script, [[
local mastra = require "mastra"
require("mastra.local_platform").lockDeadlineMs = 600
local ticks = 0
mastra.spawn(function()
  for _ = 1, 20 do mastra.sleep(10); ticks = ticks + 1 end
end)
local ok, err = pcall(mastra.localPlatform)
print(ok, ticks >= 10)
io.stderr:write(tostring(err), "\n")
]])
    local r = sb:executeCommand(quote(MASTRA_LUA) .. " " .. quote(script), nil,
      { env = env(state), timeout = 20000 })
    assert.are.equal(0, r.exitCode, r.stderr)
    -- the other task kept running while this one waited for the lock
    assert.are.equal("false\ttrue\n", r.stdout)
    assert.matches(state .. "/platform.lock", r.stderr, 1, true)
    assert.matches("held by pid " .. holder.pid, r.stderr, 1, true)
    assert.is_nil(platform.readFile(state .. "/platform.state"))
  end)

  -- A stand-in for the first start of a data directory: a script that says
  -- what the server says when it builds its base, waits 1.5 s, then execs
  -- the real server (so the pid it records is the server's).
  local function slow_binary(name, says)
    local bin = dir .. "/" .. name
    platform.writeFile(bin, ("#!/bin/sh\nif [ \"$1\" = serve ]; then\necho $$ > %s\n%s\n"
      .. "sleep 1.5\nfi\nexec %s \"$@\"\n")
      :format(quote(bin .. ".pid"), says and "echo 'mastra-platform: building the base of"
        .. " the sandboxes in X (once)' >&2" or ":", quote(platform.binary())))
    assert(os.execute("chmod +x " .. quote(bin)))
    return bin
  end

  local START = [[
local mastra = require "mastra"
require("mastra.local_platform").startMs = 500
local ok, err = pcall(mastra.localPlatform)
print(ok)
io.stderr:write(tostring(err), "\n")
]]

  it("waits past its start time for a server that says it builds its base", function()
    local state = dir .. "/state-base"
    local script = dir .. "/base.lua"
    platform.writeFile(script, START)
    finally(function() stop_server(state) end)
    local e = env(state)
    e.MASTRA_PLATFORM_BIN = slow_binary("building", true)
    local r = sb:executeCommand(quote(MASTRA_LUA) .. " " .. quote(script), nil,
      { env = e, timeout = 20000 })
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal("true\n", r.stdout, r.stderr)
    assert.matches("pid=" .. platform.readFile(dir .. "/building.pid"):gsub("%s+$", ""),
      platform.readFile(state .. "/platform.state"), 1, true)
  end)

  it("gives up on a server that is slow to start and says nothing of a base", function()
    local state = dir .. "/state-slow"
    local script = dir .. "/slow.lua"
    platform.writeFile(script, START)
    local e = env(state)
    e.MASTRA_PLATFORM_BIN = slow_binary("slow", false)
    finally(function()
      -- the server it gave up on starts anyway: a daemon, stopped here
      local pid = (platform.readFile(dir .. "/slow.pid") or ""):match("%d+")
      if pid then sb:executeCommand("kill " .. pid .. " 2>/dev/null; true") end
      platform.waitUntil(function()
        return pid == nil or sb:executeCommand("kill -0 " .. pid .. " 2>/dev/null").exitCode ~= 0
      end, 10000)
    end)
    local r = sb:executeCommand(quote(MASTRA_LUA) .. " " .. quote(script), nil,
      { env = e, timeout = 20000 })
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal("false\n", r.stdout, r.stderr)
    assert.matches("did not start within 0.5 s; see " .. state .. "/platform.log", r.stderr,
      1, true)
  end)
end)
