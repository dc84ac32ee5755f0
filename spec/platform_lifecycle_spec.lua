-- mastra-platform lifecycle: nothing a sandbox runs outlives its owner.
-- The default idle timeout (--default-idle-minutes) reaps forgotten
-- sandboxes, never running ones; a server restarted after kill -9 kills
-- what the previous one started; SIGTERM (during a legacy exec too) leaves
-- nothing running; a client that dies takes its command with it.
-- Needs MASTRA_PLATFORM and MASTRA_WS_EXEC (set by CTest).
--
-- Commands are `sleep <unique number>`: a process is found by its exact
-- command line in /proc, and whatever a failing spec leaves is killed by
-- the same number.
local lfs = require "lfs"
local mastra = require "mastra"
local platform = require "spec.support.platform"

local null = platform.null
local P = "/v1/railway/projects/proj-life"

-- {====== helpers ======

-- a number no other run of this spec uses at the same time
local next_seconds = 3117000 + math.random(0, 899) * 100
local function unique_seconds()
  next_seconds = next_seconds + 1
  return tostring(next_seconds)
end

-- pids of live (not zombie) processes whose command line is `sleep <n>`
local function sleepers(n)
  local want = "sleep\0" .. n .. "\0"
  local found = {}
  for name in lfs.dir("/proc") do
    if name:match("^%d+$") and platform.readFile("/proc/" .. name .. "/cmdline") == want then
      local stat = platform.readFile("/proc/" .. name .. "/stat")
      local state = stat and stat:match(".*%) (%a)")
      if state ~= nil and state ~= "Z" then found[#found + 1] = tonumber(name) end
    end
  end
  return found
end

local function all_gone(numbers)
  for _, n in ipairs(numbers) do
    if #sleepers(n) > 0 then return false end
  end
  return true
end

local function all_running(numbers)
  for _, n in ipairs(numbers) do
    if #sleepers(n) == 0 then return false end
  end
  return true
end

-- which of numbers still have a live sleeper, for messages
local function alive_list(numbers)
  local out = {}
  for _, n in ipairs(numbers) do
    if #sleepers(n) > 0 then out[#out + 1] = "sleep " .. n end
  end
  return table.concat(out, ", ")
end

-- the last resort of a failing spec: SIGKILL what it started
local function kill_sleepers(numbers)
  for _, n in ipairs(numbers) do
    for _, pid in ipairs(sleepers(n)) do os.execute("kill -9 " .. pid .. " 2>/dev/null") end
  end
end

-- whether the server's log (read as it arrives) shows text within 2 s
local function logged(srv, text)
  return platform.waitUntil(function() return srv.stderrTail:find(text, 1, true) ~= nil end,
    2000)
end

local function start(dir, args)
  return platform.start{ dataDir = dir .. "/data", tokenFile = dir .. "/token", args = args }
end

local function create(srv, body)
  local r = srv:json("POST", P .. "/sandbox", body)
  assert.are.equal(201, r.status, "POST /sandbox: " .. r.body)
  return r.json
end

local function get(srv, id)
  local r = srv:curl("GET", P .. "/sandbox/" .. id)
  assert.are.equal(200, r.status, r.body)
  return r.json
end

local function destroyed(srv, id)
  return get(srv, id).destroyedAt ~= null
end

-- POST /sandbox/{id}/exec with curl, in the background: the handle (its pid
-- is curl's; stdout gets the HTTP status, the body goes to a file).
local function legacy_spawn(srv, id, command)
  local body = srv.scratch .. "/legacy-body-" .. unique_seconds()
  platform.writeFile(body, platform.encode{ command = command })
  local words = { "curl", "-s", "-o", body .. ".out", "-w", "%{http_code}",
    "-H", "Authorization: Bearer " .. srv.token, "-H", "Content-Type: application/json",
    "--data-binary", "@" .. body, srv.url .. P .. "/sandbox/" .. id .. "/exec" }
  local quoted = {}
  for i, w in ipairs(words) do quoted[i] = mastra.quote(w) end
  local h = srv.sandbox.processes:spawn("exec " .. table.concat(quoted, " "))
  h.bodyFile = body .. ".out"
  return h
end

-- ws-exec in the background, as the process itself (its pid is ws-exec's)
local function ws_spawn(srv, lease, command)
  return srv.sandbox.processes:spawn("exec " .. platform.wsExecCommandLine(lease, command))
end

-- Run body(ctx); then stop the servers in ctx.servers (SIGTERM, exit 0
-- expected), kill the sleepers in ctx.numbers and remove ctx.dir; the
-- first failure is raised after the cleanup.
local function with_cleanup(body)
  local ctx = { servers = {}, numbers = {}, dir = platform.tmpdir() }
  local ok, err = pcall(body, ctx)
  for _, srv in ipairs(ctx.servers) do
    local stopped, why = pcall(srv.stop, srv)
    if not stopped then
      srv:kill9()
      if ok then ok, err = false, why end
    end
  end
  kill_sleepers(ctx.numbers)
  platform.rm_rf(ctx.dir)
  if not ok then error(err, 0) end
end

local function numbers(ctx, count)
  local out = {}
  for i = 1, count do
    out[i] = unique_seconds()
    ctx.numbers[#ctx.numbers + 1] = out[i]
  end
  return out
end

-- with_cleanup around a server started with args: body(ctx, srv, n, sb)
-- gets `count` unique numbers and a sandbox created without options.
local function with_server(args, count, body)
  with_cleanup(function(ctx)
    local srv = start(ctx.dir, args)
    ctx.servers[1] = srv
    local n = numbers(ctx, count)
    body(ctx, srv, n, create(srv, { environmentId = "env" }))
  end)
end

-- }======

describe("mastra-platform default idle timeout (--default-idle-minutes)", function()
  local MINUTES = 0.1 -- 6 s: time enough to start a command on a busy machine

  it("reaps a sandbox created without idleTimeoutMinutes and keeps its checkpoint", function()
    with_cleanup(function(ctx)
      local srv = start(ctx.dir, { "--default-idle-minutes", tostring(MINUTES) })
      ctx.servers[1] = srv
      local sb = create(srv, { id = "idle-key", environmentId = "env" })
      local own = create(srv, { environmentId = "env", idleTimeoutMinutes = 60 })
      local w = srv:wsExec(srv:lease(P, sb.id), "echo kept > kept.txt")
      assert.are.equal(0, w.exitCode, w.stderr)
      local t0 = mastra.now()
      assert.is_true(platform.waitUntil(function() return destroyed(srv, sb.id) end, 20000, 200),
        "a sandbox without idleTimeoutMinutes was not reaped within 20 s (default 6 s)")
      assert.is_true(mastra.now() - t0 > 4000, ("reaped %.0f ms after its last command, before"
        .. " its 6 s idle timeout"):format(mastra.now() - t0))
      assert.is_false(destroyed(srv, own.id), "a sandbox with idleTimeoutMinutes = 60 was reaped")
      -- the checkpoint was kept: the same recovery key comes back with the tree
      local again = create(srv, { id = "idle-key", environmentId = "env", idleTimeoutMinutes = 60 })
      assert.is_true(again.restoredFromCheckpoint)
      local c = srv:wsExec(srv:lease(P, again.id), "cat kept.txt")
      assert.are.equal("kept\n", c.stdout, c.stderr)
    end)
  end)

  it("never reaps a sandbox while a command runs in it; reaps it after", function()
    with_server({ "--default-idle-minutes", tostring(MINUTES) }, 1, function(_, srv, n, sb)
      local h = ws_spawn(srv, srv:lease(P, sb.id),
        "sleep " .. n[1] .. " & sleep 10; kill $!; echo done")
      assert.is_true(platform.waitUntil(function() return all_running(n) end, 10000),
        "the command did not start")
      mastra.sleep(8000) -- past the 6 s idle timeout, while the command runs
      assert.is_false(destroyed(srv, sb.id), "a sandbox with a running command was reaped")
      assert.is_true(platform.waitUntil(function() return h.exitCode ~= nil end, 20000),
        "ws-exec did not finish")
      local res = platform.wsResult(h.stdout, h.stderr, h.exitCode)
      assert.are.equal(0, res.exitCode, table.concat(res.summary.log, " / "))
      assert.are.equal("done\n", res.stdout)
      assert.is_true(platform.waitUntil(function() return destroyed(srv, sb.id) end, 20000, 200),
        "the sandbox was not reaped after its command ended")
    end)
  end)

  it("lets --idle-exit fire once the sandboxes are reaped", function()
    with_cleanup(function(ctx)
      local srv = start(ctx.dir, { "--default-idle-minutes", "0.02", "--idle-exit", "1" })
      ctx.servers[1] = srv
      local sb = create(srv, { environmentId = "env" })
      assert.is_true(platform.waitUntil(function() return not srv:running() end, 30000, 100),
        "the server did not exit after its only sandbox was reaped")
      assert.are.equal(0, srv.handle.exitCode, srv.stderrTail)
      assert.is_true(logged(srv, "sandbox " .. sb.id .. " idle"), srv.stderrTail)
    end)
  end)

  it("refuses a --default-idle-minutes that is not a number of minutes", function()
    for _, bad in ipairs{ "-1", "abc", "", "1e9" } do
      local f = assert(io.popen(mastra.quote(platform.binary()) .. " serve --default-idle-minutes "
        .. mastra.quote(bad) .. " --data-dir /nonexistent/never-created 2>&1; echo \"rc=$?\""))
      local out = f:read("a")
      f:close()
      assert.matches("rc=2\n$", out, nil, false, bad)
      assert.matches("--default-idle-minutes wants a number of minutes", out, 1, true)
    end
  end)
end)

describe("mastra-platform restart after kill -9", function()
  it("kills every command the previous server started; the sandbox stays live, stopped",
    function()
      with_cleanup(function(ctx)
        local srv = start(ctx.dir)
        ctx.servers[1] = srv
        -- in the group, escaped with setsid, with a cleared environment, the
        -- leader itself; and a legacy exec
        local n = numbers(ctx, 5)
        local sb = create(srv, { environmentId = "env" })
        local lease = srv:lease(P, sb.id)
        assert.are.equal(0, srv:wsExec(lease, "echo before > tree.txt").exitCode)
        ws_spawn(srv, lease, ("sleep %s & setsid sleep %s & env -i sleep %s & exec sleep %s")
          :format(n[1], n[2], n[3], n[4]))
        legacy_spawn(srv, sb.id, "exec sleep " .. n[5])
        assert.is_true(platform.waitUntil(function() return all_running(n) end, 10000),
          "the commands did not start: missing " .. alive_list(n))
        srv:kill9()
        table.remove(ctx.servers)
        -- the leaders die with the server (their parent-death signal)
        assert.is_true(platform.waitUntil(function() return all_gone{ n[4], n[5] } end, 3000),
          "a command's leader outlived the server: " .. alive_list{ n[4], n[5] })
        local srv2 = start(ctx.dir)
        ctx.servers[1] = srv2
        -- killed before the server serves (SIGKILL: gone at once)
        assert.is_true(platform.waitUntil(function() return all_gone(n) end, 500),
          "still running after the restart: " .. alive_list(n))
        local rec = get(srv2, sb.id)
        -- the process driver kills them from its run files; the namespaces
        -- driver's died with their sandbox's init (it keeps none)
        if rec.driver == "process" then
          assert.is_true(logged(srv2, "left running by a previous server"), srv2.stderrTail)
        end
        assert.are.equal(null, rec.destroyedAt)
        assert.are.equal("ready", rec.status)
        local c = srv2:wsExec(srv2:lease(P, sb.id), "cat tree.txt")
        assert.are.equal(0, c.exitCode, c.stderr)
        assert.are.equal("before\n", c.stdout)
        -- nothing of the previous server is left in the run files
        local run = {}
        local base = ctx.dir .. "/data/state/run"
        -- (the namespaces driver keeps no run files: no directory)
        if lfs.attributes(base) then
          for boot in lfs.dir(base) do
            if boot ~= "." and boot ~= ".." then
              for f in lfs.dir(base .. "/" .. boot) do
                if f ~= "." and f ~= ".." then run[#run + 1] = boot .. "/" .. f end
              end
            end
          end
        end
        assert.are.same({}, run)
      end)
    end)

  it("a restart after a clean stop kills nothing and finds nothing to kill", function()
    with_cleanup(function(ctx)
      local srv = start(ctx.dir)
      ctx.servers[1] = srv
      local sb = create(srv, { environmentId = "env" })
      assert.are.equal(0, srv:wsExec(srv:lease(P, sb.id), "true").exitCode)
      assert.are.equal(0, srv:stop())
      local srv2 = start(ctx.dir)
      ctx.servers[1] = srv2
      assert.is_nil(srv2.stderrTail:find("previous server", 1, true), srv2.stderrTail)
      assert.are.equal(null, get(srv2, sb.id).destroyedAt)
    end)
  end)
end)

describe("mastra-platform stop and destroy leave nothing running", function()
  it("SIGTERM kills the background processes of every sandbox, escaped ones too", function()
    with_server(nil, 2, function(ctx, srv, n, sb)
      local w = srv:wsExec(srv:lease(P, sb.id), ("sleep %s >/dev/null 2>&1 &"
        .. " setsid sleep %s >/dev/null 2>&1 & echo started"):format(n[1], n[2]))
      assert.are.equal("started\n", w.stdout, w.stderr)
      assert.is_true(platform.waitUntil(function() return all_running(n) end, 5000))
      assert.are.equal(0, srv:stop())
      table.remove(ctx.servers)
      assert.is_true(platform.waitUntil(function() return all_gone(n) end, 1000),
        "still running after the server exited: " .. alive_list(n))
    end)
  end)

  it("SIGHUP stops the server like SIGTERM: exit 0, nothing left running", function()
    with_server(nil, 1, function(ctx, srv, n, sb)
      local w = srv:wsExec(srv:lease(P, sb.id), ("setsid sleep %s >/dev/null 2>&1 & echo ok")
        :format(n[1]))
      assert.are.equal(0, w.exitCode, w.stderr)
      assert.is_true(platform.waitUntil(function() return all_running(n) end, 5000))
      srv:sh("kill -HUP " .. srv.pid)
      assert.is_true(platform.waitUntil(function() return not srv:running() end, 15000),
        "the server did not exit after SIGHUP")
      assert.are.equal(0, srv.handle.exitCode, srv.stderrTail)
      assert.is_true(all_gone(n), "still running after the server exited: " .. alive_list(n))
      assert.are.equal(0, srv:stop())
      table.remove(ctx.servers)
    end)
  end)

  it("DELETE kills what the sandbox's commands left running", function()
    with_server(nil, 2, function(_, srv, n, sb)
      local other = create(srv, { environmentId = "env" })
      local lease = srv:lease(P, sb.id)
      assert.are.equal(0, srv:wsExec(lease, ("setsid sleep %s >/dev/null 2>&1 & echo ok")
        :format(n[1])).exitCode)
      assert.are.equal(0, srv:wsExec(srv:lease(P, other.id),
        ("setsid sleep %s >/dev/null 2>&1 & echo ok"):format(n[2])).exitCode)
      assert.is_true(platform.waitUntil(function() return all_running(n) end, 5000))
      assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. sb.id).status)
      assert.is_true(platform.waitUntil(function() return all_gone{ n[1] } end, 1000),
        "a process of the destroyed sandbox still runs")
      assert.are.equal(1, #sleepers(n[2]), "a process of another sandbox was killed")
    end)
  end)
end)

describe("mastra-platform legacy exec lifecycle", function()
  it("SIGTERM during a legacy exec exits 0 and no command runs after", function()
    with_server(nil, 2, function(ctx, srv, n, sb)
      local h1 = legacy_spawn(srv, sb.id, "sleep " .. n[1])
      local h2 = legacy_spawn(srv, sb.id, "trap '' TERM; sleep " .. n[2] .. "; true")
      assert.is_true(platform.waitUntil(function() return all_running(n) end, 10000),
        "the commands did not start")
      srv:sh("kill -TERM " .. srv.pid)
      assert.is_true(platform.waitUntil(function() return not srv:running() end, 15000),
        "the server did not exit after SIGTERM")
      assert.are.equal(0, srv.handle.exitCode, srv.stderrTail)
      assert.is_nil(srv.handle.signal, srv.stderrTail)
      assert.is_true(all_gone(n), "still running after the server exited: " .. alive_list(n))
      -- each client got an answer or a closed connection, never a hang
      for _, h in ipairs{ h1, h2 } do
        assert.is_true(platform.waitUntil(function() return h.exitCode ~= nil end, 5000),
          "curl still waits after the server exited")
      end
      assert.are.equal(0, srv:stop())
      table.remove(ctx.servers)
    end)
  end)

  it("a legacy exec whose client is killed kills its command; the sandbox is then reaped",
    function()
      with_server({ "--default-idle-minutes", "0.1" }, 1, function(_, srv, n, sb)
        local h = legacy_spawn(srv, sb.id, "sleep " .. n[1])
        assert.is_true(platform.waitUntil(function() return all_running(n) end, 10000),
          "the command did not start")
        srv:sh("kill -KILL " .. h.pid)
        assert.is_true(platform.waitUntil(function() return all_gone(n) end, 3000),
          "the command outlived its client by 3 s")
        assert.is_true(logged(srv, "the client went away"), srv.stderrTail)
        assert.is_true(platform.waitUntil(function() return destroyed(srv, sb.id) end, 20000, 200),
          "the sandbox was not reaped after its client left")
        -- the server goes on serving legacy execs
        local other = create(srv, { environmentId = "env", idleTimeoutMinutes = 60 })
        local r = srv:json("POST", P .. "/sandbox/" .. other.id .. "/exec",
          { command = "echo fine" })
        assert.are.equal(200, r.status, r.body)
        assert.are.equal("fine\n", r.json.stdout)
      end)
    end)
end)

describe("mastra-platform exec WebSocket of a dead client", function()
  it("a client killed with SIGKILL takes its command with it", function()
    with_server(nil, 2, function(_, srv, n, sb)
      local h = ws_spawn(srv, srv:lease(P, sb.id), ("sleep %s & exec sleep %s"):format(n[1], n[2]))
      assert.is_true(platform.waitUntil(function() return all_running(n) end, 10000),
        "the command did not start")
      srv:sh("kill -KILL " .. h.pid)
      assert.is_true(platform.waitUntil(function() return all_gone(n) end, 3000),
        "the command outlived its client by 3 s: " .. alive_list(n))
    end)
  end)
end)
