-- Trees between the host's disk and a Workspace's sandbox (docs/api.md
-- "Directory transfers"):
--
--   ws:uploadDir(localDir, sandboxDir, opts?)    host directory -> sandbox
--   ws:downloadDir(sandboxDir, localDir, opts?)  sandbox -> host directory
--
-- The local side is a directory of the host (absolute, or relative to the
-- current directory), whatever the workspace's filesystem: a tree's modes,
-- symlinks and empty directories live on a disk, and a bucket keeps none
-- of them. A tree travels as one tar stream, made by `tar -c` on one side
-- and read by `tar -x` on the other:
--
-- * upload, where the sandbox takes stdin (supportsStdin()): one command
--   whose stdin is the host tar's output; it extracts into a temporary
--   directory beside the target.
-- * upload, where it does not (the hosted platform): the host tar's output
--   goes out in parts, each the base64 (core.base64Encode) of the next
--   bytes, carried in environment variables of one command that decodes
--   it into a part file (`base64 -d` of a here-document of the variables:
--   nothing in the sandbox parses the text), AT_ONCE commands in flight;
--   one command then feeds the parts in order to `tar -x`.
-- * download: one `tar -c` in the sandbox, its output streamed into a
--   `tar -x` on the host, in a temporary directory beside the target.
--
-- Either way the target appears whole or not at all: a second step (a
-- command in the sandbox, renames on the host) moves the temporary
-- directory into place only once both tars succeeded, and a failure
-- removes it. An existing directory is replaced (overwrite = false: a
-- FileExistsError instead).
local core = require "mastra.core"
local errors = require "mastra.errors"
local options = require "mastra.options"
local common = require "mastra.common"
local shell = require "mastra.shell"
local task = require "mastra.task"

local transfer_dir = {}

-- The commands path's sizes fit the local platform's bounds (docs/platform.md,
-- Limits): one execve string (each NAME=value) is at most 128 KiB, an
-- exec's env at most what its lease states (execEnvBytes: 960 KiB there;
-- 256 KiB where a lease states nothing), a client message at most 1 MiB.
local ENV_PIECE = 130000  -- base64 characters in one environment variable
local ENV_BOUND = 262144  -- an exec's env, NULs counted, where no lease says
local MESSAGE = 1048576 - 8192 -- a client message, less its command and framing
local ENV_SLACK = 2048
local AT_ONCE = 8         -- part commands in flight (more were slower: bench/README.md)
local STDERR_KEPT = 4096
local q = shell.quote

local function method_option(v)
  return v == "auto" or v == "stdin" or v == "commands", '"auto", "stdin" or "commands"'
end

local UP_OPTS = { timeout = options.ms, method = method_option, overwrite = options.boolean }
local DOWN_OPTS = { timeout = options.ms, overwrite = options.boolean }

-- The shell commands of the host side; specs replace them to feed a
-- broken archive through the real paths.
transfer_dir.hostCreate = "exec tar -c -f - -C %s ."
transfer_dir.hostExtract = "exec tar -x -p --no-same-owner -f - -C %s"
transfer_dir.remoteCreate = "exec tar -c -f - ."

-- {====== host processes ======

local HOST_ENV = { PATH = os.getenv("PATH") or "/usr/local/bin:/usr/bin:/bin", LC_ALL = "C" }

local Host = {}
Host.__index = Host
Host.__close = function(h) h:close() end

local function host(where, command, stdin, timeout)
  local proc, msg, name = core.spawn{ command = command, env = HOST_ENV, stdin = stdin,
    timeout = timeout and timeout > 0 and math.ceil(timeout) or nil }
  if not proc then
    errors.MastraError:raise({ message = ("%s: cannot run %q on the host: %s")
      :format(where, command, msg), code = name }, 0)
  end
  return setmetatable({ proc = proc, stderr = "", done = false }, Host)
end

-- What the process wrote since the last call (stderr is kept, bounded).
function Host:_pump()
  local out, err, done = self.proc:read()
  if err and #self.stderr < STDERR_KEPT then
    self.stderr = (self.stderr .. err):sub(1, STDERR_KEPT)
  end
  if done then self.done = true end
  return out
end

--- The next piece of stdout, nil at the end; waits for it.
function Host:read()
  while true do
    local out = self:_pump()
    if out and out ~= "" then return out end
    if self.done then return nil end
    task.wait(self.proc:id())
  end
end

--- Write to stdin, waiting while the pipe is full: true, or false once the
-- process stopped reading.
function Host:write(data)
  local pos = 1
  while pos <= #data do
    self:_pump()
    local n = self.proc:write(pos == 1 and data or data:sub(pos))
    if n == nil then return false end
    pos = pos + n
    if pos <= #data then
      self.proc:wantWrite()
      task.wait(self.proc:id())
    end
  end
  return true
end

--- Close stdin, wait for the exit: exitCode, timedOut.
function Host:finish(stdin)
  if stdin then self.proc:closeStdin() end
  while not self.done do
    self:_pump()
    if not self.done then task.wait(self.proc:id()) end
  end
  local code, signal, timedOut = self.proc:result()
  self:close()
  if signal and not timedOut then code = 128 + signal end
  return timedOut and 124 or code, timedOut
end

function Host:close()
  local proc = self.proc
  self.proc = nil
  if proc then proc:close() end
end

-- }======

-- {====== host paths ======

local function absolute(path)
  if path:sub(1, 1) == "/" then return path end
  return (core.getcwd() .. "/" .. path)
end

-- A path without trailing slashes, its parent and its last name; nil for
-- "/", "." and "..", which cannot be replaced.
local function split(path)
  path = path:gsub("/+$", "")
  local parent, name = path:match("^(.*)/([^/]+)$")
  if not parent then parent, name = ".", path end
  if parent == "" then parent = "/" end
  if name == "" or name == "." or name == ".." then return nil end
  return path, parent, name
end

local function temporary(parent, name)
  return ("%s/.%s.mastra-tmp-%s"):format(parent == "/" and "" or parent, name,
    common.randomDigits(8))
end

-- Remove a host tree (the project's own calls: it runs where a cancelled
-- task cannot wait, and never follows a symlink).
local function remove_tree(path)
  local st = core.fsLstat(path)
  if not st then return end
  if st.type == "directory" then
    for _, n in ipairs(core.fsReaddir(path) or {}) do remove_tree(path .. "/" .. n) end
    core.fsRmdir(path)
  else
    core.fsUnlink(path)
  end
end

-- }======

local function raise(class, where, text, fields)
  fields = fields or {}
  fields.message = where .. ": " .. text
  class:raise(fields, 0)
end

local function failed(where, what, r, stderr)
  stderr = (stderr or r.stderr or ""):gsub("%s+$", "")
  if r.exitCode == 17 then
    raise(errors.FileExistsError, where, stderr, { path = r.path })
  elseif r.exitCode == 20 then
    raise(errors.NotDirectoryError, where, stderr, { path = r.path })
  end
  if r.exitCode == 44 then
    raise(errors.DirectoryNotFoundError, where, stderr, { path = r.path })
  end
  raise(errors.MastraError, where, ("%s failed with exit code %s%s"):format(what,
    tostring(r.exitCode), r.timedOut and " (timed out)" or (stderr ~= "" and ": " .. stderr or "")),
    { exitCode = r.exitCode, stderr = stderr, timedOut = r.timedOut })
end

local function fatal(err)
  return errors.CancelledError:is(err) or errors.InterruptedError:is(err)
end

local function deadline_of(timeout)
  local at = timeout and timeout > 0 and core.now() + timeout or nil
  return function()
    if not at then return 0 end
    return math.max(1, math.ceil(at - core.now()))
  end
end

-- {====== upload ======

-- $1 target, $2 temporary, $3 overwrite (1/0): refuse what cannot be
-- replaced, then make the temporary directory
local PREPARE = [[
D=$1 T=$2
if [ -L "$D" ] || { [ -e "$D" ] && [ ! -d "$D" ]; }; then
  echo "$D exists and is not a directory" >&2; exit 20; fi
if [ "$3" != 1 ] && [ -e "$D" ]; then
  echo "$D already exists (overwrite = false)" >&2; exit 17; fi
mkdir -p -- "$(dirname -- "$D")" && mkdir -- "$T" || exit 1
]]

local EXTRACT_STDIN = PREPARE .. [[
tar -x -p --no-same-owner -f - -C "$T" || { s=$?; rm -rf -- "$T"; exit $s; }
]]

-- $4: the parts' directory, decoded in name order through tar first;
-- then the temporary directory goes into place (an old tree aside first)
local COMMIT = [[
D=$1 T=$2 P=$4
if [ -n "$P" ]; then
  cat -- "$P"/p-* | tar -x -p --no-same-owner -f - -C "$T"
  s=$?
  rm -rf -- "$P"
  if [ "$s" != 0 ]; then rm -rf -- "$T"; exit "$s"; fi
fi
if [ -L "$D" ] || { [ -e "$D" ] && [ ! -d "$D" ]; }; then
  rm -rf -- "$T"; echo "$D exists and is not a directory" >&2; exit 20; fi
if [ -e "$D" ]; then
  if [ "$3" != 1 ]; then
    rm -rf -- "$T"; echo "$D already exists (overwrite = false)" >&2; exit 17; fi
  mv -- "$D" "$T.old" || { rm -rf -- "$T"; exit 1; }
  mv -- "$T" "$D" || { mv -- "$T.old" "$D"; rm -rf -- "$T"; exit 1; }
  rm -rf -- "$T.old"
else
  mv -- "$T" "$D" || { rm -rf -- "$T"; exit 1; }
fi
]]

-- How many environment variables of ENV_PIECE characters a part command
-- may carry beside the sandbox's own env (PlatformSandbox merges it into
-- every exec).
local function env_pieces(sb)
  local bound = type(sb._execEnvBytes) == "function" and sb:_execEnvBytes() or ENV_BOUND
  local raw, json = ENV_SLACK, ENV_SLACK
  if type(sb.env) == "table" then
    for k, v in pairs(sb.env) do
      k, v = tostring(k), tostring(v)
      raw = raw + #k + #v + 2
      local _, escaped = v:gsub('[%c"\\]', "")
      json = json + #k + #v + 5 * escaped + 6 -- "k":"v", at most 6 bytes a character
    end
  end
  local piece_raw = ENV_PIECE + #"MASTRA_PART_00=" + 1
  local piece_json = ENV_PIECE + #'"MASTRA_PART_00":"",'
  local n = 0
  while raw + (n + 1) * piece_raw <= bound and json + (n + 1) * piece_json <= MESSAGE do
    n = n + 1
  end
  return n
end

local function check_host_dir(where, dir)
  local st = core.fsStat(dir)
  if not st then
    raise(errors.DirectoryNotFoundError, where, "Directory not found: " .. dir, { path = dir })
  elseif st.type ~= "directory" then
    raise(errors.NotDirectoryError, where, "Not a directory: " .. dir, { path = dir })
  end
end

-- The part files, AT_ONCE commands at a time, from the host tar's
-- output: each part is the base64 (core.base64Encode) of the next
-- `group / 4 * 3` bytes, so that every part decodes on its own.
local function send_parts(where, sb, h, P, remaining)
  local pieces = env_pieces(sb)
  if pieces == 0 then
    raise(errors.MastraError, where, "the sandbox's env leaves no room in an exec's env for"
      .. " the archive's parts (give the sandbox a smaller env, or use a sandbox that takes"
      .. " stdin)")
  end
  local group = pieces * ENV_PIECE // 4 * 3 -- bytes of the archive a part
  local pending, plen, eof = {}, 0, false
  local busy, turn = false, {}
  local parts, bytes = 0, 0
  local function take()
    while plen < group and not eof do
      local c = h:read()
      if c == nil then eof = true else
        pending[#pending + 1] = c
        plen = plen + #c
      end
    end
    if plen == 0 then return nil end
    local s = table.concat(pending)
    pending, plen = {}, 0
    if #s > group then
      pending[1] = s:sub(group + 1)
      plen = #pending[1]
      s = s:sub(1, group)
    end
    parts = parts + 1
    bytes = bytes + #s
    return parts, core.base64Encode(s)
  end
  local function next_part()
    while busy do task.wait(turn) end
    busy = true
    local ok, n, text = pcall(take)
    busy = false
    task.wake(turn)
    if not ok then error(n, 0) end
    return n, text
  end
  local function writer()
    while true do
      local n, text = next_part()
      if n == nil then return end
      local name = q(("%s/p-%08d"):format(P, n))
      local env, refs = {}, {}
      for pos = 1, #text, ENV_PIECE do
        local var = "MASTRA_PART_" .. (#refs + 1)
        env[var] = text:sub(pos, pos + ENV_PIECE - 1)
        refs[#refs + 1] = "${" .. var .. ":?}" -- a variable that is missing fails the part
      end
      -- a here-document: the shell expands the variables and base64 reads
      -- them from a pipe (one program started, not printenv as well)
      local cmd = ("exec base64 -d > %s <<MASTRA_PART_END\n%s\nMASTRA_PART_END\n")
        :format(name, table.concat(refs))
      local r = sb:executeCommand(cmd, nil, { env = env, timeout = remaining() })
      if r.exitCode ~= 0 then failed(where, ("writing part %d of the archive"):format(n), r) end
    end
  end
  local writers = {}
  for i = 1, AT_ONCE do writers[i] = writer end
  task.all(writers)
  return bytes
end

--- Copy the host directory `localDir` to `sandboxDir` in the sandbox.
-- Returns {bytes (of the tar stream), method = "stdin" | "commands"}.
function transfer_dir.upload(self, localDir, sandboxDir, opts)
  local where = "Workspace:uploadDir"
  options.arg(where, 1, "localDir", localDir, options.string, 4)
  options.arg(where, 2, "sandboxDir", sandboxDir, options.string, 4)
  opts = options.check(where, opts, UP_OPTS, 4)
  local sb = self.sandbox
  if sb == nil then
    error(where .. ": the workspace needs a sandbox (Workspace.new{sandbox = ...})", 4)
  end
  local D, parent, name = split(sandboxDir)
  if not D then
    error(("%s: sandboxDir %q names no directory that can be replaced (give a path such as"
      .. " \"project\" or \"/workspace/project\")"):format(where, sandboxDir), 4)
  end
  local method = opts.method or "auto"
  local can = type(sb.supportsStdin) == "function" and method ~= "commands" and sb:supportsStdin()
  if method == "stdin" and not can then
    error(where .. ': method "stdin": this sandbox does not take stdin (its platform does'
      .. ' not advertise it); use method "auto" or "commands"', 4)
  end
  local src = absolute(localDir)
  check_host_dir(where, src)
  local remaining = deadline_of(opts.timeout)
  local T = temporary(parent, name)
  local P = T .. ".parts"
  local ow = opts.overwrite == false and "0" or "1"
  local bytes = 0
  local ok, err = pcall(function()
    if can then
      local h <close> = host(where, transfer_dir.hostCreate:format(q(src)), false, remaining())
      local function source()
        local c = h:read()
        if c then bytes = bytes + #c end
        return c
      end
      local r = sb:executeCommand("sh", { "-c", EXTRACT_STDIN, "sh", D, T, ow },
        { stdin = source, timeout = remaining() })
      r.path = D
      if r.exitCode ~= 0 then
        h:_pump() -- a host tar that has exited says so (its failure is the cause)
        if not h.done then failed(where, "extracting into " .. sandboxDir, r) end
      end
      -- the host side first: a host tar that failed wrote a part of a tree
      while h:read() do end
      local hc, hto = h:finish(false)
      if hc ~= 0 then
        failed(where, "tar on the host (" .. localDir .. ")", { exitCode = hc, timedOut = hto },
          h.stderr)
      end
      if r.exitCode ~= 0 then failed(where, "extracting into " .. sandboxDir, r) end
    else
      local r = sb:executeCommand("sh",
        { "-c", PREPARE .. "mkdir -- \"$T.parts\"", "sh", D, T, ow }, { timeout = remaining() })
      r.path = D
      if r.exitCode ~= 0 then failed(where, "preparing " .. sandboxDir, r) end
      local h <close> = host(where, transfer_dir.hostCreate:format(q(src)), false, remaining())
      bytes = send_parts(where, sb, h, P, remaining)
      local hc, hto = h:finish(false)
      if hc ~= 0 then
        failed(where, "tar on the host (" .. localDir .. ")", { exitCode = hc, timedOut = hto },
          h.stderr)
      end
    end
    local r = sb:executeCommand("sh", { "-c", COMMIT, "sh", D, T, ow, can and "" or P },
      { timeout = remaining() })
    r.path = D
    if r.exitCode ~= 0 then failed(where, "moving the tree into " .. sandboxDir, r) end
  end)
  if not ok then
    if not fatal(err) then
      pcall(sb.executeCommand, sb, "rm", { "-rf", "--", T, P, T .. ".old" })
    end
    error(err, 0)
  end
  return { bytes = bytes, method = can and "stdin" or "commands" }
end

-- }======

-- {====== download ======

-- $1 the directory: its tar on stdout
local CREATE = [[
D=$1
if [ ! -e "$D" ] && [ ! -L "$D" ]; then echo "Directory not found: $D" >&2; exit 44; fi
if [ ! -d "$D" ]; then echo "Not a directory: $D" >&2; exit 20; fi
cd -- "$D" || exit 1
]]

local HOST_GONE = {} -- raised from onStdout when the host tar stopped reading

--- Copy `sandboxDir` from the sandbox to the host directory `localDir`.
-- Returns {bytes (of the tar stream)}.
function transfer_dir.download(self, sandboxDir, localDir, opts)
  local where = "Workspace:downloadDir"
  options.arg(where, 1, "sandboxDir", sandboxDir, options.string, 4)
  options.arg(where, 2, "localDir", localDir, options.string, 4)
  opts = options.check(where, opts, DOWN_OPTS, 4)
  local sb = self.sandbox
  if sb == nil then
    error(where .. ": the workspace needs a sandbox (Workspace.new{sandbox = ...})", 4)
  end
  local target, parent, name = split(absolute(localDir))
  if not target then
    error(("%s: localDir %q names no directory that can be replaced"):format(where, localDir), 4)
  end
  local function check_target()
    local st = core.fsLstat(target)
    if st and st.type ~= "directory" then
      raise(errors.NotDirectoryError, where, localDir .. " exists and is not a directory",
        { path = localDir })
    elseif st and opts.overwrite == false then
      raise(errors.FileExistsError, where, localDir .. " already exists (overwrite = false)",
        { path = localDir })
    end
    return st ~= nil
  end
  check_target()
  local made, msg, code = core.fsMkdir(parent, true)
  if not made then
    raise(errors.MastraError, where, ("cannot create %s: %s"):format(parent, msg), { code = code })
  end
  local remaining = deadline_of(opts.timeout)
  local T = temporary(parent, name)
  assert(core.fsMkdir(T))
  local bytes = 0
  local ok, err = pcall(function()
    local h <close> = host(where, transfer_dir.hostExtract:format(q(T)), true, remaining())
    local stderr = ""
    local ran, r = pcall(sb.executeCommand, sb, "sh",
      { "-c", CREATE .. transfer_dir.remoteCreate, "sh", sandboxDir }, {
        onStdout = function(chunk)
          bytes = bytes + #chunk
          if not h:write(chunk) then error(HOST_GONE, 0) end
        end,
        onStderr = function(chunk)
          if #stderr < STDERR_KEPT then stderr = (stderr .. chunk):sub(1, STDERR_KEPT) end
        end,
        maxRetainedBytes = 0, timeout = remaining(),
      })
    if not ran and r ~= HOST_GONE then error(r, 0) end
    if ran and r.exitCode ~= 0 then
      r.path = sandboxDir
      failed(where, "reading " .. sandboxDir, r, stderr)
    end
    local hc, hto = h:finish(true)
    if hc ~= 0 or not ran then
      failed(where, "tar on the host (into " .. localDir .. ")",
        { exitCode = hc ~= 0 and hc or 1, timedOut = hto }, h.stderr)
    end
    -- into place: an existing tree goes aside, then away
    if check_target() then
      local old = T .. ".old"
      local moved, why = core.fsRename(target, old)
      if not moved then
        raise(errors.MastraError, where, "cannot replace " .. localDir .. ": " .. why)
      end
      local placed, why2 = core.fsRename(T, target)
      if not placed then
        core.fsRename(old, target)
        raise(errors.MastraError, where, "cannot replace " .. localDir .. ": " .. why2)
      end
      remove_tree(old)
    else
      local placed, why = core.fsRename(T, target)
      if not placed then
        raise(errors.MastraError, where, "cannot create " .. localDir .. ": " .. why)
      end
    end
  end)
  if not ok then
    remove_tree(T)
    error(err, 0)
  end
  return { bytes = bytes }
end

-- }======

return transfer_dir
