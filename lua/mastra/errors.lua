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
-- a template's build failed (`templateId`, `buildError`: the platform's
-- message), or was not ready in time (`templateId`, `timeoutMs`)
class("PlatformTemplateBuildError")
class("PlatformTemplateBuildTimeoutError")
local ExecTransport = class("SandboxExecTransportError")
-- the socket dropped after output reached onStdout/onStderr: the command
-- is not run again (the caller saw part of it); `delivered` is the bytes
class("SandboxExecInterruptedError", ExecTransport)
-- exec-resume/1 (docs/api.md "Exactly once"): the platform lost the exec
-- (its server restarted while it ran; `execId`, `code`, the output held):
-- it is never run again
class("SandboxExecLostError", ExecTransport)
-- the exec id names another command in that sandbox (`execId`): nothing ran
class("SandboxExecConflictError")
-- output came after a hole that no output_gap announced (`stream`, `held`,
-- `offset`): the command was killed
class("SandboxExecGapError", ExecTransport)
-- the process ran out of file descriptors (EMFILE, ENFILE): `limit` is
-- the soft RLIMIT_NOFILE, `inUse` the descriptors open when it was seen
class("ResourceLimitError")

-- mastra.Agent's model calls (lua/mastra/agent/): a model that cannot be
-- used as configured (no key, no URL, an unknown api): raised before any
-- request is sent; `variable` names the environment variable to set
class("ModelConfigError")
-- the model's API answered an error (an HTTP status, or an error event in
-- the stream): `status`, `type` (the API's error type or code),
-- `requestId`, `headers`, `body`, `url`, `retryable`
local ModelAPIError = class("ModelAPIError")
-- 429: `retryAfterMs` when the server said;
-- `spendLimit` when it is a quota or billing limit (never retried)
class("ModelRateLimitError", ModelAPIError)
-- the conversation does not fit the model's context window: not retried
class("ModelContextError", ModelAPIError)

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

-- {====== running out of descriptors ======

local DESCRIPTORS_TEXT = "Too many open files" -- strerror of EMFILE and ENFILE

-- The soft limit on open descriptors (ulimit -n), or nil. The last value
-- read is kept: at the limit, the file cannot be opened.
local known_limit
local function nofile_limit()
  local f = io.open("/proc/self/limits", "r")
  if f == nil then return known_limit end
  local text = f:read("a")
  f:close()
  known_limit = tonumber(text:match("Max open files%s+(%d+)")) or known_limit
  return known_limit
end
-- read once now: mastra.core raises the soft limit when it opens
if pcall(require, "mastra.core") then nofile_limit() end

-- The descriptors open now, or nil if they cannot be counted (at the limit
-- the count itself fails: that is an answer too).
local function fds_in_use(fs_readdir)
  local names, _, name = fs_readdir("/proc/self/fd")
  if names == nil then return nil, name == "EMFILE" or name == "ENFILE" end
  return #names - 1, false -- minus the descriptor of the listing itself
end

--- A ResourceLimitError if the failure described by `detail` (a message,
-- an errno or CURLE_* name) comes from running out of descriptors, else
-- nil. A message with strerror(EMFILE) or a name EMFILE/ENFILE says so;
-- a failure that names no cause (libcurl's "Couldn't connect to server"
-- when socket() fails) is one when the process is at its limit now (the
-- descriptors in use are within 1/16 of it, or cannot even be listed).
function errors.descriptorLimit(detail, name, probe)
  detail = tostring(detail or "")
  local named = detail:find(DESCRIPTORS_TEXT, 1, true) ~= nil
    or name == "EMFILE" or name == "ENFILE"
  local limit = nofile_limit()
  local used, at_limit = fds_in_use(require("mastra.core").fsReaddir)
  if not named then
    if not probe then return nil end
    if not at_limit and not (used and limit and used >= limit - math.max(4, limit // 16)) then
      return nil
    end
  end
  return errors.ResourceLimitError:new{
    message = ("out of file descriptors: %s%s; raise the limit (ulimit -n, and"
      .. " ulimit -Hn for the hard limit) or lower the concurrency (mastra.map's"
      .. " concurrency option). Cause: %s"):format(limit
        and ("this process may have %d open at once (ulimit -n %d)"):format(limit, limit)
        or "this process reached its limit (ulimit -n)",
      used and (", and %d are open"):format(used) or "", detail),
    limit = limit, inUse = used, cause = detail,
  }
end

-- }======

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
