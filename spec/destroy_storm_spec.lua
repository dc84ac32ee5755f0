-- A destroy that means it (issue 28 item 2; docs/platform.md, "Destroy"):
-- a DELETE answers only once no process of the sandbox is left on the
-- host. Each round starts a fork storm in a sandbox (a loop that forks for
-- ever, a fan-out of sleepers, double-forked daemons in their own
-- sessions, all deaf to SIGTERM, and a running command that forks too),
-- beside CPU hogs, destroys it, and scans the host right after the answer:
-- no live process carries the sandbox's marker or sits in its cgroup, and
-- its cgroups are gone. The same for both drivers, for an idle reaping
-- (once GET says "destroyed"), for the server's exit on SIGTERM, and the
-- deadline (--destroy-wait) when something keeps the sandbox from
-- emptying: the DELETE answers 500 saying so, and a later one waits again.
local lfs = require "lfs"
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local ROUNDS = 5
local HOGS = 2

local is_root = util.is_root

-- {====== the host

-- the live processes of sandbox id on the host: its marker in their
-- environment, or its cgroup (the namespaces driver's keeper and init,
-- and what cleared its environment); "pid (command line)" each
local function left_on_host(id)
  local marker, found = "\0MASTRA_SANDBOX_ID=" .. id .. "\0", {}
  for name in lfs.dir("/proc") do
    local pid = tonumber(name)
    if pid then
      local stat = util.read_file("/proc/" .. name .. "/stat") or ""
      local state = stat:match(".*%) (%a)")
      if state ~= nil and state ~= "Z" then
        local env = "\0" .. (util.read_file("/proc/" .. name .. "/environ") or "") .. "\0"
        local cg = util.read_file("/proc/" .. name .. "/cgroup") or ""
        if env:find(marker, 1, true) or cg:find("/" .. id .. "\n", 1, true) then
          local cmd = (util.read_file("/proc/" .. name .. "/cmdline") or ""):gsub("%z", " ")
          found[#found + 1] = ("%d %s (%s)"):format(pid, state, cmd)
        end
      end
    end
  end
  return found
end

-- the cgroup directories of sandbox id (v1 and v2)
local function cgroups(id)
  local p = io.popen("ls -d /sys/fs/cgroup/*/mastra-platform/*/" .. id
    .. " /sys/fs/cgroup/mastra-platform/*/" .. id .. " 2>/dev/null")
  local out = p:read("a")
  p:close()
  return out
end

-- the cgroups of data directory dir (mastra-platform/<12 hex of its
-- SHA-256>): its sandboxes' and its warm pool's
local function data_cgroups(dir)
  local p = io.popen("printf %s " .. mastra.quote(dir) .. " | sha256sum | cut -c1-12")
  local hex = p:read("a"):gsub("%s", "")
  p:close()
  p = io.popen("ls -d /sys/fs/cgroup/*/mastra-platform/" .. hex
    .. " /sys/fs/cgroup/mastra-platform/" .. hex .. " 2>/dev/null")
  local out = p:read("a")
  p:close()
  return out
end

local function assert_nothing_left(id, when)
  local left = left_on_host(id)
  assert(#left == 0, ("%s: %d process(es) of %s still on the host:\n%s")
    :format(when, #left, id, table.concat(left, "\n", 1, math.min(#left, 10))))
  assert(cgroups(id) == "", when .. ": cgroups of " .. id .. " left:\n" .. cgroups(id))
end

-- }======

-- {====== the storm and the load

-- shell text that starts the storm and returns; fan: how many sleepers
local function storm(fan)
  return table.concat({
    "(trap '' TERM; while :; do sleep 30 & sleep 0.005; done) </dev/null >/dev/null 2>&1 &",
    ("(trap '' TERM; for i in $(seq %d); do sleep 30 & done; wait) </dev/null >/dev/null 2>&1 &")
      :format(fan),
    "(setsid sh -c 'trap \"\" TERM; (sleep 30 &); while :; do sleep 30; done'"
      .. " </dev/null >/dev/null 2>&1 &)",
    "(setsid sh -c 'trap \"\" TERM HUP; while :; do (sleep 30 &); sleep 0.05; done'"
      .. " </dev/null >/dev/null 2>&1 &)",
    "sleep 0.3; echo started",
  }, "\n")
end

-- a command that runs when the destroy comes: forks, deaf to SIGTERM
local RUNNING = "trap '' TERM; while :; do sleep 30 & sleep 0.01; done"

local hogs

local function start_hogs()
  hogs = mastra.LocalSandbox.new{}
  hogs:start()
  for _ = 1, HOGS do
    hogs.processes:spawn("exec timeout 280 sh -c 'while :; do :; done'")
  end
end

local function stop_hogs()
  if hogs then
    hogs:destroy()
    hogs = nil
  end
end

-- a sandbox of srv in its storm, with RUNNING running in a task; returns
-- the sandbox and the task
local function stormy(srv, fan, extra)
  local sb = srv:startSandbox(extra)
  local r = sb:executeCommand(storm(fan), nil, { timeout = 60000 })
  assert.are.equal("started\n", r.stdout)
  local running = mastra.spawn(function()
    return pcall(sb.executeCommand, sb, RUNNING, nil, { timeout = 60000 })
  end)
  mastra.sleep(200)
  local before = #left_on_host(sb.sandboxId)
  assert(before > 20, "the storm runs: " .. before .. " processes")
  return sb, running
end

-- }======

local function with_server(opts, fn)
  local srv = platform.start(opts)
  local ok, err = pcall(fn, srv)
  srv:close()
  assert(ok, err)
end

local drivers = { { name = "process", fan = 300 } }
if is_root() then drivers[#drivers + 1] = { name = "namespaces", fan = 5000 } end

describe("a destroy", function()
  setup(start_hogs)
  teardown(stop_hogs)

  for _, d in ipairs(drivers) do
    it("leaves no process on the host when it answers (" .. d.name .. ", "
      .. ROUNDS .. " fork storms under load)", function()
      with_server({ driver = d.name }, function(srv)
        for round = 1, ROUNDS do
          local sb, running = stormy(srv, d.fan)
          local id = sb.sandboxId
          sb:destroy()
          assert_nothing_left(id, ("round %d, right after the DELETE"):format(round))
          assert.are.equal("destroyed",
            srv:json("GET", "/v1/railway/projects/proj/sandbox/" .. id).json.status)
          -- the running command ended (a result or an error), once
          assert.is_true(util.wait_until(function() return running:done() end, 10000),
            "the command of round " .. round .. " never ended")
          running:wait()
        end
      end)
    end)

    it("leaves no process once an idle reaping says destroyed (" .. d.name .. ")", function()
      with_server({ driver = d.name }, function(srv)
        local sb = srv:startSandbox{ idleTimeoutMinutes = 0.01 }
        assert.are.equal("started\n", sb:executeCommand(storm(d.fan), nil,
          { timeout = 60000 }).stdout)
        local id, status = sb.sandboxId, nil
        assert.is_true(util.wait_until(function()
          status = srv:json("GET", "/v1/railway/projects/proj/sandbox/" .. id).json.status
          return status == "destroyed"
        end, 20000, 5), "never reaped: " .. tostring(status))
        assert_nothing_left(id, "right after GET said destroyed")
        sb:destroy() -- of a destroyed sandbox: 204 at once
      end)
    end)

    it("leaves no process when the server exits on SIGTERM (" .. d.name .. ")", function()
      local srv = platform.start{ driver = d.name }
      local ok, err = pcall(function()
        local a, running = stormy(srv, d.fan)
        local b, running_b = stormy(srv, d.fan)
        local ids = { a.sandboxId, b.sandboxId }
        srv:stop() -- raises unless it exits 0
        for _, id in ipairs(ids) do assert_nothing_left(id, "after the server's exit") end
        -- nor of the warm pool's members (pool-<n> cgroups, under the
        -- data directory's, which is gone)
        assert.are.equal("", data_cgroups(srv.dataDir))
        for _, t in ipairs{ running, running_b } do
          -- a resumable exec's client tries to reattach for 10 s of
          -- refused connections before it says the platform is gone
          assert.is_true(util.wait_until(function() return t:done() end, 30000))
          t:wait()
        end
      end)
      srv:close()
      assert(ok, err)
    end)
  end

  it("answers 500 saying what is left past --destroy-wait, and waits again", function()
    -- a process marked as the sandbox's, started on the host outside it
    -- and frozen (the v1 freezer): a SIGKILL stays pending until it is
    -- thawed, so every check of the server finds it, however loaded the
    -- machine is
    local freezer = "/sys/fs/cgroup/freezer"
    if not is_root() or lfs.attributes(freezer, "mode") ~= "directory" then
      pending("needs root and the cgroup v1 freezer (" .. freezer .. ")")
      return
    end
    local cg = ("%s/mastra-spec-%d-%d"):format(freezer, math.floor(mastra.now() * 1000),
      math.random(1e6))
    assert(lfs.mkdir(cg))
    local function state(v)
      local f = assert(io.open(cg .. "/freezer.state", v and "w" or "r"))
      local r = v and f:write(v) or f:read("a")
      f:close()
      return r
    end
    local feeder = mastra.LocalSandbox.new{}
    local ok, err = pcall(with_server, { driver = "process", args = { "--destroy-wait", "1" } },
      function(srv)
      local sb = srv:startSandbox()
      assert.are.equal(0, sb:executeCommand("true").exitCode)
      local id = sb.sandboxId
      feeder:start()
      local h = feeder.processes:spawn(("echo $$ > %s/cgroup.procs && MASTRA_SANDBOX_ID=%s"
        .. " exec sleep 300"):format(mastra.quote(cg), id))
      assert.is_true(util.wait_until(function() return #left_on_host(id) == 1 end, 5000),
        "the marked sleeper did not start")
      state("FROZEN")
      assert.is_true(util.wait_until(function() return state():find("FROZEN") end, 5000))
      local t0 = mastra.now()
      local dok, derr = pcall(sb.destroy, sb)
      assert.is_false(dok)
      assert.are.equal(500, derr.status)
      assert.matches("still on the host", derr.message, 1, true)
      assert.matches("--destroy-wait", derr.message, 1, true)
      assert.is_true(mastra.now() - t0 >= 900, "answered after " .. (mastra.now() - t0))
      assert.are.equal("destroying",
        srv:json("GET", "/v1/railway/projects/proj/sandbox/" .. id).json.status)
      assert.is_true(util.wait_until(function()
        return srv.stderrTail:find("still on the host", 1, true) ~= nil
      end, 5000), "not logged: " .. srv.stderrTail)
      -- thawed, the sleeper meets its pending SIGKILL: the next destroy
      -- waits for it, then answers 204
      state("THAWED")
      sb:destroy()
      assert_nothing_left(id, "after the second DELETE")
      assert.are.equal("destroyed",
        srv:json("GET", "/v1/railway/projects/proj/sandbox/" .. id).json.status)
      h:wait()
    end)
    pcall(state, "THAWED")
    feeder:destroy()
    util.wait_until(function() return lfs.rmdir(cg) ~= nil end, 5000)
    assert(ok, err)
  end)
end)
