-- The embedded default: with no platform configured, the runtime finds or
-- starts one per-user mastra-platform (lua/mastra/local_platform.lua).
-- Each case runs the runner in a child process with its own state dir, so
-- the daemon it starts is found, checked and killed here.
local mastra = require "mastra"
local util = require "spec.support.util"

local RUNNER = os.getenv("MASTRA_LUA")
local PLATFORM = os.getenv("MASTRA_PLATFORM")

describe("the local platform default", function()
  local sb, dir

  local function env(extra)
    local e = {
      HOME = dir,
      MASTRA_PLATFORM_STATE_DIR = dir .. "/state",
      MASTRA_PLATFORM_BIN = PLATFORM,
    }
    -- the driver and the base CTest chose (a server never builds a base in
    -- a test)
    for _, k in ipairs{ "MASTRA_PLATFORM_DRIVER", "MASTRA_PLATFORM_BASE" } do
      e[k] = os.getenv(k)
    end
    for k, v in pairs(extra or {}) do e[k] = v end
    return e
  end

  local function read(path)
    local f = io.open(path, "rb")
    if not f then return nil end
    local s = f:read("a")
    f:close()
    return s
  end

  local function state()
    local text = read(dir .. "/state/platform.state") or ""
    return {
      url = text:match("url=([^\n]+)"),
      token = text:match("token=([^\n]+)"),
      pid = tonumber(text:match("pid=(%d+)")),
    }
  end

  local ENSURE = [[
    local p = require("mastra").localPlatform()
    print(p.url, p.pid, p.projectId, p.environmentId, p.bucketName, #p.token)
  ]]

  setup(function()
    assert(RUNNER and PLATFORM, "MASTRA_LUA and MASTRA_PLATFORM must be set (CTest sets them)")
    dir = util.tmpname()
    os.remove(dir)
    sb = mastra.LocalSandbox.new{ workingDirectory = dir }
    sb:start()
  end)

  teardown(function()
    local pid = state().pid
    if pid then sb:executeCommand("kill " .. pid .. " 2>/dev/null; true") end
    sb:executeCommand("rm -rf " .. mastra.quote(dir))
    sb:destroy()
  end)

  it("starts one server, says so once on stderr, and fills in the defaults", function()
    local r = sb:executeCommand(RUNNER, { "-e", ENSURE }, { env = env() })
    assert.are.equal(0, r.exitCode, r.stderr)
    local url, pid, project, environment, bucket, toklen =
      r.stdout:match("^(%S+)\t(%d+)\t(%S+)\t(%S+)\t(%S+)\t(%d+)\n$")
    assert.truthy(url, r.stdout)
    assert.matches("^http://127%.0%.0%.1:%d+$", url)
    assert.are.equal("local", project)
    assert.are.equal("local", environment)
    assert.are.equal("local", bucket)
    assert.is_true(tonumber(toklen) >= 32)
    local _, lines = r.stderr:gsub("using the local platform", "")
    assert.are.equal(1, lines, r.stderr)
    assert.matches("started it", r.stderr)
    local s = state()
    assert.are.equal(url, s.url)
    assert.are.equal(tonumber(pid), s.pid)
    -- the daemon runs on its own: it is not our child, and it answers
    local check = sb:executeCommand("kill -0 " .. s.pid)
    assert.are.equal(0, check.exitCode)
    local ping = sb:executeCommand("curl", { "-s", "-o", "/dev/null", "-w", "%{http_code}",
      "-H", "Authorization: Bearer " .. s.token, url .. "/v1/projects/local/sandbox/none" })
    assert.are.equal("404", ping.stdout)
  end)

  it("keeps its state to the user: the directory 0700, the state file and the log 0600",
    function()
      -- the first case started the server in a state directory made for it
      local r = sb:executeCommand("stat", { "-c", "%a %n", dir .. "/state",
        dir .. "/state/platform.state", dir .. "/state/platform.log",
        dir .. "/state/platform.token", dir .. "/state/platform-data" })
      assert.are.equal(0, r.exitCode, r.stderr)
      local modes = {}
      for mode, path in r.stdout:gmatch("(%d+) (%S+)\n") do modes[path:match("[^/]+$")] = mode end
      assert.are.same({ state = "700", ["platform.state"] = "600", ["platform.log"] = "600",
        ["platform.token"] = "600", ["platform-data"] = "700" }, modes)
    end)

  it("reuses the running server from another process", function()
    local before = state().pid
    assert.truthy(before)
    local r = sb:executeCommand(RUNNER, { "-e", ENSURE }, { env = env() })
    assert.are.equal(0, r.exitCode, r.stderr)
    -- said once per start of a platform, not by every script that finds it
    assert.are.equal("", r.stderr)
    assert.are.equal(tostring(before), r.stdout:match("\t(%d+)\t"))
  end)

  it("says nothing on stderr with MASTRA_PLATFORM_QUIET=1, even when it starts one",
    function()
      local own = dir .. "/quiet-state"
      local r = sb:executeCommand(RUNNER, { "-e", ENSURE },
        { env = env{ MASTRA_PLATFORM_STATE_DIR = own, MASTRA_PLATFORM_QUIET = "1" } })
      local pid = tonumber((read(own .. "/platform.state") or ""):match("pid=(%d+)"))
      if pid then sb:executeCommand("kill " .. pid .. " 2>/dev/null; true") end
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.truthy(pid, "it started no platform")
      assert.are.equal("", r.stderr)
    end)

  it("starts a new one when the recorded server is gone", function()
    local old = state().pid
    sb:executeCommand("kill " .. old)
    mastra.sleep(200)
    local r = sb:executeCommand(RUNNER, { "-e", ENSURE }, { env = env() })
    assert.are.equal(0, r.exitCode, r.stderr)
    local new = state().pid
    assert.truthy(new)
    assert.are_not.equal(old, new)
    assert.matches("started it", r.stderr)
  end)

  local function state_text()
    return read(dir .. "/state/platform.state") or ""
  end

  local function write_state(text)
    local f = assert(io.open(dir .. "/state/platform.state", "wb"))
    f:write(text)
    f:close()
  end

  it("records the binary's path, its version and its protocol", function()
    local text = state_text()
    local real = sb:executeCommand("readlink", { "-f", PLATFORM }).stdout:gsub("\n$", "")
    assert.are.equal(real, text:match("bin=([^\n]+)"))
    assert.are.equal(mastra._VERSION, text:match("version=([^\n]+)"))
    assert.are.equal(mastra._VERSION:match("^0%.%d+") or mastra._VERSION:match("^%d+"),
      text:match("protocol=([^\n]+)"))
  end)

  it("uses a server of another version that speaks the same protocol, and says so", function()
    local text = state_text()
    finally(function() write_state(text) end)
    local same = mastra._VERSION:gsub("%d+$", "999") -- 0.1.0 -> 0.1.999
    write_state((text:gsub("version=[^\n]+", "version=" .. same)))
    local r = sb:executeCommand(RUNNER, { "-e", ENSURE }, { env = env() })
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal(tostring(state().pid), r.stdout:match("\t(%d+)\t"))
    local _, n = r.stderr:gsub("\n", "")
    -- this line alone: a script that finds the platform running does not say
    -- that it uses it
    assert.are.equal(1, n, r.stderr)
    assert.truthy(r.stderr:find("(pid " .. state().pid .. ") is ", 1, true), r.stderr)
    assert.truthy(r.stderr:find("version " .. same .. "; this client is version "
      .. mastra._VERSION, 1, true), r.stderr)
    assert.truthy(r.stderr:find("using it, its protocol is the same", 1, true), r.stderr)
  end)

  it("starts its own when the recorded server speaks another protocol", function()
    local text = state_text()
    local own = dir .. "/state/protocol-" .. mastra._VERSION:match("^(%d+%.%d+)")
    local own_pid
    finally(function()
      write_state(text)
      if own_pid then sb:executeCommand("kill " .. own_pid .. " 2>/dev/null; true") end
    end)
    write_state((text:gsub("version=[^\n]+", "version=7.0.0")))
    local r = sb:executeCommand(RUNNER, { "-e", ENSURE }, { env = env() })
    own_pid = tonumber((read(own .. "/platform.state") or ""):match("pid=(%d+)"))
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.truthy(own_pid, r.stderr)
    assert.are_not.equal(state().pid, own_pid)
    assert.are.equal(tostring(own_pid), r.stdout:match("\t(%d+)\t"))
    assert.truthy(r.stderr:find("version 7.0.0; this client is version", 1, true), r.stderr)
    assert.truthy(r.stderr:find("its protocol is not", 1, true), r.stderr)
    assert.truthy(r.stderr:find("started it", 1, true), r.stderr)
    -- the next client finds its own there
    r = sb:executeCommand(RUNNER, { "-e", ENSURE }, { env = env() })
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal(tostring(own_pid), r.stdout:match("\t(%d+)\t"))
    assert.falsy(r.stderr:find("using the local platform", 1, true), r.stderr)
  end)

  it("reports a server that does not answer as hung, with its pid", function()
    local pid = state().pid
    assert.are.equal(0, sb:executeCommand("kill -STOP " .. pid).exitCode)
    finally(function() sb:executeCommand("kill -CONT " .. pid) end)
    local t0 = mastra.now()
    local r = sb:executeCommand(RUNNER, { "-e", ENSURE }, { env = env(), timeout = 30000 })
    assert.are_not.equal(0, r.exitCode)
    assert.truthy(mastra.now() - t0 < 20000, "took " .. (mastra.now() - t0) .. " ms")
    assert.truthy(r.stderr:find("(pid " .. pid .. ") is hung", 1, true), r.stderr)
    assert.truthy(r.stderr:find("kill " .. pid, 1, true), r.stderr)
  end)

  it("lets only one of two concurrent starters start a server", function()
    sb:executeCommand("kill " .. state().pid)
    mastra.sleep(200)
    local results = mastra.all{
      function() return sb:executeCommand(RUNNER, { "-e", ENSURE }, { env = env() }) end,
      function() return sb:executeCommand(RUNNER, { "-e", ENSURE }, { env = env() }) end,
    }
    local pids = {}
    for i, r in ipairs(results) do
      assert.are.equal(0, r.exitCode, r.stderr)
      pids[i] = r.stdout:match("\t(%d+)\t")
    end
    assert.are.equal(pids[1], pids[2])
    local started = 0
    for _, r in ipairs(results) do
      if r.stderr:find("started it", 1, true) then started = started + 1 end
    end
    assert.are.equal(1, started)
  end)

  it("exits by itself after it has been idle with no sandbox", function()
    sb:executeCommand("kill " .. state().pid)
    mastra.sleep(200)
    local r = sb:executeCommand(RUNNER, { "-e", ENSURE },
      { env = env{ MASTRA_PLATFORM_IDLE_EXIT = "1" } })
    assert.are.equal(0, r.exitCode, r.stderr)
    local pid = state().pid
    local deadline = mastra.now() + 10000
    while mastra.now() < deadline
        and sb:executeCommand("kill -0 " .. pid .. " 2>/dev/null").exitCode == 0 do
      mastra.sleep(100)
    end
    assert.are_not.equal(0, sb:executeCommand("kill -0 " .. pid .. " 2>/dev/null").exitCode)
    assert.matches("idle for 1s with no sandbox", read(dir .. "/state/platform.log") or "")
  end)

  it("says what to do when the server binary cannot be found", function()
    local r = sb:executeCommand(RUNNER, { "-e", ENSURE },
      { env = env{ MASTRA_PLATFORM_BIN = dir .. "/missing-binary" } })
    assert.are_not.equal(0, r.exitCode)
    assert.matches("cannot start the local platform", r.stderr)
    assert.matches("MASTRA_PLATFORM_BIN is .*missing%-binary, which does not exist", r.stderr)
  end)
end)
