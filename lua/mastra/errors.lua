-- Error classes (docs/api.md "Errors").
--
-- An error object is a table whose metatable is its class. It has `name`,
-- `message`, the fields of its class, and prints as "Name: message".
-- `Class:is(err)` tells whether err is of that class (or a subclass).
local errors = {}

local Base = {}
Base.__index = Base
Base.name = "MastraError"

function Base.__tostring(e)
  return e.name .. ": " .. tostring(e.message)
end

function Base:is(err)
  if type(err) ~= "table" then return false end
  local mt = getmetatable(err)
  while mt do
    if mt == self then return true end
    mt = mt.parent
  end
  return false
end

-- Make an error of this class: fields are copied; `message` is required.
function Base:new(fields)
  local e = {}
  for k, v in pairs(fields) do e[k] = v end
  e.name = self.name
  return setmetatable(e, self)
end

-- Build the error and raise it at the caller's level.
function Base:raise(fields, level)
  error(self:new(fields), (level or 1) + 1)
end

local function class(name, parent, defaults)
  parent = parent or Base
  local c = { name = name, parent = parent, code = defaults and defaults.code }
  c.__index = c
  c.__tostring = Base.__tostring
  setmetatable(c, { __index = parent })
  errors[name] = c
  return c
end

errors.MastraError = Base
class("CancelledError")
class("InterruptedError")
class("TimeoutError")
class("PlatformApiError")
class("NetworkError")
class("SandboxNotReadyError", nil, { code = "NOT_READY" })
class("SandboxDestroyedError")
class("SandboxExecTransportError")

local FilesystemError = class("FilesystemError")
class("FileNotFoundError", FilesystemError, { code = "ENOENT" })
class("DirectoryNotFoundError", FilesystemError, { code = "ENOENT" })
class("FileExistsError", FilesystemError, { code = "EEXIST" })
class("IsDirectoryError", FilesystemError, { code = "EISDIR" })
class("NotDirectoryError", FilesystemError, { code = "ENOTDIR" })
class("DirectoryNotEmptyError", FilesystemError, { code = "ENOTEMPTY" })
local PermissionError = class("PermissionError", FilesystemError, { code = "EACCES" })
-- a PermissionError too: the conformance cases (FS-ERR-05..07) expect one
class("WorkspaceReadOnlyError", PermissionError, { code = "READ_ONLY" })

-- The filesystem error class of an errno name (a failure of mastra.core,
-- docs/core.md): FilesystemError when no subclass fits.
local BY_CODE = {
  ENOENT = "FileNotFoundError", EEXIST = "FileExistsError", EISDIR = "IsDirectoryError",
  ENOTDIR = "NotDirectoryError", ENOTEMPTY = "DirectoryNotEmptyError",
  EACCES = "PermissionError", EPERM = "PermissionError", EROFS = "PermissionError",
}
function errors.forCode(code)
  return errors[BY_CODE[code]] or FilesystemError
end

-- The message text of any error value.
function errors.message(err)
  if type(err) == "table" and err.message ~= nil then
    return tostring(err.message)
  end
  return tostring(err)
end

return errors
