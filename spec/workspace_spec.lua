-- Workspace and its agent tools (upstream's workspace tools: docs/api.md),
-- driven purely through the tool list, as an agent would: LocalFilesystem,
-- then a minimal filesystem over io.open, each with a LocalSandbox over the
-- same directory.
local lfs = require "lfs"
local mastra = require "mastra"
local core = require "mastra.core"
local errors = require "mastra.errors"
local util = require "spec.support.util"

-- {====== a minimal filesystem (the WorkspaceFilesystem methods) over io.open ======

local function spec_filesystem(base)
  local fs = { id = "spec-fs", name = "SpecFilesystem", provider = "spec" }
  local function real(path)
    path = path:gsub("^/+", "")
    if path == "" or path == "." or path == "./" then return base end
    return base .. "/" .. path
  end
  local function not_found(path) errors.FileNotFoundError:raise({
    message = "File not found: " .. path, path = path }, 3) end
  function fs.readFile(_, path)
    local f = io.open(real(path), "rb")
    if not f then not_found(path) end
    local s = f:read("a")
    f:close()
    if s == nil then errors.IsDirectoryError:raise({ message = "Is a directory: " .. path }) end
    return s
  end
  function fs.writeFile(_, path, content, o)
    local p = real(path)
    if o and o.overwrite == false and lfs.attributes(p) then
      errors.FileExistsError:raise({ message = "File already exists: " .. path, path = path })
    end
    if o and o.recursive then
      local dir = p:match("^(.*)/[^/]*$")
      os.execute("mkdir -p -- " .. mastra.quote(dir))
    end
    local f = assert(io.open(p, "wb"))
    f:write(content)
    f:close()
  end
  function fs.deleteFile(_, path)
    if not os.remove(real(path)) then not_found(path) end
  end
  function fs.mkdir(_, path)
    os.execute("mkdir -p -- " .. mastra.quote(real(path)))
  end
  function fs.rmdir(_, path, o)
    local p = real(path)
    if o and o.recursive then
      os.execute("rm -rf -- " .. mastra.quote(p))
    elseif not lfs.rmdir(p) then
      errors.DirectoryNotEmptyError:raise({ message = "Directory not empty: " .. path })
    end
  end
  function fs.readdir(_, path)
    local out = {}
    for name in lfs.dir(real(path)) do
      if name ~= "." and name ~= ".." then
        local a = lfs.attributes(real(path) .. "/" .. name)
        out[#out + 1] = { name = name, type = a.mode == "directory" and "directory" or "file",
          size = a.size }
      end
    end
    return out
  end
  function fs.stat(_, path)
    local a = lfs.attributes(real(path))
    if not a then not_found(path) end
    return { name = path:match("[^/]*$"), path = path,
      type = a.mode == "directory" and "directory" or "file",
      size = a.size, modifiedAt = a.modification, createdAt = a.change }
  end
  function fs.exists(_, path) return lfs.attributes(real(path)) ~= nil end
  function fs.getInstructions() return ('Local filesystem at "%s".'):format(base) end
  return fs
end

local LocalFilesystem = require "mastra.local_filesystem"

-- The specs run over each filesystem: LocalFilesystem, and the minimal one
-- (which stands for any other implementation of the interface).
local FILESYSTEMS = {
  { "LocalFilesystem", function(dir) return LocalFilesystem.new{ basePath = dir } end },
  { "a minimal filesystem", spec_filesystem },
}

-- }======

-- {====== helpers ======

local function contains(s, sub)
  return type(s) == "string" and s:find(sub, 1, true) ~= nil
end

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function spit(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function by_name(tools)
  local t = {}
  for _, tool in ipairs(tools) do t[tool.name] = tool end
  return t
end

-- }======

for _, kind in ipairs(FILESYSTEMS) do
local fs_name, new_filesystem = kind[1], kind[2]

describe("Workspace over " .. fs_name, function()
  local dir, base, ws, tools

  local function call(short, input)
    local tool = tools["mastra_workspace_" .. short] or tools[short]
    assert(tool, "no tool " .. short)
    return tool.execute(input)
  end

  local function make(opts)
    opts = opts or {}
    opts.filesystem = opts.filesystem or new_filesystem(dir)
    if opts.sandbox == nil then
      opts.sandbox = mastra.LocalSandbox.new{ workingDirectory = dir }
    elseif opts.sandbox == false then
      opts.sandbox = nil
    end
    local w = mastra.Workspace.new(opts)
    w:init()
    return w
  end

  before_each(function()
    dir, base = util.tmpdir()
    ws = make()
    tools = by_name(ws:tools())
  end)

  after_each(function()
    ws:destroy()
    util.rm_rf(dir, base)
  end)

  describe("as an agent drives it", function()
    it("writes, edits, reads, greps and cats a file through the tools", function()
      local out, is_err = call("write_file", { path = "notes/todo.txt",
        content = "alpha\nbeta\ngamma\n" })
      assert.is_nil(is_err)
      assert.matches("^Created notes/todo.txt %(17 bytes%)$", out)
      out = call("edit_file", { path = "notes/todo.txt", old_string = "beta",
        new_string = "BETA two" })
      assert.equal("Edited notes/todo.txt: replaced 1 occurrence", out)
      out = call("read_file", { path = "notes/todo.txt" })
      assert.equal("notes/todo.txt (21 bytes)\n"
        .. "     1\u{2192}alpha\n     2\u{2192}BETA two\n     3\u{2192}gamma", out)
      out = call("grep", { pattern = "B\\w+ t\\w+" })
      assert.equal("notes/todo.txt:2:1: BETA two\n\n1 match in 1 file", out)
      out, is_err = call("execute_command", { command = "cat notes/todo.txt" })
      assert.is_nil(is_err)
      assert.equal("alpha\nBETA two\ngamma", out)
      assert.equal("alpha\nBETA two\ngamma\n", slurp(dir .. "/notes/todo.txt"))
    end)

    it("has the tools of a filesystem and a sandbox with processes", function()
      local ids = {}
      for _, t in ipairs(ws:tools()) do
        ids[#ids + 1] = t.id
        assert.equal(t.id, t.name)
        assert.is_string(t.description)
        assert.equal("object", t.inputSchema.type)
        assert.is_function(t.execute)
      end
      assert.same({
        "mastra_workspace_read_file", "mastra_workspace_write_file",
        "mastra_workspace_edit_file", "mastra_workspace_list_files",
        "mastra_workspace_delete", "mastra_workspace_file_stat", "mastra_workspace_mkdir",
        "mastra_workspace_grep", "mastra_workspace_execute_command",
        "mastra_workspace_get_process_output", "mastra_workspace_kill_process",
      }, ids)
    end)

    it("has only the filesystem tools without a sandbox", function()
      local w = make{ sandbox = false }
      local t = by_name(w:tools())
      assert.is_nil(t.mastra_workspace_execute_command)
      assert.is_nil(t.mastra_workspace_kill_process)
      assert.is_table(t.mastra_workspace_read_file)
      w:destroy()
    end)

    it("composes instructions: the sandbox's, the filesystem's, where files are", function()
      local text = ws:getInstructions()
      local head = ws.sandbox:getInstructions() .. "\n\n" .. ws.filesystem:getInstructions()
        .. "\n\n"
      assert.equal(head, text:sub(1, #head))
      assert.truthy(contains(text, "Local command execution"))
      -- the last paragraph says where the file tools' files are for commands
      if ws.filesystem.provider == "local" then
        assert.equal('Files of the file tools are in the working directory of shell commands:'
          .. ' the file tool path "/notes/a.txt" is "notes/a.txt" in a command.',
          text:sub(#head + 1))
      else
        assert.truthy(contains(text:sub(#head + 1), "shell commands do not see them"))
      end
    end)

    it("is exported as mastra.Workspace and refuses unknown options", function()
      assert.equal(require "mastra.workspace", mastra.Workspace)
      assert.has_error(function() mastra.Workspace.new{ filesystm = {} } end,
        "Workspace.new: unknown option 'filesystm' (known options: filesystem, id, name,"
        .. " sandbox, tools)")
      assert.error_matches(function() mastra.Workspace.new{ tools = { nope = {} } } end,
        "unknown tool 'nope'")
      assert.error_matches(function()
        mastra.Workspace.new{ tools = { read_file = { colour = "red" } } }
      end, "unknown option 'colour'")
      assert.error_matches(function()
        mastra.Workspace.new{ tools = { read_file = { name = "x" }, grep = { name = "x" } } }
      end, "would both be named 'x'")
    end)
  end)

  describe("input validation", function()
    it("reports a missing required parameter without a traceback", function()
      local out, is_err = call("read_file", {})
      assert.is_true(is_err)
      assert.equal("Error: Invalid input for mastra_workspace_read_file: missing required"
        .. " parameter 'path' (a string: The path of the file to read)", out)
    end)

    it("reports a parameter of the wrong type", function()
      local out, is_err = call("read_file", { path = "a", offset = "many" })
      assert.is_true(is_err)
      assert.equal("Error: Invalid input for mastra_workspace_read_file: parameter 'offset'"
        .. " must be an integer (got string \"many\")", out)
      out = call("read_file", { path = "a", offset = 0 })
      assert.truthy(contains(out, "must be an integer >= 1"))
      out = call("read_file", { path = "a", encoding = "latin1" })
      assert.truthy(contains(out, "must be one of utf-8, utf8, base64, hex, binary"))
    end)

    it("accepts JSON text and numbers sent as strings", function()
      spit(dir .. "/n.txt", "1\n2\n3\n")
      local out = call("read_file", '{"path":"n.txt","offset":"2","limit":1}')
      assert.equal("n.txt (lines 2-2 of 3, 6 bytes)\n     2\u{2192}2\n"
        .. "(1 line more; read on with offset 3)", out)
      out = call("read_file", "{not json")
      assert.truthy(contains(out, "not valid JSON"))
    end)

    it("turns filesystem errors into readable results", function()
      local out, is_err = call("read_file", { path = "missing.txt" })
      assert.is_true(is_err)
      assert.truthy(contains(out, "Error: File not found: missing.txt"))
      assert.falsy(contains(out, "stack traceback"))
      assert.falsy(contains(out, ".lua:"))
    end)
  end)

  describe("read_file", function()
    before_each(function()
      local lines = {}
      for i = 1, 12 do lines[i] = "line " .. i end
      spit(dir .. "/twelve.txt", table.concat(lines, "\n") .. "\n")
    end)

    it("reads a range with offset and limit", function()
      local out = call("read_file", { path = "twelve.txt", offset = 10, limit = 2 })
      assert.equal("twelve.txt (lines 10-11 of 12, 87 bytes)\n"
        .. "    10\u{2192}line 10\n    11\u{2192}line 11\n"
        .. "(1 line more; read on with offset 12)", out)
    end)

    it("reads without line numbers", function()
      local out = call("read_file", { path = "twelve.txt", offset = 12,
        showLineNumbers = false })
      assert.equal("twelve.txt (lines 12-12 of 12, 87 bytes)\nline 12", out)
    end)

    it("refuses an offset past the end", function()
      local out, is_err = call("read_file", { path = "twelve.txt", offset = 13 })
      assert.is_true(is_err)
      assert.equal("Error: offset 13 is past the end of twelve.txt, which has 12 lines", out)
    end)

    it("reads binary content as base64 or hex, never raw", function()
      spit(dir .. "/bin", "a\0b")
      local out = call("read_file", { path = "bin" })
      assert.truthy(contains(out, "binary file"))
      assert.equal("bin (3 bytes, base64)\nYQBi", call("read_file", { path = "bin",
        encoding = "base64" }))
      assert.equal("bin (3 bytes, hex)\n610062", call("read_file", { path = "bin",
        encoding = "hex" }))
    end)

    it("says a directory is not a file, and an empty file is empty", function()
      lfs.mkdir(dir .. "/d")
      local out, is_err = call("read_file", { path = "d" })
      assert.is_true(is_err)
      assert.truthy(contains(out, "d is a directory"))
      spit(dir .. "/empty", "")
      assert.equal("empty (0 bytes)\n(empty file)", call("read_file", { path = "empty" }))
    end)
  end)

  describe("write_file", function()
    it("creates parent directories and overwrites by default", function()
      assert.equal("Created a/b/c.txt (2 bytes)", call("write_file", { path = "a/b/c.txt",
        content = "hi" }))
      assert.equal("Overwrote a/b/c.txt (3 bytes)", call("write_file", { path = "a/b/c.txt",
        content = "bye" }))
      assert.equal("bye", slurp(dir .. "/a/b/c.txt"))
    end)

    it("refuses to replace with overwrite = false", function()
      spit(dir .. "/keep.txt", "old")
      local out, is_err = call("write_file", { path = "keep.txt", content = "new",
        overwrite = false })
      assert.is_true(is_err)
      assert.equal("Error: File already exists: keep.txt (set overwrite to true to replace it)",
        out)
      assert.equal("old", slurp(dir .. "/keep.txt"))
    end)
  end)

  describe("edit_file", function()
    before_each(function() spit(dir .. "/e.txt", "x = 1\ny = 1\nz = 2\n") end)

    it("refuses an old string that is not unique", function()
      local out, is_err = call("edit_file", { path = "e.txt", old_string = "= 1",
        new_string = "= 3" })
      assert.is_true(is_err)
      assert.equal("Error: old_string occurs 2 times in e.txt. Include more surrounding lines"
        .. " to make it unique, or set replace_all to true to replace every occurrence.", out)
      assert.equal("x = 1\ny = 1\nz = 2\n", slurp(dir .. "/e.txt"))
    end)

    it("replaces every occurrence with replace_all", function()
      local out = call("edit_file", { path = "e.txt", old_string = "= 1", new_string = "= 3",
        replace_all = true })
      assert.equal("Edited e.txt: replaced 2 occurrences", out)
      assert.equal("x = 3\ny = 3\nz = 2\n", slurp(dir .. "/e.txt"))
    end)

    it("says when the old string is missing, empty or unchanged", function()
      local out, is_err = call("edit_file", { path = "e.txt", old_string = "w = 9",
        new_string = "" })
      assert.is_true(is_err)
      assert.truthy(contains(out, "old_string was not found in e.txt"))
      out = call("edit_file", { path = "e.txt", old_string = "", new_string = "a" })
      assert.truthy(contains(out, "old_string is empty"))
      out = call("edit_file", { path = "e.txt", old_string = "z", new_string = "z" })
      assert.truthy(contains(out, "nothing to change"))
    end)

    it("treats the old string as text, not a pattern", function()
      spit(dir .. "/p.txt", "a.b%c(d)\n")
      call("edit_file", { path = "p.txt", old_string = "a.b%c(d)", new_string = "%1" })
      assert.equal("%1\n", slurp(dir .. "/p.txt"))
    end)
  end)

  describe("list_files", function()
    before_each(function()
      for _, d in ipairs{ "src", "src/lib", "src/lib/deep", "docs", ".git", "node_modules" } do
        lfs.mkdir(dir .. "/" .. d)
      end
      for _, f in ipairs{ "README.md", "src/main.lua", "src/util.c", "src/lib/a.lua",
        "src/lib/deep/b.lua", "docs/guide.md", ".env", ".git/HEAD", "node_modules/x.js" } do
        spit(dir .. "/" .. f, "x")
      end
    end)

    it("shows a tree, directories first, hidden names left out", function()
      local out = call("list_files", {})
      assert.equal(table.concat({
        "./",
        "\u{251C}\u{2500}\u{2500} docs/",
        "\u{2502}   \u{2514}\u{2500}\u{2500} guide.md",
        "\u{251C}\u{2500}\u{2500} node_modules/",
        "\u{2502}   \u{2514}\u{2500}\u{2500} x.js",
        "\u{251C}\u{2500}\u{2500} src/",
        "\u{2502}   \u{251C}\u{2500}\u{2500} lib/",
        "\u{2502}   \u{2502}   \u{251C}\u{2500}\u{2500} deep/",
        "\u{2502}   \u{2502}   \u{2514}\u{2500}\u{2500} a.lua",
        "\u{2502}   \u{251C}\u{2500}\u{2500} main.lua",
        "\u{2502}   \u{2514}\u{2500}\u{2500} util.c",
        "\u{2514}\u{2500}\u{2500} README.md",
        "",
        "5 directories, 6 files", -- b.lua is deeper than maxDepth 3
      }, "\n"), out)
    end)

    it("limits the depth, shows hidden names, lists directories only", function()
      local out = call("list_files", { maxDepth = 1 })
      assert.falsy(contains(out, "main.lua"))
      assert.truthy(contains(out, "src/"))
      out = call("list_files", { showHidden = true, maxDepth = 1 })
      assert.truthy(contains(out, ".env"))
      assert.truthy(contains(out, ".git/"))
      out = call("list_files", { dirsOnly = true })
      assert.falsy(contains(out, "README.md"))
      assert.truthy(contains(out, "deep/"))
      assert.truthy(contains(out, "\n5 directories"))
    end)

    it("filters by exclude, extension and glob pattern", function()
      local out = call("list_files", { exclude = "node_modules", maxDepth = 5 })
      assert.falsy(contains(out, "node_modules"))
      assert.truthy(contains(out, "4 directories, 6 files"))
      out = call("list_files", { extension = "lua", maxDepth = 5 })
      assert.truthy(contains(out, "a.lua"))
      assert.falsy(contains(out, "util.c"))
      assert.falsy(contains(out, "docs/")) -- no .lua file there
      assert.truthy(contains(out, "3 directories, 3 files"))
      out = call("list_files", { pattern = "src/**/*.lua", maxDepth = 5 })
      assert.truthy(contains(out, "3 directories, 3 files"))
      out = call("list_files", { pattern = { "*.md", "*.c" }, path = "." })
      assert.truthy(contains(out, "README.md"))
      assert.truthy(contains(out, "guide.md"))
      assert.truthy(contains(out, "util.c"))
      assert.truthy(contains(out, "3 files"))
      out = call("list_files", { pattern = "*.nothing" })
      assert.truthy(contains(out, "(no matching files)"))
    end)

    it("lists a subdirectory and says when the path is wrong", function()
      local out = call("list_files", { path = "src/lib" })
      assert.truthy(out:find("^src/lib\n"))
      local _, is_err = call("list_files", { path = "nope" })
      assert.is_true(is_err)
      out = call("list_files", { path = "README.md" })
      assert.truthy(contains(out, "is a file, not a directory"))
    end)
  end)

  describe("delete, file_stat and mkdir", function()
    it("make, stat and delete files and directories", function()
      assert.equal("Created directory x/y", call("mkdir", { path = "x/y" }))
      assert.equal("Directory x/y already exists", call("mkdir", { path = "x/y" }))
      spit(dir .. "/x/y/f.txt", "12345")
      local out = call("file_stat", { path = "x/y/f.txt" })
      assert.truthy(contains(out, "Type: file"))
      assert.truthy(contains(out, "Size: 5 bytes"))
      assert.truthy(out:find("Modified: %d%d%d%d%-%d%d%-%d%dT"))
      assert.truthy(contains(call("file_stat", { path = "x" }), "Type: directory"))
      local err, is_err = call("delete", { path = "x" })
      assert.is_true(is_err)
      assert.truthy(contains(err, "set recursive to true"))
      assert.equal("Deleted file x/y/f.txt", call("delete", { path = "x/y/f.txt" }))
      assert.equal("Deleted directory x", call("delete", { path = "x", recursive = true }))
      assert.is_nil(lfs.attributes(dir .. "/x"))
      out, is_err = call("file_stat", { path = "x" })
      assert.is_true(is_err)
      assert.truthy(contains(out, "File not found: x"))
    end)
  end)

  describe("grep", function()
    before_each(function()
      lfs.mkdir(dir .. "/src")
      lfs.mkdir(dir .. "/.hidden")
      spit(dir .. "/src/a.lua", "local x = 1\n-- TODO one\nprint(x)\n-- todo two\nend\n")
      spit(dir .. "/src/b.txt", "nothing\nTODO three\n")
      spit(dir .. "/.hidden/c.lua", "TODO hidden\n")
      spit(dir .. "/bin.dat", "TODO\0binary")
    end)

    it("searches with a regular expression, case-sensitively by default", function()
      local out = call("grep", { pattern = "TODO \\w+" })
      assert.equal("src/a.lua:2:4: -- TODO one\nsrc/b.txt:2:1: TODO three\n\n"
        .. "2 matches in 2 files", out)
    end)

    it("ignores case, includes hidden files, filters by a path glob", function()
      local out = call("grep", { pattern = "todo", caseSensitive = false })
      assert.truthy(contains(out, "src/a.lua:4:4: -- todo two"))
      assert.truthy(contains(out, "3 matches in 2 files"))
      out = call("grep", { pattern = "TODO", includeHidden = true })
      assert.truthy(contains(out, ".hidden/c.lua:1:1: TODO hidden"))
      out = call("grep", { pattern = "TODO", path = "src/*.lua" })
      assert.equal("src/a.lua:2:4: -- TODO one\n\n1 match in 1 file", out)
      out = call("grep", { pattern = "TODO", path = "**/*.txt" })
      assert.equal("src/b.txt:2:1: TODO three\n\n1 match in 1 file", out)
      out = call("grep", { pattern = "x", path = "src/a.lua" })
      assert.truthy(contains(out, "src/a.lua:1:7: local x = 1"))
    end)

    it("shows context lines and honours maxCount", function()
      local out = call("grep", { pattern = "TODO one", contextLines = 1, path = "src" })
      assert.equal("src/a.lua-1- local x = 1\nsrc/a.lua:2:4: -- TODO one\n"
        .. "src/a.lua-3- print(x)\n\n1 match in 1 file", out)
      out = call("grep", { pattern = "o", maxCount = 1, path = "src/a.lua" })
      assert.truthy(contains(out, "1 match in 1 file"))
    end)

    it("caps the matches at 1000", function()
      local lines = {}
      for i = 1, 1500 do lines[i] = "hit " .. i end
      spit(dir .. "/many.txt", table.concat(lines, "\n"))
      local out = call("grep", { pattern = "^hit", path = "many.txt" })
      assert.truthy(contains(out, "many.txt:1000:1: hit 1000"))
      assert.falsy(contains(out, "many.txt:1001:"))
      assert.truthy(contains(out, "Stopped at 1000 matches"))
    end)

    it("says when nothing matches and when the pattern is not a regex", function()
      local out, is_err = call("grep", { pattern = "zzz" })
      assert.is_nil(is_err)
      assert.truthy(out:find("^No matches for /zzz/ in %./"))
      out, is_err = call("grep", { pattern = "(unclosed" })
      assert.is_true(is_err)
      assert.truthy(contains(out, "Invalid regular expression"))
      out = call("grep", { pattern = ("a"):rep(1001) })
      assert.truthy(contains(out, "at most 1000 characters"))
    end)
  end)

  describe("execute_command and processes", function()
    it("reports the exit code, stderr, tail and timeout", function()
      local out, is_err = call("execute_command", { command = "echo out; echo err >&2; exit 3" })
      assert.is_true(is_err)
      assert.equal("out\n\n[stderr]\nerr\n\n[Exit code: 3]", out)
      out = call("execute_command", { command = "seq 1 10", tail = 2 })
      assert.equal("[showing the last 2 lines]\n9\n10", out)
      out, is_err = call("execute_command", { command = "sleep 5", timeout = 0.2 })
      assert.is_true(is_err)
      assert.truthy(contains(out, "timed out after 0.2s"))
      assert.equal("(no output)", call("execute_command", { command = "true" }))
      lfs.mkdir(dir .. "/sub")
      assert.equal("sub", call("execute_command", { command = "basename \"$PWD\"",
        cwd = "sub" }))
    end)

    it("runs in the background, shows output and kills", function()
      local out = call("execute_command", { background = true,
        command = "for i in 1 2 3; do echo line $i; done; sleep 30" })
      local pid = out:match("^Started background process %(PID: (.-)%)$")
      assert.is_string(pid)
      util.wait_until(function()
        return contains(call("get_process_output", { pid = pid }), "line 3")
      end, 5000)
      out = call("get_process_output", { pid = pid, tail = 1 })
      assert.truthy(out:find("^Process " .. pid:gsub("%p", "%%%0") .. " %(.*%): running"))
      assert.truthy(contains(out, "line 3"))
      assert.falsy(contains(out, "line 2"))
      out = call("kill_process", { pid = pid })
      assert.truthy(contains(out, "Killed process " .. pid))
      assert.truthy(contains(out, "line 1\nline 2\nline 3"))
      local _, is_err = call("get_process_output", { pid = pid })
      assert.is_true(is_err)
    end)

    it("waits for a background process", function()
      local pid = call("execute_command", { background = true, command = "sleep 0.2; echo done" })
        :match("PID: (.-)%)")
      local out = call("get_process_output", { pid = pid, wait = true })
      assert.truthy(contains(out, "exited with code 0"))
      assert.truthy(contains(out, "done"))
      out = call("kill_process", { pid = "nope" })
      assert.truthy(contains(out, "No background process with PID nope"))
    end)
  end)

  describe("tool configuration", function()
    it("renames and disables tools", function()
      local w = make{ tools = {
        read_file = { name = "view" },
        mastra_workspace_delete = { enabled = false },
      } }
      local t = by_name(w:tools())
      assert.is_table(t.view)
      assert.equal("mastra_workspace_read_file", t.view.id)
      assert.is_nil(t.mastra_workspace_read_file)
      assert.is_nil(t.mastra_workspace_delete)
      spit(dir .. "/f", "1\n")
      assert.equal("f (2 bytes)\n     1\u{2192}1", w:callTool("view", { path = "f" }))
      local out, is_err = w:callTool("mastra_workspace_delete", { path = "f" })
      assert.is_true(is_err)
      assert.truthy(contains(out, "unknown tool"))
      w:destroy()
    end)

    it("requires a read before a write when configured", function()
      local w = make{ tools = {
        write_file = { requireReadBeforeWrite = true },
        edit_file = { requireReadBeforeWrite = true },
        read_file = { requireApproval = true },
      } }
      local t = by_name(w:tools())
      assert.is_true(t.mastra_workspace_read_file.requireApproval)
      spit(dir .. "/r.txt", "one\n")
      local out, is_err = t.mastra_workspace_write_file.execute({ path = "r.txt",
        content = "two\n" })
      assert.is_true(is_err)
      assert.equal("Error: r.txt has not been read yet. Read it with mastra_workspace_read_file"
        .. " before changing it.", out)
      out = t.mastra_workspace_edit_file.execute({ path = "r.txt", old_string = "one",
        new_string = "two" })
      assert.truthy(contains(out, "has not been read yet"))
      assert.equal("one\n", slurp(dir .. "/r.txt"))
      -- a new file needs no read
      assert.is_nil(select(2, t.mastra_workspace_write_file.execute({ path = "new.txt",
        content = "n" })))
      t.mastra_workspace_read_file.execute({ path = "r.txt" })
      assert.equal("Edited r.txt: replaced 1 occurrence", t.mastra_workspace_edit_file.execute({
        path = "r.txt", old_string = "one", new_string = "two" }))
      assert.equal("two\n", slurp(dir .. "/r.txt"))
      w:destroy()
    end)

    it("truncates output to maxOutputTokens", function()
      local w = make{ tools = { execute_command = { maxOutputTokens = 10 } } }
      local out = w:callTool("mastra_workspace_execute_command", { command = "seq 1 100" })
      assert.truthy(contains(out, "[output truncated: 40 of"))
      w:destroy()
    end)
  end)

  describe("toolDefinitions", function()
    it("emits the Anthropic shape", function()
      local w = make{ tools = { read_file = { name = "view" } } }
      local defs = w:toolDefinitions("anthropic")
      assert.equal(11, #defs)
      local json = core.jsonEncode(defs)
      assert.equal('[{"name":"view","description":"Read a file of the workspace.',
        json:sub(1, 60))
      assert.truthy(contains(json, '"input_schema":{"type":"object","properties":{"path":'
        .. '{"type":"string","description":"The path of the file to read"},"encoding":{"type":'
        .. '"string","enum":["utf-8","utf8","base64","hex","binary"]'))
      assert.truthy(contains(json, '"required":["path"]}'))
      assert.truthy(contains(json, '"name":"mastra_workspace_list_files","description":'))
      assert.truthy(contains(json, '"required":[]}')) -- list_files needs nothing
      assert.truthy(contains(json, '"exclude":{"anyOf":[{"type":"string"},{"type":"array",'
        .. '"items":{"type":"string"}}]'))
      local back = core.jsonDecode(json)
      assert.equal("view", back[1].name)
      assert.equal("object", back[1].input_schema.type)
      w:destroy()
    end)

    it("emits the OpenAI shape", function()
      local json = core.jsonEncode(ws:toolDefinitions("openai"))
      assert.equal('[{"type":"function","function":{"name":"mastra_workspace_read_file",'
        .. '"description":"Read a file', json:sub(1, 94))
      assert.truthy(contains(json, '"parameters":{"type":"object","properties":'))
      local back = core.jsonDecode(json)
      for _, d in ipairs(back) do
        assert.equal("function", d.type)
        assert.is_string(d["function"].name)
        assert.equal("object", d["function"].parameters.type)
      end
      assert.error_matches(function() ws:toolDefinitions("gemini") end,
        "must be one of anthropic, openai")
    end)
  end)
end)
end

-- {====== PlatformFilesystem + PlatformSandbox on the local platform ======
-- The bucket is not mounted in the sandbox: the file tools and the shell
-- see different files, so the scenario checks each side on its own.

local function platform_specs()
  local platform = require "spec.support.platform"
  local PlatformFilesystem = require "mastra.platform_filesystem"

  describe("Workspace over PlatformFilesystem and PlatformSandbox", function()
    local srv, ws

    setup(function() srv = platform.start{} end)
    teardown(function() if srv then srv:close() end end)

    before_each(function()
      local creds = { accessToken = srv.token, proxyUrl = srv.url, projectId = "p" }
      ws = mastra.Workspace.new{
        filesystem = PlatformFilesystem.new{ accessToken = creds.accessToken,
          proxyUrl = creds.proxyUrl, projectId = "p", bucketName = "ws" .. math.random(1e9) },
        sandbox = mastra.PlatformSandbox.new{ accessToken = creds.accessToken,
          proxyUrl = creds.proxyUrl, projectId = "p", environmentId = "e" },
      }
      ws:init()
    end)

    after_each(function() ws:destroy() end)

    it("writes, edits, reads, greps, lists and runs commands through the tools", function()
      local out, is_err = ws:callTool("mastra_workspace_write_file", { path = "notes/todo.txt",
        content = "alpha\nbeta\ngamma\n" })
      assert.is_nil(is_err)
      assert.equal("Created notes/todo.txt (17 bytes)", out)
      assert.equal("Edited notes/todo.txt: replaced 1 occurrence",
        ws:callTool("mastra_workspace_edit_file", { path = "notes/todo.txt",
          old_string = "beta", new_string = "BETA two" }))
      assert.equal("notes/todo.txt (lines 2-3 of 3, 21 bytes)\n     2\u{2192}BETA two\n"
        .. "     3\u{2192}gamma", ws:callTool("mastra_workspace_read_file",
          { path = "notes/todo.txt", offset = 2 }))
      assert.equal("notes/todo.txt:2:1: BETA two\n\n1 match in 1 file",
        ws:callTool("mastra_workspace_grep", { pattern = "^B" }))
      assert.equal("./\n\u{2514}\u{2500}\u{2500} notes/\n    \u{2514}\u{2500}\u{2500} todo.txt"
        .. "\n\n1 directory, 1 file", ws:callTool("mastra_workspace_list_files", {}))
      out = ws:callTool("mastra_workspace_execute_command",
        { command = "printf 'alpha\\nBETA two\\n' > t.txt && cat t.txt" })
      assert.equal("alpha\nBETA two", out)
      assert.equal("Deleted directory notes", ws:callTool("mastra_workspace_delete",
        { path = "notes", recursive = true }))
      out, is_err = ws:callTool("mastra_workspace_read_file", { path = "notes/todo.txt" })
      assert.is_true(is_err)
      assert.truthy(contains(out, "File not found"))
      local text = ws:getInstructions()
      assert.truthy(text:find("^Platform sandbox .-\n\nPlatform filesystem backed by"))
    end)

    it("runs a background process and reads its output", function()
      local out = ws:callTool("mastra_workspace_execute_command",
        { command = "echo started; sleep 0.3; echo finished", background = true })
      local pid = out:match("^Started background process %(PID: (.-)%)$")
      assert.is_string(pid)
      out = ws:callTool("mastra_workspace_get_process_output", { pid = pid, wait = true })
      assert.truthy(contains(out, "exited with code 0"))
      assert.truthy(contains(out, "started\nfinished"))
    end)
  end)
end

if os.getenv("MASTRA_PLATFORM") and os.getenv("MASTRA_PLATFORM") ~= "" then
  platform_specs()
else
  describe("Workspace over PlatformFilesystem and PlatformSandbox", function()
    pending("needs MASTRA_PLATFORM (the mastra-platform executable; CTest sets it)")
  end)
end

-- }======

describe("core.regexCompile (PCRE2)", function()
  it("matches with positions, flags and errors", function()
    local re = assert(core.regexCompile("b(a+)r"))
    assert.same({ 5, 8 }, { re:match("foo baar") })
    assert.is_nil(re:match("nothing"))
    assert.same({ 5, 7 }, { core.regexMatch(re, "bar bar", 3) })
    local bad, err = core.regexCompile("(open")
    assert.is_nil(bad)
    assert.equal("missing closing parenthesis at offset 5", err)
    assert.same({ 5, 9 }, { core.regexCompile("HELLO", true):match("say hello") })
    assert.same({ 1, 0 }, { core.regexCompile("^"):match("") })
    assert.same({ 4, 6 }, { core.regexCompile("\\d+"):match("ab 123") })
  end)

  it("matches UTF-8 by characters and other bytes as bytes", function()
    assert.same({ 4, 7 }, { core.regexCompile("\u{e9}+"):match("caf\u{e9}\u{e9}") })
    assert.same({ 1, 2 }, { core.regexCompile("^.$"):match("\u{e9}") })
    assert.same({ 2, 3 }, { core.regexCompile("b."):match("ab\xffc") })
  end)

  it("stops a runaway match with an error", function()
    local re = core.regexCompile("(a+)+$")
    assert.error_matches(function() re:match(("a"):rep(40) .. "b") end,
      "match limit exceeded")
  end)
end)

describe("Workspace.globMatch", function()
  local match = mastra.Workspace.globMatch

  it("matches stars, classes, alternatives and double stars", function()
    assert.is_true(match("*.lua", "init.lua"))
    assert.is_false(match("*.lua", "src/init.lua"))
    assert.is_true(match("src/**/*.lua", "src/a/b/c.lua"))
    assert.is_true(match("src/**/*.lua", "src/c.lua"))
    assert.is_true(match("src/[a-c]?.{c,h}", "src/b1.h"))
    assert.is_false(match("src/[!a-c]?.{c,h}", "src/b1.h"))
    assert.is_true(match("a\\*b", "a*b"))
    assert.is_false(match("a\\*b", "axb"))
  end)

  -- patterns come from agents: each of these ran for minutes (or longer)
  -- when every star retried every split of the rest
  it("answers patterns with many stars without backtracking forever", function()
    local s = string.rep("a", 60)
    assert.is_false(match(string.rep("*a", 20) .. "*b", s))
    assert.is_true(match(string.rep("*a", 20) .. "*", s))
    local path = string.rep("a/", 40) .. "c"
    assert.is_false(match(string.rep("**/a", 20) .. "/b", path))
    assert.is_true(match(string.rep("**/a", 20) .. "/c", path))
  end)

  it("refuses a pattern whose {} expand past 1024 alternatives, saying why", function()
    local ok, err = pcall(match, string.rep("{a,b}", 11), "a")
    assert.is_false(ok)
    assert.matches("more than 1024 alternatives", err)
    assert.is_true(match(string.rep("{a,b}", 10), string.rep("ab", 5)))
  end)
end)
