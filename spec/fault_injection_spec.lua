-- Fault injection, measured (docs/reliability.md): a fleet of PlatformSandbox
-- clones, each running a command whose output is known (the lines 1..N of
-- `seq`), goes through one injected fault per case, and the spec counts
-- what happened to every exec and every sandbox:
--   a. kill -9 of the real mastra-platform mid-command, and a restart on
--      the same data directory and port;
--   b. WebSocket close 1006 mid-output (the scripted fault server);
--   c. a storm of 503 answers to POST /sandbox (the fault server);
--   d. a slow reader: onStdout sleeps now and then (the real platform);
--   e. a full disk under the data directory (a small tmpfs): bucket writes
--      through PlatformFilesystem, then a restart.
-- The rules, for every case: each exec ends in the full result (the exact
-- output, exit 0) or a typed error of a documented class
-- (mastra.errors.X:is(err)); an exit 0 with less than the full output is a
-- silent truncation and fails the case; every sandbox a clone held is
-- destroyed or not live on the server at the end (GET: destroyedAt,
-- stopped, or 404), and no command runs under the data directory. The
-- figures go to stderr, one line per fault ("fault-injection: ...").
local lfs = require "lfs"
local mastra = require "mastra"
local platform = require "spec.support.platform"
local fault = require "spec.support.fault"
local util = require "spec.support.util"

local errors = mastra.errors
local quote = mastra.quote

local FLEET = 50
local LINES = 20000

local function seq_text(from, to)
  local t = {}
  for i = from, to do t[#t + 1] = i end
  return table.concat(t, "\n") .. "\n"
end

local EXPECTED = seq_text(1, LINES) -- `seq 1 20000`: 108894 bytes

-- The documented error classes (docs/api.md "Errors"), most specific first.
local CLASSES = { "SandboxDestroyedError", "SandboxExecTransportError", "SandboxNotReadyError",
  "ResourceLimitError", "PlatformApiError", "NetworkError", "TimeoutError", "CancelledError",
  "FileNotFoundError", "FileExistsError", "PermissionError", "FilesystemError" }

local function classify(err)
  for _, name in ipairs(CLASSES) do
    if errors[name]:is(err) then
      if name == "PlatformApiError" then return name .. " " .. tostring(err.status) end
      return name
    end
  end
  return nil
end

-- {====== the tally of one fault ======

local REPORT = {}

local function tally(name)
  return { name = name, execs = 0, full = 0, typed = {}, truncated = 0, failed = 0,
    untyped = 0, replayed = 0, sandboxes = 0, left = 0, processes = 0,
    t0 = mastra.now() }
end

local function typed_total(t)
  local n = 0
  for _, v in pairs(t.typed) do n = n + v end
  return n
end

local function typed_text(t)
  local names = {}
  for k in pairs(t.typed) do names[#names + 1] = k end
  table.sort(names)
  for i, k in ipairs(names) do names[i] = ("%s %d"):format(k, t.typed[k]) end
  return #names == 0 and "none" or table.concat(names, ", ")
end

-- One exec's outcome: ok and r as pcall gave them; streamed: what onStdout
-- saw (nil: not watched).
local function count(t, ok, r, expected, streamed)
  t.execs = t.execs + 1
  if ok then
    if r.exitCode == 0 and r.stdout == expected then
      t.full = t.full + 1
      if streamed ~= nil and streamed ~= expected then t.replayed = t.replayed + 1 end
    elseif r.exitCode == 0 then
      t.truncated = t.truncated + 1
      t.sample = ("exit 0 with %d of %d bytes"):format(#r.stdout, #expected)
    else
      t.failed = t.failed + 1
      t.sample = ("exit %s with %d of %d bytes: %s"):format(tostring(r.exitCode), #r.stdout,
        #expected, r.stderr:sub(1, 200))
    end
  else
    local c = classify(r)
    t.lastError = errors.message(r)
    if c then
      t.typed[c] = (t.typed[c] or 0) + 1
    else
      t.untyped = t.untyped + 1
      t.sample = tostring(r)
    end
  end
end

-- Run command on sb and count it. opts.onChunk(n): after the nth chunk of
-- stdout (it may sleep).
local function exec(t, sb, command, expected, opts)
  opts = opts or {}
  local chunks = {}
  local ok, r = pcall(sb.executeCommand, sb, command, nil, {
    timeout = 60000,
    onStdout = function(c)
      chunks[#chunks + 1] = c
      if opts.onChunk then opts.onChunk(#chunks) end
    end,
  })
  count(t, ok, r, expected, table.concat(chunks))
  return ok, r
end

-- Print the figures, and check the rules.
local function finish(t)
  t.wallMs = math.floor(mastra.now() - t.t0)
  local line = ("fault-injection: %s: execs %d, full %d, typed errors %d (%s), truncated %d,"
    .. " failed %d, untyped %d, onStdout replays %d, sandboxes %d, left %d, processes left %d,"
    .. " wall %d ms%s\n"):format(t.name, t.execs, t.full, typed_total(t), typed_text(t),
      t.truncated, t.failed, t.untyped, t.replayed, t.sandboxes, t.left, t.processes,
      t.wallMs, t.note and ("; " .. t.note) or "")
    .. (t.lastError and ("fault-injection:   last error: " .. t.lastError:sub(1, 300) .. "\n")
      or "")
  io.stderr:write(line)
  REPORT[#REPORT + 1] = t
  assert.are.equal(0, t.truncated, "a success with less than the full output: " .. (t.sample or ""))
  assert.are.equal(0, t.failed, "an exec ended with a non-zero exit: " .. (t.sample or ""))
  assert.are.equal(0, t.untyped, "an error of no documented class: " .. (t.sample or ""))
  assert.are.equal(t.execs, t.full + typed_total(t))
  assert.are.equal(0, t.left, "sandboxes still live on the server")
  assert.are.equal(0, t.processes, "commands still running under the data directory")
end

-- }======

-- {====== the real platform ======

local P = "/v1/railway/projects/proj"

-- extra: more PlatformSandbox options
local function template(srv, extra)
  local o = { accessToken = srv.token, proxyUrl = srv.url, projectId = "proj",
    environmentId = "env", createRetryDelayMs = 50 }
  for k, v in pairs(extra or {}) do o[k] = v end
  return mastra.PlatformSandbox.new(o)
end

local function fleet(srv, prefix, n, extra)
  local tpl = template(srv, extra)
  local clones = {}
  for i = 1, n do clones[i] = tpl:clone{ id = ("%s-%d"):format(prefix, i) } end
  return clones
end

local function note_id(ids, sb)
  if sb.sandboxId then ids[sb.sandboxId] = true end
end

local function realpath(path)
  local p = assert(io.popen("realpath " .. quote(path)))
  local out = p:read("a")
  p:close()
  return util.trim(out)
end

-- The pids of the processes whose working directory is under dir.
local function processes_under(dir)
  local found = {}
  for name in lfs.dir("/proc") do
    if name:match("^%d+$") and util.alive(name) then
      local a = lfs.symlinkattributes("/proc/" .. name .. "/cwd")
      local target = a and a.target
      if target and target:sub(1, #dir + 1) == dir .. "/" then found[#found + 1] = name end
    end
  end
  return found
end

-- Destroy every clone, then ask srv about every sandbox id a clone held:
-- t.sandboxes, t.left (live on the server), t.processes (commands running
-- under dataDir, after a grace of 3 s).
local function account(t, srv, clones, ids, dataDir)
  for _, sb in ipairs(clones) do note_id(ids, sb) end
  mastra.map(clones, function(sb)
    local ok, err = pcall(sb.destroy, sb)
    if not ok then
      t.destroyErrors = (t.destroyErrors or 0) + 1
      t.note = "destroy raised " .. (classify(err) or tostring(err))
    end
  end, { concurrency = 16 })
  local list = {}
  for id in pairs(ids) do list[#list + 1] = id end
  t.sandboxes = #list
  mastra.map(list, function(id)
    local r = srv:curl("GET", P .. "/sandbox/" .. id)
    local rec = type(r.json) == "table" and r.json or {}
    local gone = r.status == 404 or (r.status == 200 and (type(rec.destroyedAt) == "string"
      or rec.status == "stopped" or rec.status == "destroyed"))
    if not gone then t.left = t.left + 1 end
  end, { concurrency = 8 })
  local real = realpath(dataDir)
  platform.waitUntil(function() return #processes_under(real) == 0 end, 3000)
  t.processes = #processes_under(real)
end

-- }======

-- {====== the fault server ======

local FP = "/v1/railway/projects/p"
local FAR = "2030-01-01T00:00:00.000Z"
local ERROR_503 = { error = { message = "busy", type = "internal_error" } }

-- EXPECTED in 10 stdout frames of 2000 lines
local FRAMES = {}
for i = 0, 9 do
  FRAMES[#FRAMES + 1] = { binary = "\1" .. seq_text(i * 2000 + 1, i * 2000 + 2000) }
end

local function frames(n, exit)
  local out = {}
  for i = 1, n do out[i] = FRAMES[i] end
  if exit then out[#out + 1] = { json = { type = "exit", data = { exit_code = 0 } } } end
  return out
end

local FULL_SESSION = { afterMessages = 2, frames = frames(#FRAMES, true), close = 1000 }

-- The routes of a fleet: POST /sandbox answers `creates` in order (the
-- k-th 201 names sbx_k), a lease and a DELETE for each sbx_k, and `ws`
-- for the exec sockets.
local function routes(creates, ws)
  local list = { { method = "POST", path = FP .. "/sandbox", responses = creates } }
  for k = 1, FLEET do
    list[#list + 1] = { method = "POST", path = ("%s/sandbox/sbx_%d/exec-lease"):format(FP, k),
      responses = { { status = 200, json = { provider = "railway", sandboxId = "sbx_" .. k,
        providerResourceId = "rw_" .. k, jwt = "jwt-" .. k, wsEndpoint = "$WS/ws/exec",
        subprotocol = "railway-shell", expiresAt = FAR } } } }
    list[#list + 1] = { method = "DELETE", path = ("%s/sandbox/sbx_%d"):format(FP, k),
      responses = { { status = 204 } } }
  end
  list[#list + 1] = { method = "GET", path = "/ws/exec", ws = ws }
  return list
end

local function created(k)
  return { status = 201, json = { id = "sbx_" .. k, status = "ready",
    createdAt = "2026-01-01T00:00:00.000Z" } }
end

local function fault_fleet(srv, n)
  local tpl = mastra.PlatformSandbox.new{ accessToken = "tok", proxyUrl = srv.url,
    projectId = "p", environmentId = "env1", createRetryDelayMs = 20,
    handshakeTimeout = 5000 }
  local clones = {}
  for i = 1, n do clones[i] = tpl:clone{ id = "clone-" .. i } end
  return clones
end

-- Destroy every clone, then read the fault server's log: every sandbox it
-- answered 201 for (response `offset + k` names sbx_k) must have had a
-- DELETE answered 204.
local function fault_account(t, srv, clones, offset)
  mastra.map(clones, function(sb)
    local ok, err = pcall(sb.destroy, sb)
    if not ok then t.note = "destroy raised " .. (classify(err) or tostring(err)) end
  end, { concurrency = 16 })
  local made, deleted = {}, {}
  for _, ev in ipairs(srv:requests()) do
    if ev.method == "POST" and ev.path == FP .. "/sandbox" and ev.status == 201 then
      made[#made + 1] = "sbx_" .. (ev.response - offset)
    elseif ev.method == "DELETE" and ev.status == 204 then
      deleted[ev.path:match("/sandbox/([^/]+)$")] = true
    end
  end
  t.sandboxes = #made
  for _, id in ipairs(made) do
    if not deleted[id] then t.left = t.left + 1 end
  end
end

-- }======

describe("fault injection", function()
  local servers, dirs, mounts = {}, {}, {}

  local function start(opts)
    local srv = platform.start(opts)
    servers[#servers + 1] = srv
    return srv
  end

  -- A fleet of FLEET clones on the fault server srv, one `seq` each, then
  -- destroyed and accounted for (offset: see fault_account).
  local function fault_run(name, srv, offset)
    servers[#servers + 1] = srv
    local t = tally(name)
    local clones = fault_fleet(srv, FLEET)
    mastra.map(clones, function(sb) exec(t, sb, "seq 1 " .. LINES, EXPECTED) end,
      { concurrency = FLEET })
    fault_account(t, srv, clones, offset)
    return t
  end

  local function tmpdir()
    local d = platform.tmpdir()
    dirs[#dirs + 1] = d
    return d
  end

  after_each(function()
    for _, srv in ipairs(servers) do
      if srv.close then srv:close() end
    end
    servers = {}
    for _, m in ipairs(mounts) do
      if not os.execute("umount " .. quote(m) .. " 2>/dev/null") then
        os.execute("umount -l " .. quote(m))
      end
    end
    mounts = {}
    for _, d in ipairs(dirs) do platform.rm_rf(d) end
    dirs = {}
  end)

  teardown(function()
    io.stderr:write("fault-injection: | fault | execs | full | typed errors | truncated"
      .. " | sandboxes left | wall |\n")
    for _, t in ipairs(REPORT) do
      io.stderr:write(("fault-injection: | %s | %d | %d | %d (%s) | %d | %d of %d | %.1f s |\n")
        :format(t.name, t.execs, t.full, typed_total(t), typed_text(t), t.truncated,
          t.left, t.sandboxes, t.wallMs / 1000))
    end
  end)

  it("the tally sees a silent truncation: a session that ends with exit 0 after 4 of 10"
    .. " frames", function()
    -- the detector itself: a server that lies (exit 0 after part of the
    -- output) gives a success the client cannot tell from a full one
    local srv = fault.start{ routes = routes({ created(1) },
      { { afterMessages = 2, frames = frames(4, true), close = 1000 } }) }
    servers[#servers + 1] = srv
    local t = tally("lying server")
    local sb = fault_fleet(srv, 1)[1]
    exec(t, sb, "seq 1 " .. LINES, EXPECTED)
    sb:destroy()
    assert.are.equal(1, t.truncated)
    assert.are.equal(("exit 0 with %d of %d bytes"):format(#seq_text(1, 8000), #EXPECTED),
      t.sample)
    assert.are.equal(0, t.full)
  end)

  it("a: kill -9 of the server mid-command, then a restart on the same data directory",
    function()
      local dir = tmpdir()
      local opts = { dataDir = dir .. "/data", tokenFile = dir .. "/token" }
      local srv = start(opts)
      local port = srv.port
      local t = tally("kill -9 mid-command")
      local clones = fleet(srv, "kill9", FLEET)
      local ids = {}
      mastra.map(clones, function(sb)
        sb:start()
        note_id(ids, sb)
      end, { concurrency = 16 })
      -- 40 bursts of 500 lines, 50 ms apart: about 2 s of output; set -e:
      -- the shell ends once a write fails (the server is gone). Every 5th
      -- clone prints half, then stays quiet for 30 s: a command that
      -- writes nothing after the kill, which only the restart can end.
      local noisy = "set -e; for i in $(seq 0 39); do seq $((i*500+1)) $((i*500+500));"
        .. " sleep 0.05; done"
      local quiet = "seq 1 10000; sleep 30; seq 10001 " .. LINES
      local real = realpath(opts.dataDir)
      local streaming, finished, inflight, between = 0, 0, nil, nil
      local killedAt, restartedAt
      mastra.all{
        function()
          mastra.map(clones, function(sb, i)
            local seen = false
            exec(t, sb, i % 5 == 0 and quiet or noisy, EXPECTED, { onChunk = function()
              if not seen then
                seen = true
                streaming = streaming + 1
              end
            end })
            finished = finished + 1
            note_id(ids, sb)
          end, { concurrency = FLEET })
        end,
        function()
          platform.waitUntil(function() return streaming + finished >= FLEET end, 20000)
          mastra.sleep(200)
          inflight = FLEET - finished
          killedAt = mastra.now() - t.t0
          srv:kill9()
          mastra.sleep(300)
          between = #processes_under(real)
          srv = start{ dataDir = opts.dataDir, tokenFile = opts.tokenFile,
            args = { "--listen", "127.0.0.1:" .. port } }
          restartedAt = mastra.now() - t.t0
        end,
      }
      -- the restarted server killed what the previous one started before
      -- it served: nothing of theirs is left
      platform.waitUntil(function() return #processes_under(real) == 0 end, 2000)
      local survivors = #processes_under(real)
      t.note = ("%d of %d execs in flight at the kill (at %.1f s); %d commands alive between"
        .. " the kill and the restart (serving again at %.1f s), %d after the restart")
        :format(inflight, FLEET, killedAt / 1000, between, restartedAt / 1000, survivors)
      assert.are.equal(0, survivors, "commands of the killed server outlived the restart")
      assert.is_true(inflight > 0, "no exec was in flight at the kill")
      assert.are.equal(port, srv.port)
      -- after the restart: one exec per clone, and one more after a
      -- SandboxDestroyedError (which clears the handle: the next exec
      -- provisions again), as a user would
      local after = tally("kill -9: the next exec after the restart")
      mastra.map(clones, function(sb)
        local ok, err = exec(after, sb, "seq 1 " .. LINES, EXPECTED)
        if not ok and errors.SandboxDestroyedError:is(err) then
          exec(after, sb, "seq 1 " .. LINES, EXPECTED)
        end
        note_id(ids, sb)
      end, { concurrency = FLEET })
      account(t, srv, clones, ids, opts.dataDir)
      after.sandboxes, after.left, after.processes = t.sandboxes, t.left, t.processes
      finish(t)
      finish(after)
      assert.is_true(after.full >= 1, "no clone ran a command after the restart")
    end)

  it("b: WebSocket close 1006 mid-output", function()
    -- the first 20 sockets drop after 4 of 10 frames, the next 15 after
    -- all 10 frames but before the exit frame; the rest answer in full.
    -- Output reached onStdout before each drop, so none is retried: 35
    -- SandboxExecInterruptedError (a SandboxExecTransportError), 15 full
    local srv = fault.start{ routes = routes(
      (function()
        local c = {}
        for k = 1, FLEET do c[k] = created(k) end
        return c
      end)(),
      { { afterMessages = 2, frames = frames(4), drop = true, times = 20 },
        { afterMessages = 2, frames = frames(#FRAMES), drop = true, times = 15 },
        FULL_SESSION }) }
    local t = fault_run("WebSocket 1006 mid-output", srv, 0)
    t.note = ("%d exec sockets"):format(#srv:sessions())
    finish(t)
    assert.is_true(t.full >= 1 and (t.typed.SandboxExecTransportError or 0) >= 1,
      "both outcomes should occur: " .. typed_text(t))
    assert.are.equal(0, t.replayed, "a command was run again after onStdout saw its output")
  end)

  it("c: a storm of 503 answers to create", function()
    -- 120 creates answer 503, then each one 201: three attempts per clone
    -- (createRetryDelayMs 20: 20 then 40 ms apart)
    local creates = { { status = 503, json = ERROR_503, times = 120 } }
    for k = 1, FLEET do creates[#creates + 1] = created(k) end
    local srv = fault.start{ routes = routes(creates, { FULL_SESSION }) }
    local t = fault_run("503 storm on create", srv, 1)
    local posts = 0
    for _, ev in ipairs(srv:requests()) do
      if ev.method == "POST" and ev.path == FP .. "/sandbox" then posts = posts + 1 end
    end
    t.note = ("%d POST /sandbox"):format(posts)
    finish(t)
    assert.is_true(t.full >= 1, "no clone got through the storm")
    assert.is_true((t.typed["PlatformApiError 503"] or 0) >= 1,
      "no clone gave up: " .. typed_text(t))
    assert.are.equal(t.full, t.sandboxes)
  end)

  it("d: a slow reader gets the whole output", function()
    local srv = start{}
    local big = 100000
    local expected = seq_text(1, big) -- 588895 bytes
    local t = tally("slow reader")
    local clones = fleet(srv, "slow", FLEET)
    local ids = {}
    local chunks = 0
    mastra.map(clones, function(sb)
      exec(t, sb, "seq 1 " .. big, expected, { onChunk = function(n)
        chunks = chunks + 1
        -- 20 ms after every chunk, 300 ms after every 8th
        mastra.sleep(n % 8 == 0 and 300 or 20)
      end })
      note_id(ids, sb)
    end, { concurrency = FLEET })
    local status = util.read_file("/proc/" .. math.tointeger(srv.pid) .. "/status") or ""
    t.note = ("%d chunks of stdout, %.0f bytes on average; the server's peak RSS %s kB")
      :format(chunks, t.execs * #expected / math.max(chunks, 1),
        status:match("VmHWM:%s*(%d+)") or "?")
    account(t, srv, clones, ids, srv.dataDir)
    finish(t)
    assert.are.equal(FLEET, t.full)
    assert.are.equal(0, t.replayed)
  end)

  it("e: a full disk under the data directory: typed write errors, and every object"
    .. " answered 2xx reads back, also after a restart", function()
      local dir = tmpdir()
      local data = dir .. "/data"
      assert(lfs.mkdir(data))
      local p = io.popen("mount -t tmpfs -o size=6m tmpfs " .. quote(data) .. " 2>&1; echo rc=$?")
      local out = p:read("a")
      p:close()
      if not out:match("rc=0%s*$") then
        pending("mount -t tmpfs refused: " .. util.trim(out))
        return
      end
      mounts[#mounts + 1] = data
      local opts = { dataDir = data, tokenFile = dir .. "/token" }
      local srv = start(opts)
      local t = tally("full disk (bucket writes)")
      local function fs_of(s)
        return mastra.PlatformFilesystem.new{ accessToken = s.token, proxyUrl = s.url,
          projectId = "proj", bucketName = "bkt" }
      end
      -- 40 objects of 256 KiB (10 MiB) into 6 MiB, then 100 of 4 KiB for
      -- the space left; bytes of every value
      local N, BIG = 140, 40
      local function body(i)
        local unit = ("object %03d \0\255"):format(i) .. string.rep(string.char(i % 256), 50)
          .. "\n"
        local size = i <= BIG and 256 * 1024 or 4096
        return string.rep(unit, size // #unit) .. ("end %03d"):format(i)
      end
      local stored = {}
      local fs = fs_of(srv)
      local function fill(from, to, concurrency)
        local list = {}
        for i = from, to do list[#list + 1] = i end
        mastra.map(list, function(i)
          local ok, err = pcall(fs.writeFile, fs, ("/fill/obj-%03d.bin"):format(i), body(i))
          if ok then
            t.execs, t.full = t.execs + 1, t.full + 1
            stored[i] = true
          else
            count(t, false, err)
          end
        end, { concurrency = concurrency })
      end
      fill(1, BIG, 4)
      fill(BIG + 1, N, 1)
      -- every object answered 2xx reads back as written; a refused one is
      -- absent (nothing torn)
      local function check_back(f, when)
        local intact, absent, torn = 0, 0, 0
        for i = 1, N do
          local ok, got = pcall(f.readFile, f, ("/fill/obj-%03d.bin"):format(i))
          if stored[i] then
            if ok and got == body(i) then intact = intact + 1 else torn = torn + 1 end
          elseif not ok and errors.FileNotFoundError:is(got) then
            absent = absent + 1
          else
            torn = torn + 1
          end
        end
        t[when] = { intact = intact, absent = absent, torn = torn }
        return intact, absent, torn
      end
      check_back(fs, "before")
      -- sandboxes on the full disk: 10 clones, one exec each
      local sbt = tally("full disk (sandboxes)")
      -- a detach timeout of 5 s: a command caught by the kill -9 below
      -- (a quiet one, or one whose lease was due) stops reattaching soon,
      -- whatever state the full disk left it in
      local clones = fleet(srv, "full", 10, { execDetachTimeout = 5000 })
      local ids = {}
      mastra.map(clones, function(sb)
        exec(sbt, sb, "seq 1 " .. LINES, EXPECTED)
        note_id(ids, sb)
      end, { concurrency = 10 })
      -- a quiet command in each, running across the kill -9 (the restart
      -- must end them, full disk or not)
      local real = realpath(opts.dataDir)
      -- (in the clones that exist: a create the full disk refused is a 507)
      local quiet = {}
      for _, sb in ipairs(clones) do
        if sb.sandboxId then quiet[#quiet + 1] = sb.processes:spawn("sleep 60") end
      end
      platform.waitUntil(function() return #processes_under(real) >= #quiet end, 10000)
      local running = #processes_under(real)
      srv:kill9()
      for _, h in ipairs(quiet) do pcall(h.wait, h) end
      srv = start{ dataDir = opts.dataDir, tokenFile = opts.tokenFile,
        args = { "--listen", "127.0.0.1:" .. srv.port } }
      platform.waitUntil(function() return #processes_under(real) == 0 end, 3000)
      local survivors = #processes_under(real)
      local fs2 = fs_of(srv)
      check_back(fs2, "after")
      -- what the restarted server knows of the sandboxes made on the full disk
      local known = {}
      for id in pairs(ids) do
        local st = srv:curl("GET", P .. "/sandbox/" .. id).status
        known[st] = (known[st] or 0) + 1
      end
      local parts = {}
      for st, n in pairs(known) do parts[#parts + 1] = ("%d answered %d"):format(n, st) end
      table.sort(parts)
      sbt.note = ("%d sleep commands running at the kill, %d alive after the restart;"
        .. " GET after the restart: %s"):format(running, survivors, table.concat(parts, ", "))
      -- room again: delete 8 stored objects, then a write goes through
      local freed = 0
      for i = 1, N do
        if stored[i] and freed < 8 then
          fs2:deleteFile(("/fill/obj-%03d.bin"):format(i))
          stored[i] = nil
          freed = freed + 1
        end
      end
      local ok_again, err_again = pcall(fs2.writeFile, fs2, "/fill/again.bin", body(99))
      t.note = ("readback before the restart: %d intact, %d absent, %d torn; after a kill -9"
        .. " and restart: %d intact, %d absent, %d torn; a write after freeing 2 MiB: %s")
        :format(t.before.intact, t.before.absent, t.before.torn, t.after.intact,
          t.after.absent, t.after.torn,
          ok_again and "ok" or (classify(err_again) or tostring(err_again)))
      finish(t)
      account(sbt, srv, clones, ids, opts.dataDir)
      local trees = 0
      for id in pairs(ids) do
        if lfs.attributes(opts.dataDir .. "/sandboxes/" .. id) then trees = trees + 1 end
      end
      sbt.note = sbt.note .. ("; working trees left on disk after the destroys: %d"):format(trees)
      finish(sbt)
      assert.is_true(t.full >= 1, "no write succeeded")
      assert.is_true(typed_total(t) >= 1, "the disk never filled")
      assert.are.same({ intact = t.full, absent = N - t.full, torn = 0 }, t.before)
      assert.are.same({ intact = t.full, absent = N - t.full, torn = 0 }, t.after)
      assert.is_true(ok_again, "a write after freeing space: " .. tostring(err_again))
      assert.are.equal(body(99), fs2:readFile("/fill/again.bin"))
    end)
end)
