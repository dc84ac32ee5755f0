-- SandboxFilesystem: the filesystem contract (spec/support/fs_contract.lua,
-- the cases LocalFilesystem and PlatformFilesystem pass) on the files of a
-- PlatformSandbox of a local mastra-platform, with stdin and without it
-- (--exec-stdin off: the bytes go in base64, in the command or in part
-- files), and on a LocalSandbox; names that need quoting, every byte value,
-- 8 MiB; containment in basePath; options; and the Workspace tools over it,
-- where write_file and execute_command see one tree.
local mastra = require "mastra"
local errors = mastra.errors
local platform = require "spec.support.platform"
local util = require "spec.support.util"
local contract = require "spec.support.fs_contract"
local raises, names = contract.raises, contract.names

local SandboxFilesystem = mastra.SandboxFilesystem

local function urandom(n)
  local f = assert(io.open("/dev/urandom", "rb"))
  local s = f:read(n)
  f:close()
  return s
end

local function sha256(data)
  local tmp = util.tmpname()
  platform.writeFile(tmp, data)
  local p = assert(io.popen("sha256sum " .. mastra.quote(tmp)))
  local line = p:read("l")
  p:close()
  os.remove(tmp)
  return line:match("^(%x+)")
end

-- A command in the sandbox, in the filesystem's base (as an agent's
-- execute_command runs there).
local function sh(fs, script, ...)
  local r = fs.sandbox:executeCommand("sh", { "-c", script, "sh", ... }, { cwd = fs.basePath })
  assert.are.equal(0, r.exitCode, r.stderr)
  return r.stdout
end

-- What the cases on one sandbox share: describe(label) with a started
-- sandbox of a server started with server_opts (nil: a LocalSandbox).
local function with_sandbox(label, server_opts, body)
  describe(label, function()
    local srv, sb, dir, reserved
    local ctx = {}
    setup(function()
      if server_opts then
        srv = platform.start(server_opts)
        sb = srv:startSandbox()
      else
        sb, dir, reserved = util.tempSandbox()
      end
      ctx.sb = sb
    end)
    teardown(function()
      if sb then pcall(sb.destroy, sb) end
      if srv then srv:close() end
      if dir then util.rm_rf(dir, reserved) end
    end)
    body(ctx)
  end)
end

local function fs_on(ctx, opts)
  opts = opts or {}
  opts.sandbox = ctx.sb
  return SandboxFilesystem.new(opts)
end

-- {====== names, bytes, sizes ======

local AWKWARD = {
  "with space.txt", "it's.txt", 'double "quoted".txt', "new\nline.txt", "tab\there.txt",
  "ünïcødé 文件 🌍.txt", "$(touch pwned).txt", "`touch pwned2`.txt", "-rf", "*", "?[a]",
  "trailing newline\n", "back\\slash", "semi;colon|pipe&amp", "--", ".hidden",
}

local function awkward_names(ctx)
  it("names with spaces, quotes, newlines, globs and unicode: the same bytes", function()
    local fs = fs_on(ctx)
    local dir = "/awkward dir 'é'\n/"
    for _, name in ipairs(AWKWARD) do fs:writeFile(dir .. name, "content of " .. name) end
    local listed = names(fs:readdir(dir))
    for _, name in ipairs(AWKWARD) do
      assert.are.equal("content of " .. name, fs:readFile(dir .. name))
      assert.truthy(listed[name], ("readdir lists %q"):format(name))
      assert.are.equal(name, fs:stat(dir .. name).name)
      -- a command sees the same file at the same name
      assert.are.equal("content of " .. name,
        sh(fs, 'cat -- "$1"', fs:resolvePath(dir .. name)))
    end
    local count = 0
    for _ in pairs(listed) do count = count + 1 end
    assert.are.equal(#AWKWARD, count)
    -- nothing was run from a name
    assert.is_false(fs:exists("/awkward dir 'é'\n/pwned"))
    assert.is_false(fs:exists("pwned"))
    assert.are.equal("", sh(fs, 'ls -A | grep -x "pwned2*" || true'))
    fs:copyFile(dir .. "new\nline.txt", dir .. "copy\n'q'")
    fs:moveFile(dir .. "copy\n'q'", "/moved \"x\"\n")
    assert.are.equal("content of new\nline.txt", fs:readFile("/moved \"x\"\n"))
    fs:rmdir(dir, { recursive = true })
    fs:deleteFile("/moved \"x\"\n")
    assert.is_false(fs:exists(dir))
  end)

  it("every byte value, NULs included, and what a command makes of them", function()
    local fs = fs_on(ctx)
    local all = {}
    for i = 0, 255 do all[#all + 1] = string.char(i) end
    local data = table.concat(all) .. "\0\0\n\r\0" .. table.concat(all):reverse()
    fs:writeFile("/bytes/all.bin", data)
    assert.is_true(fs:readFile("/bytes/all.bin") == data)
    assert.are.equal(sha256(data), sh(fs, "sha256sum bytes/all.bin"):match("^(%x+)"))
    -- bytes that a command wrote come back as they are
    sh(fs, [[printf 'a\000b\377\n' > bytes/cmd.bin]])
    assert.is_true(fs:readFile("/bytes/cmd.bin") == "a\0b\255\n")
    fs:appendFile("/bytes/cmd.bin", "\0tail")
    assert.is_true(fs:readFile("/bytes/cmd.bin") == "a\0b\255\n\0tail")
    fs:rmdir("/bytes", { recursive = true })
  end)

  it("8 MiB of random bytes in and out, the same sha256 in the sandbox", function()
    local fs = fs_on(ctx)
    local data = urandom(8 * 1048576 + 5)
    fs:writeFile("/big/data.bin", data)
    assert.are.equal(sha256(data), sh(fs, "sha256sum big/data.bin"):match("^(%x+)"))
    assert.are.equal(#data, fs:stat("/big/data.bin").size)
    local back = fs:readFile("/big/data.bin")
    assert.are.equal(#data, #back)
    assert.is_true(back == data)
    -- no temporary or part file is left behind
    assert.are.equal("", sh(fs, "ls -A big | grep -v '^data.bin$' || true"))
    fs:rmdir("/big", { recursive = true })
  end)
end

-- }======

-- {====== the Workspace over it ======

local function workspace_cases(ctx)
  it('write_file then execute_command cat sees it (filesystem = "sandbox")', function()
    local ws = mastra.Workspace.new{ sandbox = ctx.sb, filesystem = "sandbox" }
    ws:init()
    assert.are.equal("mastra.SandboxFilesystem", getmetatable(ws.filesystem).__name)
    local text, is_error = ws:callTool("write_file",
      { path = "/proj/hello.sh", content = "echo \"hi from $0\"\n" })
    assert.is_nil(is_error, text)
    assert.are.equal("Created /proj/hello.sh (18 bytes)", text)
    text, is_error = ws:callTool("execute_command", { command = "cat proj/hello.sh" })
    assert.is_nil(is_error, text)
    assert.are.equal('echo "hi from $0"', text)
    text = ws:callTool("execute_command", { command = "sh proj/hello.sh" })
    assert.are.equal("hi from proj/hello.sh", text)
    -- and the other way: what a command makes, the file tools see
    text, is_error = ws:callTool("execute_command",
      { command = "mkdir -p out && printf 'line one\\nline two\\n' > out/made.txt" })
    assert.is_nil(is_error, text)
    text, is_error = ws:callTool("read_file", { path = "out/made.txt" })
    assert.is_nil(is_error, text)
    assert.truthy(text:find("line two", 1, true), text)
    text = ws:callTool("list_files", { path = "/" })
    assert.truthy(text:find("made.txt", 1, true), text)
    assert.truthy(text:find("hello.sh", 1, true), text)
    text, is_error = ws:callTool("edit_file",
      { path = "out/made.txt", old_string = "line one", new_string = "line 1" })
    assert.is_nil(is_error, text)
    assert.are.equal("line 1\nline two",
      ws:callTool("execute_command", { command = "cat out/made.txt" }))
    text = ws:callTool("grep", { pattern = "two", path = "/" })
    assert.truthy(text:find("out/made.txt:2:", 1, true), text)
    assert.is_nil(select(2, ws:callTool("delete", { path = "out", recursive = true })))
    assert.are.equal("gone", ws:callTool("execute_command",
      { command = "test -e out || echo gone" }))
    assert.is_nil(select(2, ws:callTool("delete", { path = "proj", recursive = true })))
  end)

  it("the tools report the filesystem's errors as results", function()
    local ws = mastra.Workspace.new{ sandbox = ctx.sb,
      filesystem = SandboxFilesystem.new{ sandbox = ctx.sb } }
    local text, is_error = ws:callTool("read_file", { path = "/no/such.txt" })
    assert.is_true(is_error)
    assert.truthy(text:find("File not found: /no/such.txt", 1, true), text)
    text, is_error = ws:callTool("read_file", { path = "../../etc/passwd" })
    assert.is_true(is_error)
    assert.truthy(text:find("outside the filesystem base path", 1, true), text)
    ws:callTool("write_file", { path = "/once.txt", content = "1" })
    text, is_error = ws:callTool("write_file", { path = "/once.txt", content = "2",
      overwrite = false })
    assert.is_true(is_error)
    assert.truthy(text:find("File already exists", 1, true), text)
    assert.are.equal("1", ws:callTool("execute_command", { command = "cat once.txt" }))
    ws:callTool("delete", { path = "/once.txt" })
  end)

  it("the instructions say that files and commands share one tree", function()
    local ws = mastra.Workspace.new{ sandbox = ctx.sb, filesystem = "sandbox" }
    local text = ws:getInstructions()
    local wd = ws.filesystem.basePath
    assert.truthy(text:find("Files and commands share one tree", 1, true), text)
    assert.truthy(text:find('"/notes/a.txt" is "notes/a.txt"', 1, true), text)
    assert.truthy(text:find(wd .. "/notes/a.txt", 1, true), text)
    assert.is_nil(text:find("stored apart", 1, true), text)
    -- another base: the absolute path
    local sub = mastra.Workspace.new{ sandbox = ctx.sb,
      filesystem = SandboxFilesystem.new{ sandbox = ctx.sb, basePath = "sub dir" } }
    text = sub:getInstructions()
    assert.truthy(text:find(('under "%s/sub dir"'):format(wd), 1, true), text)
    -- a SandboxFilesystem of another sandbox is apart from this one
    local other = mastra.LocalSandbox.new{}
    local apart = mastra.Workspace.new{ sandbox = other, filesystem = ws.filesystem }
    assert.truthy(apart:getInstructions():find("stored apart", 1, true))
  end)
end

-- }======

-- {====== on the local platform, with stdin ======

with_sandbox("SandboxFilesystem on a PlatformSandbox (stdin)", {}, function(ctx)
  contract.conformance(_ENV, "SandboxFilesystem (platform, stdin)",
    function(opts) return fs_on(ctx, opts) end)

  it("the lease advertises stdin here", function()
    assert.is_true(ctx.sb:supportsStdin())
  end)

  awkward_names(ctx)
  workspace_cases(ctx)

  it("confines paths to basePath: '..' and symlinks out are PermissionError", function()
    local fs = fs_on(ctx)
    for _, p in ipairs{ "../../etc/passwd", "/../../etc/passwd", "a/../../x", "/workspace/../x" } do
      local err = raises(errors.PermissionError, fs.readFile, fs, p)
      assert.are.equal(p, err.path)
      assert.truthy(err.message:find("outside the filesystem base path", 1, true))
    end
    raises(errors.PermissionError, fs.writeFile, fs, "../escape.txt", "x")
    sh(fs, "ln -sfn /etc out-link && ln -sfn /etc/hostname file-link"
      .. " && ln -sfn /nowhere/x dangling")
    local function refused(fn, ...)
      local err = raises(errors.PermissionError, fn, fs, ...)
      assert.truthy(err.message:find("through a symlink", 1, true), err.message)
    end
    refused(fs.readFile, "/out-link/passwd")
    refused(fs.readFile, "/file-link")
    refused(fs.writeFile, "/out-link/pwned", "x")
    refused(fs.writeFile, "/dangling", "x")
    refused(fs.appendFile, "/file-link", "x")
    refused(fs.readdir, "/out-link")
    refused(fs.stat, "/out-link/passwd")
    refused(fs.deleteFile, "/out-link/hostname")
    refused(fs.copyFile, "/file-link", "/copy")
    refused(fs.moveFile, "/nothing", "/out-link/moved")
    refused(fs.mkdir, "/out-link/newdir")
    -- a listing shows the links without following them
    local set = names(fs:readdir("/"))
    assert.is_true(set["out-link"].isSymlink)
    assert.are.equal("/etc", set["out-link"].symlinkTarget)
    sh(fs, "rm -f out-link file-link dangling")
    -- a symlink inside works
    fs:writeFile("/real/target.txt", "inside")
    sh(fs, "ln -sfn real alias")
    assert.are.equal("inside", fs:readFile("/alias/target.txt"))
    assert.are.equal("/real/target.txt", fs:realpath("/alias/target.txt"))
    sh(fs, "rm -rf alias real")
  end)

  it("an absolute path inside basePath is that path; others are under basePath", function()
    local fs = fs_on(ctx)
    assert.are.equal("/workspace", fs.basePath)
    fs:writeFile("/workspace/abs.txt", "abs")
    assert.are.equal("abs", fs:readFile("abs.txt"))
    assert.are.equal("abs", fs:readFile("/abs.txt"))
    assert.are.equal("/workspace/abs.txt", fs:resolvePath("/abs.txt"))
    assert.are.equal("/workspace/abs.txt", fs:resolvePath("/workspace/./abs.txt"))
    assert.are.equal("/workspace", fs:resolvePath("/"))
    assert.are.equal("/abs.txt", fs:stat("/workspace/abs.txt").path)
    assert.are.equal("abs", sh(fs, "cat /workspace/abs.txt"))
    fs:deleteFile("/abs.txt")
  end)

  it("options: basePath, readOnly, unknown keys, the sandbox", function()
    local sub = fs_on(ctx, { basePath = "nested/base", timeout = 30000 })
    assert.are.equal("/workspace/nested/base", sub.basePath)
    sub:init()
    assert.are.equal("yes", sh(sub, "test -d /workspace/nested/base && printf yes"))
    sub:writeFile("/f.txt", "in sub")
    assert.are.equal("in sub", sh(sub, "cat /workspace/nested/base/f.txt"))
    local info = sub:getInfo()
    assert.are.same({ basePath = "/workspace/nested/base", sandboxId = ctx.sb.sandboxId,
      sandboxProvider = "platform" }, info.metadata)
    assert.are.equal("sandbox", info.provider)
    assert.are.equal("SandboxFilesystem", info.name)
    local ro = fs_on(ctx, { basePath = "/workspace/ro-base", readOnly = true })
    ro:init()
    assert.is_false(fs_on(ctx):exists("/ro-base"))
    raises(errors.WorkspaceReadOnlyError, ro.writeFile, ro, "/x", "x")
    fs_on(ctx):rmdir("/nested", { recursive = true })
    local function message(fn, ...)
      local ok, err = pcall(fn, ...)
      assert.is_false(ok)
      return tostring(err)
    end
    assert.truthy(message(SandboxFilesystem.new, { sandbox = ctx.sb, bogus = 1 })
      :find("SandboxFilesystem.new: unknown option 'bogus' (known options:", 1, true))
    assert.truthy(message(SandboxFilesystem.new, {})
      :find("option 'sandbox' is required", 1, true))
    assert.truthy(message(SandboxFilesystem.new, { sandbox = {} })
      :find("option 'sandbox' must be a sandbox", 1, true))
    assert.truthy(message(SandboxFilesystem.new, { sandbox = ctx.sb, basePath = 7 })
      :find("option 'basePath' must be a string", 1, true))
    assert.truthy(message(mastra.Workspace.new, { filesystem = "sandbox" })
      :find('filesystem = "sandbox" needs the option sandbox', 1, true))
    assert.truthy(message(mastra.Workspace.new, { filesystem = "bucket" })
      :find('option \'filesystem\' must be a filesystem (a table with readFile, writeFile,'
        .. ' ...), or "sandbox"', 1, true))
  end)

  it("a write the script refuses before it reads its stdin leaves the file", function()
    local fs = fs_on(ctx)
    fs:writeFile("/keep.txt", "kept")
    local big = urandom(3 * 1048576)
    raises(errors.FileExistsError, fs.writeFile, fs, "/keep.txt", big, { overwrite = false })
    fs:mkdir("/a-dir")
    raises(errors.IsDirectoryError, fs.writeFile, fs, "/a-dir", big)
    raises(errors.NotDirectoryError, fs.writeFile, fs, "/keep.txt/under", "x")
    raises(errors.DirectoryNotFoundError, fs.writeFile, fs, "/none/x.txt", "x",
      { recursive = false })
    assert.are.equal("kept", fs:readFile("/keep.txt"))
    assert.are.equal("", sh(fs, "ls -A | grep mastra-tmp || true"))
    fs:rmdir("/a-dir")
    fs:deleteFile("/keep.txt")
  end)
end)

-- }======

-- {====== without stdin (the hosted platform's protocol) ======

with_sandbox("SandboxFilesystem on a PlatformSandbox without stdin",
  { args = { "--exec-stdin", "off" } }, function(ctx)
  it("the lease does not advertise stdin here", function()
    assert.is_false(ctx.sb:supportsStdin())
  end)

  contract.conformance(_ENV, "SandboxFilesystem (platform, no stdin)",
    function(opts) return fs_on(ctx, opts) end)

  awkward_names(ctx)
  workspace_cases(ctx)

  it("a large append goes through part files too", function()
    local fs = fs_on(ctx)
    local a, b = urandom(200000), urandom(300001)
    fs:writeFile("/app.bin", a)
    fs:appendFile("/app.bin", b)
    assert.is_true(fs:readFile("/app.bin") == a .. b)
    assert.are.equal("app.bin\n", sh(fs, "ls -A | grep app"))
    fs:deleteFile("/app.bin")
  end)
end)

-- }======

-- {====== other sandboxes ======

with_sandbox("SandboxFilesystem on the process driver (/workspace mapped)",
  { driver = "process" }, function(ctx)
  it("files and commands share the sandbox's directory", function()
    local fs = fs_on(ctx)
    fs:init()
    fs:writeFile("/notes/a.txt", "mapped")
    assert.are.equal("mapped", sh(fs, "cat notes/a.txt"))
    assert.are.equal("mapped", ctx.sb:executeCommand("cat notes/a.txt").stdout)
    sh(fs, "echo made > notes/b.txt")
    assert.are.equal("made\n", fs:readFile("/notes/b.txt"))
    assert.are.same({ "a.txt", "b.txt" }, (function()
      local out = {}
      for _, e in ipairs(fs:readdir("/notes")) do out[#out + 1] = e.name end
      return out
    end)())
    assert.are.equal("/notes/a.txt", fs:realpath("notes/a.txt"))
    fs:rmdir("/notes", { recursive = true })
  end)
end)

with_sandbox("SandboxFilesystem on a LocalSandbox", nil, function(ctx)
  contract.conformance(_ENV, "SandboxFilesystem (LocalSandbox)",
    function(opts) return fs_on(ctx, opts) end)

  it("its base is the sandbox's working directory", function()
    local fs = fs_on(ctx)
    assert.are.equal(ctx.sb.workingDirectory, fs.basePath)
    fs:writeFile("/here.txt", "local")
    assert.are.equal("local", platform.readFile(ctx.sb.workingDirectory .. "/here.txt"))
    fs:deleteFile("/here.txt")
  end)
end)

-- }======
