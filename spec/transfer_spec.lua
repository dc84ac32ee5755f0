-- Workspace:upload and Workspace:download: bucket -> sandbox -> bucket and
-- disk -> sandbox -> disk with the same bytes (sha256 on both sides),
-- through stdin where the platform advertises it and through chunked
-- commands where it does not (mastra-platform --exec-stdin off, the
-- upstream protocol). bench/transfer.lua measures 100 MB and the peak RSS.
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local function random_bytes(n)
  local f = assert(io.open("/dev/urandom", "rb"))
  local s = f:read(n)
  f:close()
  return s
end

local function sha256_of_file(path)
  local p = assert(io.popen("sha256sum " .. mastra.quote(path)))
  local line = p:read("l")
  p:close()
  return line:match("^(%x+)")
end

local function sha256_in(sb, path)
  local r = sb:executeCommand("sha256sum", { path })
  assert.are.equal(0, r.exitCode, r.stderr)
  return r.stdout:match("^(%x+)")
end

local function platform_workspace(srv, bucket)
  local o = { accessToken = srv.token, proxyUrl = srv.url, projectId = "proj" }
  local fs = mastra.PlatformFilesystem.new{ accessToken = o.accessToken, proxyUrl = o.proxyUrl,
    projectId = o.projectId, bucketName = bucket }
  local sb = mastra.PlatformSandbox.new{ accessToken = o.accessToken, proxyUrl = o.proxyUrl,
    projectId = o.projectId, environmentId = "env" }
  return mastra.Workspace.new{ filesystem = fs, sandbox = sb }
end

local function round_trip(ws, size, expect_method)
  local data = random_bytes(size)
  ws.filesystem:writeFile("/in/data.bin", data)
  local up = ws:upload("/in/data.bin", "work/copy.bin")
  assert.are.equal(size, up.bytes)
  assert.are.equal(expect_method, up.method)
  local tmp = util.tmpname()
  local f = assert(io.open(tmp, "wb"))
  f:write(data)
  f:close()
  local want = sha256_of_file(tmp)
  os.remove(tmp)
  assert.are.equal(want, sha256_in(ws.sandbox, "work/copy.bin"))
  local down = ws:download("work/copy.bin", "/out/back.bin")
  assert.are.equal(size, down.bytes)
  assert.is_true(ws.filesystem:readFile("/out/back.bin") == data)
end

describe("Workspace transfers on the local platform", function()
  local srv

  setup(function() srv = platform.start{} end)
  teardown(function() if srv then srv:stop() end end)

  it("moves a file bucket -> sandbox -> bucket through stdin", function()
    local ws <close> = platform_workspace(srv, "transfers")
    ws:init()
    round_trip(ws, 8 * 1048576 + 5, "stdin")
  end)

  it("moves a file through chunked commands when asked to", function()
    local ws <close> = platform_workspace(srv, "transfers2")
    ws:init()
    local data = random_bytes(300000)
    ws.filesystem:writeFile("/a.bin", data)
    local up = ws:upload("/a.bin", "./a.bin", { method = "commands" })
    assert.are.equal("commands", up.method)
    ws:download("./a.bin", "/b.bin")
    assert.is_true(ws.filesystem:readFile("/b.bin") == data)
  end)

  it("reports a missing file and a failed command with what went wrong", function()
    local ws <close> = platform_workspace(srv, "transfers3")
    ws:init()
    assert.error_matches(function() ws:upload("/nope.bin", "x.bin") end, "File not found")
    local ok, err = pcall(ws.download, ws, "no/such/file", "/x.bin")
    assert.is_false(ok)
    assert.matches("Workspace:download: reading no/such/file failed with exit code 1: cat:",
      tostring(err), 1, true)
    assert.is_false(ws.filesystem:exists("/x.bin"))
    assert.has_error(function() ws:upload("/a", "b", { method = "ftp" }) end,
      "Workspace:upload: option 'method' must be \"auto\", \"stdin\" or \"commands\""
        .. ' (got string "ftp")')
    local lone = mastra.Workspace.new{ sandbox = ws.sandbox }
    assert.error_matches(function() lone:upload("/a", "b") end,
      "the workspace needs both a filesystem and a sandbox")
  end)
end)

-- A FIFO in the sandbox that gives `bytes` and then stays open (its
-- writer sleeps): a `cat` of it reads them and then waits. Returns the
-- writer's handle.
local function stalled_source(ws, name, bytes)
  assert.are.equal(0, ws.sandbox:executeCommand("mkfifo", { name }).exitCode)
  local w = ws.sandbox.processes:spawn(("{ head -c %d /dev/urandom; exec sleep 60; } > %s")
    :format(bytes, name))
  return w
end

local function temporary_files(srv, bucket)
  local p = assert(io.popen("ls -A " .. mastra.quote(srv.dataDir .. "/buckets/proj/" .. bucket)
    .. " 2>/dev/null"))
  local names = p:read("a")
  p:close()
  return names:find("mpb%-tmp") ~= nil
end

describe("Workspace transfers that fail half-way", function()
  local srv

  setup(function() srv = platform.start{} end)
  teardown(function() if srv then srv:stop() end end)

  it("aborts the bucket's PUT when the command fails or the task is cancelled", function()
    local ws <close> = platform_workspace(srv, "halfway")
    ws:init()
    -- the command times out after 2 MB went out: the PUT is aborted
    local w = stalled_source(ws, "fifo1", 2 * 1048576)
    local ok, err = pcall(ws.download, ws, "fifo1", "/timed-out.bin", { timeout = 1500 })
    assert.is_false(ok)
    assert.matches("Workspace:download: reading fifo1 failed with exit code 124",
      tostring(err), 1, true)
    assert.is_true(w:kill())
    -- the task of a download is cancelled while the command waits
    w = stalled_source(ws, "fifo2", 2 * 1048576)
    local t = mastra.spawn(function() ws:download("fifo2", "/cancelled.bin") end)
    mastra.sleep(1000)
    t:cancel()
    local tok, terr = pcall(t.wait, t)
    assert.is_false(tok)
    assert.is_true(mastra.errors.CancelledError:is(terr))
    assert.is_true(w:kill())
    assert.is_false(ws.filesystem:exists("/timed-out.bin"))
    assert.is_false(ws.filesystem:exists("/cancelled.bin"))
    -- their temporary files go too (see http_stream_spec.lua for the bound)
    assert.is_true(platform.waitUntil(function() return not temporary_files(srv, "halfway") end,
      45000, 200))
  end)

  it("ends with a clean error when the server stops in the middle of a download", function()
    local own = platform.start{}
    finally(function() own:close() end)
    local ws = platform_workspace(own, "dying")
    ws:init()
    local w = stalled_source(ws, "fifo", 2 * 1048576)
    local t = mastra.spawn(function() return ws:download("fifo", "/never.bin") end)
    mastra.sleep(1000)
    assert.are.equal(0, own:stop())
    local ok, err = pcall(t.wait, t)
    assert.is_false(ok)
    assert.is_true(mastra.errors.MastraError:is(err), tostring(err))
    assert.matches("Direct%-exec transport failed", tostring(err))
    -- the background writer's exec ended with the server too
    assert.is_true(platform.waitUntil(function() return w.exitCode ~= nil or w.error ~= nil end,
      10000))
    pcall(ws.destroy, ws)
  end)
end)

describe("Workspace transfers on a platform without stdin", function()
  local srv

  setup(function() srv = platform.start{ args = { "--exec-stdin", "off" } } end)
  teardown(function() if srv then srv:stop() end end)

  it("falls back to chunked commands, each under the argument limit", function()
    local ws <close> = platform_workspace(srv, "fallback")
    ws:init()
    -- 1 MiB: the 200 KB that one argument cannot carry, many times over
    round_trip(ws, 1048576 + 7, "commands")
    assert.error_matches(function()
      ws:upload("/in/data.bin", "x.bin", { method = "stdin" })
    end, 'method "stdin": this sandbox does not take stdin')
  end)
end)

describe("Workspace transfers on the local disk", function()
  it("streams LocalFilesystem <-> LocalSandbox and keeps the bytes", function()
    local dir, base = util.tmpdir()
    finally(function() util.rm_rf(dir, base) end)
    local fs = mastra.LocalFilesystem.new{ basePath = dir .. "/files" }
    local sb = mastra.LocalSandbox.new{ workingDirectory = dir .. "/sandbox" }
    local ws <close> = mastra.Workspace.new{ filesystem = fs, sandbox = sb }
    ws:init()
    round_trip(ws, 3 * 1048576 + 1, "stdin")
    -- nothing half-written is left beside the file
    -- (readdir hides temporary files: list the host directory)
    assert.are.same({ "back.bin" }, require("mastra.core").fsReaddir(dir .. "/files/out"))
    local text = ws:getInstructions()
    assert.matches("Files of the file tools are on the same disk as shell commands", text, 1,
      true)
  end)
end)
