-- Pieces shared by LocalFilesystem and PlatformFilesystem: the options of
-- each operation, path arguments, and the extension filter of readdir.
local options = require "mastra.options"

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

fs_common.READ_OPTS = { encoding = ENCODING }
fs_common.WRITE_OPTS = { overwrite = options.boolean, recursive = options.boolean,
  mimeType = options.string, encoding = ENCODING }
fs_common.DELETE_OPTS = { recursive = options.boolean, force = options.boolean }
fs_common.COPY_OPTS = { overwrite = options.boolean, recursive = options.boolean }
fs_common.MKDIR_OPTS = { recursive = options.boolean }
fs_common.READDIR_OPTS = { recursive = options.boolean, extension = extension,
  maxDepth = depth }

--- A path argument: a string without NUL bytes. Raises at `level`
-- (default: the caller of the method that checks).
function fs_common.checkPath(where, n, name, p, level)
  level = level or 3
  if type(p) ~= "string" then
    error(("%s: argument #%d (%s) must be a string path (got %s)")
      :format(where, n, name, options.describe(p)), level)
  end
  if p:find("%z") then
    error(("%s: argument #%d (%s) must not contain NUL bytes"):format(where, n, name), level)
  end
  return p
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
