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

  -- Run shell text in dir (the runner's path quoted inside by the caller).
  local function sh(text)
    local r = sb:executeCommand(text, nil, { timeout = 10000 })
    if r.timedOut then
      error(("%s: still running after 10 s (killed); stdout: %q, stderr: %q")
        :format(text, r.stdout, r.stderr), 2)
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
    it("-v prints the version, then runs the script", function()
      local path = script("after_v.lua", "io.write('script ran')\n")
      local r = run{ "-v", path }
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.truthy(r.stdout:find("^mastra%-lua [^\n]+\nscript ran$"), r.stdout)
    end)

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

    it("no script, and stdin is not a terminal: runs stdin, as lua does", function()
      local r = sh("printf 'io.write(\"from stdin \", #arg)' | " .. quote(MASTRA_LUA))
      assert.are.equal("", r.stderr)
      assert.are.equal(0, r.exitCode)
      assert.are.equal("from stdin 0", r.stdout)
    end)

    it("- runs stdin with the arguments after it", function()
      local r = sh("printf 'io.write(table.concat({...}, \",\"), \" \", arg[0])' | "
        .. quote(MASTRA_LUA) .. " - a b")
      assert.are.equal("", r.stderr)
      assert.are.equal(0, r.exitCode)
      assert.are.equal("a,b -", r.stdout)
    end)

    it("--help prints the usage with every option", function()
      local r = run{ "--help" }
      assert.are.equal(0, r.exitCode)
      for _, opt in ipairs{ "-e CODE", "-i ", "-l mod", "-l g=mod", "-v ", "-E ", "-W ",
          "--env-file FILE", "--no-env-file", "--  ", "-  " } do
        assert.truthy(r.stdout:find(opt, 1, true), opt .. " in " .. r.stdout)
      end
    end)

    it("arg exists before -e runs (two passes, as in lua)", function()
      local path = script("arg_e.lua", "")
      local r = run{ "-e", "io.write(arg[0], '|', arg[1], '|', arg[-1], '|', arg[-2])", path, "x" }
      assert.are.equal("", r.stderr)
      assert.are.equal(0, r.exitCode)
      assert.are.equal(table.concat({ path, "x", "io.write(arg[0], '|', arg[1], '|', arg[-1],"
        .. " '|', arg[-2])", "-e" }, "|"), r.stdout)
      -- with no script, arg[0] is the runner and the options follow, as in lua
      r = run{ "-e", "io.write(arg[0], ' ', arg[1], ' ', #arg)" }
      assert.are.equal(MASTRA_LUA .. " -e 2", r.stdout)
    end)

    it("-l mod and -l g=mod require into globals, as tasks, in order with -e", function()
      write_file(dir .. "/mymod.lua", [[
local mastra = require "mastra"
return { name = "mymod", task = mastra.currentTask() ~= nil }
]])
      local r = sh("LUA_PATH=" .. quote(dir .. "/?.lua") .. " " .. quote(MASTRA_LUA)
        .. " -e 'X = 1' -l mymod -l g=mymod -lmastra"
        .. " -e 'io.write(X, mymod.name, tostring(mymod.task), g.name, mastra._VERSION)'")
      assert.are.equal("", r.stderr)
      assert.are.equal(0, r.exitCode)
      assert.are.equal("1mymodtruemymod" .. mastra._VERSION, r.stdout)
      local bad = run{ "-l", "no_such_module_here" }
      assert.are.equal(1, bad.exitCode)
      assert.truthy(bad.stderr:find("module 'no_such_module_here' not found", 1, true), bad.stderr)
    end)

    it("LUA_INIT_5_4, else LUA_INIT, runs first; -E ignores them", function()
      local init = script("init.lua", "io.write('init file ')\n")
      local r = sh("LUA_INIT='io.write(\"init \")' " .. quote(MASTRA_LUA) .. " -e 'io.write(1)'")
      assert.are.equal("init 1", r.stdout, r.stderr)
      r = sh("LUA_INIT='io.write(\"init \")' LUA_INIT_5_4=" .. quote("@" .. init) .. " "
        .. quote(MASTRA_LUA) .. " -e 'io.write(2)'")
      assert.are.equal("init file 2", r.stdout, r.stderr)
      r = sh("LUA_INIT='io.write(\"init \")' " .. quote(MASTRA_LUA) .. " -E -e 'io.write(3)'")
      assert.are.equal("3", r.stdout, r.stderr)
      r = sh("LUA_INIT='error(\"bad init\")' " .. quote(MASTRA_LUA) .. " -e 'io.write(4)'")
      assert.are.equal(1, r.exitCode)
      assert.are.equal("", r.stdout)
      assert.truthy(r.stderr:find("LUA_INIT:1: bad init", 1, true), r.stderr)
    end)

    it("-W turns warnings on", function()
      local r = run{ "-e", "warn('quiet')" }
      assert.are.equal("", r.stderr)
      r = run{ "-W", "-e", "warn('loud')" }
      assert.are.equal(0, r.exitCode)
      assert.truthy(r.stderr:find("Lua warning: loud", 1, true), r.stderr)
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

    it("error(nil), error({}) and an error object's __tostring print as in lua", function()
      local r = run{ "-e", "error(nil)" }
      assert.are.equal(1, r.exitCode)
      assert.are.equal(MASTRA_LUA .. ": (error object is a nil value)\n", r.stderr)
      r = run{ "-e", "error({})" }
      assert.are.equal(1, r.exitCode)
      assert.truthy(r.stderr:find("^" .. MASTRA_LUA:gsub("%p", "%%%0")
        .. ": %(error object is a table value%)\nstack traceback:"), r.stderr)
      r = run{ "-e", "error(setmetatable({}, { __tostring = function() return 'custom' end }))" }
      assert.are.equal(1, r.exitCode)
      assert.truthy(r.stderr:find(MASTRA_LUA .. ": custom\n", 1, true), r.stderr)
      r = run{ "-e", "error(setmetatable({}, { __tostring = function() return 42 end }))" }
      assert.truthy(r.stderr:find("(error object is a table value)", 1, true), r.stderr)
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

  describe("stopping signals", function()
    for _, case in ipairs{ { "INT", 130 }, { "TERM", 143 }, { "HUP", 129 } } do
      local signame, code = case[1], case[2]
      it("SIG" .. signame .. " exits " .. code .. " and leaves no child process alive", function()
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
        for _, name in ipairs(names) do os.remove(dir .. "/" .. name) end
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
        assert.are.equal(0, sb:executeCommand("kill -" .. signame .. " " .. h.pid).exitCode)
        local r = h:wait()
        assert.are.equal(code, r.exitCode)
        assert.truthy(r.stderr:find("(SIG" .. signame .. ")", 1, true), r.stderr)
        assert.is_true(mastra.now() - t1 < 5000, "the runner took too long to stop")
        assert.are.equal("", r.stdout)
        assert.truthy(r.stderr:find("interrupted", 1, true), r.stderr)
        for _, pid in ipairs(pids) do
          local alive = sb:executeCommand("kill -0 " .. pid)
          assert.are_not.equal(0, alive.exitCode, "sleep " .. pid .. " is still alive")
        end
      end)
    end
  end)

  describe("the REPL (-i)", function()
    -- Feed the lines to `mastra-lua -i` through a pipe, with pauses
    -- ("SLEEP n" lines) between them.
    local function repl(lines, extra)
      local parts = {}
      for _, l in ipairs(lines) do
        local pause = l:match("^SLEEP (.*)$")
        parts[#parts + 1] = pause and ("sleep " .. pause) or ("printf '%s\\n' " .. quote(l))
      end
      return sh("(" .. table.concat(parts, "; ") .. ") | " .. quote(MASTRA_LUA) .. " -i "
        .. (extra or ""))
    end

    it("runs each line as a task: sb:executeCommand at the prompt returns its result", function()
      local r = repl{
        "mastra = require 'mastra'",
        "sb = mastra.LocalSandbox.new{ workingDirectory = " .. ("%q"):format(dir) .. " }",
        "return sb:executeCommand('echo', { 'from the prompt' }).stdout",
        "= mastra.currentTask() ~= nil",
        "x = 20 + 1",
        "x * 2",
        "for i = 1, 2 do",
        "  io.write(i, ' ')",
        "end",
        "error('line failed')",
        "print('still here')",
        "sb:destroy()",
      }
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.truthy(r.stdout:find("^mastra%-lua [^\n]*\n> "), r.stdout) -- the version, a prompt
      assert.truthy(r.stdout:find("> from the prompt\n\n> true\n", 1, true), r.stdout)
      assert.truthy(r.stdout:find("> 42\n", 1, true), r.stdout)
      assert.truthy(r.stdout:find(">> >> 1 2 > ", 1, true), r.stdout) -- _PROMPT2 while incomplete
      assert.truthy(r.stdout:find("still here", 1, true), r.stdout)
      -- errors are reported without the program's name, and the REPL goes on
      assert.truthy(r.stderr:find("^stdin:1: line failed\nstack traceback:"), r.stderr)
    end)

    it("drives the loop while it waits for input: spawned tasks progress", function()
      local r = repl{
        "mastra = require 'mastra'; t0 = mastra.now()",
        "mastra.spawn(function() for i = 1, 3 do mastra.sleep(50) print('tick', i) end end)",
        "SLEEP 1",
        "print('typed later')",
      }
      assert.are.equal(0, r.exitCode, r.stderr)
      local ticks = r.stdout:find("tick\t3", 1, true)
      local later = r.stdout:find("typed later", 1, true)
      assert.truthy(ticks and later and ticks < later, r.stdout)
    end)

    it("reports a failed task nobody waited for, and waits for tasks at the end", function()
      local r = repl{
        "mastra = require 'mastra'",
        "mastra.spawn(function() mastra.sleep(20) error('background failure') end)",
        "SLEEP 0.5",
        "mastra.spawn(function() mastra.sleep(300) print('finished after the input') end)",
      }
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.truthy(r.stderr:find("background failure", 1, true), r.stderr)
      assert.truthy(r.stdout:find("finished after the input", 1, true), r.stdout)
    end)

    it("runs the script first, then the REPL; _PROMPT sets the prompt", function()
      local path = script("before_repl.lua", "_PROMPT = 'mastra> '\nFROM_SCRIPT = 7\n")
      local r = repl({ "FROM_SCRIPT + 1" }, quote(path))
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.truthy(r.stdout:find("mastra> 8\n", 1, true), r.stdout)
    end)

    it("Ctrl-C cancels the running line and comes back; SIGTERM exits 143", function()
      -- the REPL's input: its pid into a file, a line that sleeps, later a
      -- line that leaves a marker, then empty lines until the runner is gone
      local pidfile, marker = dir .. "/repl.pid", dir .. "/after_ctrl_c"
      os.remove(pidfile)
      os.remove(marker)
      local lines = {
        ("f = io.open(%q, 'w'); f:write(io.open('/proc/self/stat'):read('n')); f:close()")
          :format(pidfile),
        "require('mastra').sleep(20000)",
        ("io.open(%q, 'w'):close()"):format(marker),
      }
      local feed = ("printf '%%s\\n' %s %s; sleep 1; printf '%%s\\n' %s;"
        .. " while printf '\\n'; do sleep 0.2; done"):format(quote(lines[1]), quote(lines[2]),
        quote(lines[3]))
      local h = sb.processes:spawn("(" .. feed .. ") | " .. quote(MASTRA_LUA) .. " -i")
      local pid
      finally(function()
        if h.exitCode == nil then
          if pid then sb:executeCommand("kill -KILL " .. pid) end
          h:kill()
          h:wait()
        end
      end)
      util.wait_until(function()
        pid = tonumber(read_file(pidfile) or "")
        return pid ~= nil
      end, 5000)
      assert.is_not_nil(pid, "the REPL ran no line: " .. h.stdout .. h.stderr)
      mastra.sleep(300) -- into the sleep of the second line
      assert.are.equal(0, sb:executeCommand("kill -INT " .. pid).exitCode)
      util.wait_until(function() return read_file(marker) ~= nil end, 5000)
      assert.truthy(read_file(marker), "the line after the Ctrl-C did not run: " .. h.stderr)
      assert.is_nil(h.exitCode)
      assert.truthy(h.stderr:find("InterruptedError: interrupted", 1, true), h.stderr)

      assert.are.equal(0, sb:executeCommand("kill -TERM " .. pid).exitCode)
      local r = h:wait()
      assert.truthy(r.stderr:find("interrupted (SIGTERM)", 1, true), r.stderr)
      -- the pipeline's status is the runner's (the feeding loop then dies of SIGPIPE)
      assert.are.equal(143, r.exitCode)
    end)
  end)

  describe("SIGTERM with platform and local commands running", function()
    it("leaves no process and no sandbox behind, and exits 143", function()
      local platform = require "spec.support.platform"
      -- its platform command writes its pid into a directory of the host
      local srv = platform.start{ driver = "process" }
      local path = script("sigterm_platform.lua", [[
local mastra = require "mastra"
local dir, url, token = arg[1], arg[2], arg[3]
local lsb = mastra.LocalSandbox.new{ workingDirectory = dir }
local psb = mastra.PlatformSandbox.new{ accessToken = token, proxyUrl = url,
  projectId = "proj-runner", environmentId = "env" }
psb:start()
local f = assert(io.open(dir .. "/sandbox_id", "w"))
f:write(psb.sandboxId)
f:close()
mastra.spawn(function()
  lsb:executeCommand("echo $$ > lpid.tmp && mv lpid.tmp lpid; exec sleep 30")
end)
mastra.spawn(function()
  psb:executeCommand("echo $$ > " .. dir .. "/ppid.tmp && mv " .. dir .. "/ppid.tmp "
    .. dir .. "/ppid; exec sleep 30")
end)
mastra.sleep(30000)
]])
      for _, name in ipairs{ "lpid", "ppid", "sandbox_id" } do os.remove(dir .. "/" .. name) end
      local h = sb.processes:spawn("exec " .. quote(MASTRA_LUA) .. " " .. quote(path) .. " "
        .. quote(dir) .. " " .. quote(srv.url) .. " " .. quote(srv.token), { timeout = 30000 })
      local pids = {}
      finally(function()
        if h.exitCode == nil then
          sb:executeCommand("kill -KILL " .. h.pid)
          h:wait()
        end
        for _, pid in ipairs(pids) do sb:executeCommand("kill -KILL " .. pid) end
        srv:stop()
      end)
      util.wait_until(function()
        pids = {}
        for _, name in ipairs{ "lpid", "ppid" } do
          local pid = (read_file(dir .. "/" .. name) or ""):match("^(%d+)\n$")
          if pid then pids[#pids + 1] = pid end
        end
        return #pids == 2 or h.exitCode ~= nil
      end, 15000)
      assert.are.equal(2, #pids, "the commands did not start: " .. h.stderr)
      local id = read_file(dir .. "/sandbox_id")
      assert.truthy(id and id ~= "")

      assert.are.equal(0, sb:executeCommand("kill -TERM " .. h.pid).exitCode)
      local r = h:wait()
      assert.are.equal(143, r.exitCode, r.stderr)
      assert.truthy(r.stderr:find("interrupted (SIGTERM)", 1, true), r.stderr)
      for _, pid in ipairs(pids) do
        assert.are_not.equal(0, sb:executeCommand("kill -0 " .. pid).exitCode,
          "process " .. pid .. " is still alive")
      end
      local rec = srv:curl("GET", "/v1/railway/projects/proj-runner/sandbox/" .. id)
      assert.are.equal(200, rec.status, rec.body)
      assert.are_not.equal(platform.null, rec.json.destroyedAt, rec.body)
    end)
  end)

  describe(".env", function()
    local show = "io.write(tostring(os.getenv('DOT_A')), '|', tostring(os.getenv('DOT_B')))"

    it("is read from the current directory; the real environment wins", function()
      write_file(dir .. "/.env", "# settings\nexport DOT_A=from-file # a comment\n"
        .. "DOT_B = \"two\\nlines\"\n")
      finally(function() os.remove(dir .. "/.env") end)
      local r = run{ "-e", show }
      assert.are.equal("", r.stderr)
      assert.are.equal("from-file|two\nlines", r.stdout)
      r = sh("DOT_A=from-env " .. quote(MASTRA_LUA) .. " -e " .. quote(show))
      assert.are.equal("from-env|two\nlines", r.stdout)
      r = run{ "--no-env-file", "-e", show }
      assert.are.equal("nil|nil", r.stdout)
      r = sh("MASTRA_ENV_FILE= " .. quote(MASTRA_LUA) .. " -e " .. quote(show))
      assert.are.equal("nil|nil", r.stdout)
    end)

    it("--env-file and MASTRA_ENV_FILE pick another file, which must exist", function()
      local other = dir .. "/other.env"
      write_file(other, "DOT_A='single $quoted'\n")
      local r = run{ "--env-file", other, "-e", show }
      assert.are.equal("single $quoted|nil", r.stdout, r.stderr)
      r = sh("MASTRA_ENV_FILE=" .. quote(other) .. " " .. quote(MASTRA_LUA) .. " -e "
        .. quote(show))
      assert.are.equal("single $quoted|nil", r.stdout, r.stderr)
      r = run{ "--env-file", dir .. "/missing.env", "-e", show }
      assert.are.equal(1, r.exitCode)
      assert.truthy(r.stderr:find("missing.env", 1, true), r.stderr)
    end)

    it("a malformed file names the line, never a value", function()
      local bad = dir .. "/bad.env"
      write_file(bad, "GOOD=secret-value-1\nBROKEN=\"secret-value-2\n")
      local r = run{ "--env-file", bad, "-e", show }
      assert.are.equal(1, r.exitCode)
      assert.truthy(r.stderr:find("bad.env:2: the value of BROKEN has no closing \" quote", 1,
        true), r.stderr)
      assert.is_nil(r.stderr:find("secret-value", 1, true), r.stderr)
    end)
  end)

  describe("a plain lua5.4 script", function()
    it("that spawns tasks and never waits for them gets a warning at exit", function()
      local path = script("no_run.lua", [[
local mastra = require "mastra"
mastra.spawn(function() io.write("never runs") end)
]])
      -- an ASan build's module needs the ASan runtime first in lua5.4
      local preload = os.getenv("MASTRA_TEST_PRELOAD")
      local r = sh("LUA_PATH_5_4=" .. quote(os.getenv("LUA_PATH_5_4") or "") .. " LUA_CPATH_5_4="
        .. quote(os.getenv("LUA_CPATH_5_4") or "")
        .. (preload and (" LD_PRELOAD=" .. quote(preload)) or "") .. " lua5.4 " .. quote(path))
      assert.are.equal(0, r.exitCode)
      assert.are.equal("", r.stdout)
      assert.truthy(r.stderr:find("mastra: 1 task(s) had not finished when Lua exited"
        .. " (1 never started)", 1, true), r.stderr)
      -- the same script under the runner runs its task
      r = run{ path }
      assert.are.equal("never runs", r.stdout)
      assert.are.equal("", r.stderr)
    end)
  end)
end)
