-- The filesystem cases of upstream's conformance suite (FS-FILE, FS-DIR,
-- FS-PATH, FS-ERR, FS-LIFE) run against LocalFilesystem on a temporary
-- directory and PlatformFilesystem on a local mastra-platform, plus edge
-- cases of our own (bytes with NULs, 10 MiB, Unicode and spaces in names,
-- concurrent writers, containment).
--
-- Cases that do not apply: FS-MCFG (neither filesystem mounts), FS-CFG
-- (covered by the bad-input cases at the end). Every FS-* case applies to
-- both: PlatformFilesystem keeps empty directories through marker objects.
-- The PARITY cases (ours) hold both to the same behaviour and the same
-- errors: directories copied and moved, files onto directories, mkdir over
-- a file, rmdir of a file.
local mastra = require "mastra"
local errors = mastra.errors
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local LocalFilesystem = mastra.LocalFilesystem
local PlatformFilesystem = mastra.PlatformFilesystem

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
local function conformance(label, make)
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

-- {====== LocalFilesystem ======

local dir, reserved = util.tmpdir()
local base = dir .. "/base"

conformance("LocalFilesystem", function(opts)
  opts.basePath = base
  return LocalFilesystem.new(opts)
end)

describe("LocalFilesystem specifics", function()
  local fs, outside
  setup(function()
    fs = LocalFilesystem.new{ basePath = base }
    fs:init()
    outside = dir .. "/outside"
    os.execute("mkdir -p " .. mastra.quote(outside))
    platform.writeFile(outside .. "/secret.txt", "secret")
  end)
  teardown(function() util.rm_rf(dir, reserved) end)

  it("basePath is resolved against the current directory, '/' is stripped", function()
    local rel = LocalFilesystem.new{ basePath = "some/dir" }
    assert.equal(assert(require("mastra.core").getcwd()) .. "/some/dir", rel.basePath)
    fs:writeFile("/lead.txt", "a")
    assert.equal("a", platform.readFile(base .. "/lead.txt"))
    assert.equal("a", fs:readFile("lead.txt"))
    assert.truthy(fs:getInstructions():find(base, 1, true))
  end)

  it("refuses ../../etc/passwd with a clear PermissionError", function()
    for _, p in ipairs{ "../../etc/passwd", "/../../etc/passwd", "a/../../x" } do
      local err = raises(errors.PermissionError, fs.readFile, fs, p)
      assert.equal(p, err.path)
      assert.truthy(err.message:find("outside the filesystem base path", 1, true))
    end
    raises(errors.PermissionError, fs.writeFile, fs, "../outside/secret.txt", "pwned")
    raises(errors.PermissionError, fs.deleteFile, fs, "../outside/secret.txt")
    assert.equal("secret", platform.readFile(outside .. "/secret.txt"))
  end)

  it("refuses a symlink that points outside basePath and never touches the target", function()
    assert(os.execute(("ln -s %s %s"):format(mastra.quote(outside), mastra.quote(base .. "/link"))))
    assert(os.execute(("ln -s %s %s"):format(mastra.quote(outside .. "/secret.txt"),
      mastra.quote(base .. "/file-link"))))
    assert(os.execute(("ln -s %s %s"):format(mastra.quote(outside .. "/new.txt"),
      mastra.quote(base .. "/dangling"))))
    local function refused(fn, ...)
      local err = raises(errors.PermissionError, fn, fs, ...)
      assert.truthy(err.message:find("symlink", 1, true))
    end
    refused(fs.readFile, "/link/secret.txt")
    refused(fs.readFile, "/file-link")
    refused(fs.writeFile, "/link/secret.txt", "pwned")
    refused(fs.writeFile, "/file-link", "pwned")
    refused(fs.writeFile, "/dangling", "pwned")
    refused(fs.appendFile, "/file-link", "pwned")
    refused(fs.deleteFile, "/link/secret.txt")
    refused(fs.readdir, "/link")
    refused(fs.stat, "/link/secret.txt")
    refused(fs.copyFile, "/file-link", "/copy.txt")
    refused(fs.moveFile, "/lead.txt", "/link/moved.txt")
    refused(fs.mkdir, "/link/newdir")
    assert.equal("secret", platform.readFile(outside .. "/secret.txt"))
    assert.is_nil(platform.readFile(outside .. "/new.txt"))
    assert.is_nil(platform.readFile(outside .. "/moved.txt"))
    -- the listing shows the links, and removing the tree leaves the target
    local set = names(fs:readdir("/"))
    assert.is_true(set.link.isSymlink)
    os.remove(base .. "/link")
    os.remove(base .. "/file-link")
    os.remove(base .. "/dangling")
  end)

  it("a symlink inside basePath works", function()
    fs:writeFile("/real/target.txt", "inside")
    assert(os.execute(("ln -s real %s"):format(mastra.quote(base .. "/alias"))))
    assert.equal("inside", fs:readFile("/alias/target.txt"))
    assert.equal("/real/target.txt", fs:realpath("/alias/target.txt"))
    fs:rmdir("/real", { recursive = true })
    os.remove(base .. "/alias")
  end)

  it("contained = false allows ..; allowedPaths add roots", function()
    local free = LocalFilesystem.new{ basePath = base, contained = false }
    assert.equal("secret", free:readFile("../outside/secret.txt"))
    local extra = LocalFilesystem.new{ basePath = base, allowedPaths = { outside } }
    assert.equal("secret", extra:readFile(outside .. "/secret.txt"))
    assert.equal("secret", extra:readFile("../outside/secret.txt"))
    raises(errors.PermissionError, extra.readFile, extra, "../../etc/passwd")
    extra:setAllowedPaths({})
    raises(errors.PermissionError, extra.readFile, extra, "../outside/secret.txt")
  end)

  it("directory errors", function()
    fs:writeFile("/errs/f.txt", "x")
    raises(errors.IsDirectoryError, fs.readFile, fs, "/errs")
    raises(errors.IsDirectoryError, fs.writeFile, fs, "/errs", "x")
    raises(errors.IsDirectoryError, fs.deleteFile, fs, "/errs")
    raises(errors.NotDirectoryError, fs.rmdir, fs, "/errs/f.txt")
    raises(errors.DirectoryNotFoundError, fs.rmdir, fs, "/errs/none")
    raises(errors.FileExistsError, fs.mkdir, fs, "/errs/f.txt")
    raises(errors.FileExistsError, fs.mkdir, fs, "/errs", { recursive = false })
    raises(errors.DirectoryNotFoundError, fs.mkdir, fs, "/errs/a/b", { recursive = false })
    raises(errors.DirectoryNotFoundError, fs.writeFile, fs, "/errs/a/b.txt", "x",
      { recursive = false })
    raises(errors.NotDirectoryError, fs.writeFile, fs, "/errs/f.txt/under", "x")
    fs:copyFile("/errs", "/errs-copy", { recursive = true })
    assert.equal("x", fs:readFile("/errs-copy/f.txt"))
    fs:deleteFile("/errs", { recursive = true })
    fs:rmdir("/errs-copy", { recursive = true })
    assert.is_false(fs:exists("/errs"))
  end)

  it("an overwrite keeps the file's mode", function()
    fs:writeFile("/run.sh", "#!/bin/sh\n")
    assert(os.execute("chmod 755 " .. mastra.quote(base .. "/run.sh")))
    fs:writeFile("/run.sh", "#!/bin/sh\necho hi\n")
    assert.equal(tonumber("755", 8), require("mastra.core").fsStat(base .. "/run.sh").mode)
    fs:deleteFile("/run.sh")
  end)

  it("a read-only filesystem deleting a missing file raises the read-only error", function()
    local ro = LocalFilesystem.new{ basePath = base, readOnly = true }
    local err = raises(errors.WorkspaceReadOnlyError, ro.deleteFile, ro, "/does-not-exist.txt")
    assert.is_false(errors.FileNotFoundError:is(err))
  end)

  it("loads no platform module (PlatformFilesystem, its client, the local platform)", function()
    local root = os.getenv("PWD") or "."
    local code = ([[
      package.path = %q .. "/lua/?.lua;" .. %q .. "/lua/?/init.lua;" .. package.path
      require "mastra.local_filesystem"
      for name in pairs(package.loaded) do
        if name:find("^mastra") then io.write(name, " ") end
      end]]):format(root, root)
    local p = assert(io.popen("lua5.4 -e " .. mastra.quote(code) .. " 2>&1"))
    local out = p:read("a")
    p:close()
    assert.truthy(out:find("mastra.local_filesystem ", 1, true), out)
    assert.is_nil(out:find("platform", 1, true), out)
  end)

  it("concurrent writers (separate processes) never leave a torn file", function()
    local root = os.getenv("PWD") or "."
    local script = dir .. "/writer.lua"
    platform.writeFile(script, ([[
      package.path = %q .. "/lua/?.lua;" .. %q .. "/lua/?/init.lua;" .. package.path
      local fs = require("mastra.local_filesystem").new{ basePath = %q }
      local who = arg[1]
      if who == "reader" then
        local torn = 0
        for _ = 1, 400 do
          local ok, s = pcall(fs.readFile, fs, "/race.bin")
          if ok and not (#s == 262144 and s == s:sub(1, 1):rep(262144)) then torn = torn + 1 end
        end
        print("torn=" .. torn)
      else
        for _ = 1, 40 do fs:writeFile("/race.bin", who:rep(262144)) end
      end
    ]]):format(root, root, base))
    local cmd = ("cd %s && (for w in a b c d e f; do lua5.4 %s $w & done;"
      .. " lua5.4 %s reader; wait) 2>&1"):format(mastra.quote(root), mastra.quote(script),
      mastra.quote(script))
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    assert.truthy(out:find("torn=0", 1, true), out)
    local final = fs:readFile("/race.bin")
    assert.equal(262144, #final)
    assert.equal(final:sub(1, 1):rep(262144), final)
    -- no temporary file is left behind or listed
    for _, e in ipairs(fs:readdir("/")) do assert.is_nil(e.name:find("mastra%-tmp")) end
    fs:deleteFile("/race.bin")
  end)
end)

-- }======

-- {====== PlatformFilesystem ======

describe("PlatformFilesystem on a local mastra-platform", function()
  local srv
  local function make(opts)
    opts.accessToken = srv.token
    opts.proxyUrl = srv.url
    opts.projectId = "p"
    opts.bucketName = "b"
    return PlatformFilesystem.new(opts)
  end
  setup(function() srv = platform.start{} end)
  teardown(function() if srv then srv:close() end end)

  -- describe blocks run after the setup above: make is called lazily
  conformance("PlatformFilesystem", function(opts) return make(opts) end)

  it("1000 files written concurrently read back identical", function()
    local fs = make{}
    local list = {}
    for i = 1, 1000 do list[i] = i end
    mastra.map(list, function(i)
      fs:writeFile(("/conc/f-%04d.txt"):format(i), ("content %d "):format(i):rep(i % 50 + 1))
    end, { concurrency = 64 })
    local back = mastra.map(list, function(i)
      return fs:readFile(("/conc/f-%04d.txt"):format(i))
    end, { concurrency = 64 })
    for i = 1, 1000 do
      assert.equal(("content %d "):format(i):rep(i % 50 + 1), back[i])
    end
    assert.equal(1000, #fs:readdir("/conc"))
    fs:rmdir("/conc", { recursive = true })
    assert.is_false(fs:exists("/conc"))
  end)

  it("concurrent writers of one key leave one whole version", function()
    local fs = make{}
    local list = { "a", "b", "c", "d", "e", "f", "g", "h" }
    mastra.map(list, function(c)
      for _ = 1, 5 do fs:writeFile("/race.bin", c:rep(300000)) end
    end)
    local final = fs:readFile("/race.bin")
    assert.equal(300000, #final)
    assert.equal(final:sub(1, 1):rep(300000), final)
    fs:deleteFile("/race.bin")
  end)

  it("prefix-only folders: stat and readdir (F-test)", function()
    local fs = make{}
    fs:writeFile("/foo/bar.md", "abc")
    assert.equal("directory", fs:stat("/foo").type)
    assert.same({ { name = "bar.md", type = "file", size = 3 } }, fs:readdir("/foo"))
    assert.truthy(names(fs:readdir("/")).foo)
    fs:rmdir("/foo", { recursive = true })
  end)

  it("stat of an object reads HEAD: size, mime type, time", function()
    local fs = make{}
    local t0 = os.time() * 1000
    fs:writeFile("/h/page.html", "<p>hi</p>", { mimeType = "text/html" })
    local st = fs:stat("/h/page.html")
    assert.equal(9, st.size)
    assert.equal("text/html", st.mimeType)
    assert.is_true(st.modifiedAt >= t0 - 2000 and st.modifiedAt <= t0 + 60000)
    assert.equal("/h/page.html", st.path)
    assert.same({ name = "", path = "/", type = "directory", size = 0, createdAt = 0,
      modifiedAt = 0 }, fs:stat("/"))
    fs:rmdir("/h", { recursive = true })
  end)

  it("bucketName, realpath, normalizePath, instructions", function()
    local fs = make{}
    assert.equal("b", fs.bucketName)
    assert.equal("b", fs:getInfo().metadata.bucketName)
    assert.equal("/a/c/", fs:realpath("a/./b/../c/"))
    assert.equal("/", fs:realpath(""))
    assert.equal("/x", PlatformFilesystem.normalizePath("/../../x"))
    assert.equal("Platform filesystem backed by Mastra Platform bucket b."
      .. " Use absolute workspace paths.", fs:getInstructions())
  end)
end)

describe("PlatformFilesystem wire (fake fetch)", function()
  local calls
  local replies
  local function make(opts)
    calls, replies = {}, {}
    opts = opts or {}
    opts.accessToken = "sk_test"
    opts.proxyUrl = "https://proxy.test/"
    opts.projectId = "proj_123"
    opts.bucketName = "dev-bucket"
    opts.fetch = function(req)
      calls[#calls + 1] = req
      return table.remove(replies, 1) or { status = 204 }
    end
    return PlatformFilesystem.new(opts)
  end

  it("PLAT-FS-01 write and read through the bucket routes", function()
    local fs = make()
    fs:init()
    assert.equal(0, #calls)
    fs:writeFile("/dir/file.txt", "hello", { mimeType = "text/plain" })
    assert.equal("PUT", calls[1].method)
    assert.equal("https://proxy.test/v1/railway/projects/proj_123/fs/dev-bucket/dir/file.txt",
      calls[1].url)
    assert.equal("text/plain", calls[1].headers["content-type"])
    assert.equal("Bearer sk_test", calls[1].headers.authorization)
    assert.equal("hello", calls[1].body)
    replies[1] = { status = 200, body = "hello" }
    assert.equal("hello", fs:readFile("/dir/file.txt", { encoding = "utf8" }))
    assert.equal("GET", calls[2].method)
  end)

  it("PLAT-FS-02 copy, move and mkdir", function()
    local fs = make()
    -- a file: HEAD finds it, the destination is no directory (an empty
    -- listing), then one POST
    replies = { { status = 200 }, { status = 200, body = "{}" } }
    fs:copyFile("/a.txt", "/b.txt")
    assert.equal("HEAD", calls[1].method)
    assert.truthy(calls[1].url:find("/fs/dev-bucket/a.txt", 1, true))
    assert.truthy(calls[2].url:find("/fs/dev-bucket/?delimiter=%2F&prefix=b.txt%2F", 1, true)
      or calls[2].url:find("prefix=b.txt", 1, true), calls[2].url)
    assert.truthy(calls[3].url:find("/fs/dev-bucket/a.txt?op=copy", 1, true))
    assert.equal('{"destination":"b.txt"}', calls[3].body)
    assert.equal("application/json", calls[3].headers["content-type"])
    replies = { { status = 200 }, { status = 200, body = "{}" } }
    fs:moveFile("/b.txt", "/c.txt")
    assert.truthy(calls[6].url:find("/fs/dev-bucket/b.txt?op=rename", 1, true))
    -- mkdir: HEAD finds no file there, then the marker
    replies = { { status = 404 } }
    fs:mkdir("/dir")
    assert.equal("HEAD", calls[7].method)
    assert.truthy(calls[8].url:find("/fs/dev-bucket/dir?op=mkdir", 1, true))
    assert.is_nil(calls[8].headers["content-type"])
  end)

  it("keys are percent-encoded segment by segment; destination stays raw", function()
    local fs = make()
    fs:writeFile("/notes/why?.txt", "x")
    fs:writeFile("/notes/tag#one.md", "x")
    fs:writeFile("/dir with space/a&b.txt", "\0binary")
    assert.truthy(calls[1].url:find("/fs/dev-bucket/notes/why%3F.txt", 1, true))
    assert.truthy(calls[2].url:find("/fs/dev-bucket/notes/tag%23one.md", 1, true))
    assert.truthy(calls[3].url:find("/fs/dev-bucket/dir%20with%20space/a%26b.txt", 1, true))
    assert.equal("text/plain;charset=UTF-8", calls[1].headers["content-type"])
    replies = { { status = 200 }, { status = 200, body = "{}" } }
    fs:copyFile("/dir with space/a&b.txt", "/x y/ü.txt")
    assert.equal('{"destination":"x y/ü.txt"}', calls[6].body)
  end)

  it("copyFile/moveFile with overwrite = false raise before any request", function()
    local fs = make()
    local ok, err = pcall(fs.copyFile, fs, "/a", "/b", { overwrite = false })
    assert.is_false(ok)
    assert.truthy(tostring(err):find(
      "PlatformFilesystem.copyFile does not support overwrite: false", 1, true))
    ok, err = pcall(fs.moveFile, fs, "/a", "/b", { overwrite = false })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("moveFile does not support overwrite", 1, true))
    assert.equal(0, #calls)
  end)

  it("overwrite = false sends If-None-Match and 412 is FileExistsError", function()
    local fs = make()
    replies[1] = { status = 412, body = '{"error":{"message":"exists","type":"precondition"}}' }
    local err = raises(errors.FileExistsError, fs.writeFile, fs, "/k.txt", "x",
      { overwrite = false })
    assert.equal("*", calls[1].headers["if-none-match"])
    assert.equal("/k.txt", err.path)
  end)

  it("readdir and stat requests: list at the bucket root, HEAD hit needs one call", function()
    local fs = make()
    replies[1] = { status = 200, body = '{"contents":[{"key":"d/x.txt","size":1}],'
      .. '"commonPrefixes":["d/sub/"]}' }
    local list = fs:readdir("/d")
    assert.equal("https://proxy.test/v1/railway/projects/proj_123/fs/dev-bucket/"
      .. "?delimiter=%2F&prefix=d%2F", calls[1].url)
    assert.same({ { name = "sub", type = "directory" },
      { name = "x.txt", type = "file", size = 1 } }, list)
    replies[1] = { status = 200, headers = { ["content-length"] = "5",
      ["last-modified"] = "Sun, 06 Nov 1994 08:49:37 GMT" } }
    local st = fs:stat("/d/x.txt")
    assert.equal(2, #calls)
    assert.equal("HEAD", calls[2].method)
    assert.equal(784111777000, st.modifiedAt)
    assert.equal(5, st.size)
    replies[1] = { status = 404, body = "" }
    replies[2] = { status = 200, body = '{"contents":[],"commonPrefixes":[]}' }
    raises(errors.FileNotFoundError, fs.stat, fs, "/nope")
    replies[1] = { status = 404, body = "" }
    replies[2] = { status = 200, body = '{}' }
    assert.is_false(fs:exists("/nope"))
    replies[1] = { status = 500, body = "boom" }
    local err = raises(errors.PlatformApiError, fs.readFile, fs, "/x")
    assert.equal(500, err.status)
  end)

  it("deleteFile sends recursive only when given; 404 with force is silent", function()
    local fs = make()
    fs:deleteFile("/a.txt")
    assert.equal("https://proxy.test/v1/railway/projects/proj_123/fs/dev-bucket/a.txt",
      calls[1].url)
    replies[1] = { status = 404 }
    fs:deleteFile("/a.txt", { recursive = false, force = true })
    assert.truthy(calls[2].url:find("?recursive=false", 1, true))
    fs:rmdir("/d", { recursive = true })
    assert.truthy(calls[3].url:find("/fs/dev-bucket/d/?recursive=true", 1, true))
  end)

  it("configuration errors", function()
    local ok, err = pcall(PlatformFilesystem.new, { accessToken = "t", proxyUrl = "http://x",
      projectId = "p", bucketName = "b", bogus = 1 })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("unknown option 'bogus'", 1, true))
    ok, err = pcall(PlatformFilesystem.new, { accessToken = "t", proxyUrl = "http://x",
      projectId = "p", readOnly = "yes" })
    assert.is_false(ok)
    assert.truthy(tostring(err):find("option 'readOnly' must be a boolean", 1, true))
    local fs = make{ displayName = "Docs", description = "the docs", readOnly = true }
    local info = fs:getInfo()
    assert.same({ bucketName = "dev-bucket", displayName = "Docs", description = "the docs" },
      info.metadata)
    assert.equal("cloud", info.icon)
    assert.equal("platform", info.provider)
    assert.is_true(info.readOnly)
  end)
end)

-- }======
