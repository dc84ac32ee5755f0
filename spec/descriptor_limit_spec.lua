-- Running out of file descriptors (docs/decisions.md "Teardown and
-- errors"): mastra.map's default concurrency is bounded, and EMFILE/ENFILE
-- on a local spawn, an HTTP request or a WebSocket becomes one
-- ResourceLimitError that names the limit and the fix. The limited cases
-- run a child (mastra-lua or lua5.4) under `ulimit -n 64`, soft and hard,
-- since the module raises the soft limit to the hard one when it opens.
local mastra = require "mastra"
local platform = require "spec.support.platform"
local child = require "spec.support.child"

local quote = mastra.quote

describe("descriptor limits", function()
  local ctx, dir, sb

  setup(function()
    ctx = child.context{ platform = true }
    dir, sb = ctx.dir, ctx.sb
  end)

  teardown(function()
    if ctx then ctx:close() end
  end)

  -- Run `n` commands at once (`kind`: "local" or "platform"; "request": a
  -- GET of the platform sandbox instead) under ulimit -n `limit`; every
  -- failure is printed as one line "Name\tmessage".
  local SCRIPT = [[
local mastra = require "mastra"
local kind, n = arg[1], tonumber(arg[2])
local opts = arg[3] ~= "default" and { concurrency = n } or nil
local s
if kind == "local" then
  s = mastra.LocalSandbox.new{ workingDirectory = arg[0]:gsub("[^/]*$", "") .. "wd" }
else
  s = mastra.PlatformSandbox.new{}
  s:start()
end
local list = {}
for i = 1, n do list[i] = i end
if kind == "request" then
  -- requests end fast: hold them open by stopping the platform for 1 s
  local pid = os.getenv("SERVER_PID")
  os.execute(("kill -STOP %s; (sleep 1; kill -CONT %s) &"):format(pid, pid))
end
local ok = 0
mastra.map(list, function()
  local good, err
  if kind == "request" then -- a control-plane request (GET /sandbox/:id)
    good, err = pcall(s.getInfo, s)
    if good then err = { stdout = err.id == s.sandboxId and "hi\n" } end
  else
    good, err = pcall(s.executeCommand, s, "sleep 0.3; echo hi")
  end
  if good and err.stdout == "hi\n" then
    ok = ok + 1
  else
    print(type(err) == "table" and err.name or "string",
      (tostring(type(err) == "table" and err.message or err):gsub("\n", " ")))
  end
end, opts)
print("ok", ok)
s:destroy()
]]

  local function run(runner, kind, n, limit, default)
    local script = dir .. "/fd.lua"
    platform.writeFile(script, SCRIPT)
    local r = sb:executeCommand(("ulimit -n %d && exec %s %s %s %d %s"):format(limit,
      quote(child.binary(runner)), quote(script), kind, n, default and "default" or "given"),
      nil, { env = ctx:env{ SERVER_PID = tostring(ctx.srv.pid) }, timeout = 60000 })
    sb:executeCommand("kill -CONT " .. ctx.srv.pid) -- whatever happened
    assert.are.equal(0, r.exitCode, r.stderr)
    local ok = tonumber(r.stdout:match("\nok\t(%d+)\n$") or r.stdout:match("^ok\t(%d+)\n$"))
    assert.truthy(ok, r.stdout)
    local failures = {}
    for line in r.stdout:gmatch("[^\n]+") do
      if not line:match("^ok\t") then failures[#failures + 1] = line end
    end
    assert.are.equal(n, ok + #failures, r.stdout)
    return ok, failures
  end

  for _, case in ipairs{ { "mastra-lua", "local" }, { "lua5.4", "local" },
    { "mastra-lua", "platform" }, { "lua5.4", "platform" }, { "lua5.4", "request" } } do
    local runner, kind = case[1], case[2]
    it(("100 %s operations at once under ulimit -n 64 (%s): a result or the descriptor"
      .. " error"):format(kind, runner), function()
      local ok, failures = run(runner, kind, 100, 64)
      assert.is_true(#failures > 0, "want the limit to be reached (all 100 succeeded)")
      assert.is_true(ok > 0, "want some commands to succeed:\n" .. table.concat(failures, "\n"))
      for _, line in ipairs(failures) do
        assert.matches("^ResourceLimitError\t", line)
        assert.matches("out of file descriptors", line, 1, true)
        assert.matches("ulimit -n 64", line, 1, true)
        assert.matches("lower the concurrency", line, 1, true)
      end
    end)
  end

  it("mastra.map's default concurrency keeps 150 local commands under ulimit -n 256",
    function()
      local ok, failures = run("mastra-lua", "local", 150, 256, true)
      assert.are.equal(150, ok, table.concat(failures, "\n"))
    end)

  it("mastra.map runs at most 64 items at once by default", function()
    local running, most = 0, 0
    local list = {}
    for i = 1, 150 do list[i] = i end
    mastra.map(list, function()
      running = running + 1
      most = math.max(most, running)
      mastra.sleep(5)
      running = running - 1
    end)
    assert.are.equal(64, most)
  end)
end)
