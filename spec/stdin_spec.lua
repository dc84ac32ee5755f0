-- executeCommand's stdin option on both sandboxes: the exec WebSocket's
-- stdin frames (tag 2, then stdin_close) against the real local platform,
-- the "capabilities" list of its exec lease, backpressure with a command
-- that reads slowly, and the error of a platform that does not advertise
-- stdin (mastra-platform --exec-stdin off, as the hosted platform).
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"
local common = require "mastra.common"
local direct_exec = require "mastra.direct_exec"
local platform_exec = require "mastra.platform_exec"

local function pattern(n)
  local unit = {}
  for i = 0, 255 do unit[#unit + 1] = string.char(i) end
  local block = table.concat(unit)
  return block:rep(n // 256 + 1):sub(1, n)
end

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

local function new_platform_sandbox(srv)
  return mastra.PlatformSandbox.new{ accessToken = srv.token, proxyUrl = srv.url,
    projectId = "proj", environmentId = "env" }
end

-- the pid a command of sb wrote to file (waits for it)
local function written_pid(sb, file)
  local pid
  assert.is_true(platform.waitUntil(function()
    local r = sb:executeCommand("cat", { file })
    pid = r.exitCode == 0 and r.stdout:match("%d+") or nil
    return pid ~= nil
  end, 15000), "the command did not start")
  return pid
end

-- the maximum (third field) of /proc/sys/net/ipv4/<name>
local function sysctl_max(name)
  local v = (util.read_file("/proc/sys/net/ipv4/" .. name) or ""):match("(%d+)%s*$")
  return assert(tonumber(v), "cannot read /proc/sys/net/ipv4/" .. name)
end

-- pid of sb is gone within 15 s
local function assert_gone(sb, pid)
  assert.is_true(platform.waitUntil(function()
    return sb:executeCommand("kill", { "-0", pid }).exitCode ~= 0
  end, 15000), "the command is still running")
end

-- Run run(feed) with a source of FEED_CHUNKS chunks of 1 MiB that always
-- has one, beside a task that notes each chunk count it sees (it gives the
-- loop a turn whenever it runs). Returns run's result and how many counts
-- between the first chunk and the last that task saw.
local FEED_CHUNKS = 64
local function feeds_beside_a_task(run)
  local chunk, fed, finished = ("f"):rep(1048576), 0, false
  local seen = {}
  local watcher = mastra.spawn(function()
    while not finished do
      if fed > 0 and fed < FEED_CHUNKS then seen[fed] = true end
      mastra.sleep(0)
    end
  end)
  local ok, r = pcall(run, function()
    if fed == FEED_CHUNKS then return nil end
    fed = fed + 1
    return chunk
  end)
  finished = true
  watcher:wait()
  assert(ok, r)
  local turns = 0
  for _ in pairs(seen) do turns = turns + 1 end
  return r, turns
end

-- r counted every byte, and the task beside the feed ran at a quarter of
-- the chunk counts at least (it runs at every turn of the loop: one per
-- TURN_BYTES; without them it saw one to three)
local function assert_fed_with_turns(r, turns)
  assert.are.equal(0, r.exitCode)
  assert.are.equal(tostring(FEED_CHUNKS * 1048576), (r.stdout:gsub("%s", "")))
  assert.is_true(turns >= FEED_CHUNKS // 4, ("the other task ran at %d points of %d"
    .. " chunks"):format(turns, FEED_CHUNKS))
end

describe("stdin on the local platform", function()
  local srv

  setup(function() srv = platform.start{} end)
  teardown(function() if srv then srv:stop() end end)

  it("advertises stdin in the exec lease", function()
    local sb <close> = new_platform_sandbox(srv)
    sb:start()
    local lease = srv:lease("/v1/railway/projects/proj", sb.sandboxId)
    -- exec-resume/1, and egressRules where the driver has egress
    -- (docs/platform.md)
    local driver = srv:curl("GET", "/v1/railway/projects/proj/sandbox/" .. sb.sandboxId)
      .json.driver
    assert.are.same(driver == "namespaces"
      and { "stdin", "keepRunning", "exec-resume/1", "egressRules" }
      or { "stdin", "keepRunning", "exec-resume/1" }, lease.capabilities)
    assert.is_true(sb:supportsStdin())
  end)

  it("streams bytes to the command and gets them back unchanged", function()
    local sb <close> = new_platform_sandbox(srv)
    local data = pattern(3 * 1048576 + 17) -- above the 1 MiB message limit
    local r = sb:executeCommand("cat", nil, { stdin = data })
    assert.are.equal(0, r.exitCode)
    assert.are.equal(#data, #r.stdout)
    assert.is_true(r.stdout == data)
    local w = sb:executeCommand("wc", { "-c" }, { stdin = "abc" })
    assert.are.equal("3", (w.stdout:gsub("%s", "")))
    -- an empty stdin is end of file at once
    local e = sb:executeCommand("wc", { "-c" }, { stdin = "" })
    assert.are.equal("0", (e.stdout:gsub("%s", "")))
  end)

  it("takes a function that returns chunks, and holds back while the command is slow", function()
    local sb <close> = new_platform_sandbox(srv)
    local n, sent = 0, 0
    local chunk = ("x"):rep(65536)
    local r = sb:executeCommand("sh", { "-c", "sleep 1; wc -c" }, { stdin = function()
      n = n + 1
      if n > 160 then return nil end -- 10 MiB
      sent = sent + #chunk
      return chunk
    end })
    assert.are.equal(0, r.exitCode)
    assert.are.equal(tostring(160 * 65536), (r.stdout:gsub("%s", "")))
    assert.are.equal(160 * 65536, sent)
  end)

  it("drops what a command does not read, and reports its exit", function()
    local sb <close> = new_platform_sandbox(srv)
    local r = sb:executeCommand("head", { "-c", "5" }, { stdin = pattern(4 * 1048576) })
    assert.are.equal(0, r.exitCode)
    assert.are.equal(pattern(5), r.stdout)
  end)

  it("kills a command whose client goes away while its stdin waits", function()
    local sb <close> = new_platform_sandbox(srv)
    sb:start()
    local chunk = ("x"):rep(65536)
    local sent = 0
    local t = mastra.spawn(function()
      -- the command never reads: the pipe fills, then the server holds
      -- 1 MiB and stops reading, then the client's queue fills
      sb:executeCommand("sh", { "-c", "echo $$ > pid; exec sleep 60" }, { stdin = function()
        sent = sent + 1
        return chunk
      end })
    end)
    local pid = written_pid(sb, "pid")
    local before
    assert.is_true(platform.waitUntil(function()
      before = sent
      mastra.sleep(200)
      return sent == before -- the client stopped: backpressure
    end, 15000), "the client kept sending")
    -- what can hold it: the client's queue (1 MiB and a chunk), the two
    -- sockets' kernel buffers (at most the tcp_wmem and tcp_rmem maxima:
    -- under load, autotuning grew them past 8 MiB in one CI run), the 1 MiB
    -- the server takes in, and the pipe
    local bound = 2 * 1048576 + 65536 + sysctl_max("tcp_wmem") + sysctl_max("tcp_rmem")
      + tonumber(util.read_file("/proc/sys/fs/pipe-max-size"))
    assert.is_true(sent * 65536 < bound, ("sent %d chunks, bound %d bytes"):format(sent, bound))
    t:cancel()
    assert_gone(sb, pid)
  end)

  it("kills it too when the client's KILL frame waits behind stdin the server holds",
    function()
    -- a little over what the server takes in while the command does not
    -- read (1 MiB and a pipe): the rest leaves the client's queue for the
    -- kernel's buffers, and a KILL frame sent after it is never read
    local sb <close> = new_platform_sandbox(srv)
    sb:start()
    local t = mastra.spawn(function()
      sb:executeCommand("sh", { "-c", "echo $$ > pid2; exec sleep 60" },
        { stdin = ("y"):rep(1536 * 1024) })
    end)
    local pid = written_pid(sb, "pid2")
    mastra.sleep(1000) -- the stdin is out of the client's queue
    t:cancel()
    assert_gone(sb, pid)
  end)

  it("and when the call's timeout sends that KILL frame", function()
    local sb <close> = new_platform_sandbox(srv)
    sb:start()
    local r = sb:executeCommand("sh", { "-c", "echo $$ > pid3; exec sleep 60" },
      { stdin = ("z"):rep(1536 * 1024), timeout = 2000 })
    assert.is_true(r.timedOut)
    local pid = sb:executeCommand("cat", { "pid3" }).stdout:match("%d+")
    assert.is_truthy(pid)
    assert_gone(sb, pid)
  end)

  -- a source that always has a chunk, for a command that reads at once: the
  -- socket always has room, so the exec never has to wait; it gives the
  -- loop a turn every TURN_BYTES all the same
  it("lets other tasks run while a source that never waits feeds a fast reader", function()
    local sb <close> = new_platform_sandbox(srv)
    sb:start()
    local r, turns = feeds_beside_a_task(function(feed)
      return sb:executeCommand("wc", { "-c" }, { stdin = feed })
    end)
    assert_fed_with_turns(r, turns)
  end)

  it("does so on upstream's exec WebSocket too (a lease without exec-resume/1)", function()
    local sb <close> = new_platform_sandbox(srv)
    sb:start()
    local lease = platform_exec.ensureLease(sb, "wc", 1, sb.sandboxId)
    local r, turns = feeds_beside_a_task(function(feed)
      return direct_exec.run{ url = lease.wsEndpoint, subprotocol = lease.subprotocol,
        jwt = lease.jwt, command = "wc -c", stdin = common.stdinSource(feed) }
    end)
    assert_fed_with_turns(r, turns)
  end)

  it("and a cancel stops such a feed and its command", function()
    local sb <close> = new_platform_sandbox(srv)
    sb:start()
    local chunk, fed = ("c"):rep(1048576), 0
    local t = mastra.spawn(function()
      sb:executeCommand("sh", { "-c", "echo $$ > pid4; exec cat > /dev/null" },
        { stdin = function()
          fed = fed + 1
          return chunk -- never the end
        end })
    end)
    local pid = written_pid(sb, "pid4")
    local before = fed
    mastra.sleep(100)
    assert.is_true(fed > before, "the feed does not go on")
    t:cancel()
    local ok, err = pcall(t.wait, t)
    assert.is_false(ok)
    assert.is_true(mastra.errors.CancelledError:is(err), tostring(err))
    local after = fed
    mastra.sleep(100)
    assert.are.equal(after, fed) -- nothing fed after the cancel
    assert_gone(sb, pid)
  end)

  it("rejects a stdin that is neither bytes nor a function, naming what came", function()
    local sb <close> = new_platform_sandbox(srv)
    assert.has_error(function() sb:executeCommand("cat", nil, { stdin = 42 }) end,
      "PlatformSandbox:executeCommand: option 'stdin' must be a string, or a function"
        .. " that returns the next chunk (nil at the end) (got number 42)")
  end)
end)

describe("stdin of a background process on the local platform", function()
  local srv

  setup(function() srv = platform.start{} end)
  teardown(function() if srv then srv:stop() end end)

  it("feeds an interactive read loop through sendStdin, then closeStdin ends it", function()
    local sb <close> = new_platform_sandbox(srv)
    local h = sb.processes:spawn('while read -r line; do echo "got:$line"; done; echo done')
    h:sendStdin("one\n")
    assert.is_true(util.wait_until(function() return h.stdout == "got:one\n" end, 10000))
    h:sendStdin("two\nthr")
    h:sendStdin("ee\n")
    assert.is_true(util.wait_until(function()
      return h.stdout == "got:one\ngot:two\ngot:three\n"
    end, 10000))
    h:closeStdin()
    h:closeStdin() -- again: nothing to do
    local r = h:wait()
    assert.are.equal(0, r.exitCode)
    assert.are.equal("got:one\ngot:two\ngot:three\ndone\n", r.stdout)
    local ok, err = pcall(h.sendStdin, h, "late\n")
    assert.is_false(ok)
    assert.are.equal("EPIPE", err.code)
    assert.matches("has exited; its stdin is closed", err.message, 1, true)
  end)

  it("sends MiBs to a slow reader with backpressure, the bytes unchanged", function()
    local sb <close> = new_platform_sandbox(srv)
    local data = pattern(3 * 1048576 + 5)
    -- reads nothing for a second: sendStdin waits while 1 MiB is queued
    local h = sb.processes:spawn("sleep 1; sha256sum")
    for i = 1, #data, 200000 do h:sendStdin(data:sub(i, i + 199999)) end
    h:closeStdin()
    local ok, err = pcall(h.sendStdin, h, "more")
    assert.is_false(ok)
    assert.matches("had closeStdin() called", err.message, 1, true)
    local r = h:wait()
    assert.are.equal(0, r.exitCode)
    assert.are.equal(sha256(data), r.stdout:match("^(%x+)"))
  end)

  it("wakes a sendStdin that waits for room when the process is killed", function()
    local sb <close> = new_platform_sandbox(srv)
    local h = sb.processes:spawn("exec sleep 60") -- never reads
    local chunk = ("z"):rep(1048576)
    local result
    local t = mastra.spawn(function()
      result = table.pack(pcall(function()
        for _ = 1, 64 do h:sendStdin(chunk) end
      end))
    end)
    -- the pipe, the server's 1 MiB and the socket fill; then sendStdin waits
    assert.is_true(util.wait_until(function() return h._stdin.bytes > 1048576 end, 10000))
    assert.is_nil(result)
    assert.is_true(h:kill())
    t:wait()
    assert.is_false(result[1])
    assert.are.equal("EPIPE", result[2].code)
    assert.are.equal(137, h:wait().exitCode)
  end)
end)

describe("stdin on a platform that does not advertise it", function()
  local srv

  setup(function() srv = platform.start{ args = { "--exec-stdin", "off" } } end)
  teardown(function() if srv then srv:stop() end end)

  it("sends no capabilities and raises an error that says so", function()
    local sb <close> = new_platform_sandbox(srv)
    sb:start()
    local lease = srv:lease("/v1/railway/projects/proj", sb.sandboxId)
    assert.is_nil(lease.capabilities)
    -- the bounds of an exec are stated either way (uploadDir sizes its parts by them;
    -- 983040 under a stack limit of 8 MiB, never below 262144)
    assert.are.equal("integer", math.type(lease.limits.execEnvBytes))
    assert.is_true(lease.limits.execEnvBytes >= 262144, tostring(lease.limits.execEnvBytes))
    assert.is_false(sb:supportsStdin())
    local ok, err = pcall(sb.executeCommand, sb, "cat", nil, { stdin = "x" })
    assert.is_false(ok)
    assert.matches("this platform does not support stdin", tostring(err), 1, true)
    -- without stdin, commands still read end of file at once
    assert.are.equal("0", (sb:executeCommand("wc", { "-c" }).stdout:gsub("%s", "")))
  end)

  it("gives a background process end of file, and sendStdin says stdin is not supported",
    function()
    local sb <close> = new_platform_sandbox(srv)
    local cat = sb.processes:spawn("wc -c")
    assert.are.equal("0", (cat:wait().stdout:gsub("%s", "")))
    local h = sb.processes:spawn("echo up; exec sleep 60")
    assert.is_true(util.wait_until(function() return h.stdout == "up\n" end, 10000))
    local ok, err = pcall(h.sendStdin, h, "x")
    assert.is_false(ok)
    assert.matches("ProcessHandle:sendStdin: this platform does not support stdin",
      tostring(err), 1, true)
    h:closeStdin() -- its stdin is at its end already: nothing to do
    assert.is_true(h:kill())
    assert.are.equal(137, h:wait().exitCode)
  end)
end)

describe("stdin on LocalSandbox", function()
  it("feeds bytes and chunk functions, and drops what is not read", function()
    local dir, base = util.tmpdir()
    finally(function() util.rm_rf(dir, base) end)
    local sb <close> = mastra.LocalSandbox.new{ workingDirectory = dir }
    local data = pattern(2 * 1048576 + 3)
    local r = sb:executeCommand("cat", nil, { stdin = data })
    assert.is_true(r.stdout == data)
    local n = 0
    local f = sb:executeCommand("wc", { "-c" }, { stdin = function()
      n = n + 1
      return n <= 3 and "abcd" or nil
    end })
    assert.are.equal("12", (f.stdout:gsub("%s", "")))
    local h = sb:executeCommand("head", { "-c", "2" }, { stdin = data })
    assert.are.equal(data:sub(1, 2), h.stdout)
    assert.is_true(sb:supportsStdin())
  end)
end)

describe("ProcessHandle:sendStdin of a local process", function()
  -- a partial write used to copy the rest of the string (data:sub(n + 1)):
  -- quadratic in its length. Each write now passes the same string and the
  -- offset of the next byte (p:write(data, init), docs/core.md).
  it("sends 8 MiB intact, each write going on from an offset into the one string", function()
    local dir, base = util.tmpdir()
    local sb <close> = mastra.LocalSandbox.new{ workingDirectory = dir }
    local data = pattern(8 * 1048576 + 5)
    local h = sb.processes:spawn("cat", { maxRetainedBytes = math.huge })
    -- what reaches the C write of this process's stdin
    local proc = h._proc
    local methods = getmetatable(proc).__index
    local write = methods.write
    local calls = {}
    methods.write = function(p, s, init)
      if p == proc then calls[#calls + 1] = { len = #s, init = init } end
      return write(p, s, init)
    end
    finally(function() -- one finally per test (busted keeps the last)
      methods.write = write
      util.rm_rf(dir, base)
    end)
    h:sendStdin(data)
    h:closeStdin()
    local r = h:wait()
    methods.write = write
    assert.are.equal(0, r.exitCode)
    assert.are.equal(#data, #r.stdout)
    assert.is_true(r.stdout == data, "the bytes arrived changed")
    assert.is_true(#calls > 1, "one write took 8 MiB: the pipe never filled")
    local last = 1
    for i, c in ipairs(calls) do
      assert.are.equal(#data, c.len, ("write %d got a copy of the rest"):format(i))
      -- the same offset again when a wake found the pipe still full
      assert.is_true(math.type(c.init) == "integer" and c.init >= last,
        ("write %d did not go on from an offset"):format(i))
      last = c.init
    end
    assert.is_true(last > 1, "every write started at the first byte")
  end)

  it("p:write checks its offset", function()
    local dir, base = util.tmpdir()
    finally(function() util.rm_rf(dir, base) end)
    local sb <close> = mastra.LocalSandbox.new{ workingDirectory = dir }
    local h = sb.processes:spawn("cat")
    local proc = h._proc
    assert.are.equal(2, proc:write("abc", 2))
    assert.are.equal(0, proc:write("abc", 4)) -- #data + 1: nothing left
    assert.has_error(function() proc:write("abc", 5) end)
    assert.has_error(function() proc:write("abc", 0) end)
    h:closeStdin()
    assert.are.equal("bc", h:wait().stdout)
  end)
end)
