-- Workspace:uploadDir and Workspace:downloadDir: a host tree (2,000 small
-- files, a large one, exec bits, symlinks that must not be followed,
-- empty directories, names with spaces and non-ASCII letters) goes into
-- the sandbox and back with the same manifest (kind, mode, link target and
-- sha256 of every entry), through stdin and through the commands of a
-- platform without stdin (mastra-platform --exec-stdin off), on a
-- PlatformSandbox and a LocalSandbox; a transfer that fails half-way
-- leaves neither the target nor a temporary directory behind.
-- bench/transfer.lua dirs measures the same paths at 100 MB.
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"
local transfer_dir = require "mastra.workspace.transfer_dir"

-- kinds, modes, link targets, then the sha256 of every regular file
local MANIFEST = [[cd -- "$1" && find . -mindepth 1 -printf '%y %m %p -> %l\n' | LC_ALL=C sort &&
find . -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum]]

local function host_manifest(path)
  local p = assert(io.popen("sh -c " .. mastra.quote(MANIFEST) .. " sh " .. mastra.quote(path)))
  local text = p:read("a")
  assert(p:close())
  return text
end

local function sandbox_manifest(sb, path)
  local r = sb:executeCommand("sh", { "-c", MANIFEST, "sh", path })
  assert.are.equal(0, r.exitCode, r.stderr)
  return r.stdout
end

local function sh(cmd)
  assert(os.execute(cmd), cmd)
end

-- The tree under `root`: 2,000 files of 1 to 3 KB in 20 directories, a
-- file of `big` bytes, and the cases that a careless copy loses.
local function make_tree(root, big)
  local q = mastra.quote
  sh(("mkdir -p %s/small %s/empty/nested %s/bin %s"):format(q(root), q(root), q(root),
    q(root .. "/with space")))
  local rnd = assert(io.open("/dev/urandom", "rb"))
  for d = 0, 19 do
    sh(("mkdir %s/small/d%02d"):format(q(root), d))
  end
  for i = 1, 2000 do
    local f = assert(io.open(("%s/small/d%02d/f%04d.bin"):format(root, i % 20, i), "wb"))
    f:write(rnd:read(1000 + (i * 7919) % 2000))
    f:close()
  end
  local f = assert(io.open(root .. "/big.bin", "wb"))
  f:write(rnd:read(big))
  f:close()
  rnd:close()
  f = assert(io.open(root .. "/with space/naïve ☃ résumé.txt", "wb"))
  f:write("unicode and spaces\n")
  f:close()
  f = assert(io.open(root .. "/bin/run.sh", "wb"))
  f:write("#!/bin/sh\necho ran\n")
  f:close()
  sh(("cd %s && chmod 755 bin/run.sh && echo s > secret && chmod 600 secret && chmod 700 bin"
    .. " && ln -s big.bin link-to-big && ln -s /nonexistent/target dangling"
    .. " && ln -s small dirlink && ln -s '../with space' bin/up"):format(q(root)))
end

local function platform_workspace(srv)
  local sb = mastra.PlatformSandbox.new{ accessToken = srv.token, proxyUrl = srv.url,
    projectId = "proj", environmentId = "env" }
  return mastra.Workspace.new{ sandbox = sb }
end

-- Nothing but `names` in the sandbox's directory `dir`: no temporary
-- directory of a transfer.
local function sandbox_listing(sb, dir)
  local r = sb:executeCommand("ls", { "-A", dir })
  assert.are.equal(0, r.exitCode, r.stderr)
  return r.stdout
end

local function host_listing(dir)
  local names = require("mastra.core").fsReaddir(dir)
  table.sort(names)
  return table.concat(names, " ")
end

local tree, tree_base, want

setup(function()
  tree, tree_base = util.tmpdir()
  make_tree(tree .. "/src", 6 * 1048576 + 3)
  want = host_manifest(tree .. "/src")
end)

teardown(function() util.rm_rf(tree, tree_base) end)

-- Up, check, down, check; then a second upload replaces the tree.
local function round_trip(ws, method, expect_method, out)
  local up = ws:uploadDir(tree .. "/src", "trees/copy", { method = method })
  assert.are.equal(expect_method, up.method)
  assert.is_true(up.bytes > 6 * 1048576 + 2000 * 1000, tostring(up.bytes))
  local got = sandbox_manifest(ws.sandbox, "trees/copy")
  assert.are.equal(want, got)
  -- the symlinks are links, not what they point at
  assert.matches("l 777 ./dirlink -> small\n", got, 1, true)
  assert.matches("l 777 ./dangling -> /nonexistent/target\n", got, 1, true)
  assert.matches("-rwxr-xr-x", ws.sandbox:executeCommand("ls", { "-l", "trees/copy/bin/run.sh" })
    .stdout, 1, true)
  assert.matches("d 755 ./empty/nested -> \n", got, 1, true)
  local down = ws:downloadDir("trees/copy", out)
  assert.is_true(down.bytes > 6 * 1048576 + 2000 * 1000, tostring(down.bytes))
  assert.are.equal(want, host_manifest(out))
  -- again over an existing tree: replaced whole (a file only there goes)
  assert.are.equal(0, ws.sandbox:executeCommand("touch", { "trees/copy/stale" }).exitCode)
  ws:uploadDir(tree .. "/src", "trees/copy", { method = method })
  assert.are.equal(want, sandbox_manifest(ws.sandbox, "trees/copy"))
  assert.are.equal("copy\n", sandbox_listing(ws.sandbox, "trees"))
  -- and down over an existing host tree
  assert(io.open(out .. "/stale", "w")):close()
  ws:downloadDir("trees/copy", out)
  assert.are.equal(want, host_manifest(out))
end

describe("Workspace:uploadDir and downloadDir on the local platform", function()
  local srv

  setup(function() srv = platform.start{} end)
  teardown(function() if srv then srv:stop() end end)

  it("moves a tree through stdin and back, every file, mode and link kept", function()
    local ws <close> = platform_workspace(srv)
    ws:init()
    round_trip(ws, nil, "stdin", tree .. "/back-platform")
    -- chunked commands asked for on a platform that has stdin: the same tree
    ws:uploadDir(tree .. "/src", "trees/by-commands", { method = "commands" })
    assert.are.equal(want, sandbox_manifest(ws.sandbox, "trees/by-commands"))
  end)

  it("refuses what it must not replace, and says why", function()
    local ws <close> = platform_workspace(srv)
    ws:init()
    ws:uploadDir(tree .. "/src/bin", "kept")
    local ok, err = pcall(ws.uploadDir, ws, tree .. "/src", "kept", { overwrite = false })
    assert.is_false(ok)
    assert.is_true(mastra.errors.FileExistsError:is(err), tostring(err))
    assert.matches("kept already exists (overwrite = false)", tostring(err), 1, true)
    assert.are.equal(sandbox_manifest(ws.sandbox, "kept"), host_manifest(tree .. "/src/bin"))
    assert.are.equal(0, ws.sandbox:executeCommand("touch", { "afile" }).exitCode)
    ok, err = pcall(ws.uploadDir, ws, tree .. "/src", "afile")
    assert.is_false(ok)
    assert.is_true(mastra.errors.NotDirectoryError:is(err), tostring(err))
    ok, err = pcall(ws.downloadDir, ws, "no/such/dir", tree .. "/never")
    assert.is_false(ok)
    assert.is_true(mastra.errors.DirectoryNotFoundError:is(err), tostring(err))
    assert.is_nil(require("mastra.core").fsLstat(tree .. "/never"))
    ok, err = pcall(ws.uploadDir, ws, tree .. "/no-such-dir", "x")
    assert.is_false(ok)
    assert.is_true(mastra.errors.DirectoryNotFoundError:is(err), tostring(err))
    assert.has_error(function() ws:uploadDir(tree, "x", { methd = "stdin" }) end,
      "Workspace:uploadDir: unknown option 'methd' (known options: method, overwrite, timeout)")
    assert.has_error(function() ws:downloadDir("x", tree, { overwrite = "yes" }) end,
      "Workspace:downloadDir: option 'overwrite' must be a boolean (got string \"yes\")")
    assert.error_matches(function() ws:uploadDir(tree, ".") end,
      'sandboxDir "." names no directory that can be replaced')
    assert.error_matches(function() mastra.Workspace.new{}:uploadDir(tree, "x") end,
      "the workspace needs a sandbox")
    assert.are.equal("afile\nkept\n", sandbox_listing(ws.sandbox, "."))
  end)

  it("leaves nothing when the archive is broken, either way", function()
    local ws <close> = platform_workspace(srv)
    ws:init()
    local saved_create, saved_remote = transfer_dir.hostCreate, transfer_dir.remoteCreate
    finally(function()
      transfer_dir.hostCreate, transfer_dir.remoteCreate = saved_create, saved_remote
    end)
    -- half an archive from the host, then a failed tar
    transfer_dir.hostCreate = "sh -c 'tar -c -f - -C \"$1\" . | head -c 300000; exit 2' sh %s"
    for _, method in ipairs{ "stdin", "commands" } do
      local ok, err = pcall(ws.uploadDir, ws, tree .. "/src", "broken/tree", { method = method })
      assert.is_false(ok)
      -- the host's failure, or (stdin) the sandbox's tar that saw the archive end first
      local text = tostring(err)
      assert.is_truthy(text:find("Workspace:uploadDir: tar on the host (" .. tree .. "/src) failed"
        .. " with exit code 2", 1, true) or (method == "stdin"
        and text:find("extracting into broken/tree failed with exit code 2", 1, true)), text)
      assert.are.equal("", sandbox_listing(ws.sandbox, "broken"))
    end
    -- bytes that are no archive at all: the sandbox's tar refuses them
    transfer_dir.hostCreate = "head -c 100000 /dev/urandom; : %s"
    local ok, err = pcall(ws.uploadDir, ws, tree .. "/src", "broken/tree", { method = "commands" })
    assert.is_false(ok)
    assert.matches("moving the tree into broken/tree failed with exit code 2", tostring(err), 1,
      true)
    assert.are.equal("", sandbox_listing(ws.sandbox, "broken"))
    transfer_dir.hostCreate = saved_create
    -- a broken archive from the sandbox: the host's tar refuses it
    ws:uploadDir(tree .. "/src/bin", "small")
    transfer_dir.remoteCreate = "head -c 100000 /dev/urandom"
    sh("mkdir -p " .. mastra.quote(tree .. "/down"))
    ok, err = pcall(ws.downloadDir, ws, "small", tree .. "/down/tree")
    assert.is_false(ok)
    assert.matches("tar on the host (into " .. tree .. "/down/tree) failed with exit code 2",
      tostring(err), 1, true)
    assert.are.equal("", host_listing(tree .. "/down"))
  end)

  it("leaves nothing when the sandbox is destroyed half-way", function()
    local ws = platform_workspace(srv)
    ws:init()
    local t = mastra.spawn(function()
      return ws:uploadDir(tree .. "/src", "gone", { method = "commands" })
    end)
    -- the first parts are written: then the sandbox goes
    assert.is_true(platform.waitUntil(function()
      local r = ws.sandbox:executeCommand("sh", { "-c", "ls -d .gone.mastra-tmp-*.parts/p-*" })
      return r.exitCode == 0
    end, 30000, 20))
    ws.sandbox:destroy()
    local ok, err = pcall(t.wait, t)
    assert.is_false(ok)
    assert.is_true(mastra.errors.MastraError:is(err), tostring(err))
    -- a new sandbox of the same (no) id starts empty; the host is untouched
    assert.are.equal(want, host_manifest(tree .. "/src"))
    ws:destroy()
  end)
end)

describe("Workspace:uploadDir on a platform without stdin", function()
  local srv

  setup(function() srv = platform.start{ args = { "--exec-stdin", "off" } } end)
  teardown(function() if srv then srv:stop() end end)

  it("sends the tree in part commands and gets it back the same", function()
    local ws <close> = platform_workspace(srv)
    ws:init()
    round_trip(ws, nil, "commands", tree .. "/back-nostdin")
    assert.error_matches(function() ws:uploadDir(tree .. "/src", "x", { method = "stdin" }) end,
      'method "stdin": this sandbox does not take stdin')
  end)
end)

describe("Workspace:uploadDir through commands when the platform dies half-way", function()
  it("raises, reports nothing as done and leaves no host tar running", function()
    local srv = platform.start{ args = { "--exec-stdin", "off" } }
    finally(function() srv:close() end)
    local ws = platform_workspace(srv)
    ws:init()
    local src = tree .. "/src"
    local t = mastra.spawn(function() return ws:uploadDir(src, "cut", { method = "auto" }) end)
    -- the first parts are written: then the platform is killed
    assert.is_true(platform.waitUntil(function()
      local r = ws.sandbox:executeCommand("sh", { "-c", "ls -d .cut.mastra-tmp-*.parts/p-*" })
      return r.exitCode == 0
    end, 30000, 20))
    srv:kill9()
    local ok, err = pcall(t.wait, t)
    assert.is_false(ok)
    assert.is_true(mastra.errors.MastraError:is(err), tostring(err))
    assert.are.equal(want, host_manifest(src))
    -- the host side of the transfer (its tar -c) has ended with it
    -- (util.sh: without the sanitizers' preload, under which ps can hang
    -- in the ASan runtime's start)
    local ps = util.sh("ps -eo args")
    assert.is_nil(ps:find("tar -c -f - -C " .. src, 1, true), ps)
    pcall(ws.destroy, ws) -- its sandbox died with the platform
  end)
end)

describe("Workspace:uploadDir and downloadDir with a LocalSandbox", function()
  it("moves the tree both ways, through stdin and through commands", function()
    local dir, base = util.tmpdir()
    finally(function() util.rm_rf(dir, base) end)
    local sb = mastra.LocalSandbox.new{ workingDirectory = dir .. "/sandbox" }
    local ws <close> = mastra.Workspace.new{ sandbox = sb }
    ws:init()
    round_trip(ws, "stdin", "stdin", dir .. "/back-local")
    ws:uploadDir(tree .. "/src", "trees/by-commands", { method = "commands" })
    assert.are.equal(want, sandbox_manifest(sb, "trees/by-commands"))
    -- relative host paths are the current directory's, as in a shell
    local _, depth = require("mastra.core").getcwd():gsub("/[^/]+", "")
    local rel = "./" .. ("../"):rep(depth) .. tree:sub(2) .. "/src/bin"
    ws:uploadDir(rel, "bin-copy")
    assert.are.equal(host_manifest(tree .. "/src/bin"), sandbox_manifest(sb, "bin-copy"))
  end)

  it("says so when the sandbox's env leaves no room for a part, and leaves nothing", function()
    local dir, base = util.tmpdir()
    finally(function() util.rm_rf(dir, base) end)
    -- 300,000 bytes of the sandbox's own env (merged into every exec): over
    -- the 256 KiB an exec's env may hold where nothing says more
    local env = { BIG1 = ("x"):rep(100000), BIG2 = ("y"):rep(100000), BIG3 = ("z"):rep(100000) }
    local sb = mastra.LocalSandbox.new{ workingDirectory = dir .. "/sandbox", env = env }
    local ws <close> = mastra.Workspace.new{ sandbox = sb }
    ws:init()
    local ok, err = pcall(ws.uploadDir, ws, tree .. "/src/bin", "roomless", { method = "commands" })
    assert.is_false(ok)
    assert.matches("Workspace:uploadDir: the sandbox's env leaves no room in an exec's env for the"
      .. " archive's parts", tostring(err), 1, true)
    assert.are.equal("", host_listing(dir .. "/sandbox"))
    -- through stdin the env is no matter
    ws:uploadDir(tree .. "/src/bin", "roomy")
    assert.are.equal(host_manifest(tree .. "/src/bin"), sandbox_manifest(sb, "roomy"))
  end)

  it("times out half-way and leaves nothing", function()
    local dir, base = util.tmpdir()
    local saved = transfer_dir.hostCreate
    finally(function() -- (busted keeps one finally a test)
      transfer_dir.hostCreate = saved
      util.rm_rf(dir, base)
    end)
    local sb = mastra.LocalSandbox.new{ workingDirectory = dir .. "/sandbox" }
    local ws <close> = mastra.Workspace.new{ sandbox = sb }
    ws:init()
    -- a host tar that stalls after a part of its archive
    transfer_dir.hostCreate = "sh -c 'tar -c -f - -C \"$1\" . | head -c 300000; exec sleep 30'"
      .. " sh %s"
    for _, method in ipairs{ "stdin", "commands" } do
      local t0 = mastra.now()
      local ok, err = pcall(ws.uploadDir, ws, tree .. "/src", "slow", { method = method,
        timeout = 1500 })
      assert.is_false(ok)
      assert.is_true(mastra.now() - t0 < 10000)
      assert.matches("timed out", tostring(err), 1, true)
      assert.are.equal("", host_listing(dir .. "/sandbox"))
    end
  end)
end)
