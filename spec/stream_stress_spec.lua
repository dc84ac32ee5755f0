-- Every stream ends, with every byte, under load (issue 28 item 1). Many
-- execs at once of 0 bytes to 64 MiB, on stdout and stderr, kept and not
-- kept, read fast, slowly, or after a long pause (which fills every
-- buffer on the way, then drains them at once), with stdin, on the local
-- platform's process and namespaces drivers and on a LocalSandbox; then
-- the bucket's streamed PUTs and GETs; all beside CPU hogs. And once more
-- with spec/support/preempt.so in the server, which gives it every time
-- the timing that load gives it rarely (preempted between two sends while
-- its client drains the socket): the lost wake-up of exec_ws.c's held-back
-- output stalled every one of those execs before its fix.
--
-- A stalled stream fails the spec within its own bound: every exec has a
-- timeout (and a timed-out result fails), every HTTP request too.
local mastra = require "mastra"
local core = require "mastra.core"
local task = require "mastra.task"
local platform = require "spec.support.platform"

local KiB, MiB = 1024, 1048576
local EXEC_TIMEOUT = 100000 -- ms: far above a run under ASan and load
local HOGS = 4

-- {====== the bytes: lines of 251 (a prime, so no frame size is a multiple)

local function line(seed)
  local alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
  local t = {}
  for i = 0, 249 do
    local k = (i * i + seed * i + seed) % #alphabet
    t[#t + 1] = alphabet:sub(k + 1, k + 1)
  end
  return table.concat(t)
end

local OUT_LINE, ERR_LINE = line(3), line(7)
local SLICE = MiB
local function period(l) return (l .. "\n"):rep((SLICE + 251) // 251 + 1) end
local OUT_REP, ERR_REP = period(OUT_LINE), period(ERR_LINE)

-- shell text that writes n bytes of the stream's pattern (yes | head)
local function gen(l, n, fd)
  return ("yes %s | head -c %d%s"):format(l, n, fd == 2 and " >&2" or "")
end

-- A checker of one stream: feed it the bytes as they come.
local function checker(rep)
  local c = { n = 0 }
  function c.feed(s)
    local pos = 1
    while pos <= #s and not c.bad do
      local k = math.min(#s - pos + 1, SLICE)
      local off = c.n % 251
      if s:sub(pos, pos + k - 1) ~= rep:sub(off + 1, off + k) then
        c.bad = ("bytes differ from the pattern at or after offset %d"):format(c.n)
      end
      c.n = c.n + k
      pos = pos + k
    end
  end
  return c
end

-- n bytes of the pattern whose period rep holds (a whole number of lines)
local function pattern(rep, n)
  return rep:rep(n // #rep + 1):sub(1, n)
end

-- }======

-- {====== readers

-- onStdout/onStderr for a reader kind: fast, slow (a sleep every 512 KiB),
-- pause (one long sleep after the first MiB, then as fast as it can),
-- pauses (a long sleep every 16 MiB)
local function reader(kind, c)
  local mark, paused = 0, false
  return function(s)
    c.feed(s)
    if kind == "slow" and c.n - mark >= 512 * KiB then
      mark = c.n
      mastra.sleep(30)
    elseif kind == "pause" and not paused and c.n >= MiB then
      paused = true
      mastra.sleep(600)
    elseif kind == "pauses" and c.n - mark >= 16 * MiB then
      mark = c.n
      mastra.sleep(500)
    end
  end
end

-- the cases of one target: bytes on stdout and stderr, kept or not, reader
local CASES = {
  { out = 0, err = 0, keep = true, read = "fast" },
  { out = 1, err = 0, keep = true, read = "fast" },
  { out = 64 * KiB - 1, err = 64 * KiB + 1, keep = true, read = "slow" },
  { out = MiB + 3, err = 0, keep = false, read = "pause" },
  { out = 0, err = 3 * MiB, keep = false, read = "fast" },
  { out = 8 * MiB, err = MiB, keep = false, read = "slow" },
  { out = 16 * MiB, err = 0, keep = false, read = "pause" },
  { out = 16 * MiB, err = 0, keep = true, read = "fast" },
  { out = 64 * MiB, err = 0, keep = false, read = "pause" },
  { out = 4 * MiB, err = 4 * MiB, keep = true, read = "fast" },
  { out = 2 * MiB + 1, err = 0, keep = true, read = "slow" },
  { out = 24 * MiB, err = 2 * MiB, keep = false, read = "fast" },
}

local function describe_case(c)
  return ("%d bytes on stdout, %d on stderr, %s, %s reader"):format(c.out, c.err,
    c.keep and "kept" or "not kept", c.read)
end

-- Run one case on sb; returns nil or what went wrong.
local function run_case(sb, c)
  local out, err = checker(OUT_REP), checker(ERR_REP)
  local cmd = ("(%s) & %s; wait"):format(gen(OUT_LINE, c.out, 1), gen(ERR_LINE, c.err, 2))
  local r = sb:executeCommand(cmd, nil, {
    timeout = c.timeout or EXEC_TIMEOUT,
    maxRetainedBytes = (not c.keep) and 0 or nil,
    onStdout = reader(c.read, out),
    onStderr = reader(c.read, err),
  })
  local why
  if r.timedOut then why = "timed out (a stalled stream)"
  elseif r.exitCode ~= 0 then why = "exit " .. tostring(r.exitCode)
  elseif out.n ~= c.out then why = ("stdout: %d bytes, want %d"):format(out.n, c.out)
  elseif err.n ~= c.err then why = ("stderr: %d bytes, want %d"):format(err.n, c.err)
  elseif out.bad or err.bad then why = out.bad or err.bad
  elseif c.keep then
    local ko, ke = checker(OUT_REP), checker(ERR_REP)
    ko.feed(r.stdout)
    ke.feed(r.stderr)
    if ko.n ~= c.out or ke.n ~= c.err or ko.bad or ke.bad then
      why = ("kept output: %d and %d bytes%s"):format(ko.n, ke.n,
        (ko.bad or ke.bad) and (": " .. (ko.bad or ke.bad)) or "")
    end
  elseif #r.stdout ~= 0 or #r.stderr ~= 0 then
    why = "output kept with maxRetainedBytes = 0"
  end
  return why and (describe_case(c) .. ": " .. why) or nil
end

-- stdin: sizes through cat, one of them from a function source
local STDIN_CASES = {
  { n = 0, read = "fast" },
  { n = 1, read = "fast" },
  { n = MiB + 5, read = "slow" },
  { n = 8 * MiB, read = "pause" },
  { n = 3 * MiB + 1, read = "fast", source = true },
}

local function run_stdin_case(sb, c)
  local data = pattern(OUT_REP, c.n)
  local stdin = data
  if c.source then
    local pos, pieces = 1, 0
    stdin = function()
      if pos > #data then return nil end
      local piece = data:sub(pos, pos + 100000 - 1)
      pos = pos + #piece
      pieces = pieces + 1
      if pieces % 8 == 0 then mastra.sleep(5) end -- a slow source now and then
      return piece
    end
  end
  local out = checker(OUT_REP)
  local r = sb:executeCommand("cat", nil, { timeout = EXEC_TIMEOUT, stdin = stdin,
    maxRetainedBytes = 0, onStdout = reader(c.read, out) })
  local why
  if r.timedOut then why = "timed out (a stalled stream)"
  elseif r.exitCode ~= 0 then why = "exit " .. tostring(r.exitCode) .. ": " .. r.stderr
  elseif out.n ~= c.n then why = ("%d bytes back, want %d"):format(out.n, c.n)
  elseif out.bad then why = out.bad end
  return why and (("stdin of %d bytes (%s reader%s): %s"):format(c.n, c.read,
    c.source and ", a function source" or "", why)) or nil
end

-- Every case, `at_once` (default 6) at a time; the list of failures.
local function stress(sb, cases, run, at_once)
  local failures = {}
  mastra.map(cases, function(c)
    local why = run(sb, c)
    if why then failures[#failures + 1] = why end
  end, { concurrency = at_once or 6 })
  return failures
end

-- }======

-- {====== load

local hogs

local function start_hogs()
  hogs = mastra.LocalSandbox.new{}
  hogs:start()
  for _ = 1, HOGS do
    -- bounded even if the spec is killed: timeout ends it
    hogs.processes:spawn("exec timeout 280 sh -c 'while :; do :; done'")
  end
end

local function stop_hogs()
  if hogs then
    hogs:destroy()
    hogs = nil
  end
end

-- }======

local function is_root()
  local p = io.popen("id -u")
  local uid = p:read("a"):gsub("%s", "")
  p:close()
  return uid == "0"
end

local function exec_stress(sb)
  local failures = stress(sb, CASES, run_case)
  for _, f in ipairs(stress(sb, STDIN_CASES, run_stdin_case)) do
    failures[#failures + 1] = f
  end
  assert.are.same({}, failures)
end

describe("streams under load", function()
  setup(start_hogs)
  teardown(stop_hogs)

  it("every exec of a LocalSandbox completes with every byte", function()
    local sb <close> = mastra.LocalSandbox.new{}
    sb:start()
    exec_stress(sb)
  end)

  for _, driver in ipairs{ "process", "namespaces" } do
    it("every exec of the local platform's " .. driver .. " driver completes with every byte",
      function()
      if driver == "namespaces" and not is_root() then
        pending("the namespaces driver needs root here: skipped")
        return
      end
      local srv = platform.start{ driver = driver }
      local ok, err = pcall(function()
        local sb <close> = srv:startSandbox()
        exec_stress(sb)
      end)
      srv:stop()
      assert(ok, err)
    end)
  end

  it("every streamed PUT and GET of the bucket completes with every byte", function()
    local srv = platform.start{ driver = "process" }
    local function url(key) return srv.url .. "/v1/railway/projects/proj/fs/bkt/" .. key end
    local auth = { authorization = "Bearer " .. srv.token }
    local function result(req)
      while true do
        local status, a, b = req:result()
        if status or a then return status, a, b end
        task.wait(req:id())
      end
    end
    local objects = {
      { n = 0, read = "fast" }, { n = 1, read = "slow" }, { n = MiB + 1, read = "pause" },
      { n = 16 * MiB, read = "pause" }, { n = 16 * MiB + 7, read = "slow" },
      { n = 48 * MiB, read = "fast" }, { n = 64 * MiB, read = "pause" },
    }
    local failures = {}
    local ok, err = pcall(mastra.map, objects, function(o)
      local key = ("o%d-%s"):format(o.n, o.read)
      local data = pattern(OUT_REP, o.n)
      -- PUT: written in pieces of 100000 bytes while the queue has room;
      -- a slow writer sleeps now and then
      local put <close> = assert(core.http{ method = "PUT", url = url(key), headers = auth,
        bodyStream = true, timeout = EXEC_TIMEOUT })
      for i = 1, #data, 100000 do
        assert(put:write(data:sub(i, i + 99999)))
        if o.read ~= "fast" and (i // 100000) % 16 == 0 then mastra.sleep(20) end
        while put:bufferedAmount() >= 256 * KiB and put:result() == nil do
          task.wait(put:id())
        end
      end
      assert(put:finish())
      local status, msg = result(put)
      if status ~= 200 then
        failures[#failures + 1] = ("PUT %s: %s"):format(key, tostring(status or msg))
        return
      end
      -- GET, streamed, through the reader
      local get <close> = assert(core.http{ url = url(key), headers = auth,
        streamResponse = true, timeout = EXEC_TIMEOUT })
      local c = checker(OUT_REP)
      local feed = reader(o.read, c)
      while true do
        local piece = get:read()
        if piece then
          feed(piece)
        else
          local done, m = get:result()
          if done or m then break end
          task.wait(get:id())
        end
      end
      status, msg = get:result()
      if status ~= 200 or c.n ~= o.n or c.bad then
        failures[#failures + 1] = ("GET %s: status %s, %d bytes of %d%s"):format(key,
          tostring(status or msg), c.n, o.n, c.bad and (": " .. c.bad) or "")
      end
    end, { concurrency = 4 })
    srv:stop()
    assert(ok, err)
    assert.are.same({}, failures)
  end)
end)

describe("the exec WebSocket with the server preempted between two sends", function()
  it("moves the output it held back once a send drains its queue", function()
    local preempt = os.getenv("MASTRA_PREEMPT")
    if preempt == nil or preempt == "" then
      pending("MASTRA_PREEMPT is not set (CTest sets it): skipped")
      return
    end
    local srv = platform.start{ driver = "process", preload = preempt }
    local failures = {}
    local ok, err = pcall(function()
      local sb <close> = srv:startSandbox()
      local cases = {
        { out = 64 * MiB, err = 0, keep = false, read = "pauses", timeout = 30000 },
        { out = 64 * MiB, err = 0, keep = false, read = "pauses", timeout = 30000 },
        { out = 64 * MiB, err = MiB, keep = false, read = "pauses", timeout = 30000 },
        { out = 48 * MiB, err = 0, keep = false, read = "pauses", timeout = 30000 },
        { out = 40 * MiB, err = 2 * MiB, keep = false, read = "pauses", timeout = 30000 },
      }
      -- one at a time: each client reads as fast as it can after a pause
      failures = stress(sb, cases, run_case, 1)
    end)
    srv:stop()
    assert(ok, err)
    assert.are.same({}, failures)
  end)
end)
