-- Exec that survives a cut (exec-resume/1, issue 27), our client against
-- the real local platform through the fault proxy (spec/support/
-- fault_proxy.py). Each command appends a line to a counter file, then a
-- deterministic generator writes stdout and stderr together (UTF-8 text
-- with 2- and 4-byte characters, written in pieces of random sizes, so
-- cuts land inside characters). Over a fixed list of seeds, a cut at a
-- seeded byte of the server's stream (or of the client's), it asserts:
-- the counter holds one line (the command ran once), each stream's
-- sha256 is the generator's, and the bytes delivered to onStdout/onStderr
-- are exactly the stream (no byte lost or twice), each piece whole UTF-8.
-- Also: a cut between the exit and its frame, refused upgrades, a cut
-- every 64 KiB, a detach longer than the detach timeout, kill -9 of the
-- server while detached, 8 and 32 MiB of stdin with cuts, and 64 MiB with
-- a cut every 8 MiB (about 10 s here). bench/resume.lua measures;
-- bench/cuts.lua injects thousands of cuts.
local core = require "mastra.core"
local mastra = require "mastra"
local platform = require "spec.support.platform"
local fault_proxy = require "spec.support.fault_proxy"
local util = require "spec.support.util"

local errors = mastra.errors

-- the generator (spec/support/streams.py), passed inline: the sandbox
-- does not see this tree
local GEN = util.read_file((os.getenv("MASTRA_SOURCE_DIR") or ".") .. "/spec/support/streams.py")

local function sha256(data)
  local tmp = util.tmpname()
  local f = assert(io.open(tmp, "wb"))
  f:write(data)
  f:close()
  local p = assert(io.popen("sha256sum " .. mastra.quote(tmp)))
  local line = p:read("l")
  p:close()
  os.remove(tmp)
  return line:match("^(%x+)")
end

local function gen_command(seed, bytes, share)
  return ("python3 -c %s %d %d %s"):format(mastra.quote(GEN), seed, bytes, share)
end

describe("exec-resume/1 through the fault proxy", function()
  local srv, px, keep
  local expected = {} -- [seed .. "/" .. bytes] = {stdout, stderr}

  setup(function()
    -- the data outside the server's scratch: a restart after kill -9 uses it
    keep = platform.tmpdir()
    srv = platform.start{ dataDir = keep .. "/data", tokenFile = keep .. "/token" }
    px = fault_proxy.start(srv.url)
  end)
  teardown(function()
    if px then px:stop() end
    if srv then srv:close() end
    if keep then platform.rm_rf(keep) end
  end)

  local function sandbox(extra)
    local o = { proxyUrl = px.url }
    for k, v in pairs(extra or {}) do o[k] = v end
    local sb = mastra.PlatformSandbox.new(srv:sandboxOptions(o))
    sb:start()
    return sb
  end

  -- what the generator writes, from a run on the host
  local function want(seed, bytes, share)
    local key = ("%d/%d/%s"):format(seed, bytes, share)
    if not expected[key] then
      local r = srv:sh(gen_command(seed, bytes, share))
      assert.are.equal(0, r.exitCode, r.stderr)
      expected[key] = { stdout = r.stdout, stderr = r.stderr }
    end
    return expected[key]
  end

  local counter = 0
  -- run the generator under plan; the result, what the callbacks got and
  -- how many times the command ran
  local function run(sb, plan, seed, bytes, share, opts)
    counter = counter + 1
    local file = ("count-%d"):format(counter)
    local got = { stdout = {}, stderr = {}, whole = true }
    px:plan(plan)
    local from = #px:events() + 1
    local o = {
      onStdout = function(s)
        got.stdout[#got.stdout + 1] = s
        got.whole = got.whole and core.isUtf8(s)
      end,
      onStderr = function(s)
        got.stderr[#got.stderr + 1] = s
        got.whole = got.whole and core.isUtf8(s)
      end,
    }
    for k, v in pairs(opts or {}) do o[k] = v end
    local ok, r = pcall(sb.executeCommand, sb,
      ("echo run >> %s; %s"):format(file, gen_command(seed, bytes, share)), nil, o)
    px:plan{}
    local c = sb:executeCommand("cat " .. file .. " 2>/dev/null | wc -l")
    return ok, r, got, tonumber(c.stdout), px:only("cut", from)
  end

  local function check(r, got, runs, w)
    assert.are.equal(1, runs) -- ran once
    assert.are.equal(0, r.exitCode)
    assert.are.equal(sha256(w.stdout), sha256(r.stdout))
    assert.are.equal(sha256(w.stderr), sha256(r.stderr))
    -- each byte once, in order, to the callbacks; pieces whole characters
    assert.is_true(table.concat(got.stdout) == w.stdout, "stdout delivered differs")
    assert.is_true(table.concat(got.stderr) == w.stderr, "stderr delivered differs")
    assert.is_true(got.whole, "a callback got a piece of a UTF-8 character")
  end

  -- {seed, bytes}: 1 KiB to 4 MiB; the cut byte comes from the seed
  local CASES = {
    { 1, 1024 }, { 2, 1024 }, { 3, 16384 }, { 4, 65536 }, { 5, 65536 }, { 6, 262144 },
    { 7, 1048576 }, { 8, 1048576 }, { 9, 1048576 }, { 10, 4194304 }, { 11, 4194304 },
    { 12, 3000000 },
  }
  for _, c in ipairs(CASES) do
    local seed, bytes = c[1], c[2]
    it(("cut down at a seeded byte: seed %d, %d bytes: once, whole, exact"):format(seed, bytes),
      function()
        local sb <close> = sandbox()
        math.randomseed(seed)
        local at = math.random(1, bytes)
        local w = want(seed, bytes, 0.3)
        local ok, r, got, runs, cuts = run(sb, { { cut = "down", at = at }, {} }, seed, bytes,
          0.3)
        assert.is_true(ok, tostring(r))
        check(r, got, runs, w)
        assert.are.equal(1, #cuts)
        assert.are.equal(at, cuts[1].down)
        assert.is_true(r.reattaches >= 1)
      end)
  end

  for _, seed in ipairs{ 21, 22, 23 } do
    it(("cut up at a seeded byte (seed %d): once, exact"):format(seed), function()
      local sb <close> = sandbox()
      math.randomseed(seed)
      local at = math.random(1, 300) -- inside init_exec, or just after it
      local w = want(seed, 65536, 0.5)
      local ok, r, got, runs = run(sb, { { cut = "up", at = at }, {} }, seed, 65536, 0.5)
      assert.is_true(ok, tostring(r))
      check(r, got, runs, w)
    end)
  end

  it("cut between the exit and its frame: the reattach gets the exit, once", function()
    local sb <close> = sandbox()
    local w = want(31, 100000, 0.3)
    local ok, r, got, runs, cuts = run(sb, { { exit = true }, {} }, 31, 100000, 0.3)
    assert.is_true(ok, tostring(r))
    check(r, got, runs, w)
    assert.are.equal("exit", cuts[1].how)
    assert.are.equal(1, r.reattaches)
  end)

  for _, code in ipairs{ 1001, 1006, 1012, 1013 } do
    it("an upgrade refused with " .. code .. " is retried; once", function()
      local sb <close> = sandbox()
      local w = want(40, 4096, 0.3)
      local ok, r, got, runs, cuts = run(sb, { { refuse = code }, {} }, 40, 4096, 0.3)
      assert.is_true(ok, tostring(r))
      check(r, got, runs, w)
      assert.are.equal("refuse", cuts[1].how)
    end)
  end

  it("a socket held half-open: the keepalive gives it up and reattaches; once, exact",
    function()
    -- nothing closes a held socket for a minute: only the client's
    -- keepalive (1 s here) can tell that it is dead
    local sb <close> = sandbox{ execKeepalive = 1000 }
    local bytes = 262144
    local w = want(60, bytes, 0.3)
    local from = #px:events() + 1
    local ok, r, got, runs, cuts = run(sb,
      { { cut = "down", at = 100000, hold = true, holdMs = 60000 }, {} }, 60, bytes, 0.3)
    assert.is_true(ok, tostring(r))
    check(r, got, runs, w)
    assert.are.equal("hold", cuts[1].how)
    assert.are.equal(100000, cuts[1].down)
    assert.is_true(r.reattaches >= 1)
    -- the reattach came while the held socket was still held
    local upgrades = px:only("ws", from)
    assert.is_true(#upgrades >= 2, #upgrades)
    assert.is_true(upgrades[2].t < cuts[1].t + 60000)
    for _, e in ipairs(px:only("wsEnd", from)) do
      assert.is_false(e.conn == cuts[1].conn and e.t <= upgrades[2].t,
        "the held socket ended before the reattach")
    end
  end)

  it("a cut every 64 KiB: many reattaches, still once and exact", function()
    local sb <close> = sandbox()
    local bytes = 1048576
    local w = want(50, bytes, 0.3)
    local ok, r, got, runs, cuts = run(sb, { { cut = "down", at = 65536 } }, 50, bytes, 0.3)
    assert.is_true(ok, tostring(r))
    check(r, got, runs, w)
    assert.is_true(#cuts >= 10, #cuts)
    -- a frame cut short is lost whole (frames are at most 32 KiB), so each
    -- socket of 64 KiB carries at least one whole frame of new bytes
    assert.is_true(r.reattaches <= math.ceil(bytes / 32768) + 1, r.reattaches)
  end)

  it("64 MiB of stdout and stderr with a cut every 8 MiB: once, whole, exact", function()
    local sb <close> = sandbox()
    local bytes = 64 * 1048576
    local w = want(60, bytes, 0.3)
    local ok, r, got, runs, cuts = run(sb, { { cut = "down", at = 8 * 1048576 } }, 60, bytes,
      0.3)
    assert.is_true(ok, tostring(r))
    check(r, got, runs, w)
    assert.is_true(#cuts >= 7, #cuts)
  end)

  for _, c in ipairs{ { 71, 8 }, { 72, 8 }, { 73, 32 } } do
    local seed, mib = c[1], c[2]
    it(("stdin of %d MiB with cuts (seed %d): every byte once, in order"):format(mib, seed),
      function()
      local sb <close> = sandbox()
      math.randomseed(seed)
      local unit = {}
      for i = 1, 4096 do unit[i] = string.char(math.random(0, 255)) end
      local data = table.concat(unit):rep(256 * mib)
      -- cuts of the client's way: in the stdin, more than once
      local plan = {}
      for i = 1, 3 do
        plan[i] = { cut = "up", at = math.random(1000, (mib * 1048576) * 3 // 8) }
      end
      plan[4] = {}
      px:plan(plan)
      local from = #px:events() + 1
      local r = sb:executeCommand("echo run >> stdin-count; cat > in.bin;"
        .. " sha256sum < in.bin; wc -c < in.bin", nil, { stdin = data })
      px:plan{}
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.are.equal(sha256(data) .. "  -\n" .. #data .. "\n", r.stdout)
      assert.is_true(px:count("cut", from) >= 1)
      assert.is_true(r.reattaches >= 1)
      assert.are.equal("run\n", sb:executeCommand("cat stdin-count").stdout)
    end)
  end

  it("a cancel and a timeout end the command (signal KILL: the close only detaches)",
    function()
      local sb <close> = sandbox()
      local t = mastra.spawn(function()
        return sb:executeCommand("echo $$ > cancelled.pid; exec sleep 60")
      end)
      local pid
      assert.is_true(platform.waitUntil(function()
        local r = sb:executeCommand("cat cancelled.pid 2>/dev/null")
        pid = r.stdout:match("%d+")
        return pid ~= nil
      end, 15000))
      t:cancel()
      assert.is_true(platform.waitUntil(function()
        return sb:executeCommand("kill -0 " .. pid .. " 2>/dev/null").exitCode ~= 0
      end, 5000), "the cancelled command still runs")
      local r = sb:executeCommand("echo $$ > timed.pid; exec sleep 60", nil, { timeout = 500 })
      assert.are.equal(124, r.exitCode)
      assert.is_true(r.timedOut)
      pid = sb:executeCommand("cat timed.pid").stdout:match("%d+")
      assert.is_true(platform.waitUntil(function()
        return sb:executeCommand("kill -0 " .. pid .. " 2>/dev/null").exitCode ~= 0
      end, 5000), "the timed-out command still runs")
    end)

  it("a detach longer than the detach timeout: the platform abandons the command, the"
    .. " call raises, nothing runs again", function()
    local sb <close> = sandbox{ execDetachTimeout = 1000 }
    px:plan{ { cut = "down", at = 300 }, { refuse = 1013 } }
    local ok, err = pcall(sb.executeCommand, sb,
      "echo run >> abandoned; head -c 5000 /dev/zero; sleep 4; echo finished >> abandoned")
    assert.is_false(ok)
    assert.is_true(errors.SandboxExecTransportError:is(err), tostring(err))
    assert.matches("detach timeout", err.message)
    px:plan{}
    mastra.sleep(4500)
    local c = sb:executeCommand("cat abandoned")
    assert.are.equal("run\n", c.stdout) -- once, and ended before its end
  end)

  it("kill -9 of the server while detached: the reattach says lost, no second run",
    function()
      local sb <close> = sandbox()
      px:plan{ { cut = "down", at = 200 }, { refuse = 1013 } }
      local from = #px:events() + 1
      local t = mastra.spawn(function()
        return pcall(sb.executeCommand, sb,
          "echo run >> lost; head -c 5000 /dev/zero; sleep 3; echo finished >> lost")
      end)
      assert.is_true(platform.waitUntil(function() return px:count("cut", from) > 0 end, 10000))
      local port = srv.port
      srv:kill9()
      srv = platform.start{ dataDir = keep .. "/data", tokenFile = keep .. "/token",
        args = { "--listen", "127.0.0.1:" .. port } }
      px:plan{}
      local ok, err = t:wait()
      assert.is_false(ok)
      assert.is_true(errors.SandboxExecLostError:is(err), tostring(err))
      assert.are.equal("exec_lost", err.code)
      assert.is_nil(err.exitCode)
      -- the restarted server brings the sandbox back from what it kept
      -- (the file may be gone with the killed tree): at most the one run
      mastra.sleep(3500)
      local c = sb:executeCommand("cat lost 2>/dev/null")
      assert.is_true(c.stdout == "run\n" or c.stdout == "", c.stdout)
    end)
end)

describe("exec-resume/1 keepalive and the platform's pings", function()
  -- a command that sleeps with 16 MiB of stdin for it: the platform stops
  -- reading the socket once 1 MiB waits for the pipe, so the client's own
  -- pings wait behind the stdin; only the platform's pings (--exec-ping)
  -- tell the client that the socket is alive
  local function sleeper(ping)
    local srv = platform.start{ args = { "--exec-ping", ping } }
    local sb
    local ok, res = pcall(function()
      sb = srv:startSandbox{ execKeepalive = 1500 }
      return sb:executeCommand("sleep 4; wc -c", nil, { stdin = ("z"):rep(16777216) })
    end)
    if sb then pcall(sb.destroy, sb) end
    srv:close()
    assert(ok, res)
    return res
  end

  it("pinged every 0.2 s, a command that reads nothing for 4 s keeps its socket", function()
    local r = sleeper("0.2")
    assert.are.equal(0, r.exitCode)
    assert.are.equal("16777216", r.stdout:match("%d+"))
    assert.are.equal(0, r.reattaches)
  end)

  it("never pinged, the same command is taken for a cut: it reattaches, stdin once",
    function()
    local r = sleeper("0")
    assert.are.equal(0, r.exitCode)
    -- each byte of stdin reached the command once across the reattaches
    assert.are.equal("16777216", r.stdout:match("%d+"))
    assert.is_true(r.reattaches >= 1, r.reattaches)
  end)
end)

describe("exec-resume/1 when the platform is gone", function()
  it("a reattach that must ask for a lease gives up once refused for 10 s, not at the"
    .. " detach timeout", function()
    -- a lease of 30 s is inside the client's refresh margin: every attempt
    -- asks for a new one, so after the kill each fails at the lease request
    local srv = platform.start{ args = { "--lease-ttl", "30" } }
    local sb
    local ok, err = pcall(function()
      sb = srv:startSandbox{}
      local t = mastra.spawn(function()
        return pcall(sb.executeCommand, sb, "echo started; sleep 67")
      end)
      assert.is_true(platform.waitUntil(function()
        return srv:sh("pgrep -f '^sleep 67$' >/dev/null && echo yes").stdout == "yes\n"
      end, 10000), "the command did not start")
      srv:kill9()
      local t0 = mastra.now()
      local rok, rerr = t:wait()
      local took = mastra.now() - t0
      assert.is_false(rok)
      assert.is_true(errors.SandboxExecTransportError:is(rerr), tostring(rerr))
      assert.matches("has refused connections for 10 s", rerr.message, 1, true)
      assert.is_true(took < 60000, "it gave up after " .. took .. " ms")
    end)
    if sb then pcall(sb.detach, sb) end
    srv:close()
    assert(ok, err)
  end)
end)
