-- The filesystem tools of a Workspace: read_file, write_file, edit_file,
-- list_files, delete, file_stat, mkdir and grep. Each runs as
-- run(ws, args, id) on the workspace `ws` (its filesystem, its tool
-- configuration and its read tracker) with arguments that schema.validate
-- checked, and returns the text for the model; failures are raised (see
-- result.lua). `fs_tools.defs` lists the tools with their parameters.
local core = require "mastra.core"
local common = require "mastra.common"
local errors = require "mastra.errors"
local fs_common = require "mastra.fs_common"
local glob = require "mastra.workspace.glob"
local result = require "mastra.workspace.result"
local plural, split_lines, cut, fail = result.plural, result.lines, result.cut, result.fail

local fs_tools = {}

local GREP_MATCH_CAP = 1000
local GREP_MAX_PATTERN = 1000
local GREP_MAX_LINE = 500
local BINARY_PROBE = 8192

-- {====== small helpers ======

local function is_binary(content)
  return content:sub(1, BINARY_PROBE):find("\0", 1, true) ~= nil
end

-- "/a/b" for "a/b", "./a//b/", "/a/./c/../b": the key of the read tracker.
local normalize = fs_common.canonicalPath

-- A child path for display and for the filesystem: "." and "./" are the
-- current directory, and leave names relative.
local function join(dir, name)
  if dir == "" or dir == "." or dir == "./" then return name end
  if dir:sub(-1) == "/" then return dir .. name end
  return dir .. "/" .. name
end

local function iso_time(v)
  if type(v) == "number" then
    if v > 1e11 then v = v / 1000 end -- milliseconds
    return os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(v))
  end
  if v == nil then return nil end
  return tostring(v)
end

-- read_file's encoding "base64"
local base64 = common.base64

local function hex(s)
  return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

-- }======

-- {====== the filesystem tools ======

local BRANCH = "\u{251C}\u{2500}\u{2500} " -- tree drawing: "|-- "
local LAST = "\u{2514}\u{2500}\u{2500} "   -- "`-- "
local PIPE = "\u{2502}   "

local function fs_stat(fs, path)
  local ok, st = pcall(fs.stat, fs, path)
  if ok then return st end
  if errors.FileNotFoundError:is(st) or errors.DirectoryNotFoundError:is(st) then return nil end
  error(st, 0)
end

local function read_text(fs, path)
  local content = fs:readFile(path)
  if type(content) ~= "string" then content = tostring(content) end
  return content
end

-- The read tracker: path was read (or written) at its current modifiedAt.
local function note_read(ws, path)
  local st = fs_stat(ws.filesystem, path)
  ws._reads[normalize(path)] = st and st.modifiedAt or true
end

-- requireReadBeforeWrite: an existing file must have been read, and not
-- changed since.
local function check_read(ws, tool, path)
  local c = ws._config[tool]
  if not (c and c.requireReadBeforeWrite) then return end
  local st = fs_stat(ws.filesystem, path)
  if not st or st.type == "directory" then return end
  local read_tool = ws:_nameOf("read_file")
  local seen = ws._reads[normalize(path)]
  if seen == nil then
    fail("%s has not been read yet. Read it with %s before changing it.", path, read_tool)
  end
  if seen ~= true and st.modifiedAt ~= nil and st.modifiedAt ~= seen then
    fail("%s has changed since it was last read. Read it again with %s before changing it.",
      path, read_tool)
  end
end

local function walk(fs, dir, rel, depth, max_depth, visit)
  local entries = fs:readdir(dir)
  local list = {}
  for _, e in ipairs(entries) do list[#list + 1] = e end
  table.sort(list, function(a, b)
    local ad, bd = a.type == "directory", b.type == "directory"
    if ad ~= bd then return ad end
    return a.name < b.name
  end)
  for _, e in ipairs(list) do
    local child_rel = rel == "" and e.name or rel .. "/" .. e.name
    local descend = visit(e, join(dir, e.name), child_rel, depth)
    if descend and e.type == "directory" and (not max_depth or depth < max_depth) then
      walk(fs, join(dir, e.name), child_rel, depth + 1, max_depth, visit)
    end
  end
end

local function as_list(v)
  if v == nil then return nil end
  if type(v) == "string" then return { v } end
  return v
end

local function list_files(self, a)
  local fs = self.filesystem
  local root = a.path
  local st = fs_stat(fs, root)
  if not st then
    fail("Directory not found: %s (check the path with list_files on its parent)", root)
  end
  if st.type ~= "directory" then
    fail("%s is a file, not a directory (use read_file or file_stat for files)", root)
  end
  local exclude = as_list(a.exclude)
  local patterns = as_list(a.pattern)
  local exts
  if a.extension then
    exts = {}
    for _, e in ipairs(as_list(a.extension)) do
      exts[#exts + 1] = e:sub(1, 1) == "." and e or "." .. e
    end
  end
  local filtering = (patterns and #patterns > 0) or (exts and #exts > 0)
  local tree = { children = {} }
  local nodes = { [""] = tree }
  walk(fs, root, "", 1, a.maxDepth, function(e, _, rel, _)
    if not a.showHidden and e.name:sub(1, 1) == "." then return false end
    if exclude and glob.matchAny(exclude, rel, e.name) then return false end
    local parent = nodes[rel:match("^(.*)/[^/]*$") or ""]
    if e.type == "directory" then
      local node = { name = e.name, dir = true, children = {}, expanded = false }
      parent.children[#parent.children + 1] = node
      nodes[rel] = node
      node.expanded = true
      return true
    end
    if a.dirsOnly then return false end
    if exts then
      local ok = false
      for _, x in ipairs(exts) do
        if e.name:sub(-#x) == x then ok = true break end
      end
      if not ok then return false end
    end
    if patterns and #patterns > 0 and not glob.matchAny(patterns, rel, e.name) then return false end
    parent.children[#parent.children + 1] = { name = e.name, size = e.size }
    return false
  end)
  -- with a file filter, directories without a matching file are left out
  local function prune(node)
    local kept = {}
    for _, c in ipairs(node.children) do
      if not c.dir then kept[#kept + 1] = c
      elseif prune(c) then kept[#kept + 1] = c end
    end
    node.children = kept
    return #kept > 0
  end
  if filtering and not a.dirsOnly then prune(tree) end
  local out, ndirs, nfiles = { root }, 0, 0
  local function render(node, indent)
    for i, c in ipairs(node.children) do
      local last = i == #node.children
      out[#out + 1] = indent .. (last and LAST or BRANCH) .. c.name .. (c.dir and "/" or "")
      if c.dir then
        ndirs = ndirs + 1
        render(c, indent .. (last and "    " or PIPE))
      else
        nfiles = nfiles + 1
      end
    end
  end
  render(tree, "")
  if #tree.children == 0 then
    out[#out + 1] = filtering and "(no matching files)" or "(empty directory)"
  end
  out[#out + 1] = ""
  if a.dirsOnly then
    out[#out + 1] = plural(ndirs, "directory", "directories")
  else
    out[#out + 1] = ("%s, %s"):format(plural(ndirs, "directory", "directories"),
      plural(nfiles, "file"))
  end
  return table.concat(out, "\n")
end

local function read_file(self, a)
  local fs, path = self.filesystem, a.path
  local st = fs_stat(fs, path)
  if st and st.type == "directory" then
    fail("%s is a directory, not a file (use list_files to see its contents)", path)
  end
  local content = read_text(fs, path)
  note_read(self, path)
  local size = #content
  local enc = a.encoding
  if enc == "base64" or enc == "hex" then
    local body = enc == "base64" and base64(content) or hex(content)
    return ("%s (%d bytes, %s)\n%s"):format(path, size, enc, body)
  end
  if enc ~= "binary" and is_binary(content) then
    return ("%s (%d bytes)\nThis is a binary file. Read it with encoding \"base64\" or"
      .. " \"hex\" to see its bytes.")
      :format(path, size)
  end
  local lines = split_lines(content)
  local total = #lines
  if total == 0 then return ("%s (0 bytes)\n(empty file)"):format(path) end
  local first = a.offset or 1
  if first > total then
    fail("offset %d is past the end of %s, which has %s", first, path, plural(total, "line"))
  end
  local last = total
  if a.limit then last = math.min(total, first + a.limit - 1) end
  local header
  if first == 1 and last == total then
    header = ("%s (%d bytes)"):format(path, size)
  else
    header = ("%s (lines %d-%d of %d, %d bytes)"):format(path, first, last, total, size)
  end
  local out = { header }
  for i = first, last do
    if a.showLineNumbers then
      out[#out + 1] = ("%6d\u{2192}%s"):format(i, lines[i])
    else
      out[#out + 1] = lines[i]
    end
  end
  if last < total then
    out[#out + 1] = ("(%s more; read on with offset %d)")
      :format(plural(total - last, "line"), last + 1)
  end
  return table.concat(out, "\n")
end

local function write_file(self, a, tool)
  local fs, path = self.filesystem, a.path
  check_read(self, tool, path)
  local st = fs_stat(fs, path)
  if st and st.type == "directory" then fail("%s is a directory; give a file path", path) end
  if st and a.overwrite == false then
    fail("File already exists: %s (set overwrite to true to replace it)", path)
  end
  fs:writeFile(path, a.content, { overwrite = a.overwrite, recursive = true })
  note_read(self, path)
  return ("%s %s (%d bytes)"):format(st and "Overwrote" or "Created", path, #a.content)
end

local function count_plain(s, needle)
  local n, pos = 0, 1
  while true do
    local i, j = s:find(needle, pos, true)
    if not i then return n end
    n = n + 1
    pos = j + 1
  end
end

local function replace_plain(s, old, new, all)
  local out, pos = {}, 1
  while true do
    local i, j = s:find(old, pos, true)
    if not i then break end
    out[#out + 1] = s:sub(pos, i - 1)
    out[#out + 1] = new
    pos = j + 1
    if not all then break end
  end
  out[#out + 1] = s:sub(pos)
  return table.concat(out)
end

local function edit_file(self, a, tool)
  local fs, path = self.filesystem, a.path
  if a.old_string == "" then
    fail("old_string is empty. Give the exact text to replace (use write_file to create a file).")
  end
  if a.old_string == a.new_string then
    fail("old_string and new_string are the same; there is nothing to change.")
  end
  check_read(self, tool, path)
  local content = read_text(fs, path)
  local n = count_plain(content, a.old_string)
  if n == 0 then
    fail("old_string was not found in %s. It must match the file exactly, including "
      .. "whitespace and indentation; read the file to see its current content.", path)
  end
  if n > 1 and not a.replace_all then
    fail("old_string occurs %d times in %s. Include more surrounding lines to make it "
      .. "unique, or set replace_all to true to replace every occurrence.", n, path)
  end
  local updated = replace_plain(content, a.old_string, a.new_string, a.replace_all)
  fs:writeFile(path, updated, { overwrite = true })
  note_read(self, path)
  return ("Edited %s: replaced %s"):format(path, plural(a.replace_all and n or 1, "occurrence"))
end

local function delete(self, a)
  local fs, path = self.filesystem, a.path
  local st = fs_stat(fs, path)
  if not st then fail("File not found: %s (check the path with list_files)", path) end
  if st.type == "directory" then
    fs:rmdir(path, { recursive = a.recursive, force = a.recursive })
    self._reads[normalize(path)] = nil
    return "Deleted directory " .. path
  end
  fs:deleteFile(path)
  self._reads[normalize(path)] = nil
  return "Deleted file " .. path
end

local function file_stat(self, a)
  local st = fs_stat(self.filesystem, a.path)
  if not st then fail("File not found: %s (check the path with list_files)", a.path) end
  local out = {
    ("Path: %s"):format(st.path or a.path),
    ("Type: %s"):format(st.type or "file"),
  }
  if st.type ~= "directory" then out[#out + 1] = ("Size: %d bytes"):format(st.size or 0) end
  local m, c = iso_time(st.modifiedAt), iso_time(st.createdAt)
  if m then out[#out + 1] = "Modified: " .. m end
  if c then out[#out + 1] = "Created: " .. c end
  if st.mimeType then out[#out + 1] = "MIME type: " .. st.mimeType end
  return table.concat(out, "\n")
end

local function mkdir(self, a)
  local fs, path = self.filesystem, a.path
  local st = fs_stat(fs, path)
  if st and st.type == "directory" then return ("Directory %s already exists"):format(path) end
  if st then fail("%s exists and is a file", path) end
  fs:mkdir(path, { recursive = a.recursive })
  return "Created directory " .. path
end

local function compile_pattern(pattern, case_sensitive)
  if core.regexCompile then
    local re, err = core.regexCompile(pattern, not case_sensitive)
    if not re then fail("Invalid regular expression %q: %s", pattern, err) end
    return function(line) return re:match(line) end
  end
  -- no PCRE2: Lua patterns
  local ok, err = pcall(string.find, "", pattern)
  if not ok then fail("Invalid pattern %q: %s", pattern, result.errorText(err)) end
  if case_sensitive then
    return function(line) return line:find(pattern) end
  end
  local lower = pattern:lower()
  return function(line) return line:lower():find(lower) end
end

-- The files grep searches: {display path, ...}.
local function grep_files(self, a)
  local fs, path = self.filesystem, a.path
  local base, pattern = path, nil
  if glob.isGlob(path) then
    local segs, fixed, rest = {}, {}, {}
    for seg in path:gmatch("[^/]+") do segs[#segs + 1] = seg end
    local in_glob = false
    for _, seg in ipairs(segs) do
      if in_glob or glob.isGlob(seg) then
        in_glob = true
        rest[#rest + 1] = seg
      else
        fixed[#fixed + 1] = seg
      end
    end
    base = table.concat(fixed, "/")
    if path:sub(1, 1) == "/" then base = "/" .. base elseif base == "" then base = "." end
    pattern = table.concat(rest, "/")
  end
  local st = fs_stat(fs, base)
  if not st then fail("Path not found: %s (check it with list_files)", base) end
  if st.type ~= "directory" then return { path } end
  local files = {}
  walk(fs, base, "", 1, nil, function(e, full, rel)
    if not a.includeHidden and e.name:sub(1, 1) == "." then return false end
    if e.type == "directory" then return e.name ~= "node_modules" or a.includeHidden end
    if pattern and not glob.match(pattern, rel) then return false end
    files[#files + 1] = full
    return false
  end)
  return files
end

local function grep(self, a)
  local fs = self.filesystem
  local match = compile_pattern(a.pattern, a.caseSensitive)
  local files = grep_files(self, a)
  local ctx = a.contextLines
  local out, total, nfiles, capped = {}, 0, 0, false
  for _, file in ipairs(files) do
    if capped then break end
    local ok, content = pcall(read_text, fs, file)
    if not ok then
      if result.fatal(content) then error(content, 0) end
      goto continue
    end
    if is_binary(content) then goto continue end
    do
      local lines = split_lines(content)
      local hits = {}
      for i, line in ipairs(lines) do
        if line:sub(-1) == "\r" then line = line:sub(1, -2); lines[i] = line end
        local s = match(line)
        if s then
          hits[#hits + 1] = { i, s }
          total = total + 1
          if total >= GREP_MATCH_CAP then capped = true break end
          if a.maxCount and #hits >= a.maxCount then break end
        end
      end
      if #hits > 0 then
        nfiles = nfiles + 1
        local shown = 0 -- the last line printed
        for _, h in ipairs(hits) do
          local i, s = h[1], h[2]
          local from = math.max(1, i - ctx)
          if ctx > 0 and #out > 0 and (shown == 0 or from > shown + 1) then out[#out + 1] = "--" end
          for k = math.max(from, shown + 1), i - 1 do
            out[#out + 1] = ("%s-%d- %s"):format(file, k, cut(lines[k], GREP_MAX_LINE))
          end
          local col = utf8.len(lines[i], 1, s - 1) or (s - 1)
          out[#out + 1] = ("%s:%d:%d: %s"):format(file, i, col + 1, cut(lines[i], GREP_MAX_LINE))
          shown = i
          -- context after: up to the next hit
          local stop = math.min(#lines, i + ctx)
          for k = i + 1, stop do
            local next_hit = false
            for _, h2 in ipairs(hits) do
              if h2[1] == k then next_hit = true break end
            end
            if next_hit then break end
            out[#out + 1] = ("%s-%d- %s"):format(file, k, cut(lines[k], GREP_MAX_LINE))
            shown = k
          end
        end
      end
    end
    ::continue::
  end
  if total == 0 then
    return ("No matches for /%s/ in %s (%s searched)"):format(a.pattern, a.path,
      plural(#files, "file"))
  end
  out[#out + 1] = ""
  if capped then
    out[#out + 1] = ("Stopped at %d matches (the limit); narrow the pattern or the path to"
      .. " see the rest.")
      :format(GREP_MATCH_CAP)
  end
  out[#out + 1] = ("%s in %s"):format(plural(total, "match", "matches"), plural(nfiles, "file"))
  return table.concat(out, "\n")
end

-- }======

-- the tools, in the order Workspace:tools lists them
fs_tools.defs = {
  { short = "read_file", needs = "filesystem", run = read_file,
    description = "Read a file of the workspace. Returns a header `<path> (<size> bytes)` and "
      .. "the content with line numbers. Use offset and limit to read part of a long file.",
    params = {
      { name = "path", type = "string", required = true,
        description = "The path of the file to read" },
      { name = "encoding", type = "string", enum = { "utf-8", "utf8", "base64", "hex", "binary" },
        description = "How to return the content: text (default), or base64/hex for binary files" },
      { name = "offset", type = "integer", minimum = 1,
        description = "The first line to read (1-based)" },
      { name = "limit", type = "integer", minimum = 1,
        description = "The number of lines to read" },
      { name = "showLineNumbers", type = "boolean", default = true,
        description = "Prefix each line with its number" },
    } },
  { short = "write_file", needs = "filesystem", run = write_file, writes = true,
    description = "Write a file of the workspace, creating it (and its parent directories) "
      .. "or replacing its content.",
    params = {
      { name = "path", type = "string", required = true,
        description = "The path of the file to write" },
      { name = "content", type = "string", required = true,
        description = "The full content of the file" },
      { name = "overwrite", type = "boolean", default = true,
        description = "Replace the file if it exists; false fails instead" },
    } },
  { short = "edit_file", needs = "filesystem", run = edit_file, writes = true,
    description = "Replace text in a file. old_string must match the file exactly (including "
      .. "whitespace) and only once, unless replace_all is true.",
    params = {
      { name = "path", type = "string", required = true,
        description = "The path of the file to edit" },
      { name = "old_string", type = "string", required = true,
        description = "The exact text to replace" },
      { name = "new_string", type = "string", required = true,
        description = "The text to put instead" },
      { name = "replace_all", type = "boolean", default = false,
        description = "Replace every occurrence instead of exactly one" },
    } },
  { short = "list_files", needs = "filesystem", run = list_files,
    description = "List the files and directories under a path as a tree.",
    params = {
      { name = "path", type = "string", default = "./", description = "The directory to list" },
      { name = "maxDepth", type = "integer", minimum = 1, default = 3,
        description = "How many levels of directories to descend" },
      { name = "showHidden", type = "boolean", default = false,
        description = "Include names starting with '.'" },
      { name = "dirsOnly", type = "boolean", default = false,
        description = "List directories only" },
      { name = "exclude", type = "string|string[]",
        description = "Glob patterns of names or paths to leave out (e.g. node_modules)" },
      { name = "extension", type = "string|string[]",
        description = "Only files with this extension (e.g. \".lua\")" },
      { name = "pattern", type = "string|string[]",
        description = "Only files matching this glob (e.g. \"**/*.ts\"); a pattern without '/' "
          .. "matches the file name" },
    } },
  { short = "delete", needs = "filesystem", run = delete, writes = true,
    description = "Delete a file, or a directory (recursive is needed if it is not empty).",
    params = {
      { name = "path", type = "string", required = true, description = "The path to delete" },
      { name = "recursive", type = "boolean", default = false,
        description = "Delete a directory with its contents" },
    } },
  { short = "file_stat", needs = "filesystem", run = file_stat,
    description = "Show the type, size and times of a file or directory.",
    params = {
      { name = "path", type = "string", required = true, description = "The path to inspect" },
    } },
  { short = "mkdir", needs = "filesystem", run = mkdir, writes = true,
    description = "Create a directory.",
    params = {
      { name = "path", type = "string", required = true, description = "The directory to create" },
      { name = "recursive", type = "boolean", default = true,
        description = "Create missing parent directories too" },
    } },
  { short = "grep", needs = "filesystem", run = grep,
    description = "Search file contents with a regular expression (PCRE syntax). Output lines "
      .. "are `<file>:<line>:<column>: <text>`; at most 1000 matches are shown.",
    params = {
      { name = "pattern", type = "string", required = true, maxLength = GREP_MAX_PATTERN,
        description = "The regular expression to search for" },
      { name = "path", type = "string", default = "./",
        description = "A file or directory to search, or a glob such as \"src/**/*.lua\"" },
      { name = "contextLines", type = "integer", minimum = 0, default = 0,
        description = "Lines of context to show before and after each match" },
      { name = "maxCount", type = "integer", minimum = 1,
        description = "The most matching lines to show per file" },
      { name = "caseSensitive", type = "boolean", default = true,
        description = "false ignores case" },
      { name = "includeHidden", type = "boolean", default = false,
        description = "Also search files and directories whose names start with '.'" },
    } },
}

return fs_tools
