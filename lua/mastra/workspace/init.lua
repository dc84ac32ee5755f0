-- Workspace: a filesystem and a sandbox, with the agent tools over them
-- (platform-protocol.md 7.6).
--
--   local ws = mastra.Workspace.new{ filesystem = fs, sandbox = sb }
--   ws:init()
--   for _, tool in ipairs(ws:tools()) do ... tool.execute(input) ... end
--   ws:toolDefinitions("anthropic") -- or "openai"
--
-- A tool's execute(input) returns a string for the model, and true as a
-- second value when that string reports an error. Bad input and failures
-- become such results; only cancellation is raised.
local core = require "mastra.core"
local errors = require "mastra.errors"
local options = require "mastra.options"

local Workspace = { __name = "mastra.Workspace" }
Workspace.__index = Workspace

local PREFIX = "mastra_workspace_"
local GREP_MATCH_CAP = 1000
local GREP_MAX_PATTERN = 1000
local GREP_MAX_LINE = 500
local KILL_TAIL_LINES = 50
local BINARY_PROBE = 8192

-- {====== small helpers ======

local function ordered(order, t)
  return setmetatable(t, { __jsonorder = order })
end

local function array(t)
  return setmetatable(t, core.jsonArray)
end

local function plural(n, one, many)
  return ("%d %s"):format(n, n == 1 and one or (many or one .. "s"))
end

-- Lines of text: a final newline does not make an extra empty line.
local function split_lines(text)
  local lines, pos, n = {}, 1, #text
  while pos <= n do
    local nl = text:find("\n", pos, true)
    if not nl then
      lines[#lines + 1] = text:sub(pos)
      break
    end
    lines[#lines + 1] = text:sub(pos, nl - 1)
    pos = nl + 1
  end
  return lines
end

local function last_lines(text, n)
  local lines = split_lines(text)
  if #lines <= n then return text, false end
  return table.concat(lines, "\n", #lines - n + 1), true
end

local function is_binary(content)
  return content:sub(1, BINARY_PROBE):find("\0", 1, true) ~= nil
end

-- "/a/b" for "a/b", "./a//b/", "/a/./c/../b": the key of the read tracker.
local function normalize(path)
  local parts = {}
  for seg in path:gmatch("[^/]+") do
    if seg == ".." then
      if #parts > 0 then parts[#parts] = nil end
    elseif seg ~= "." then
      parts[#parts + 1] = seg
    end
  end
  return "/" .. table.concat(parts, "/")
end

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

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = (a << 16) | ((b or 0) << 8) | (c or 0)
    local q = {}
    for k = 1, 4 do
      local d = (n >> (6 * (4 - k))) & 63
      q[k] = B64:sub(d + 1, d + 1)
    end
    if not b then q[3], q[4] = "=", "=" elseif not c then q[4] = "=" end
    out[#out + 1] = table.concat(q)
  end
  return table.concat(out)
end

local function hex(s)
  return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

-- Cut a line for display at a UTF-8 character boundary.
local function cut(line, max)
  if #line <= max then return line end
  local n = max
  while n > 0 do
    local b = line:byte(n + 1)
    if not b or b < 0x80 or b >= 0xC0 then break end
    n = n - 1
  end
  return line:sub(1, n) .. "..."
end

-- }======

-- {====== globs ======
-- `*` (not across `/`), `**` (across `/`; `**/` also matches no directory),
-- `?`, `[abc]`, `[a-z]`, `[!x]`, and `{a,b}` alternatives.

local function expand_braces(pat)
  local s = pat:find("{", 1, true)
  if not s then return { pat } end
  local depth, e = 0, nil
  for i = s, #pat do
    local c = pat:sub(i, i)
    if c == "{" then depth = depth + 1
    elseif c == "}" then
      depth = depth - 1
      if depth == 0 then e = i break end
    end
  end
  if not e then return { pat } end
  local inner, alts, start, d = pat:sub(s + 1, e - 1), {}, 1, 0
  for i = 1, #inner do
    local c = inner:sub(i, i)
    if c == "{" then d = d + 1 elseif c == "}" then d = d - 1
    elseif c == "," and d == 0 then
      alts[#alts + 1] = inner:sub(start, i - 1)
      start = i + 1
    end
  end
  alts[#alts + 1] = inner:sub(start)
  local out = {}
  for _, alt in ipairs(alts) do
    for _, x in ipairs(expand_braces(pat:sub(1, s - 1) .. alt .. pat:sub(e + 1))) do
      out[#out + 1] = x
    end
  end
  return out
end

local function class_match(set, ch)
  local negate = false
  if set:sub(1, 1) == "!" or set:sub(1, 1) == "^" then
    negate, set = true, set:sub(2)
  end
  local i, found = 1, false
  while i <= #set do
    local c = set:sub(i, i)
    if set:sub(i + 1, i + 1) == "-" and i + 2 <= #set then
      if ch >= c and ch <= set:sub(i + 2, i + 2) then found = true end
      i = i + 3
    else
      if ch == c then found = true end
      i = i + 1
    end
  end
  return found ~= negate
end

local function glob_here(p, pi, s, si)
  while pi <= #p do
    local c = p:sub(pi, pi)
    if c == "*" then
      if p:sub(pi + 1, pi + 1) == "*" then
        local rest = pi + 2
        if p:sub(rest, rest) == "/" then
          if glob_here(p, rest + 1, s, si) then return true end
          for k = si, #s do
            if s:sub(k, k) == "/" and glob_here(p, rest + 1, s, k + 1) then return true end
          end
          return false
        end
        for k = si, #s + 1 do
          if glob_here(p, rest, s, k) then return true end
        end
        return false
      end
      for k = si, #s + 1 do
        if glob_here(p, pi + 1, s, k) then return true end
        if s:sub(k, k) == "/" then break end
      end
      return false
    elseif c == "?" then
      if si > #s or s:sub(si, si) == "/" then return false end
      pi, si = pi + 1, si + 1
    elseif c == "[" and p:find("]", pi + 2, true) then
      local close = p:find("]", pi + 2, true)
      if si > #s or not class_match(p:sub(pi + 1, close - 1), s:sub(si, si)) then
        return false
      end
      pi, si = close + 1, si + 1
    else
      if c == "\\" and pi < #p then pi = pi + 1; c = p:sub(pi, pi) end
      if s:sub(si, si) ~= c then return false end
      pi, si = pi + 1, si + 1
    end
  end
  return si > #s
end

local function glob_match(pattern, s)
  for _, p in ipairs(expand_braces(pattern)) do
    if glob_here(p, 1, s, 1) then return true end
  end
  return false
end

local function is_glob(s)
  return s:find("[%*%?%[{]") ~= nil
end

-- A pattern without `/` matches the base name, one with `/` the path.
local function glob_matches(patterns, rel, name)
  for _, p in ipairs(patterns) do
    local target = p:find("/", 1, true) and rel or name
    if glob_match(p, target) then return true end
  end
  return false
end

Workspace.globMatch = glob_match

-- }======

-- {====== input schemas and validation ======

local TYPE_TEXT = {
  string = "a string",
  integer = "an integer",
  number = "a number",
  boolean = "a boolean",
  ["string[]"] = "a list of strings",
  ["string|string[]"] = "a string or a list of strings",
}

local function property_schema(p)
  local t = {}
  if p.type == "string[]" then
    t.type = "array"
    t.items = ordered({ "type" }, { type = "string" })
  elseif p.type == "string|string[]" then
    t.anyOf = array{
      ordered({ "type" }, { type = "string" }),
      ordered({ "type", "items" }, { type = "array",
        items = ordered({ "type" }, { type = "string" }) }),
    }
  else
    t.type = p.type
  end
  t.enum = p.enum and array(p.enum)
  t.minimum = p.minimum
  t.maxLength = p.maxLength
  t.default = p.default
  t.description = p.description
  return ordered({ "type", "items", "anyOf", "enum", "minimum", "maxLength", "default",
    "description" }, t)
end

local function input_schema(params)
  local props, order, required = {}, {}, {}
  for _, p in ipairs(params) do
    props[p.name] = property_schema(p)
    order[#order + 1] = p.name
    if p.required then required[#required + 1] = p.name end
  end
  return ordered({ "type", "properties", "required" }, {
    type = "object",
    properties = ordered(order, props),
    required = array(required),
  })
end

local function is_list_of_strings(v)
  if type(v) ~= "table" then return false end
  local n = 0
  for k in pairs(v) do
    if math.type(k) ~= "integer" then return false end
    n = n + 1
  end
  for i = 1, n do
    if type(v[i]) ~= "string" then return false end
  end
  return true
end

-- Coerce v to the type of p, or nil plus what was expected. Models send
-- numbers and booleans as strings now and then; those are accepted.
local function coerce(p, v)
  local t = p.type
  if t == "string" then
    if type(v) == "number" then v = tostring(v) end
    if type(v) ~= "string" then return nil end
    if p.enum then
      for _, e in ipairs(p.enum) do
        if v == e then return v end
      end
      return nil, "one of " .. table.concat(p.enum, ", ")
    end
    if p.maxLength and utf8.len(v) and utf8.len(v) > p.maxLength then
      return nil, ("a string of at most %d characters"):format(p.maxLength)
    end
    return v
  elseif t == "integer" or t == "number" then
    if type(v) == "string" then v = tonumber(v) end
    if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then return nil end
    if t == "integer" then
      v = math.tointeger(v)
      if not v then return nil end
    end
    if p.minimum and v < p.minimum then
      return nil, ("%s >= %s"):format(TYPE_TEXT[t], p.minimum)
    end
    return v
  elseif t == "boolean" then
    if v == "true" then return true elseif v == "false" then return false end
    if type(v) ~= "boolean" then return nil end
    return v
  elseif t == "string[]" then
    if type(v) == "string" then return { v } end
    if not is_list_of_strings(v) then return nil end
    return v
  elseif t == "string|string[]" then
    if type(v) == "string" then return v end
    if not is_list_of_strings(v) then return nil end
    return v
  end
  return nil
end

-- The validated arguments with defaults, or nil and a message for the model.
local function validate(tool, params, input)
  if type(input) == "string" then
    local decoded, err = core.jsonDecode(input)
    if decoded == nil then
      return nil, ("Invalid input for %s: not valid JSON (%s)"):format(tool, err)
    end
    input = decoded
  end
  if input == nil then input = {} end
  if type(input) ~= "table" then
    return nil, ("Invalid input for %s: expected an object of parameters (got %s)")
      :format(tool, type(input))
  end
  local args = {}
  for _, p in ipairs(params) do
    local v = input[p.name]
    if v == core.null then v = nil end
    if v == nil then
      if p.required then
        return nil, ("Invalid input for %s: missing required parameter '%s' (%s: %s)")
          :format(tool, p.name, TYPE_TEXT[p.type], p.description)
      end
      args[p.name] = p.default
    else
      local value, expected = coerce(p, v)
      if value == nil then
        return nil, ("Invalid input for %s: parameter '%s' must be %s (got %s)")
          :format(tool, p.name, expected or TYPE_TEXT[p.type], options.describe(v))
      end
      args[p.name] = value
    end
  end
  return args
end

-- }======

-- {====== tool configuration ======

local TOOL_IDS = {
  "read_file", "write_file", "edit_file", "list_files", "delete", "file_stat",
  "mkdir", "grep", "execute_command", "get_process_output", "kill_process",
}

local KNOWN_TOOLS = {}
for _, short in ipairs(TOOL_IDS) do
  KNOWN_TOOLS[short] = PREFIX .. short
  KNOWN_TOOLS[PREFIX .. short] = PREFIX .. short
end

local function tool_name(v)
  return type(v) == "string" and v:match("^[%w_%-]+$") ~= nil and #v <= 64,
    "a tool name of 1 to 64 letters, digits, '_' or '-'"
end

local TOOL_OPTS = {
  name = tool_name,
  enabled = options.boolean,
  requireReadBeforeWrite = options.boolean,
  requireApproval = options.boolean,
  maxOutputTokens = options.positive_integer,
}

local function tools_config(v)
  if type(v) ~= "table" then return false, "a table of tool id = {config}" end
  return true
end

local function is_table(what)
  return function(v) return type(v) == "table", what end
end

local NEW_OPTS = {
  filesystem = is_table("a filesystem (a table with readFile, writeFile, ...)"),
  sandbox = is_table("a sandbox (a table with executeCommand, ...)"),
  tools = tools_config,
  id = options.string,
  name = options.string,
}

local FS_METHODS = { "readFile", "writeFile", "deleteFile", "mkdir", "rmdir", "readdir", "stat" }

local function random_id()
  local digits = "0123456789abcdefghijklmnopqrstuvwxyz"
  local r = {}
  for i = 1, 6 do
    local n = math.random(1, 36)
    r[i] = digits:sub(n, n)
  end
  return "workspace-" .. table.concat(r)
end

function Workspace.new(opts)
  local where = "Workspace.new"
  opts = options.check(where, opts, NEW_OPTS)
  local fs = opts.filesystem
  if fs then
    for _, m in ipairs(FS_METHODS) do
      if type(fs[m]) ~= "function" then
        error(("%s: option 'filesystem' must have a %s method"):format(where, m), 2)
      end
    end
  end
  local config = {}
  for key, c in pairs(opts.tools or {}) do
    local id = KNOWN_TOOLS[key]
    if not id then
      error(("%s: unknown tool '%s' in option 'tools' (known tools: %s)")
        :format(where, tostring(key), table.concat(TOOL_IDS, ", ")), 2)
    end
    options.check(("%s: tools.%s"):format(where, key), c, TOOL_OPTS)
    if config[id] then
      error(("%s: tool '%s' is configured twice in option 'tools'"):format(where, id), 2)
    end
    config[id] = c
  end
  local names = {}
  for _, short in ipairs(TOOL_IDS) do
    local id = PREFIX .. short
    local c = config[id]
    if not c or c.enabled ~= false then
      local name = c and c.name or id
      if names[name] then
        error(("%s: tools '%s' and '%s' would both be named '%s'")
          :format(where, names[name], id, name), 2)
      end
      names[name] = id
    end
  end
  return setmetatable({
    id = opts.id or random_id(),
    name = opts.name or "Workspace",
    filesystem = fs,
    sandbox = opts.sandbox,
    status = "pending",
    _config = config,
    _reads = {}, -- normalized path -> modifiedAt seen by read_file (or true)
  }, Workspace)
end

local function check_self(where, self)
  options.self(where, self, Workspace, 4)
  return self
end

function Workspace:init()
  check_self("Workspace:init", self)
  self.status = "initializing"
  local ok, err = pcall(function()
    local fs = self.filesystem
    if fs and type(fs.init) == "function" then fs:init() end
    local sb = self.sandbox
    if sb and type(sb.start) == "function" then sb:start() end
  end)
  if not ok then
    self.status = "error"
    error(err, 0)
  end
  self.status = "ready"
end

function Workspace:destroy()
  check_self("Workspace:destroy", self)
  if self.status == "destroyed" then return end
  self.status = "destroying"
  local sb, fs = self.sandbox, self.filesystem
  local ok, err = true, nil
  if sb and type(sb.destroy) == "function" then ok, err = pcall(sb.destroy, sb) end
  if fs and type(fs.destroy) == "function" then
    local ok2, err2 = pcall(fs.destroy, fs)
    if ok and not ok2 then ok, err = ok2, err2 end
  end
  self.status = "destroyed"
  if not ok then error(err, 0) end
end

Workspace.__close = function(self) self:destroy() end

function Workspace.__tostring(self)
  return ("mastra.Workspace: %s (%s)"):format(self.id, self.status)
end

--- Sandbox instructions, then the mounts or the filesystem's, separated by
-- a blank line (upstream workspace.ts).
function Workspace:getInstructions(opts)
  check_self("Workspace:getInstructions", self)
  local parts = {}
  local sb, fs = self.sandbox, self.filesystem
  if sb and type(sb.getInstructions) == "function" then
    local text = sb:getInstructions(opts)
    if type(text) == "string" and text ~= "" then parts[#parts + 1] = text end
  end
  local mounts = sb and type(sb.mounts) == "table" and sb.mounts or nil
  local mounted, workspace_only = {}, {}
  if mounts then
    local paths = {}
    for path in pairs(mounts) do paths[#paths + 1] = path end
    table.sort(paths)
    for _, path in ipairs(paths) do
      local m = mounts[path]
      local mfs = type(m) == "table" and (m.filesystem or m) or {}
      local line = ("  - %s: %s (%s)"):format(path, mfs.displayName or mfs.provider or "filesystem",
        mfs.readOnly and "read-only" or "read-write")
      if type(m) == "table" and m.workspaceOnly then
        workspace_only[#workspace_only + 1] = line
      else
        mounted[#mounted + 1] = line
      end
    end
  end
  if #mounted > 0 or #workspace_only > 0 then
    if #mounted > 0 then
      parts[#parts + 1] = "Sandbox-mounted filesystems (accessible in shell commands):\n"
        .. table.concat(mounted, "\n")
    end
    if #workspace_only > 0 then
      parts[#parts + 1] = "Workspace-only filesystems (use file tools, NOT available in shell"
        .. " commands):\n"
        .. table.concat(workspace_only, "\n")
    end
  elseif fs and type(fs.getInstructions) == "function" then
    local text = fs:getInstructions(opts)
    if type(text) == "string" and text ~= "" then parts[#parts + 1] = text end
  end
  return table.concat(parts, "\n\n")
end

-- }======

-- {====== errors as results ======

local function fatal(err)
  return errors.CancelledError:is(err) or errors.InterruptedError:is(err)
end

-- The text of an error for the model: the message, without a Lua position.
local function error_text(err)
  if type(err) == "table" and err.message ~= nil then
    return tostring(err.message)
  end
  local s = tostring(err)
  s = s:gsub("^[^\n:]+%.lua:%d+: ", "")
  return s
end

-- A failure the tool reports itself (not a filesystem error).
local ToolError = {}

local function fail(fmt, ...)
  error(setmetatable({ message = fmt:format(...) }, ToolError), 0)
end

local function hint_for(err, args)
  if errors.FileNotFoundError:is(err) or errors.DirectoryNotFoundError:is(err) then
    return " (check the path with list_files)"
  elseif errors.FileExistsError:is(err) and args and args.overwrite == false then
    return " (set overwrite to true to replace it)"
  elseif errors.DirectoryNotEmptyError:is(err) then
    return " (set recursive to true to delete it with its contents)"
  end
  return ""
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

function Workspace:_noteRead(path)
  local st = fs_stat(self.filesystem, path)
  self._reads[normalize(path)] = st and st.modifiedAt or true
end

-- requireReadBeforeWrite: an existing file must have been read, and not
-- changed since.
function Workspace:_checkRead(tool, path, read_tool)
  local c = self._config[tool]
  if not (c and c.requireReadBeforeWrite) then return end
  local st = fs_stat(self.filesystem, path)
  if not st or st.type == "directory" then return end
  local seen = self._reads[normalize(path)]
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
    if exclude and glob_matches(exclude, rel, e.name) then return false end
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
    if patterns and #patterns > 0 and not glob_matches(patterns, rel, e.name) then return false end
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
  self:_noteRead(path)
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
  self:_checkRead(tool, path, self:_nameOf("read_file"))
  local st = fs_stat(fs, path)
  if st and st.type == "directory" then fail("%s is a directory; give a file path", path) end
  if st and a.overwrite == false then
    fail("File already exists: %s (set overwrite to true to replace it)", path)
  end
  fs:writeFile(path, a.content, { overwrite = a.overwrite, recursive = true })
  self:_noteRead(path)
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
  self:_checkRead(tool, path, self:_nameOf("read_file"))
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
  self:_noteRead(path)
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
  if not ok then fail("Invalid pattern %q: %s", pattern, error_text(err)) end
  if case_sensitive then
    return function(line) return line:find(pattern) end
  end
  local lower = pattern:lower()
  return function(line) return line:lower():find(lower) end
end

-- The files grep searches: {display path, ...}.
local function grep_files(self, a)
  local fs, path = self.filesystem, a.path
  local base, glob = path, nil
  if is_glob(path) then
    local segs, fixed, rest = {}, {}, {}
    for seg in path:gmatch("[^/]+") do segs[#segs + 1] = seg end
    local in_glob = false
    for _, seg in ipairs(segs) do
      if in_glob or is_glob(seg) then
        in_glob = true
        rest[#rest + 1] = seg
      else
        fixed[#fixed + 1] = seg
      end
    end
    base = table.concat(fixed, "/")
    if path:sub(1, 1) == "/" then base = "/" .. base elseif base == "" then base = "." end
    glob = table.concat(rest, "/")
  end
  local st = fs_stat(fs, base)
  if not st then fail("Path not found: %s (check it with list_files)", base) end
  if st.type ~= "directory" then return { path } end
  local files = {}
  walk(fs, base, "", 1, nil, function(e, full, rel)
    if not a.includeHidden and e.name:sub(1, 1) == "." then return false end
    if e.type == "directory" then return e.name ~= "node_modules" or a.includeHidden end
    if glob and not glob_match(glob, rel) then return false end
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
      if fatal(content) then error(content, 0) end
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

-- {====== the sandbox tools ======

local function command_output(r, tail)
  local stdout = (r.stdout or ""):gsub("\n$", "")
  local stderr = (r.stderr or ""):gsub("\n$", "")
  local text
  if stdout ~= "" and stderr ~= "" then
    text = stdout .. "\n\n[stderr]\n" .. stderr
  elseif stderr ~= "" then
    text = "[stderr]\n" .. stderr
  else
    text = stdout
  end
  if tail then
    local cut_text, was_cut = last_lines(text, tail)
    if was_cut then text = ("[showing the last %s]\n"):format(plural(tail, "line")) .. cut_text end
  end
  return text
end

local function execute_command(self, a)
  local sb = self.sandbox
  local opts = { cwd = a.cwd }
  if a.timeout then opts.timeout = math.floor(a.timeout * 1000 + 0.5) end
  if a.background then
    if not sb.processes then fail("This sandbox cannot run background processes") end
    local h = sb.processes:spawn(a.command, opts)
    return ("Started background process (PID: %s)"):format(tostring(h.pid))
  end
  local r = sb:executeCommand(a.command, nil, opts)
  local text = command_output(r, a.tail)
  if r.timedOut then
    text = text .. (text ~= "" and "\n\n" or "")
      .. ("[Command timed out after %gs and was killed]"):format((opts.timeout or 0) / 1000)
    return text, true
  end
  if not r.success then
    text = text .. (text ~= "" and "\n\n" or "") .. ("[Exit code: %s]"):format(tostring(r.exitCode))
    return text, true
  end
  if text == "" then text = "(no output)" end
  return text
end

local function no_process(pid)
  fail("No background process with PID %s (it never existed, or it exited and its output "
    .. "was already read)", pid)
end

local function process_state(h)
  if h.exitCode == nil then return "running" end
  if h.timedOut then return ("timed out (exit code %s)"):format(tostring(h.exitCode)) end
  if h.killed then return ("killed (exit code %s)"):format(tostring(h.exitCode)) end
  return ("exited with code %s"):format(tostring(h.exitCode))
end

local function get_process_output(self, a)
  local procs = self.sandbox.processes
  local h = procs:get(a.pid)
  if not h then no_process(a.pid) end
  if a.wait and h.exitCode == nil then
    h:wait()
    procs:get(a.pid) -- exited and read: forget it
  end
  local text = command_output(h, a.tail)
  if text == "" then text = "(no output yet)" end
  return ("Process %s (%s): %s\n\n%s"):format(tostring(h.pid), tostring(h.command or "?"),
    process_state(h), text)
end

local function kill_process(self, a)
  local procs = self.sandbox.processes
  local h = procs:get(a.pid)
  if not h then no_process(a.pid) end
  local head
  if h.exitCode ~= nil then
    head = ("Process %s had already %s."):format(tostring(h.pid), process_state(h))
  else
    procs:kill(a.pid)
    head = ("Killed process %s."):format(tostring(h.pid))
  end
  local text = command_output(h, KILL_TAIL_LINES)
  if text == "" then return head .. " It wrote no output." end
  return head .. "\n\nLast output:\n" .. text
end

-- }======

-- {====== the tool list ======

local DEFS = {
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
  { short = "execute_command", needs = "executeCommand", run = execute_command,
    description = "Run a shell command in the sandbox and return its output.",
    params = {
      { name = "command", type = "string", required = true,
        description = "The shell command line to run" },
      { name = "timeout", type = "number", minimum = 0,
        description = "Kill the command after this many seconds" },
      { name = "cwd", type = "string", description = "The directory to run the command in" },
      { name = "tail", type = "integer", minimum = 1,
        description = "Return only the last N lines of output" },
      { name = "background", type = "boolean", default = false, processes = true,
        description = "Start the command in the background and return its PID at once" },
    } },
  { short = "get_process_output", needs = "processes", run = get_process_output,
    description = "Show the state and output of a background process.",
    params = {
      { name = "pid", type = "string", required = true, description = "The PID of the process" },
      { name = "tail", type = "integer", minimum = 1,
        description = "Return only the last N lines of output" },
      { name = "wait", type = "boolean", default = false,
        description = "Wait for the process to exit first" },
    } },
  { short = "kill_process", needs = "processes", run = kill_process,
    description = "Kill a background process and show the last 50 lines of its output.",
    params = {
      { name = "pid", type = "string", required = true, description = "The PID of the process" },
    } },
}

function Workspace:_nameOf(short)
  local id = PREFIX .. short
  local c = self._config[id]
  return c and c.name or id
end

local function available(self, def)
  if def.needs == "filesystem" then return self.filesystem ~= nil end
  local sb = self.sandbox
  if not sb then return false end
  if def.needs == "executeCommand" then return type(sb.executeCommand) == "function" end
  return type(sb.processes) == "table"
end

local function truncate(text, max_tokens)
  if not max_tokens then return text end
  local max = max_tokens * 4
  if #text <= max then return text end
  return cut(text, max):gsub("%.%.%.$", "")
    .. ("\n[output truncated: %d of %d characters shown; ask for less, e.g. with"
      .. " offset/limit or tail]")
      :format(max, #text)
end

function Workspace:_makeTool(def)
  local id = PREFIX .. def.short
  local c = self._config[id] or {}
  local params = {}
  for _, p in ipairs(def.params) do
    if not p.processes or type(self.sandbox.processes) == "table" then params[#params + 1] = p end
  end
  local name = c.name or id
  local ws = self
  return {
    id = id,
    name = name,
    description = def.description,
    inputSchema = input_schema(params),
    requireApproval = c.requireApproval or false,
    requireReadBeforeWrite = def.writes and c.requireReadBeforeWrite or nil,
    execute = function(input)
      local args, err = validate(name, params, input)
      if not args then return "Error: " .. err, true end
      local ok, result, is_error = pcall(def.run, ws, args, id)
      if not ok then
        if fatal(result) then error(result, 0) end
        local text = error_text(result)
        if getmetatable(result) ~= ToolError then text = text .. hint_for(result, args) end
        return truncate("Error: " .. text, c.maxOutputTokens), true
      end
      return truncate(result, c.maxOutputTokens), is_error or nil
    end,
  }
end

--- The enabled tools for what this workspace has, in a fixed order.
function Workspace:tools()
  check_self("Workspace:tools", self)
  local list = {}
  for _, def in ipairs(DEFS) do
    local c = self._config[PREFIX .. def.short]
    if (not c or c.enabled ~= false) and available(self, def) then
      list[#list + 1] = self:_makeTool(def)
    end
  end
  return list
end

--- The tool named `name` (its configured name, or its id), or nil.
function Workspace:getTool(name)
  check_self("Workspace:getTool", self)
  for _, t in ipairs(self:tools()) do
    if t.name == name or t.id == name then return t end
  end
  return nil
end

--- Run a tool call by name: the result text, and true when it is an error.
function Workspace:callTool(name, input)
  check_self("Workspace:callTool", self)
  local t = self:getTool(name)
  if not t then
    local names = {}
    for _, x in ipairs(self:tools()) do names[#names + 1] = x.name end
    return ("Error: unknown tool '%s' (available: %s)"):format(tostring(name),
      table.concat(names, ", ")), true
  end
  return t.execute(input)
end

local check_format = options.one_of("anthropic", "openai")

--- The tools as the Anthropic Messages API ("anthropic") or the OpenAI chat
-- API ("openai") takes them; encode with core.jsonEncode.
function Workspace:toolDefinitions(format)
  local where = "Workspace:toolDefinitions"
  check_self(where, self)
  options.arg(where, 1, "format", format, check_format)
  local out = {}
  for _, t in ipairs(self:tools()) do
    if format == "anthropic" then
      out[#out + 1] = ordered({ "name", "description", "input_schema" }, {
        name = t.name, description = t.description, input_schema = t.inputSchema,
      })
    else
      out[#out + 1] = ordered({ "type", "function" }, {
        type = "function",
        ["function"] = ordered({ "name", "description", "parameters" }, {
          name = t.name, description = t.description, parameters = t.inputSchema,
        }),
      })
    end
  end
  return array(out)
end

-- }======

return Workspace
