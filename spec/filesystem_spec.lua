-- The filesystem cases of upstream's conformance suite (FS-FILE, FS-DIR,
-- FS-PATH, FS-ERR, FS-LIFE; spec/support/fs_contract.lua) run against
-- LocalFilesystem on a temporary directory and PlatformFilesystem on a
-- local mastra-platform, plus edge cases of our own (bytes with NULs,
-- 10 MiB, Unicode and spaces in names, concurrent writers, containment).
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

local contract = require "spec.support.fs_contract"
local raises, names = contract.raises, contract.names

local LocalFilesystem = mastra.LocalFilesystem
local PlatformFilesystem = mastra.PlatformFilesystem

-- {====== LocalFilesystem ======

local dir, reserved = util.tmpdir()
local base = dir .. "/base"

contract.conformance(_ENV, "LocalFilesystem", function(opts)
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
  contract.conformance(_ENV, "PlatformFilesystem", function(opts) return make(opts) end)

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
