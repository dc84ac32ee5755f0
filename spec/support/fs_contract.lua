-- The filesystem contract: the cases of upstream's conformance suite
-- (FS-FILE, FS-DIR, FS-PATH, FS-ERR, FS-LIFE), edge cases of our own
-- (bytes with NULs, 10 MiB, Unicode and spaces in names) and the PARITY
-- cases, which hold every filesystem to the same behaviour and the same
-- errors. spec/filesystem_spec.lua runs them on LocalFilesystem and
-- PlatformFilesystem, spec/sandbox_filesystem_spec.lua on SandboxFilesystem.
--
--   local contract = require "spec.support.fs_contract"
--   contract.conformance(_ENV, "LocalFilesystem", function(opts) ... end)
--
-- The first argument is the spec file's environment: busted's describe, it,
-- setup ... live there, not in _G.
local mastra = require "mastra"
local assert = require "luassert"
local errors = mastra.errors

local contract = {}

local counter = 0
local function test_path()
  counter = counter + 1
  return ("/fs-test-%d-%d"):format(counter, math.random(1, 1e9))
end

local function random_bytes(n)
  local t = {}
  for i = 1, n do t[i] = string.char(math.random(0, 255)) end
  return table.concat(t)
end

local function raises(class, fn, ...)
  local ok, err = pcall(fn, ...)
  assert.is_false(ok, "expected an error")
  assert.is_true(class:is(err), ("expected %s, got %s"):format(class.name, tostring(err)))
  return err
end

local function names(entries)
  local set = {}
  for _, e in ipairs(entries) do set[e.name] = e end
  return set
end

-- cleanupTestPath of the upstream suite: errors ignored.
local function cleanup(fs, base)
  pcall(function()
    if fs:exists(base) then
      if fs:stat(base).type == "directory" then
        fs:rmdir(base, { recursive = true, force = true })
      else
        fs:deleteFile(base, { force = true })
      end
    end
  end)
end

--- The shared suite. make(opts) returns a new, uninitialised filesystem;
-- opts.readOnly makes a read-only one over the same storage.
function contract.conformance(env, label, make)
  local describe, it, setup, teardown = env.describe, env.it, env.setup, env.teardown
  local before_each, after_each = env.before_each, env.after_each
  describe(label, function()
    local fs, B
    setup(function()
      fs = make{}
      fs:init()
    end)
    teardown(function() fs:destroy() end)
    before_each(function() B = test_path() end)
    after_each(function() cleanup(fs, B) end)

    -- {====== FS-FILE ======
    it("FS-FILE-01 writes and reads text", function()
      fs:writeFile(B .. "/text-file.txt", "Hello, World!")
      assert.equal("Hello, World!", fs:readFile(B .. "/text-file.txt", { encoding = "utf-8" }))
    end)

    it("FS-FILE-02 writes binary (all 256 byte values, NULs included)", function()
      local data = random_bytes(256) .. "\0\0\1\255\0"
      local all = {}
      for i = 0, 255 do all[#all + 1] = string.char(i) end
      data = data .. table.concat(all)
      fs:writeFile(B .. "/binary.bin", data)
      local back = fs:readFile(B .. "/binary.bin")
      assert.equal(#data, #back)
      assert.is_true(data == back)
    end)

    it("FS-FILE-03 creates missing parents (and the base)", function()
      fs:writeFile(B .. "/nested/deep/file.txt", "deep")
      assert.equal("deep", fs:readFile(B .. "/nested/deep/file.txt"))
    end)

    it("FS-FILE-04 overwrites", function()
      fs:writeFile(B .. "/f.txt", "original")
      fs:writeFile(B .. "/f.txt", "updated")
      assert.equal("updated", fs:readFile(B .. "/f.txt", { encoding = "utf-8" }))
    end)

    it("FS-FILE-05 writes empty content", function()
      fs:writeFile(B .. "/empty.txt", "")
      assert.is_true(fs:exists(B .. "/empty.txt"))
      assert.equal("", fs:readFile(B .. "/empty.txt", { encoding = "utf-8" }))
    end)

    it("FS-FILE-06 round-trips Unicode", function()
      local text = "你好世界 🌍 مرحبا"
      fs:writeFile(B .. "/unicode.txt", text)
      assert.equal(text, fs:readFile(B .. "/unicode.txt", { encoding = "utf-8" }))
    end)

    it("FS-FILE-07 writes with recursive = true", function()
      fs:writeFile(B .. "/deeply/nested/path/file.txt", "r", { recursive = true })
      assert.equal("r", fs:readFile(B .. "/deeply/nested/path/file.txt"))
    end)

    it("FS-FILE-08 writes bytes", function()
      fs:writeFile(B .. "/buf.bin", "\x48\x65\x6c\x6c\x6f")
      assert.equal("Hello", fs:readFile(B .. "/buf.bin"))
    end)

    it("FS-FILE-09 reads as text", function()
      fs:writeFile(B .. "/r.txt", "Read me!")
      local v = fs:readFile(B .. "/r.txt", { encoding = "utf8" })
      assert.equal("string", type(v))
      assert.equal("Read me!", v)
    end)

    it("FS-FILE-10 reads as bytes (a string without an encoding)", function()
      fs:writeFile(B .. "/r.bin", "\0\1\2")
      assert.equal("\0\1\2", fs:readFile(B .. "/r.bin"))
    end)

    it("FS-FILE-11 appends", function()
      fs:writeFile(B .. "/a.txt", "Hello")
      fs:appendFile(B .. "/a.txt", ", World!")
      assert.equal("Hello, World!", fs:readFile(B .. "/a.txt"))
    end)

    it("FS-FILE-12 append creates the file", function()
      fs:appendFile(B .. "/new.txt", "New content")
      assert.equal("New content", fs:readFile(B .. "/new.txt"))
    end)

    it("FS-FILE-13 deletes", function()
      fs:writeFile(B .. "/d.txt", "x")
      fs:deleteFile(B .. "/d.txt")
      assert.is_false(fs:exists(B .. "/d.txt"))
    end)

    it("FS-FILE-14 force-deletes a missing file", function()
      fs:deleteFile(B .. "/missing.txt", { force = true })
    end)

    it("FS-FILE-15 copies", function()
      fs:writeFile(B .. "/src.txt", "Copy me!")
      fs:copyFile(B .. "/src.txt", B .. "/dest.txt")
      assert.equal("Copy me!", fs:readFile(B .. "/src.txt"))
      assert.equal("Copy me!", fs:readFile(B .. "/dest.txt"))
    end)

    it("FS-FILE-16 copies with overwrite = true", function()
      fs:writeFile(B .. "/src.txt", "source")
      fs:writeFile(B .. "/dest.txt", "original")
      fs:copyFile(B .. "/src.txt", B .. "/dest.txt", { overwrite = true })
      assert.equal("source", fs:readFile(B .. "/dest.txt"))
    end)

    it("FS-FILE-17 copy with overwrite = false rejects and leaves the destination", function()
      fs:writeFile(B .. "/src.txt", "source")
      fs:writeFile(B .. "/dest.txt", "original")
      local ok, err = pcall(fs.copyFile, fs, B .. "/src.txt", B .. "/dest.txt",
        { overwrite = false })
      assert.is_false(ok)
      assert.truthy(errors.message(err):find("overwrite") or errors.FileExistsError:is(err))
      assert.equal("original", fs:readFile(B .. "/dest.txt"))
    end)

    it("FS-FILE-18 moves", function()
      fs:writeFile(B .. "/src.txt", "Move me!")
      fs:moveFile(B .. "/src.txt", B .. "/dest.txt")
      assert.is_false(fs:exists(B .. "/src.txt"))
      assert.equal("Move me!", fs:readFile(B .. "/dest.txt"))
    end)

    it("FS-FILE-19 moves across directories (the target directory is missing)", function()
      fs:writeFile(B .. "/dir1/file.txt", "across")
      fs:moveFile(B .. "/dir1/file.txt", B .. "/dir2/file.txt")
      assert.is_false(fs:exists(B .. "/dir1/file.txt"))
      assert.equal("across", fs:readFile(B .. "/dir2/file.txt"))
    end)

    it("FS-FILE-20 writes and reads 1 MiB", function()
      local chars = {}
      for i = 1, 1024 do chars[i] = string.char(math.random(97, 122)) end
      local data = table.concat(chars):rep(1024)
      fs:writeFile(B .. "/large.txt", data)
      assert.equal(1024 * 1024, #fs:readFile(B .. "/large.txt"))
    end)

    it("FS-FILE 10 MiB of bytes round-trip", function()
      local data = random_bytes(4096):rep(2560)
      fs:writeFile(B .. "/ten.bin", data)
      local back = fs:readFile(B .. "/ten.bin")
      assert.equal(10 * 1024 * 1024, #back)
      assert.is_true(back == data)
      assert.equal(#data, fs:stat(B .. "/ten.bin").size)
    end)

    it("FS-FILE Unicode and space-containing names", function()
      local dir = B .. "/dir with space/ünïcødé 目录"
      local file = dir .. "/naïve 文件 #1?&=%.txt"
      fs:writeFile(file, "named")
      assert.equal("named", fs:readFile(file))
      assert.is_true(fs:exists(file))
      local st = fs:stat(file)
      assert.equal("naïve 文件 #1?&=%.txt", st.name)
      assert.equal("file", st.type)
      assert.truthy(names(fs:readdir(dir))["naïve 文件 #1?&=%.txt"])
      assert.truthy(names(fs:readdir(B))["dir with space"])
      fs:copyFile(file, dir .. "/copy é.txt")
      fs:moveFile(dir .. "/copy é.txt", B .. "/moved ü.txt")
      assert.equal("named", fs:readFile(B .. "/moved ü.txt"))
    end)

    it("FS-FILE writeFile with overwrite = false refuses an existing file", function()
      fs:writeFile(B .. "/once.txt", "first")
      local err = raises(errors.FileExistsError, fs.writeFile, fs, B .. "/once.txt", "second",
        { overwrite = false })
      assert.equal(B .. "/once.txt", err.path)
      assert.equal("first", fs:readFile(B .. "/once.txt"))
      fs:writeFile(B .. "/fresh.txt", "new", { overwrite = false })
      assert.equal("new", fs:readFile(B .. "/fresh.txt"))
    end)
    -- }======

    -- {====== FS-DIR ======
    it("FS-DIR-01 mkdir (the parent is missing)", function()
      fs:mkdir(B .. "/new-dir")
      assert.equal("directory", fs:stat(B .. "/new-dir").type)
    end)

    it("FS-DIR-02 recursive mkdir", function()
      fs:mkdir(B .. "/a/b/c/d", { recursive = true })
      assert.equal("directory", fs:stat(B .. "/a/b/c/d").type)
    end)

    it("FS-DIR-03 recursive mkdir of an existing directory", function()
      fs:mkdir(B .. "/x", { recursive = true })
      fs:mkdir(B .. "/x", { recursive = true })
      assert.equal("directory", fs:stat(B .. "/x").type)
    end)

    it("FS-DIR-04 rmdir of an empty directory", function()
      fs:mkdir(B .. "/empty")
      fs:rmdir(B .. "/empty")
      assert.is_false(fs:exists(B .. "/empty"))
    end)

    it("FS-DIR-05 recursive rmdir", function()
      fs:writeFile(B .. "/t/file1.txt", "1")
      fs:writeFile(B .. "/t/file2.txt", "2")
      fs:writeFile(B .. "/t/subdir/file3.txt", "3")
      fs:rmdir(B .. "/t", { recursive = true })
      assert.is_false(fs:exists(B .. "/t"))
    end)

    it("FS-DIR-06 readdir lists entries", function()
      fs:mkdir(B)
      fs:writeFile(B .. "/file1.txt", "1")
      fs:writeFile(B .. "/file2.txt", "2")
      fs:mkdir(B .. "/subdir")
      local set = names(fs:readdir(B))
      assert.truthy(set["file1.txt"])
      assert.truthy(set["file2.txt"])
      assert.truthy(set.subdir)
    end)

    it("FS-DIR-07 readdir types (directories first)", function()
      fs:writeFile(B .. "/file.txt", "f")
      fs:mkdir(B .. "/dir")
      local list = fs:readdir(B)
      local set = names(list)
      assert.equal("file", set["file.txt"].type)
      assert.equal(1, set["file.txt"].size)
      assert.equal("directory", set.dir.type)
      assert.equal("dir", list[1].name)
    end)

    it("FS-DIR-08 readdir of an empty directory is {}", function()
      fs:mkdir(B .. "/empty")
      assert.same({}, fs:readdir(B .. "/empty"))
    end)

    it("FS-DIR-09 recursive readdir names sub/nested.txt", function()
      fs:writeFile(B .. "/root.txt", "r")
      fs:writeFile(B .. "/sub/nested.txt", "n")
      local set = names(fs:readdir(B, { recursive = true }))
      assert.truthy(set["root.txt"])
      assert.truthy(set["sub/nested.txt"])
      assert.equal("file", set["sub/nested.txt"].type)
      assert.equal("directory", set.sub.type)
      local shallow = names(fs:readdir(B, { recursive = true, maxDepth = 1 }))
      assert.truthy(shallow.sub)
      assert.is_nil(shallow["sub/nested.txt"])
    end)

    it("FS-DIR-10 extension filter", function()
      fs:writeFile(B .. "/file.txt", "t")
      fs:writeFile(B .. "/file.md", "m")
      fs:writeFile(B .. "/file.json", "j")
      local set = names(fs:readdir(B, { extension = ".txt" }))
      assert.truthy(set["file.txt"])
      assert.is_nil(set["file.md"])
      assert.is_nil(set["file.json"])
      set = names(fs:readdir(B, { extension = { ".md", ".json" } }))
      assert.is_nil(set["file.txt"])
      assert.truthy(set["file.md"])
    end)

    it("FS-DIR readdir of a missing directory and of a file", function()
      raises(errors.DirectoryNotFoundError, fs.readdir, fs, B .. "/nope")
      fs:writeFile(B .. "/f.txt", "x")
      raises(errors.NotDirectoryError, fs.readdir, fs, B .. "/f.txt")
    end)
    -- }======

    -- {====== FS-PATH ======
    it("FS-PATH-01 exists on a file", function()
      fs:writeFile(B .. "/e.txt", "x")
      assert.is_true(fs:exists(B .. "/e.txt"))
    end)

    it("FS-PATH-02 exists on a directory", function()
      fs:mkdir(B .. "/d")
      assert.is_true(fs:exists(B .. "/d"))
    end)

    it("FS-PATH-03 exists on a missing path is false", function()
      assert.is_false(fs:exists(B .. "/missing"))
    end)

    it("FS-PATH-04 file stat", function()
      fs:writeFile(B .. "/stat-file.txt", "Hello, stat!")
      local st = fs:stat(B .. "/stat-file.txt")
      assert.equal("file", st.type)
      assert.equal("stat-file.txt", st.name)
      assert.truthy(st.path:find("stat-file.txt", 1, true))
      assert.is_true(st.size >= 12)
    end)

    it("FS-PATH-05 directory stat", function()
      fs:mkdir(B .. "/stat-dir")
      local st = fs:stat(B .. "/stat-dir")
      assert.equal("directory", st.type)
      assert.equal("stat-dir", st.name)
    end)

    it("FS-PATH-06 timestamps (ms since the epoch)", function()
      local before = os.time() * 1000
      fs:writeFile(B .. "/t.txt", "t")
      local st = fs:stat(B .. "/t.txt")
      assert.equal("integer", math.type(st.createdAt))
      assert.equal("integer", math.type(st.modifiedAt))
      assert.is_true(st.modifiedAt >= before - 2000)
    end)

    it("FS-PATH-07 file classification", function()
      fs:writeFile(B .. "/c.txt", "c")
      local st = fs:stat(B .. "/c.txt")
      assert.is_true(st.type == "file")
      assert.is_false(st.type == "directory")
    end)

    it("FS-PATH-08 directory classification", function()
      fs:mkdir(B .. "/cd")
      local st = fs:stat(B .. "/cd")
      assert.is_true(st.type == "directory")
      assert.is_false(st.type == "file")
    end)

    it("FS-PATH-09 missing path: stat rejects", function()
      raises(errors.FileNotFoundError, fs.stat, fs, B .. "/missing")
    end)
    -- }======

    -- {====== FS-ERR ======
    it("FS-ERR-01 readFile of a missing file: FileNotFoundError with the caller's path", function()
      local p = B .. "//sub/../missing.txt"
      local err = raises(errors.FileNotFoundError, fs.readFile, fs, p)
      assert.equal(p, err.path)
      assert.equal("ENOENT", err.code)
      assert.equal("File not found: " .. p, err.message)
    end)

    it("FS-ERR-02 deleteFile of a missing file", function()
      raises(errors.FileNotFoundError, fs.deleteFile, fs, B .. "/missing.txt")
    end)

    it("FS-ERR-03 copyFile of a missing source", function()
      local err = raises(errors.FileNotFoundError, fs.copyFile, fs, B .. "/missing.txt",
        B .. "/dest.txt")
      assert.equal(B .. "/missing.txt", err.path)
    end)

    it("FS-ERR-04 stat of a missing path", function()
      raises(errors.FileNotFoundError, fs.stat, fs, B .. "/missing")
    end)

    describe("read-only", function()
      local ro
      setup(function() ro = make{ readOnly = true } ro:init() end)

      it("FS-ERR-05 writeFile rejects (PermissionError, WorkspaceReadOnlyError)", function()
        local err = raises(errors.WorkspaceReadOnlyError, ro.writeFile, ro, B .. "/w.txt", "x")
        assert.is_true(errors.PermissionError:is(err))
        assert.equal("READ_ONLY", err.code)
        assert.equal("Workspace is in read-only mode. Cannot perform: writeFile", err.message)
        assert.is_false(fs:exists(B .. "/w.txt"))
      end)

      it("FS-ERR-06 deleteFile of a missing path: read-only error, never FileNotFoundError",
      function()
        local err = raises(errors.PermissionError, ro.deleteFile, ro, B .. "/missing.txt")
        assert.is_true(errors.WorkspaceReadOnlyError:is(err))
        assert.is_false(errors.FileNotFoundError:is(err))
        err = raises(errors.PermissionError, ro.deleteFile, ro, B .. "/missing.txt",
          { force = true })
        assert.is_true(errors.WorkspaceReadOnlyError:is(err))
      end)

      it("FS-ERR-07 mkdir rejects (and every other write)", function()
        raises(errors.PermissionError, ro.mkdir, ro, B .. "/d")
        fs:writeFile(B .. "/keep.txt", "keep")
        raises(errors.WorkspaceReadOnlyError, ro.appendFile, ro, B .. "/keep.txt", "x")
        raises(errors.WorkspaceReadOnlyError, ro.copyFile, ro, B .. "/keep.txt", B .. "/c.txt")
        raises(errors.WorkspaceReadOnlyError, ro.moveFile, ro, B .. "/keep.txt", B .. "/m.txt")
        raises(errors.WorkspaceReadOnlyError, ro.rmdir, ro, B, { recursive = true })
        raises(errors.WorkspaceReadOnlyError, ro.deleteFile, ro, B .. "/keep.txt")
        assert.equal("keep", ro:readFile(B .. "/keep.txt"))
      end)

      it("FS-ERR-08 reads are allowed", function()
        assert.is_true(ro:exists("/"))
        assert.equal("table", type(ro:readdir("/")))
        local ok, err = pcall(ro.readFile, ro, "/nonexistent-read-test.txt")
        assert.is_false(ok)
        assert.is_false(errors.PermissionError:is(err))
        assert.is_true(errors.FileNotFoundError:is(err))
      end)
    end)

    it("FS-ERR-09 rmdir of a non-empty directory without recursive rejects", function()
      fs:writeFile(B .. "/full/file.txt", "x")
      raises(errors.DirectoryNotEmptyError, fs.rmdir, fs, B .. "/full")
      assert.equal("x", fs:readFile(B .. "/full/file.txt"))
    end)

    it("FS-ERR-10 readFile of a directory rejects", function()
      fs:mkdir(B .. "/adir")
      local ok = pcall(fs.readFile, fs, B .. "/adir")
      assert.is_false(ok)
    end)
    -- }======

    -- {====== parity: the same behaviour and errors on both filesystems ======
    it("PARITY copyFile of a directory with recursive = true copies the tree", function()
      fs:writeFile(B .. "/tree/a.txt", "A")
      fs:writeFile(B .. "/tree/sub/b.txt", "B")
      fs:mkdir(B .. "/tree/empty")
      fs:copyFile(B .. "/tree", B .. "/copy", { recursive = true })
      assert.equal("A", fs:readFile(B .. "/copy/a.txt"))
      assert.equal("B", fs:readFile(B .. "/copy/sub/b.txt"))
      assert.equal("directory", fs:stat(B .. "/copy/empty").type)
      assert.equal("A", fs:readFile(B .. "/tree/a.txt")) -- the source stays
    end)

    it("PARITY copyFile of a directory without recursive: IsDirectoryError", function()
      fs:writeFile(B .. "/tree/a.txt", "A")
      local err = raises(errors.IsDirectoryError, fs.copyFile, fs, B .. "/tree", B .. "/copy")
      assert.truthy(errors.message(err):find("recursive = true", 1, true))
      assert.is_false(fs:exists(B .. "/copy"))
    end)

    it("PARITY moveFile of a directory moves the tree", function()
      fs:writeFile(B .. "/tree/a.txt", "A")
      fs:writeFile(B .. "/tree/sub/b.txt", "B")
      fs:moveFile(B .. "/tree", B .. "/moved", { recursive = true })
      assert.is_false(fs:exists(B .. "/tree"))
      assert.equal("A", fs:readFile(B .. "/moved/a.txt"))
      assert.equal("B", fs:readFile(B .. "/moved/sub/b.txt"))
    end)

    it("PARITY moveFile and copyFile of a missing path: FileNotFoundError", function()
      raises(errors.FileNotFoundError, fs.moveFile, fs, B .. "/nope", B .. "/x")
      raises(errors.FileNotFoundError, fs.copyFile, fs, B .. "/nope", B .. "/x",
        { recursive = true })
    end)

    it("PARITY copyFile of a file onto a directory: IsDirectoryError", function()
      fs:writeFile(B .. "/f.txt", "F")
      fs:mkdir(B .. "/d")
      raises(errors.IsDirectoryError, fs.copyFile, fs, B .. "/f.txt", B .. "/d")
    end)

    it("PARITY rmdir of a file: NotDirectoryError", function()
      fs:writeFile(B .. "/f.txt", "F")
      raises(errors.NotDirectoryError, fs.rmdir, fs, B .. "/f.txt")
      assert.equal("F", fs:readFile(B .. "/f.txt"))
    end)

    it("PARITY mkdir where a file is: FileExistsError", function()
      fs:writeFile(B .. "/f.txt", "F")
      raises(errors.FileExistsError, fs.mkdir, fs, B .. "/f.txt")
    end)

    it("PARITY rmdir of a missing directory: DirectoryNotFoundError (or FileNotFound)", function()
      local ok, err = pcall(fs.rmdir, fs, B .. "/none")
      assert.is_false(ok)
      assert.is_true(errors.DirectoryNotFoundError:is(err) or errors.FileNotFoundError:is(err),
        tostring(err))
      fs:rmdir(B .. "/none", { force = true }) -- force: nothing to do, no error
    end)
    -- }======

    -- {====== FS-LIFE ======
    it("FS-LIFE-01 status is a string", function()
      assert.equal("string", type(fs.status))
    end)

    it("FS-LIFE-02 status is ready after init", function()
      assert.equal("ready", fs.status)
    end)

    it("FS-LIFE-03 id, name and provider are strings", function()
      assert.equal("string", type(fs.id))
      assert.equal("string", type(fs.name))
      assert.equal("string", type(fs.provider))
    end)

    it("FS-LIFE-04 a second instance has another id", function()
      local other = make{}
      assert.equal("pending", other.status)
      assert.not_equal(fs.id, other.id)
    end)

    it("FS-LIFE-05 displayName, description and icon are strings when set", function()
      for _, k in ipairs{ "displayName", "description", "icon" } do
        assert.is_true(fs[k] == nil or type(fs[k]) == "string")
      end
      assert.equal("string", type(fs.icon))
    end)

    it("FS-LIFE-06 readOnly is a boolean", function()
      assert.equal("boolean", type(fs.readOnly))
    end)

    it("FS-LIFE-07 getInfo names the filesystem", function()
      local info = fs:getInfo()
      assert.equal(fs.id, info.id)
      assert.equal(fs.name, info.name)
      assert.equal(fs.provider, info.provider)
      assert.is_not_nil(info.status)
    end)

    it("FS-LIFE-08 getInfo icon", function()
      assert.equal(fs.icon, fs:getInfo().icon)
    end)

    it("FS-LIFE-09 getInfo status", function()
      assert.equal(fs.status, fs:getInfo().status)
    end)
    -- }======

    it("bad input raises clear messages", function()
      local function message(fn, ...)
        local ok, err = pcall(fn, ...)
        assert.is_false(ok)
        return tostring(err)
      end
      assert.truthy(message(fs.readFile, fs, 42):find(
        "argument #1 %(path%) must be a string path %(got number 42%)"))
      assert.truthy(message(fs.writeFile, fs, B .. "/x", { 1, 2 })
        :find("argument #2 %(content%) must be a string"))
      assert.truthy(message(fs.readdir, fs, B, { recursve = true })
        :find("unknown option 'recursve'"))
      assert.truthy(message(fs.readFile, fs, B .. "/x", { encoding = "latin1" })
        :find("option 'encoding' must be one of utf%-8, utf8"))
      assert.truthy(message(fs.writeFile, fs, "/a\0b", "x"):find("NUL"))
      assert.truthy(message(fs.stat, fs, nil):find("must be a string path"))
      assert.truthy(message(fs.copyFile, fs, "/a", false):find("argument #2 %(dest%)"))
    end)

    it("getInstructions", function()
      assert.equal("string", type(fs:getInstructions()))
      local custom = make{ instructions = "Use /data." }
      assert.equal("Use /data.", custom:getInstructions())
      local fn = make{ instructions = function(ctx) return ctx.defaultInstructions .. " More." end }
      assert.equal(fs:getInstructions() .. " More.", fn:getInstructions())
    end)
  end)
end

contract.raises = raises
contract.names = names
contract.random_bytes = random_bytes

return contract
