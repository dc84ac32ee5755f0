-- PlatformSandbox:detach() and what the handle started (issue 29 item 1):
-- a command or background process is bound to the sandbox it started on,
-- so nothing of it runs in another sandbox, even when its task starts
-- after the detach; a detached or destroyed handle refuses new work with
-- an error that says so; keepRunning processes are handed to the platform
-- by detach() and ended by a destroy; and a checkpoint survives the
-- capture of another sandbox that merely shares its key (the server side,
-- with two live sandboxes of one key as an older server could leave them).
-- Against a real mastra-platform; the script cases run in child processes
-- (mastra-lua) as a user runs them.
local mastra = require "mastra"
local platform = require "spec.support.platform"
local child = require "spec.support.child"
local util = require "spec.support.util"

local quote = mastra.quote
local P = "/v1/railway/projects/proj"

-- The sandbox records of srv whose recovery key is `key`: {id = destroyed?}
local function records_of(srv, key)
  local dir = srv.dataDir .. "/state/sandboxes"
  local r = srv:sh("ls -A " .. quote(dir))
  local out, n = {}, 0
  for name in r.stdout:gmatch("[^\n]+") do
    local rec = platform.decode(platform.readFile(dir .. "/" .. name) or "")
    if type(rec) == "table" and rec.recoveryKey == key then
      out[rec.id] = (rec.destroyedMs or 0) > 0
      n = n + 1
    end
  end
  return out, n
end

local function live_count(records)
  local n = 0
  for _, destroyed in pairs(records) do if not destroyed then n = n + 1 end end
  return n
end

-- whether a host process's whole command line is `marker` (the host sees
-- the processes of the namespaces driver's sandboxes too; -x: not the
-- shell that runs pgrep, nor the driver's helper)
local function pgrep(srv, marker)
  return srv:sh("pgrep -fx " .. quote(marker)).stdout ~= ""
end

describe("PlatformSandbox:detach", function()
  local srv

  local function new(extra)
    return mastra.PlatformSandbox.new(srv:sandboxOptions(extra))
  end

  setup(function() srv = platform.start{} end)
  teardown(function() if srv then srv:stop() end end)

  it("spawn then detach: the process runs in the detached sandbox, no second one", function()
    local sb = new{ id = "detach-spawn" }
    sb:start()
    sb:executeCommand("echo kept > before.txt")
    -- the spawn's task starts on the next turn of the loop, after detach()
    local h = sb.processes:spawn("echo ran > spawned.txt; exec sleep 1")
    local id = sb:detach()
    assert.matches("^sbx_", id)
    assert.are.equal("detached", sb.status)
    assert.is_nil(sb.sandboxId)
    assert.are.equal(0, h:wait().exitCode) -- followed to its end, there
    assert.are.equal(id, h.sandboxId)
    local recs, n = records_of(srv, "detach-spawn")
    assert.are.equal(1, n, "a second sandbox was provisioned for the id")
    assert.is_false(recs[id])
    local again <close> = new{ sandboxId = id }
    assert.are.equal("connected", again:start().outcome)
    assert.are.equal("kept\nran\n",
      again:executeCommand("cat before.txt spawned.txt").stdout)
  end)

  it("a checkpoint after spawn+detach still has the files", function()
    local sb = new{ id = "detach-ckpt" }
    sb:start()
    sb:executeCommand("echo precious > data.txt")
    local h = sb.processes:spawn("exec sleep 3")
    local id = sb:detach()
    h:wait()
    -- the detached sandbox is destroyed later (by a new handle): it captures
    local owner = new{ sandboxId = id }
    owner:start()
    owner:destroy()
    local _, n = records_of(srv, "detach-ckpt")
    assert.are.equal(1, n)
    local back <close> = new{ id = "detach-ckpt" }
    local res = back:start()
    assert.are.equal("created", res.outcome)
    assert.is_true(res.restored)
    assert.are.equal("precious\n", back:executeCommand("cat data.txt").stdout)
  end)

  it("carries a command in flight along: it ends in the detached sandbox", function()
    local sb = new{ id = "detach-exec" }
    sb:start()
    local t = mastra.spawn(function()
      return sb:executeCommand("sleep 1; echo done > late.txt; echo out")
    end)
    mastra.sleep(200)
    local id = sb:detach()
    assert.are.equal("out\n", t:wait().stdout)
    local again <close> = new{ sandboxId = id }
    assert.are.equal("done\n", again:executeCommand("cat late.txt").stdout)
    local _, n = records_of(srv, "detach-exec")
    assert.are.equal(1, n)
  end)

  it("refuses new work on a detached or destroyed handle, saying which", function()
    local sb = new()
    sb:start()
    local id = sb:detach()
    for _, call in ipairs{
      function() return sb.processes:spawn("echo x") end,
      function() return sb:executeCommand("echo x") end,
      function() return sb:start() end,
    } do
      local ok, err = pcall(call)
      assert.is_false(ok)
      assert.is_true(mastra.errors.SandboxNotReadyError:is(err), tostring(err))
      assert.matches("detached", err.message, 1, true)
      assert.matches(id, err.message, 1, true)
    end
    sb:destroy() -- nothing of it is this object's: no request, still detached
    assert.are.equal("detached", sb.status)
    local again <close> = new{ sandboxId = id }
    assert.are.equal("connected", again:start().outcome)

    local gone = new()
    gone:start()
    gone:destroy()
    for _, call in ipairs{
      function() return gone.processes:spawn("echo x") end,
      function() return gone:executeCommand("echo x") end,
    } do
      local ok, err = pcall(call)
      assert.is_false(ok)
      assert.is_true(mastra.errors.SandboxNotReadyError:is(err), tostring(err))
      assert.matches("destroyed", err.message, 1, true)
    end
    -- an explicit start() provisions it again (docs/decisions.md)
    assert.are.equal("created", gone:start().outcome)
    assert.are.equal("x\n", gone:executeCommand("echo x").stdout)
    gone:destroy()
  end)

  it("keepRunning: detach hands the process to the platform; a destroy ends it", function()
    local marker = "sleep 47.25"
    local sb = new()
    sb:start()
    local h = sb.processes:spawn("echo up; exec " .. marker, { keepRunning = true })
    assert.is_true(h.keepRunning)
    assert.is_true(util.wait_until(function() return h.stdout == "up\n" end, 10000))
    local id = sb:detach()
    assert.is_true(h.handedOver)
    assert.is_nil(h.exitCode)
    assert.is_false(h:kill())
    local ok, err = pcall(h.wait, h)
    assert.is_false(ok)
    assert.are.equal("DETACHED", err.code)
    assert.matches("left running in sandbox " .. id, err.message, 1, true)
    -- its socket is closed: it runs on (and keeps its sandbox from idling)
    mastra.sleep(500)
    assert.is_true(pgrep(srv, marker))
    local again = new{ sandboxId = id }
    again:start()
    again:destroy()
    assert.is_true(util.wait_until(function() return not pgrep(srv, marker) end, 10000),
      "the destroy left the process running")
  end)

  it("keepRunning: a sandbox that is not detached ends it as any process", function()
    local marker = "sleep 47.5"
    do
      local sb <close> = new()
      sb:start()
      local h = sb.processes:spawn("echo up; exec " .. marker, { keepRunning = true })
      assert.is_true(util.wait_until(function() return h.stdout == "up\n" end, 10000))
      -- and the handle works as any other while it is followed
      assert.is_true(sb.processes:list()[1].running)
    end
    assert.is_true(util.wait_until(function() return not pgrep(srv, marker) end, 10000))
    local sb = new()
    sb:start()
    local h = sb.processes:spawn("exec " .. marker, { keepRunning = true })
    mastra.sleep(300)
    assert.is_true(h:kill())
    assert.is_false(h:wait().success)
    assert.is_true(util.wait_until(function() return not pgrep(srv, marker) end, 10000))
    sb:destroy()
  end)

  it("keepRunning is checked: a boolean, and only a PlatformSandbox takes it", function()
    local sb <close> = new()
    local ok, err = pcall(sb.processes.spawn, sb.processes, "true", { keepRunning = "yes" })
    assert.is_false(ok)
    assert.matches("option 'keepRunning' must be a boolean", err)
    local dir = platform.tmpdir()
    local lsb <close> = mastra.LocalSandbox.new{ workingDirectory = dir }
    ok, err = pcall(lsb.processes.spawn, lsb.processes, "true", { keepRunning = true })
    assert.is_false(ok)
    assert.matches("unknown option 'keepRunning'", err)
    platform.rm_rf(dir)
  end)
end)

describe("keepRunning on a platform that does not advertise it", function()
  local srv

  setup(function() srv = platform.start{ args = { "--exec-stdin", "off" } } end)
  teardown(function() if srv then srv:stop() end end)

  it("raises at the spawn, before anything runs", function()
    local sb <close> = mastra.PlatformSandbox.new(srv:sandboxOptions())
    sb:start()
    local ok, err = pcall(sb.processes.spawn, sb.processes, "echo x > ran.txt",
      { keepRunning = true })
    assert.is_false(ok)
    assert.matches('does not advertise the "keepRunning" capability', tostring(err), 1, true)
    assert.are_not.equal(0, sb:executeCommand("cat ran.txt").exitCode)
  end)
end)

describe("detach in scripts (mastra-lua)", function()
  local ctx, srv
  local counter = 0

  setup(function()
    ctx = child.context{ platform = true }
    srv = ctx.srv
  end)
  teardown(function() if ctx then ctx:close() end end)

  -- run the script text under mastra-lua; its sandbox's id is `key`
  local function script(key, text)
    counter = counter + 1
    local cdir = ("%s/case%d"):format(ctx.dir, counter)
    assert(os.execute("mkdir -p " .. quote(cdir)))
    platform.writeFile(cdir .. "/script.lua", ("local mastra = require 'mastra'\n"
      .. "local KEY = %q\n%s"):format(key, text))
    local t0 = mastra.now()
    local r = ctx.sb:executeCommand(("cd %s && exec %s script.lua"):format(quote(cdir),
      quote(child.binary("mastra-lua"))), nil, { env = ctx:env(), timeout = 30000 })
    r.elapsed = mastra.now() - t0
    return r
  end

  it("the issue's script: detach, the process in that sandbox, the script waits for it",
    function()
      local r = script("s-detach", [[
local sb = mastra.PlatformSandbox.new{ id = KEY, idleTimeoutMinutes = 5 }
sb:start()
local h = sb.processes:spawn("exec sleep 2")
print("detached", sb:detach())
]])
      assert.are.equal(0, r.exitCode, r.stderr)
      local id = r.stdout:match("detached\t(sbx_%x+)")
      assert.is_string(id, r.stdout)
      assert.is_true(r.elapsed >= 2000, "the script did not wait for its process")
      local recs, n = records_of(srv, "s-detach")
      assert.are.equal(1, n, "a second sandbox was provisioned")
      assert.is_false(recs[id], "the detached sandbox was destroyed")
      assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. id).status)
    end)

  it("keepRunning: the script ends at once and the process runs on", function()
    local r = script("s-keep", [[
local sb = mastra.PlatformSandbox.new{ id = KEY }
sb:start()
sb.processes:spawn("exec sleep 46.75", { keepRunning = true })
print("detached", sb:detach())
]])
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.is_true(r.elapsed < 10000)
    local id = r.stdout:match("detached\t(sbx_%x+)")
    -- the platform has it once its exec began: under load /bin/sh may exec
    -- sleep a moment after the script ended; then it runs on
    assert.is_true(util.wait_until(function() return pgrep(srv, "sleep 46.75") end, 10000))
    mastra.sleep(500)
    assert.is_true(pgrep(srv, "sleep 46.75"))
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. id).status)
    assert.is_true(util.wait_until(function() return not pgrep(srv, "sleep 46.75") end, 10000))
  end)

  it("an error after the spawn destroys the one sandbox; nothing else is provisioned",
    function()
      local r = script("s-error", [[
local sb <close> = mastra.PlatformSandbox.new{ id = KEY }
sb:start()
sb.processes:spawn("exec sleep 8")
error("the script fails after the spawn")
]])
      assert.are.equal(1, r.exitCode)
      assert.matches("the script fails after the spawn", r.stderr, 1, true)
      assert.is_true(r.elapsed < 8000, "the script waited for its process")
      local recs, n = records_of(srv, "s-error")
      assert.are.equal(1, n, "a second sandbox was provisioned")
      assert.are.equal(0, live_count(recs))
    end)

  it("a cancelled task after the spawn destroys the one sandbox", function()
    local r = script("s-cancel", [[
local started = false
local t = mastra.spawn(function()
  local sb <close> = mastra.PlatformSandbox.new{ id = KEY }
  sb:start()
  sb.processes:spawn("exec sleep 8")
  started = true
  mastra.sleep(60000)
end)
while not started do mastra.sleep(10) end
t:cancel()
print(pcall(t.wait, t))
]])
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.matches("false", r.stdout, 1, true)
    assert.is_true(r.elapsed < 8000, "the script waited for the cancelled process")
    local recs, n = records_of(srv, "s-cancel")
    assert.are.equal(1, n, "a second sandbox was provisioned")
    assert.are.equal(0, live_count(recs))
  end)
end)

describe("checkpoints of a key that two live sandboxes share", function()
  local dir, srv

  local function start(d)
    return platform.start{ dataDir = d .. "/data", tokenFile = d .. "/token" }
  end

  local function create(body)
    local r = srv:json("POST", P .. "/sandbox", body)
    assert.is_true(r.status == 200 or r.status == 201, r.body)
    return r.json
  end

  local function run(sb, command)
    local w = srv:wsExec(srv:lease(P, sb.id), command)
    assert.are.equal(0, w.exitCode, command .. ": " .. w.stderr)
    return w.stdout
  end

  setup(function()
    dir = platform.tmpdir()
    srv = start(dir)
  end)
  teardown(function()
    if srv then srv:close() end
    platform.rm_rf(dir)
  end)

  it("an empty sandbox of the key that wrote nothing leaves the checkpoint alone", function()
    local first = create{ id = "shared", environmentId = "env" }
    local other = create{ environmentId = "env" }
    -- two live sandboxes of one key, as a server before getOrCreate left
    -- them: the second one's record gets the key while the server is down
    srv:stop()
    local path = srv.dataDir .. "/state/sandboxes/" .. other.id .. ".json"
    local rec = platform.decode(platform.readFile(path))
    rec.recoveryKey = "shared"
    platform.writeFile(path, platform.encode(rec))
    srv = start(dir)
    run(first, "echo precious > data.txt")
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. first.id).status)
    -- the other one ran a command, wrote nothing, and goes with an empty tree
    run(other, "sleep 0.1")
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. other.id).status)
    local back = create{ id = "shared", environmentId = "env" }
    assert.are.equal(true, back.restoredFromCheckpoint)
    assert.are.equal("precious\n", run(back, "cat data.txt"))
    -- its own checkpoint, emptied by itself, still goes (as before)
    run(back, "rm data.txt")
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. back.id).status)
    local fresh = create{ id = "shared", environmentId = "env" }
    assert.are.equal(false, fresh.restoredFromCheckpoint)
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. fresh.id).status)
  end)

  it("the archive a sandbox descends from survives a restart of the server", function()
    local sb = create{ id = "base-restart", environmentId = "env" }
    run(sb, "echo v1 > f.txt")
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. sb.id).status)
    local again = create{ id = "base-restart", environmentId = "env" }
    assert.are.equal(true, again.restoredFromCheckpoint)
    srv:stop()
    srv = start(dir)
    run(again, "rm f.txt")
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. again.id).status)
    local fresh = create{ id = "base-restart", environmentId = "env" }
    assert.are.equal(false, fresh.restoredFromCheckpoint, "the emptied checkpoint came back")
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. fresh.id).status)
  end)
end)
