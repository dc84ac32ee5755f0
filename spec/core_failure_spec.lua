-- The failure convention of mastra.core (docs/core.md): a runtime failure
-- returns nil, message, NAME; the facade raises error objects of
-- mastra.errors with no internal file position. Also the atomic write and
-- mkdir -p of src/core/util.c as fsWriteAtomic and fsMkdir give them, and
-- the fractional clock.
local lfs = require "lfs"
local mastra = require "mastra"
local core = require "mastra.core"
local task = require "mastra.task"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local errors = mastra.errors

-- every value a call returns, and how many
local function pack(...)
  return { n = select("#", ...), ... }
end

local function assert_triple(r, name, needle)
  assert.are.equal(3, r.n, "expected nil, message, NAME")
  assert.is_nil(r[1])
  assert.is_string(r[2])
  assert.are.equal(name, r[3])
  if needle then assert.is_truthy(r[2]:find(needle, 1, true), r[2]) end
end

local write = platform.writeFile

describe("mastra.core failures", function()
  local dir, reserved

  before_each(function()
    dir, reserved = util.tmpdir()
  end)

  after_each(function()
    util.rm_rf(dir, reserved)
  end)

  describe("the failure triple of mastra.core", function()
    it("fsStat of a missing path: nil, a message naming it, ENOENT", function()
      assert_triple(pack(core.fsStat(dir .. "/missing")), "ENOENT", dir .. "/missing")
      assert_triple(pack(core.fsReadlink(dir)), "EINVAL", dir)
    end)

    it("fsMkdir with parents under a file: ENOTDIR naming the file", function()
      write(dir .. "/file", "x")
      assert_triple(pack(core.fsMkdir(dir .. "/file/a/b", true)), "ENOTDIR", dir .. "/file")
      assert.is_true(core.fsMkdir(dir .. "/a/b/c", true))
      assert.is_true(core.fsMkdir(dir .. "/a/b/c", true)) -- mkdir -p: an existing directory is fine
      assert.are.equal("directory", lfs.attributes(dir .. "/a/b/c", "mode"))
      assert_triple(pack(core.fsMkdir(dir .. "/a")), "EEXIST", dir .. "/a")
      assert_triple(pack(core.fsMkdir(dir .. "/x/y")), "ENOENT", dir .. "/x/y")
    end)

    it("spawn in a missing directory: ENOENT, no raise", function()
      local r = pack(core.spawn{ command = "true", cwd = dir .. "/missing" })
      assert_triple(r, "ENOENT", dir .. "/missing")
    end)

    it("getcwd, jsonDecode, regexCompile and websocket return the triple too", function()
      assert.is_string((core.getcwd()))
      assert_triple(pack(core.jsonDecode("{")), "invalid_json")
      assert_triple(pack(core.regexCompile("(open")), "invalid_regex")
      assert_triple(pack(core.websocket{ url = "ftp://host/" }), "CURLE_UNSUPPORTED_PROTOCOL")
    end)

    it("http to a closed port: nil, message, CURLE_COULDNT_CONNECT", function()
      -- a port that was just listening: the kernel refuses connections to it
      local srv = platform.start()
      local url = srv.url
      srv:stop()
      local req <close> = assert(core.http{ url = url .. "/", timeout = 5000 })
      while select("#", req:result()) == 1 do task.wait(req:id()) end -- nil: running
      assert_triple(pack(req:result()), "CURLE_COULDNT_CONNECT")
    end)

    it("fsWriteAtomic keeps the mode, refuses with exclusive, leaves no temporary", function()
      local p = dir .. "/f"
      write(p, "old")
      assert(os.execute("chmod 0751 " .. mastra.quote(p)))
      assert.is_true(core.fsWriteAtomic(p, "new"))
      assert.are.equal("new", util.read_file(p))
      assert.are.equal(tonumber("751", 8), core.fsStat(p).mode)
      assert_triple(pack(core.fsWriteAtomic(p, "x", true)), "EEXIST", p)
      assert.are.equal("new", util.read_file(p))
      assert.is_true(core.fsWriteAtomic(dir .. "/g", "g", true))
      assert_triple(pack(core.fsWriteAtomic(dir, "x")), "EISDIR", dir)
      for name in lfs.dir(dir) do
        assert.is_nil(name:find(".mastra-tmp-", 1, true), name)
      end
    end)
  end)

  describe("failures that reach a script are error objects", function()
    local function failure(fn)
      local ok, err = pcall(fn)
      assert.is_false(ok)
      assert.is_table(err, "a bare string: " .. tostring(err))
      assert.is_true(errors.MastraError:is(err))
      assert.is_nil(tostring(err.message):find("lua/mastra/", 1, true), err.message)
      assert.is_nil(tostring(err):find("%.lua:%d+:"), tostring(err))
      return err
    end

    it("LocalSandbox: a missing cwd is a DirectoryNotFoundError naming it", function()
      local sb <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/sb" }
      local err = failure(function()
        sb:executeCommand("true", nil, { cwd = dir .. "/nowhere" })
      end)
      assert.is_true(errors.DirectoryNotFoundError:is(err))
      assert.are.equal("ENOENT", err.code)
      assert.are.equal(dir .. "/nowhere", err.path)
      assert.is_truthy(err.message:find(dir .. "/nowhere", 1, true), err.message)
      -- the sandbox still works
      assert.are.equal("ok\n", sb:executeCommand("echo", { "ok" }).stdout)
    end)

    it("LocalSandbox: a working directory removed under it, and processes:spawn", function()
      local sb <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/sb" }
      sb:start()
      util.rm_rf(dir .. "/sb")
      local err = failure(function() sb:executeCommand("true") end)
      assert.is_true(errors.DirectoryNotFoundError:is(err))
      assert.is_truthy(err.message:find(dir .. "/sb", 1, true), err.message)
      err = failure(function() sb.processes:spawn("sleep 5") end)
      assert.is_true(errors.DirectoryNotFoundError:is(err))
    end)

    it("LocalSandbox:start under a file: NotDirectoryError with its code", function()
      write(dir .. "/file", "x")
      local sb <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/file/sb" }
      local err = failure(function() sb:start() end)
      assert.is_true(errors.NotDirectoryError:is(err))
      assert.are.equal("ENOTDIR", err.code)
      assert.is_truthy(err.message:find(dir .. "/file", 1, true), err.message)
      assert.are.equal("error", sb.status)
    end)

    it("LocalFilesystem: a base path under a file, and mkdir under a file", function()
      write(dir .. "/file", "x")
      local fs = mastra.LocalFilesystem.new{ basePath = dir .. "/file/base" }
      local err = failure(function() fs:init() end)
      assert.is_true(errors.NotDirectoryError:is(err))
      fs = mastra.LocalFilesystem.new{ basePath = dir }
      err = failure(function() fs:mkdir("/file/a/b") end)
      assert.is_true(errors.NotDirectoryError:is(err))
      err = failure(function() fs:writeFile("/file/a", "x") end)
      assert.is_true(errors.NotDirectoryError:is(err))
    end)
  end)
end)

describe("mastra.now", function()
  it("is monotonic milliseconds with a sub-millisecond part", function()
    local a = mastra.now()
    assert.are.equal("float", math.type(a))
    local fractional = false
    for _ = 1, 100 do
      local b = mastra.now()
      assert.is_true(b >= a)
      if b ~= math.floor(b) then fractional = true end
      a = b
    end
    assert.is_true(fractional, "100 readings, all whole milliseconds")
    local t0 = mastra.now()
    mastra.sleep(20)
    local elapsed = mastra.now() - t0
    assert.is_true(elapsed >= 19.5 and elapsed < 2000, "slept " .. elapsed .. " ms")
  end)
end)
