-- Moving files between a Workspace's filesystem and its sandbox
-- (docs/api.md "Workspace transfers"):
--
--   ws:upload(path, sandboxPath, opts?)    filesystem -> sandbox
--   ws:download(sandboxPath, path, opts?)  sandbox -> filesystem
--
-- Both stream in chunks. An upload goes through the stdin of one command
-- (`cat > file`) where the sandbox takes stdin (supportsStdin(): a
-- LocalSandbox, a platform whose exec lease advertises "stdin"), and
-- otherwise through a series of commands that each append one base64
-- chunk, every argument well under the kernel's 128 KiB limit for one
-- argument, so it works against a platform that speaks only the upstream
-- protocol. A download reads the output of `cat` as it arrives.
--
-- The filesystem side streams through the filesystem's _readStream and
-- _writeStream: LocalFilesystem's read and write the file in pieces,
-- PlatformFilesystem's stream the object's GET and PUT (core.http's
-- streams: no Range, one request per object). A filesystem without them
-- is read with readFile and written with one writeFile at the end.
local errors = require "mastra.errors"
local options = require "mastra.options"
local common = require "mastra.common"
local task = require "mastra.task"

local transfer = {}

local RAW_PER_COMMAND = 73728 -- 96 KiB of base64 per command
local COMMANDS_AT_ONCE = 8      -- part files written concurrently
local STDERR_KEPT = 4096

local function method_option(v)
  return v == "auto" or v == "stdin" or v == "commands", '"auto", "stdin" or "commands"'
end

local OPTS = {
  timeout = options.ms,
  method = method_option,
}

local b64 = common.base64

-- {====== the filesystem side ======

-- A source of the file's bytes: a function returning chunks, nil at the
-- end, and maybe a function that abandons the rest.
local function reader(fs, path)
  if type(fs._readStream) == "function" then return fs:_readStream(path) end
  return common.stdinSource(fs:readFile(path))
end

-- A sink {write(chunk), close() -> bytes, abort()} for the file at path.
local function writer(fs, path)
  if type(fs._writeStream) == "function" then return fs:_writeStream(path) end
  local parts, bytes = {}, 0
  return {
    write = function(chunk)
      parts[#parts + 1] = chunk
      bytes = bytes + #chunk
    end,
    close = function()
      local data = table.concat(parts)
      parts = {}
      fs:writeFile(path, data)
      return bytes
    end,
    abort = function() parts = {} end,
  }
end

-- Chunks of exactly `size` bytes (the last one shorter) out of a source.
local function rechunk(source, size)
  local held, done = "", false
  return function()
    while #held < size and not done do
      local c = source()
      if c == nil then done = true else held = held .. c end
    end
    if held == "" then return nil end
    local out = held:sub(1, size)
    held = held:sub(size + 1)
    return out
  end
end

-- }======

local function check(where, self, a, b, opts)
  options.arg(where, 1, a[1], a[2], options.string, 4)
  options.arg(where, 2, b[1], b[2], options.string, 4)
  opts = options.check(where, opts, OPTS, 4)
  if self.filesystem == nil or self.sandbox == nil then
    error(("%s: the workspace needs both a filesystem and a sandbox (Workspace.new{"
      .. "filesystem = ..., sandbox = ...})"):format(where), 4)
  end
  return opts
end

local function use_stdin(where, sb, method)
  if method == "commands" then return false end
  local can = type(sb.supportsStdin) == "function" and sb:supportsStdin()
  if method == "stdin" and not can then
    error(where .. ': method "stdin": this sandbox does not take stdin (its platform does'
      .. ' not advertise it); use method "auto" or "commands"', 4)
  end
  return can
end

local function failed(where, what, r)
  errors.MastraError:raise({
    message = ("%s: %s failed with exit code %s: %s"):format(where, what,
      tostring(r.exitCode), (r.stderr or ""):gsub("%s+$", "")),
    exitCode = r.exitCode, stderr = r.stderr,
  }, 0)
end

local PREPARE = 'mkdir -p -- "$(dirname -- "$1")" && : > "$1" && rm -f -- "$1".mastra-part-*'
local WRITE_PART = 'printf %s "$3" | base64 -d > "$1.mastra-part-$2"'
-- the parts' names sort in their order (%08d): the glob puts them in line
local JOIN = 'cat -- "$1".mastra-part-* > "$1" && rm -f -- "$1".mastra-part-*'
local DROP_PARTS = 'rm -f -- "$1".mastra-part-*'

local upload_from

--- Copy the file at `path` of the filesystem to `sandboxPath` in the
-- sandbox (as its commands see it: relative to their working directory).
-- Returns {bytes, method = "stdin" | "commands"}.
function transfer.upload(self, path, sandboxPath, opts)
  local where = "Workspace:upload"
  opts = check(where, self, { "path", path }, { "sandboxPath", sandboxPath }, opts)
  local stdin = use_stdin(where, self.sandbox, opts.method or "auto")
  local source, close_source = reader(self.filesystem, path)
  local ok, res = pcall(upload_from, self.sandbox, sandboxPath, source, stdin,
    opts.timeout or 0)
  if close_source then close_source() end
  if not ok then error(res, 0) end
  return res
end

-- The upload itself, from the source; the caller closes the source.
function upload_from(sb, sandboxPath, source, stdin, timeout)
  local where = "Workspace:upload"
  local bytes = 0
  local function counted()
    local c = source()
    if c then bytes = bytes + #c end
    return c
  end
  if stdin then
    local r = sb:executeCommand("sh", { "-c", 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"',
      "sh", sandboxPath }, { stdin = counted, timeout = timeout })
    if r.exitCode ~= 0 then failed(where, "writing " .. sandboxPath, r) end
    return { bytes = bytes, method = "stdin" }
  end
  local r = sb:executeCommand("sh", { "-c", PREPARE, "sh", sandboxPath }, { timeout = timeout })
  if r.exitCode ~= 0 then failed(where, "creating " .. sandboxPath, r) end
  -- each chunk becomes a part file, COMMANDS_AT_ONCE at a time; one command
  -- joins them in order at the end
  local chunks = rechunk(counted, RAW_PER_COMMAND)
  local parts = 0
  local function writer_task()
    while true do
      local chunk = chunks()
      if chunk == nil then return end
      parts = parts + 1
      local w = sb:executeCommand("sh", { "-c", WRITE_PART, "sh", sandboxPath,
        ("%08d"):format(parts), b64(chunk) }, { timeout = timeout })
      if w.exitCode ~= 0 then failed(where, "writing a part of " .. sandboxPath, w) end
    end
  end
  local writers = {}
  for i = 1, COMMANDS_AT_ONCE do writers[i] = writer_task end
  local ok, err = pcall(task.all, writers)
  if ok and parts > 0 then
    r = sb:executeCommand("sh", { "-c", JOIN, "sh", sandboxPath }, { timeout = timeout })
    if r.exitCode ~= 0 then
      ok, err = pcall(failed, where, "joining the parts of " .. sandboxPath, r)
    end
  end
  if not ok then
    if not (errors.CancelledError:is(err) or errors.InterruptedError:is(err)) then
      pcall(sb.executeCommand, sb, "sh", { "-c", DROP_PARTS, "sh", sandboxPath })
    end
    error(err, 0)
  end
  return { bytes = bytes, method = "commands" }
end

--- Copy `sandboxPath` from the sandbox to the file at `path` of the
-- filesystem, streaming the output of `cat`. Returns {bytes}.
function transfer.download(self, sandboxPath, path, opts)
  local where = "Workspace:download"
  opts = check(where, self, { "sandboxPath", sandboxPath }, { "path", path }, opts)
  local sink = writer(self.filesystem, path)
  local stderr = ""
  local function keep(chunk)
    if #stderr < STDERR_KEPT then stderr = (stderr .. chunk):sub(1, STDERR_KEPT) end
  end
  local ok, r = pcall(self.sandbox.executeCommand, self.sandbox, "cat", { "--", sandboxPath },
    { onStdout = sink.write, onStderr = keep, maxRetainedBytes = 0,
      timeout = opts.timeout or 0 })
  if not ok then
    sink.abort()
    error(r, 0)
  end
  if r.exitCode ~= 0 then
    sink.abort()
    r.stderr = stderr
    failed(where, "reading " .. sandboxPath, r)
  end
  return { bytes = sink.close() }
end

return transfer
