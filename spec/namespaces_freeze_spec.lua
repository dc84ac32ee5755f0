-- A sandbox that SIGSTOPs every process as it is born cannot delay the
-- server (issue 30 item 1; docs/platform.md, "What a `namespaces` sandbox
-- is": the rule "nothing a sandbox can do may delay the server's thread").
-- In sandbox A, spec/support/pidstop.c (MASTRA_PIDSTOP, copied in through
-- stdin) busy-watches /proc/sys/kernel/ns_last_pid and stops every new
-- pid, and in its second run the 16 pids after the last one as well, again
-- and again; meanwhile A runs commands (which it stops: they are A's), and
-- every exec of `true` in sandbox B and every GET of B is timed: each one
-- answers within 100 ms, or (on a machine so loaded that B's requests take
-- longer with no attack at all) within three times the slowest of the same
-- requests timed before the attack, with the same load in A (a busy loop
-- and its exec loops) but nothing stopped. A frozen server took seconds.
-- The attack must have stopped some of A's processes. At the end SIGTERM
-- stops the server within a few seconds and no process of it or of its
-- sandboxes is left. Skipped without root.
local client = require "mastra.platform_client"
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local trim = util.trim

local ROUNDS = 50        -- timed requests to B of each kind, per attack
local BUDGET_MS = 100    -- each of them answers within this (or, under load,
local LOAD_FACTOR = 3    -- this times the slowest without an attack)
local A_TASKS = 4        -- concurrent exec loops in A

local function figure(fmt, ...)
  if os.getenv("MASTRA_SPEC_FIGURES") then io.stderr:write(fmt:format(...), "\n") end
end

local function skip_reason()
  local p = io.popen("id -u")
  local uid = trim(p:read("a"))
  p:close()
  if uid ~= "0" then
    return "the namespaces driver needs root here (uid " .. uid .. "): skipped"
  end
  return nil
end

-- pid -> start time (field 22 of /proc/PID/stat) of pid and all its
-- descendants
local function tree(root)
  local parent, start = {}, {}
  local p = io.popen("cat /proc/[0-9]*/stat 2>/dev/null")
  for line in p:read("a"):gmatch("[^\n]+") do
    local pid, rest = line:match("^(%d+) %b() (.*)$")
    if pid then
      local f = {}
      for w in rest:gmatch("%S+") do f[#f + 1] = w end
      -- rest starts at field 3 (state): ppid is field 4, starttime 22
      parent[tonumber(pid)] = tonumber(f[2])
      start[tonumber(pid)] = f[20]
    end
  end
  p:close()
  local out, changed = { [root] = start[root] }, true
  while changed do
    changed = false
    for pid, pp in pairs(parent) do
      if out[pid] == nil and out[pp] ~= nil then
        out[pid] = start[pid]
        changed = true
      end
    end
  end
  return out
end

local function still_there(pids)
  local left = {}
  for pid, st in pairs(pids) do
    local s = util.read_file("/proc/" .. pid .. "/stat")
    local rest = s and s:match("^%d+ %b() (.*)$")
    if rest then
      local f = {}
      for w in rest:gmatch("%S+") do f[#f + 1] = w end
      if f[20] == st and f[1] ~= "Z" then left[#left + 1] = pid .. " (" .. f[1] .. ")" end
    end
  end
  return left
end

describe("a sandbox that stops every new pid", function()
  local reason = skip_reason()
  if reason then
    pending(reason)
    return
  end

  local srv

  after_each(function()
    if srv then srv:close() end
    srv = nil
  end)

  it("cannot delay another sandbox's exec or GET past 100 ms, and SIGTERM stops the"
    .. " server", function()
    local bin = os.getenv("MASTRA_PIDSTOP")
    assert(bin and bin ~= "", "MASTRA_PIDSTOP is not set: it must name"
      .. " build/spec-support/pidstop (CTest sets it)")
    local code = assert(util.read_file(bin), bin)
    srv = platform.start{ args = { "--driver", "namespaces" } }
    local a, b = srv:startSandbox(), srv:startSandbox()
    local r = a:executeCommand("cat > /workspace/pidstop && chmod 755 /workspace/pidstop",
      nil, { stdin = code })
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal(0, b:executeCommand("true").exitCode)
    local cfg = client.resolve({ accessToken = srv.token, proxyUrl = srv.url,
      projectId = "proj" }, "spec")
    local function exec(id, timeoutSec, waitMs)
      return client.request(cfg, "POST", "/sandbox/" .. id .. "/exec",
        { json = { command = "true", timeoutSec = timeoutSec }, timeout = waitMs })
    end

    -- the same requests with the same load and no attack: A runs a busy loop
    -- (as pidstop busy-watches) and its exec loops, but stops nothing; what
    -- the machine's load costs B's requests is its slowest
    local spinner = a.processes:spawn("while :; do :; done")
    local quiet_running, quiet_tasks = true, {}
    for t = 1, A_TASKS do
      quiet_tasks[t] = mastra.spawn(function()
        while quiet_running do pcall(exec, a.sandboxId, 1, 20000) end
      end)
    end
    local quiet = 0
    for _ = 1, ROUNDS do
      local t0 = mastra.now()
      assert.are.equal(0, exec(b.sandboxId, 5, 3000).json.exitCode)
      quiet = math.max(quiet, mastra.now() - t0)
      t0 = mastra.now()
      client.request(cfg, "GET", "/sandbox/" .. b.sandboxId, { timeout = 3000 })
      quiet = math.max(quiet, mastra.now() - t0)
      mastra.sleep(20)
    end
    quiet_running = false
    for _, t in ipairs(quiet_tasks) do t:wait() end
    spinner:kill()
    local budget = math.max(BUDGET_MS, LOAD_FACTOR * quiet)
    figure("no attack: the slowest of %d requests to B %.1f ms; budget %.1f ms", 2 * ROUNDS,
      quiet, budget)

    for _, mode in ipairs{ "new", "ahead 16" } do
      local out = {}
      local attacker = a.processes:spawn("/workspace/pidstop " .. mode .. " 10", {
        onStdout = function(s) out[#out + 1] = s end })
      -- it watches once its first pid is read
      mastra.sleep(300)
      assert.is_nil(attacker.exitCode, table.concat(out))
      -- A's commands: each may be stopped (its timeout then kills it)
      local running, a_runs = true, 0
      local tasks = {}
      for t = 1, A_TASKS do
        tasks[t] = mastra.spawn(function()
          while running do
            pcall(exec, a.sandboxId, 1, 20000)
            a_runs = a_runs + 1
          end
        end)
      end
      local worst, worst_what, n, failed = 0, nil, 0, nil
      local function timed(what, fn)
        local t0 = mastra.now()
        local ok, err = pcall(fn)
        local dt = mastra.now() - t0
        n = n + 1
        if dt > worst then worst, worst_what = dt, what end
        if not ok then failed = what .. ": " .. tostring(err) end
        return ok and dt <= 1000
      end
      for i = 1, ROUNDS do
        if not timed("exec " .. i, function()
          local res = exec(b.sandboxId, 5, 3000)
          assert(res.json.exitCode == 0, res.body)
        end) then break end
        if not timed("GET " .. i, function()
          client.request(cfg, "GET", "/sandbox/" .. b.sandboxId, { timeout = 3000 })
        end) then break end
        mastra.sleep(20)
      end
      running = false
      figure("pidstop %s: %d requests to B, the slowest %.1f ms (%s); %d execs in A so far",
        mode, n, worst, tostring(worst_what), a_runs)
      assert.is_nil(failed)
      assert.are.equal(2 * ROUNDS, n)
      assert.is_true(worst <= budget, ("pidstop %s: %s took %.1f ms (budget %.1f ms)")
        :format(mode, worst_what, worst, budget))
      for _, t in ipairs(tasks) do t:wait() end
      local res = attacker:wait()
      local stopped = tonumber(table.concat(out):match("stopped (%d+)"))
      figure("pidstop %s: %d execs in A, %s of A's pids stopped", mode, a_runs,
        tostring(stopped))
      assert.are.equal(0, res.exitCode, res.stderr)
      -- the attack hit A's own commands
      assert.is_true(stopped ~= nil and stopped > 0, table.concat(out))
    end

    -- SIGTERM: the server exits within a few seconds, and takes every
    -- process of its sandboxes (stopped ones included) with it
    local pids = tree(srv.pid)
    srv:sh("kill -TERM " .. srv.pid)
    local t0 = mastra.now()
    assert.is_true(platform.waitUntil(function() return not srv:running() end, 5000),
      "the server did not exit within 5 s of SIGTERM")
    figure("SIGTERM to exit: %.0f ms (%d processes)", mastra.now() - t0,
      (function() local k = 0 for _ in pairs(pids) do k = k + 1 end return k end)())
    assert.are.equal(0, srv.handle.exitCode, srv.stderrTail)
    local left
    assert.is_true(platform.waitUntil(function()
      left = still_there(pids)
      return #left == 0
    end, 3000), "left running: " .. table.concat(left or {}, ", "))
    srv:close()
    srv = nil
  end)
end)
