-- The mastra-lua runner (src/runner/main.c), driven as a child process
-- through mastra's own LocalSandbox: options, the arg table, the main chunk
-- as a task, error reports, SIGINT and the usage message.
--
-- MASTRA_LUA names the runner binary (CTest sets it). Scripts are written
-- to a fresh temp dir, removed at the end. The runner gets PATH plus the
-- sanitizer options of this process, nothing else of its environment.
local mastra = require "mastra"
local util = require "spec.support.util"

local MASTRA_LUA = os.getenv("MASTRA_LUA")
if MASTRA_LUA == nil or MASTRA_LUA == "" then
  error("MASTRA_LUA is not set: it must name the mastra-lua binary"
    .. " (CTest sets it; by hand: MASTRA_LUA=$PWD/build/mastra-lua busted ...)", 0)
end

local quote = mastra.quote

-- What the runner's environment gets besides PATH.
local ENV = {}
for _, name in ipairs{ "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS" } do
  ENV[name] = os.getenv(name)
end

local function write_file(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

local function read_file(path)
  local f = io.open(path, "r")
  if f == nil then return nil end
  local s = f:read("a")
  f:close()
  return s
end

describe("mastra-lua", function()
  local dir, base, sb

  -- Run the runner with `args` (a list, quoted for the shell) in dir.
  local function run(args)
    local r = sb:executeCommand(quote(MASTRA_LUA), args, { timeout = 10000 })
    if r.timedOut then
      error(("mastra-lua %s: still running after 10 s (killed); stdout: %q, stderr: %q")
        :format(table.concat(args, " "), r.stdout, r.stderr), 2)
    end
    return r
  end

  -- Write a script into dir; returns its path.
  local function script(name, text)
    local path = dir .. "/" .. name
    write_file(path, text)
    return path
  end

  setup(function()
    dir, base = util.tmpdir()
    sb = mastra.LocalSandbox.new{ workingDirectory = dir, env = ENV }
  end)

  teardown(function()
    if sb then sb:destroy() end
    util.rm_rf(dir, base)
  end)

  describe("options", function()
    it("-v prints the version", function()
      local r = run{ "-v" }
      assert.are.equal(0, r.exitCode)
      assert.are.equal("", r.stderr)
      assert.truthy(r.stdout:find("^mastra%-lua " .. mastra._VERSION:gsub("%.", "%%.") .. " "),
        r.stdout)
      assert.truthy(r.stdout:find("Lua 5.4", 1, true), r.stdout)
      assert.are.equal("0.1.0", mastra._VERSION)
    end)

    it("-h prints the usage on stdout", function()
      local r = run{ "-h" }
      assert.are.equal(0, r.exitCode)
      assert.truthy(r.stdout:find("^usage: "), r.stdout)
      assert.truthy(r.stdout:find("-e CODE", 1, true), r.stdout)
    end)

    it("-e runs code, in order, each as a task", function()
      local r = run{ "-e", "io.write('one ')", "-e",
        "io.write(tostring(require('mastra').currentTask() ~= nil))" }
      assert.are.equal("", r.stderr)
      assert.are.equal(0, r.exitCode)
      assert.are.equal("one true", r.stdout)
    end)

    it("-e runs before the script", function()
      local path = script("after_e.lua", "io.write('script ', tostring(X))\n")
      local r = run{ "-e", "X = 42", path }
      assert.are.equal("", r.stderr)
      assert.are.equal(0, r.exitCode)
      assert.are.equal("script 42", r.stdout)
    end)

    it("an unknown option prints the usage and exits 1", function()
      local r = run{ "-x" }
      assert.are.equal(1, r.exitCode)
      assert.are.equal("", r.stdout)
      assert.truthy(r.stderr:find("unrecognized option '-x'", 1, true), r.stderr)
      assert.truthy(r.stderr:find("usage: ", 1, true), r.stderr)
    end)

    it("-e without code prints the usage and exits 1", function()
      local r = run{ "-e" }
      assert.are.equal(1, r.exitCode)
      assert.are.equal("", r.stdout)
      assert.truthy(r.stderr:find("-e", 1, true), r.stderr)
      assert.truthy(r.stderr:find("usage: ", 1, true), r.stderr)
    end)

    it("no script and no -e prints the usage and exits 1", function()
      local r = run{}
      assert.are.equal(1, r.exitCode)
      assert.truthy(r.stderr:find("usage: ", 1, true), r.stderr)
    end)

    it("-- ends the options", function()
      local path = script("dashdash.lua", "io.write(select('#', ...), ' ', ...)\n")
      local r = run{ "--", path, "-v" }
      assert.are.equal("", r.stderr)
      assert.are.equal(0, r.exitCode)
      assert.are.equal("1 -v", r.stdout)
    end)
  end)

  describe("scripts", function()
    it("see arg[0], arg[1], arg[2] and ...", function()
      local path = script("args.lua", [[
local n = select("#", ...)
io.write(arg[0], "|", arg[1], "|", arg[2], "|", tostring(arg[3]), "|", arg[-1], "|",
  n, "|", table.concat({ ... }, ","))
]])
      local r = run{ path, "a", "b c" }
      assert.are.equal("", r.stderr)
      assert.are.equal(0, r.exitCode)
      assert.are.equal(table.concat({ path, "a", "b c", "nil", MASTRA_LUA, "2", "a,b c" }, "|"),
        r.stdout)
    end)

    it("run the main chunk as a task and wait for the tasks it spawned", function()
      local path = script("task.lua", [[
local mastra = require "mastra"
print("in task", mastra.currentTask() ~= nil)
local sb = mastra.LocalSandbox.new{ workingDirectory = arg[1] }
mastra.spawn(function()
  mastra.sleep(100)
  io.write(sb:executeCommand("echo late child").stdout)
  print("spawned task done")
end)
mastra.sleep(10) -- a blocking call at the top level yields
print("main done")
]])
      local r = run{ path, dir }
      assert.are.equal("", r.stderr)
      assert.are.equal(0, r.exitCode)
      assert.are.equal("in task\ttrue\nmain done\nlate child\nspawned task done\n", r.stdout)
    end)

    it("exit 0 when the script ends", function()
      local r = run{ script("empty.lua", "") }
      assert.are.equal(0, r.exitCode)
      assert.are.equal("", r.stdout)
      assert.are.equal("", r.stderr)
    end)
  end)

  describe("errors", function()
    it("an uncaught error prints the message and a traceback, exit 1", function()
      local path = script("boom.lua", [[
local function explode()
  error("kaboom")
end
io.write("before")
explode()
]])
      local r = run{ path }
      assert.are.equal(1, r.exitCode)
      assert.are.equal("before", r.stdout)
      assert.truthy(r.stderr:find(MASTRA_LUA .. ": ", 1, true), r.stderr)
      assert.truthy(r.stderr:find("boom.lua:2: kaboom", 1, true), r.stderr)
      assert.truthy(r.stderr:find("stack traceback:", 1, true), r.stderr)
      assert.truthy(r.stderr:find("explode", 1, true), r.stderr)
    end)

    it("an error object prints as 'Name: message'", function()
      local path = script("errobj.lua", [[
local mastra = require "mastra"
error(mastra.errors.TimeoutError:new{ message = "it took too long" })
]])
      local r = run{ path }
      assert.are.equal(1, r.exitCode)
      assert.truthy(r.stderr:find(MASTRA_LUA .. ": TimeoutError: it took too long", 1, true),
        r.stderr)
      assert.truthy(r.stderr:find("stack traceback:", 1, true), r.stderr)
    end)

    it("an error of a spawned task nobody waits for fails the run", function()
      local path = script("unobserved.lua", [[
local mastra = require "mastra"
mastra.spawn(function()
  mastra.sleep(10)
  error("lost task failed")
end)
]])
      local r = run{ path }
      assert.are.equal(1, r.exitCode)
      assert.truthy(r.stderr:find("lost task failed", 1, true), r.stderr)
    end)

    it("a syntax error exits 1 with the message", function()
      local r = run{ script("syntax.lua", "local = 1\n") }
      assert.are.equal(1, r.exitCode)
      assert.truthy(r.stderr:find("syntax.lua:1:", 1, true), r.stderr)
    end)

    it("a missing script exits 1", function()
      local r = run{ dir .. "/no-such-script.lua" }
      assert.are.equal(1, r.exitCode)
      assert.truthy(r.stderr:find("no-such-script.lua", 1, true), r.stderr)
    end)
  end)

  describe("the embedded facade", function()
    it("holds every module of lua/mastra (the runner gets no LUA_PATH)", function()
      local src = os.getenv("MASTRA_SOURCE_DIR") or os.getenv("PWD") or "."
      local p = assert(io.popen("cd " .. quote(src) .. " && find lua/mastra -name '*.lua'"))
      local names = {}
      for f in p:lines() do
        local name = f:gsub("^lua/", ""):gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", ".")
        names[#names + 1] = ("%q"):format(name)
      end
      p:close()
      assert.truthy(#names >= 20, "found " .. #names .. " modules under " .. src)
      local r = run{ "-e", ("for _, n in ipairs{%s} do"
        .. " if not package.searchpath(n, package.path) and pcall(require, n) then"
        .. " io.write(n, ' ') else io.write('MISSING ', n, ' ') end end")
        :format(table.concat(names, ", ")) }
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.is_nil(r.stdout:find("MISSING", 1, true), r.stdout)
      assert.truthy(r.stdout:find("mastra.workspace.glob ", 1, true), r.stdout)
    end)
  end)

  describe("SIGINT", function()
    it("exits 130 and leaves no child process alive", function()
      local path = script("sigint.lua", [[
local mastra = require "mastra"
local dir = arg[1]
local sb = mastra.LocalSandbox.new{ workingDirectory = dir }
for i = 1, 3 do
  mastra.spawn(function()
    sb:executeCommand("echo $$ > pid" .. i .. ".tmp && mv pid" .. i .. ".tmp pid" .. i
      .. "; exec sleep 30")
  end)
end
sb.processes:spawn("echo $$ > pidbg.tmp && mv pidbg.tmp pidbg; exec sleep 30")
mastra.sleep(30000)
print("not interrupted")
]])
      local names = { "pid1", "pid2", "pid3", "pidbg" }
      local pids = {}
      local h = sb.processes:spawn("exec " .. quote(MASTRA_LUA) .. " " .. quote(path) .. " "
        .. quote(dir), { timeout = 20000 })
      finally(function()
        -- whatever happened, leave nothing running
        if h.exitCode == nil then
          sb:executeCommand("kill -KILL " .. h.pid)
          h:wait()
        end
        for _, pid in ipairs(pids) do sb:executeCommand("kill -KILL " .. pid) end
      end)

      -- wait for the children to record their pids
      local t0 = mastra.now()
      while #pids < #names and mastra.now() - t0 < 10000 and h.exitCode == nil do
        pids = {}
        for _, name in ipairs(names) do
          local s = read_file(dir .. "/" .. name)
          local pid = s and s:match("^(%d+)\n$")
          if pid then pids[#pids + 1] = pid end
        end
        if #pids < #names then mastra.sleep(20) end
      end
      assert.are.equal(#names, #pids)
      for _, pid in ipairs(pids) do
        assert.are.equal(0, sb:executeCommand("kill -0 " .. pid).exitCode, "pid " .. pid)
      end

      local t1 = mastra.now()
      assert.are.equal(0, sb:executeCommand("kill -INT " .. h.pid).exitCode)
      local r = h:wait()
      assert.are.equal(130, r.exitCode)
      assert.is_true(mastra.now() - t1 < 5000, "the runner took too long to stop")
      assert.are.equal("", r.stdout)
      assert.truthy(r.stderr:find("interrupted", 1, true), r.stderr)
      for _, pid in ipairs(pids) do
        local alive = sb:executeCommand("kill -0 " .. pid)
        assert.are_not.equal(0, alive.exitCode, "sleep " .. pid .. " is still alive")
      end
    end)
  end)
end)
