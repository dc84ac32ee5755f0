-- Teardown that cannot be skipped (lua/mastra/task/teardown.lua, the teardown
-- queue; docs/decisions.md "Teardown"): scripts that fail, are cancelled
-- or are stopped by a signal leave no sandbox alive on the platform and no
-- LocalSandbox process running. Each case runs a script in a child process
-- (mastra-lua, and lua5.4 where the case applies to it) against a real
-- mastra-platform, then asks the platform about every sandbox the script
-- started (the script writes their ids to a file as soon as they run).
local mastra = require "mastra"
local platform = require "spec.support.platform"
local child = require "spec.support.child"

local quote = mastra.quote

local RUNNERS = { "mastra-lua", "lua5.4" }

describe("teardown", function()
  local ctx, srv, dir, sb

  setup(function()
    ctx = child.context{ platform = true }
    srv, dir, sb = ctx.srv, ctx.dir, ctx.sb
  end)

  teardown(function()
    if ctx then ctx:close() end
  end)

  local counter = 0

  local function env() return ctx:env() end

  -- A fresh case directory with the script in it (the preamble defines
  -- record(sb), which appends a started sandbox's id to `ids`, and
  -- ready(), which creates the file `ready`).
  local function case(text)
    counter = counter + 1
    local cdir = ("%s/case%d"):format(dir, counter)
    assert(os.execute("mkdir -p " .. quote(cdir)))
    platform.writeFile(cdir .. "/script.lua", [[
local mastra = require "mastra"
local DIR = ]] .. ("%q"):format(cdir) .. [[

local function record(s)
  local f = assert(io.open(DIR .. "/ids", "a"))
  f:write(s.sandboxId, "\n")
  f:close()
end
local function ready()
  assert(io.open(DIR .. "/ready", "w")):close()
end
]] .. text)
    return cdir
  end

  local function command(runner, cdir)
    return ("cd %s && exec %s script.lua"):format(quote(cdir), quote(child.binary(runner)))
  end

  local function run(runner, cdir)
    local r = sb:executeCommand(command(runner, cdir), nil, { env = env(), timeout = 30000 })
    assert.is_false(r.timedOut, "the script did not end within 30 s: " .. r.stderr)
    return r
  end

  local function ids(cdir)
    local out = {}
    for id in (platform.readFile(cdir .. "/ids") or ""):gmatch("[^\n]+") do
      out[#out + 1] = id
    end
    return out
  end

  -- Ask the platform for each sandbox the script recorded: the statuses
  -- that are not "destroyed", as "id: status" (empty when none is live).
  local function live(cdir, want)
    local list = ids(cdir)
    assert.are.equal(want, #list, "the script did not start every sandbox")
    local out = {}
    for _, id in ipairs(list) do
      local res = srv:curl("GET", "/v1/railway/projects/proj/sandbox/" .. id)
      assert.are.equal(200, res.status, res.body)
      if res.json.status ~= "destroyed" then
        out[#out + 1] = id .. ": " .. tostring(res.json.status)
      end
    end
    return out
  end

  for _, runner in ipairs(RUNNERS) do
    describe("under " .. runner, function()
      it("an erroring main chunk destroys its <close> PlatformSandbox", function()
        local cdir = case([[
local s <close> = mastra.PlatformSandbox.new{}
s:start()
record(s)
error("the main chunk fails")
]])
        local r = run(runner, cdir)
        assert.are.equal(1, r.exitCode, r.stderr)
        assert.matches("the main chunk fails", r.stderr, 1, true)
        assert.same({}, live(cdir, 1))
      end)

      it("a failing map over running clones destroys every clone", function()
        local cdir = case([[
local template = mastra.PlatformSandbox.new{}
local started = 0
mastra.map({ 1, 2, 3, 4, 5, 6 }, function(i)
  local s <close> = template:clone{}
  s:start()
  record(s)
  started = started + 1
  if i == 2 then
    while started < 6 do mastra.sleep(10) end
    mastra.sleep(100) -- the others are inside executeCommand
    error("item 2 failed")
  end
  s:executeCommand("sleep 30")
end)
]])
        local t0 = mastra.now()
        local r = run(runner, cdir)
        assert.are.equal(1, r.exitCode, r.stderr)
        assert.matches("item 2 failed", r.stderr, 1, true)
        assert.same({}, live(cdir, 6))
        assert.is_true(mastra.now() - t0 < 20000, "the failing script took too long")
      end)

      it("a failing task's <close> Workspace destroys the sandbox it owns", function()
        local cdir = case([[
local template = mastra.PlatformSandbox.new{}
mastra.map({ 1, 2, 3 }, function(i)
  local s = template:clone{}
  local ws <close> = mastra.Workspace.new{ sandbox = s }
  s:start()
  record(s)
  if i == 3 then
    mastra.sleep(200)
    error("item 3 failed")
  end
  s:executeCommand("sleep 30")
end)
]])
        local r = run(runner, cdir)
        assert.are.equal(1, r.exitCode, r.stderr)
        assert.matches("item 3 failed", r.stderr, 1, true)
        assert.same({}, live(cdir, 3))
      end)

      it("pcall(mastra.map) raises the failure once, and the script goes on", function()
        local cdir = case([[
local ok, err = pcall(mastra.map, { 1, 2, 3 }, function(i)
  if i > 1 then error("item " .. i .. " failed", 0) end
  mastra.sleep(10000)
end)
print(ok, (tostring(err):match("^[^\n]*")))
mastra.sleep(50)
print("the script went on")
]])
        local r = run(runner, cdir)
        assert.are.equal(0, r.exitCode, r.stderr)
        assert.are.equal("false\titem 2 failed\nthe script went on\n", r.stdout)
        assert.not_matches("failed", r.stderr, 1, true)
      end)

      it("an error of a task nobody waited for is reported once", function()
        local cdir = case([[
mastra.spawn(function() error("nobody waits for me") end)
mastra.sleep(50)
print("end of the chunk")
]])
        local r = run(runner, cdir)
        local _, n = r.stderr:gsub("nobody waits for me", "")
        assert.are.equal(1, n, r.stderr)
        assert.matches("stack traceback", r.stderr, 1, true)
        -- mastra.run raises it (exit 1); plain lua5.4 prints it at exit
        assert.are.equal(runner == "mastra-lua" and 1 or 0, r.exitCode, r.stderr)
      end)

      it("a cancelled task and a collected sandbox are destroyed", function()
        local cdir = case([[
local template = mastra.PlatformSandbox.new{}
local t = mastra.spawn(function()
  local s <close> = template:clone{}
  s:start()
  record(s)
  s:executeCommand("sleep 30")
end)
local dropped = template:clone{}
dropped:start()
record(dropped)
dropped = nil -- luacheck: ignore 311
collectgarbage()
collectgarbage()
local function recorded()
  local f = io.open(DIR .. "/ids")
  if not f then return 0 end
  local _, n = f:read("a"):gsub("\n", "")
  f:close()
  return n
end
while recorded() < 2 do mastra.sleep(10) end
t:cancel()
-- the teardown runs in tasks of its own while this one waits
mastra.sleep(1000)
print("done")
]])
        local r = run(runner, cdir)
        assert.are.equal(0, r.exitCode, r.stderr)
        assert.same({}, live(cdir, 2))
      end)
    end)
  end

  describe("a platform that does not answer the DELETE", function()
    for _, runner in ipairs(RUNNERS) do
      it("holds the exit of an erroring script no longer than the deadline (" .. runner
        .. ")", function()
          local cdir = case([[
local s <close> = mastra.PlatformSandbox.new{}
s:start()
record(s)
os.execute("kill -STOP " .. ]] .. srv.pid .. [[)
error("fails while the platform is frozen")
]])
          finally(function() sb:executeCommand("kill -CONT " .. srv.pid) end)
          local t0 = mastra.now()
          local r = run(runner, cdir)
          local ms = mastra.now() - t0
          sb:executeCommand("kill -CONT " .. srv.pid)
          assert.are.equal(1, r.exitCode, r.stderr)
          assert.matches("fails while the platform is frozen", r.stderr, 1, true)
          assert.matches("gave up after 5000 ms on 1 task(s)", r.stderr, 1, true)
          assert.is_true(ms >= 5000 and ms < 15000, ("the exit took %.0f ms"):format(ms))
          -- what the script gave up on is still there; leave nothing behind
          local id = ids(cdir)[1]
          local del = srv:curl("DELETE", "/v1/railway/projects/proj/sandbox/" .. id)
          assert.are.equal(204, del.status)
        end)
    end
  end)

  -- mastra-lua handles the three; plain lua5.4 has lua.c's SIGINT handler,
  -- which raises "interrupted!" in the main chunk, and the module's own
  -- SIGTERM and SIGHUP handlers, which interrupt the loop: the scheduler
  -- raises an InterruptedError in the main chunk
  local SIGNALS = {
    { "mastra-lua", "TERM", 143, "interrupted (SIGTERM)" },
    { "mastra-lua", "INT", 130, "interrupted (SIGINT)" },
    { "mastra-lua", "HUP", 129, "interrupted (SIGHUP)" },
    { "lua5.4", "INT", 1, "interrupted!" },
    { "lua5.4", "TERM", 1, "InterruptedError: interrupted" },
    { "lua5.4", "HUP", 1, "InterruptedError: interrupted" },
  }
  it("a destroy under way when a lua5.4 script ends is sent again at exit", function()
    -- lua_close finalizes the request of the DELETE in flight; the drain at
    -- exit starts the destroy again, and the platform answers it once it
    -- runs again (after 1 s)
    local cdir = case([[
local task = require "mastra.task"
local a = mastra.PlatformSandbox.new{}
local b = mastra.PlatformSandbox.new{}
a:start()
b:start()
record(a)
record(b)
os.execute("kill -STOP ]] .. srv.pid .. [[; (sleep 1; kill -CONT ]] .. srv.pid .. [[) &")
mastra.spawn(function() a:destroy() end) -- a task of the program
task.teardown(b.destroy, b)              -- a job of the teardown queue
for _ = 1, 5 do mastra.step(0) end
print(a.status, b.status)
]])
    finally(function() sb:executeCommand("kill -CONT " .. srv.pid) end)
    local t0 = mastra.now()
    local r = run("lua5.4", cdir)
    local ms = mastra.now() - t0
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal("destroying\tdestroying\n", r.stdout)
    assert.is_true(ms < 5000, ("the exit took %.0f ms"):format(ms))
    assert.same({}, live(cdir, 2))
  end)

  describe("a signal mid-fleet", function()
    for _, c in ipairs(SIGNALS) do
      local runner, sig, code, says = c[1], c[2], c[3], c[4]
      it(("SIG%s to %s destroys every sandbox and kills every local command")
        :format(sig, runner), function()
        local cdir = case([[
local template = mastra.PlatformSandbox.new{}
local lsb = mastra.LocalSandbox.new{ workingDirectory = DIR }
local remote = 0
mastra.map({ 1, 2, 3, 4, 5, 6 }, function(i)
  if i % 2 == 0 then
    lsb:executeCommand("echo $$ >> pids; exec sleep 30")
  else
    local s <close> = template:clone{}
    s:start()
    record(s)
    remote = remote + 1
    if remote == 3 then ready() end
    s:executeCommand("sleep 30")
  end
end)
]])
        local h = sb.processes:spawn(command(runner, cdir), { env = env(), timeout = 30000 })
        finally(function()
          if h.exitCode == nil then
            sb:executeCommand("kill -KILL " .. h.pid)
            h:wait()
          end
        end)
        assert.is_true(platform.waitUntil(function()
          return platform.readFile(cdir .. "/ready") ~= nil
            and select(2, (platform.readFile(cdir .. "/pids") or ""):gsub("\n", "")) == 3
            or h.exitCode ~= nil
        end, 15000), "the fleet did not start")
        mastra.sleep(200) -- every command is running
        local pids = {}
        for pid in platform.readFile(cdir .. "/pids"):gmatch("%d+") do pids[#pids + 1] = pid end
        assert.are.equal(3, #pids)
        for _, pid in ipairs(pids) do
          assert.are.equal(0, sb:executeCommand("kill -0 " .. pid).exitCode, "pid " .. pid)
        end
        local t0 = mastra.now()
        assert.are.equal(0, sb:executeCommand("kill -" .. sig .. " " .. h.pid).exitCode)
        local r = h:wait()
        assert.are.equal(code, r.exitCode, r.stderr)
        assert.matches(says, r.stderr, 1, true)
        assert.is_true(mastra.now() - t0 < 10000, runner .. " took too long to stop")
        assert.same({}, live(cdir, 3))
        for _, pid in ipairs(pids) do
          assert.are_not.equal(0, sb:executeCommand("kill -0 " .. pid).exitCode,
            "sleep " .. pid .. " is still alive")
        end
      end)
    end
  end)
end)
