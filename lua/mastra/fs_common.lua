-- Pieces shared by LocalFilesystem and PlatformFilesystem: the options of
-- each operation, the checks every method starts with (fs_common.METHODS),
-- the fields and options both constructors take, path normalization, and
-- the extension filter of readdir. Nothing here does I/O.
local errors = require "mastra.errors"
local options = require "mastra.options"
local common = require "mastra.common"

local fs_common = {}

local ENCODING = options.one_of("utf-8", "utf8")

local function extension(v)
  if type(v) == "string" then return true end
  if type(v) == "table" then
    for i = 1, #v do
      if type(v[i]) ~= "string" then return false, "a string or a list of strings" end
    end
    return true
  end
  return false, "a string or a list of strings"
end

local function depth(v)
  return math.type(v) == "integer" and v >= 0, "an integer >= 0"
end

local READ_OPTS = { encoding = ENCODING }
local WRITE_OPTS = { overwrite = options.boolean, recursive = options.boolean,
  mimeType = options.string, encoding = ENCODING }
local DELETE_OPTS = { recursive = options.boolean, force = options.boolean }
local COPY_OPTS = { overwrite = options.boolean, recursive = options.boolean }
local MKDIR_OPTS = { recursive = options.boolean }
local READDIR_OPTS = { recursive = options.boolean, extension = extension, maxDepth = depth }

--- The options both constructors take (with extra, the class's own).
function fs_common.newOpts(extra)
  local spec = {
    readOnly = options.boolean,
    displayName = options.string,
    description = options.string,
    instructions = options.string_or_function,
    icon = options.string,
    id = options.string,
  }
  for k, v in pairs(extra) do spec[k] = v end
  return spec
end

--- A new filesystem object of class from the checked constructor options:
-- the fields both classes have (`defaults` gives provider, the default
-- icon and the prefix of the id), and the class's own `fields`.
function fs_common.instance(class, opts, defaults, fields)
  local self = {
    id = opts.id or common.newId(defaults.idPrefix),
    name = class.__name:gsub("^mastra%.", ""),
    provider = defaults.provider,
    icon = opts.icon or defaults.icon,
    status = "pending",
    readOnly = opts.readOnly == true,
    displayName = opts.displayName,
    description = opts.description,
    _instructions = opts.instructions,
  }
  for k, v in pairs(fields) do self[k] = v end
  return setmetatable(self, class)
end

--- destroy (and __close): a filesystem holds nothing to release.
function fs_common.destroy(self)
  self.status = "destroyed"
end

--- What getInfo returns: the common fields and metadata (a table of the
-- class's own entries, to which displayName and description are added
-- when set).
function fs_common.info(self, metadata)
  if self.displayName and self.displayName ~= "" then metadata.displayName = self.displayName end
  if self.description and self.description ~= "" then metadata.description = self.description end
  return {
    id = self.id, name = self.name, provider = self.provider, status = self.status,
    error = self.error, readOnly = self.readOnly, icon = self.icon, metadata = metadata,
  }
end

-- A path argument: a string without NUL bytes. Raises at `level`.
local function check_path(where, n, name, p, level)
  if type(p) ~= "string" then
    error(("%s: argument #%d (%s) must be a string path (got %s)")
      :format(where, n, name, options.describe(p)), level)
  end
  if p:find("%z") then
    error(("%s: argument #%d (%s) must not contain NUL bytes"):format(where, n, name), level)
  end
  return p
end

-- The filesystem methods and the checks each starts with, in this order:
-- self is an instance of the class; the arguments named in `paths` (in
-- order) are path strings; with `content`, the next argument is a string;
-- with `opts` (a checker table), the next is an options table (nil
-- becomes {}). Then the filesystem is initialized if it is not ready
-- (unless `ready` is false), and with `writes` a read-only filesystem
-- raises WorkspaceReadOnlyError (the operation is the method's name, the
-- path its first argument).
local PATH, SRC_DEST = { "path" }, { "src", "dest" }
local SELF_ONLY = { ready = false }
fs_common.METHODS = {
  readFile = { paths = PATH, opts = READ_OPTS },
  writeFile = { paths = PATH, content = true, opts = WRITE_OPTS, writes = true },
  appendFile = { paths = PATH, content = true, opts = WRITE_OPTS, writes = true },
  deleteFile = { paths = PATH, opts = DELETE_OPTS, writes = true },
  copyFile = { paths = SRC_DEST, opts = COPY_OPTS, writes = true },
  moveFile = { paths = SRC_DEST, opts = COPY_OPTS, writes = true },
  mkdir = { paths = PATH, opts = MKDIR_OPTS, writes = true },
  rmdir = { paths = PATH, opts = DELETE_OPTS, writes = true },
  readdir = { paths = PATH, opts = READDIR_OPTS },
  stat = { paths = PATH },
  -- the streaming hooks of Workspace:upload/download (workspace/transfer.lua)
  _readStream = { paths = PATH },
  _writeStream = { paths = PATH, writes = true, name = "writeFile" },
  exists = { paths = PATH, ready = false }, -- through stat
  realpath = { paths = PATH },
  resolvePath = { paths = PATH, ready = false },
  init = SELF_ONLY,
  destroy = SELF_ONLY,
  getInfo = SELF_ONLY,
  getInstructions = SELF_ONLY,
}

local function checked(class, name, spec, body)
  local where = class.__name:gsub("^mastra%.", "") .. ":" .. name
  local paths = spec.paths or {}
  local content_at = spec.content and #paths + 1 or nil
  local opts_at = spec.opts and #paths + (spec.content and 2 or 1) or nil
  local nargs = opts_at or content_at or #paths
  return function(self, ...)
    options.self(where, self, class, 3)
    local args = { ... }
    for i, arg_name in ipairs(paths) do check_path(where, i, arg_name, args[i], 3) end
    if content_at then
      options.arg(where, content_at, "content", args[content_at], options.string, 3)
    end
    if opts_at then args[opts_at] = options.check(where, args[opts_at], spec.opts, 3) end
    if spec.ready ~= false and self.status ~= "ready" then self:init() end
    if spec.writes and self.readOnly then
      errors.WorkspaceReadOnlyError:raise({
        message = "Workspace is in read-only mode. Cannot perform: " .. name,
        operation = spec.name or name, path = args[1],
      })
    end
    -- a tail call: error level 2 in a method names its caller
    return body(self, table.unpack(args, 1, nargs))
  end
end

--- Put the checks of fs_common.METHODS in front of each of those methods
-- that class defines: a method's body then holds only what it does, and
-- gets its checked arguments (opts a table) and nothing more.
function fs_common.checkMethods(class)
  for name, spec in pairs(fs_common.METHODS) do
    local body = rawget(class, name)
    if body then class[name] = checked(class, name, spec, body) end
  end
  return class
end

--- POSIX normalize under "/": "" and "." are "/", "//" collapses, "." and
-- ".." resolve (clamped at the root), a trailing "/" is kept.
function fs_common.normalizePath(p)
  if p == "" or p == "." then return "/" end
  local trailing = p:sub(-1) == "/"
  local parts = {}
  for seg in p:gmatch("[^/]+") do
    if seg == ".." then
      if #parts > 0 then parts[#parts] = nil end
    elseif seg ~= "." then
      parts[#parts + 1] = seg
    end
  end
  local out = "/" .. table.concat(parts, "/")
  if trailing and out ~= "/" then out = out .. "/" end
  return out
end

--- normalizePath without the trailing "/" ("/" stays "/").
function fs_common.canonicalPath(p)
  return (fs_common.normalizePath(p):gsub("(.)/$", "%1"))
end

--- Whether name ends with the extension (or one of the list; nil: any).
function fs_common.extMatch(name, ext)
  if ext == nil then return true end
  if type(ext) == "string" then ext = { ext } end
  for _, e in ipairs(ext) do
    if e == "" or name:sub(-#e) == e then return true end
  end
  return false
end

return fs_common
