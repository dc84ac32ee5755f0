-- Process handles and the `processes` manager of a sandbox (upstream's
-- SandboxProcessManager and ProcessHandle).
--
-- A handle wraps one child process of mastra.core. Its output is pumped
-- into the handle as it arrives (and to onStdout/onStderr); `exitCode` is
-- nil until the process has finished and all its output is in.
local core = require "mastra.core"
local task = require "mastra.task"
local options = require "mastra.options"
local errors = require "mastra.errors"
local output = require "mastra.output"
local common = require "mastra.common"
local shell = require "mastra.shell"

local process = {}

local Handle = { __name = "mastra.ProcessHandle" }
process.Handle = Handle

-- stdout and stderr are retained output buffers (mastra.output), joined
-- when read.
Handle.__index = output.index(Handle)

function Handle.__tostring(h)
  return ("mastra.ProcessHandle: pid %s (%s)"):format(h.pid,
    h.exitCode == nil and "running" or "exit " .. h.exitCode)
end

-- Let go of the C process: a process still running is killed (SIGTERM,
-- then SIGKILL) and reaped by the loop. Runs once.
local function release(h)
  local proc = h._proc
  if proc == nil then return end
  h._proc = nil
  proc:close()
  if h._onExit then h._onExit(h) end
end

-- `local h <close> = ...`: leaving the scope early (an error, a
-- cancellation) kills the process.
function Handle.__close(h)
  release(h)
end

--- Start `command` (shell text) and return its handle. spec: command,
-- cwd, env (full map), stdin (boolean), timeout (ms, 0: none),
-- maxRetainedBytes (default: everything), onStdout, onStderr, onExit.
-- A failed core.spawn (message, errno name) raised as the error it means.
local function spawn_failed(spec, msg, name)
  local what = ("cannot run %q"):format(spec.command)
  local cwd = spec.cwd
  if cwd and (name == "ENOENT" or name == "ENOTDIR") then
    errors.DirectoryNotFoundError:raise({
      message = ("%s: the working directory %s does not exist (create it, or give an"
        .. " existing cwd)"):format(what, cwd),
      path = cwd, code = name,
    }, 0)
  elseif cwd and name == "EACCES" then
    errors.PermissionError:raise({
      message = ("%s: the working directory %s cannot be entered (permission denied)")
        :format(what, cwd),
      path = cwd, code = name,
    }, 0)
  end
  local limit = errors.descriptorLimit(("%s: %s"):format(what, msg), name)
  if limit then error(limit, 0) end -- EMFILE, ENFILE: a ResourceLimitError
  local hint = ""
  if name == "EAGAIN" then
    hint = " (too many processes: wait for some to finish)"
  end
  errors.MastraError:raise({ message = ("%s: %s%s"):format(what, msg, hint), code = name }, 0)
end

function process.start(spec)
  local proc, msg, name = core.spawn{
    command = spec.command,
    cwd = spec.cwd,
    env = spec.env,
    stdin = spec.stdin,
    timeout = spec.timeout and math.ceil(spec.timeout) or nil,
  }
  if not proc then spawn_failed(spec, msg, name) end
  return setmetatable({
    pid = tostring(proc:pid()),
    command = spec.command,
    exitCode = nil,
    _proc = proc,
    _out = output.pair(spec.maxRetainedBytes),
    _started = core.now(),
    _onStdout = spec.onStdout,
    _onStderr = spec.onStderr,
    _onExit = spec.onExit,
  }, Handle)
end

--- Move output into the handle until the process has finished. Runs in
-- the caller's task; callbacks run there too. A callback may wait (write
-- the output somewhere that is full): the loop then reads again before it
-- waits, as the process's signal may have come and gone meanwhile.
function process.pump(h)
  local proc = h._proc
  while true do
    local out, err, done = proc:read()
    if out then
      h._out.stdout:append(out)
      if h._onStdout then h._onStdout(out) end
    end
    if err then
      h._out.stderr:append(err)
      if h._onStderr then h._onStderr(err) end
    end
    if done then break end
    -- only after a read that found nothing: a callback that yielded let
    -- output (up to the pipe's pause) or the exit come meanwhile, and its
    -- wake-up went by while this task waited elsewhere
    if not out and not err then task.wait(proc:id()) end
  end
  local code, signal, timedOut, killed = proc:result()
  h.signal = signal
  h.timedOut = timedOut
  h.killed = killed
  h.executionTimeMs = math.floor(core.now() - h._started)
  h.exitCode = timedOut and 124 or code
  release(h)
end

--- Pump in a background task (for processes.spawn).
function process.background(h)
  h._pump = task.spawn(function()
    local ok, err = pcall(process.pump, h)
    if not ok then
      release(h) -- a callback failed: do not leave the process behind
      error(err, 0)
    end
  end)
  return h
end

--- The CommandResult of a finished process.
function Handle:result(args)
  return output.fill({
    exitCode = self.exitCode,
    success = self.exitCode == 0,
    executionTimeMs = self.executionTimeMs,
    timedOut = self.timedOut or false,
    killed = self.killed or false,
    command = self.command,
    args = args,
  }, self._out.stdout, self._out.stderr)
end

--- Wait for the process to finish; returns its CommandResult. Repeatable.
function Handle:wait()
  options.self("ProcessHandle:wait", self, Handle)
  if self._pump then self._pump:wait() end
  return self:result()
end

--- Kill the process group (SIGTERM, then SIGKILL after a grace period).
-- Returns true if it was running, false if it had already exited.
function Handle:kill()
  options.self("ProcessHandle:kill", self, Handle)
  if self.exitCode ~= nil or self._proc == nil then return false end
  -- at the close of the Lua state the process object may already be
  -- finalized (its finalizer killed the group): nothing runs any more
  local ok, running = pcall(self._proc.kill, self._proc)
  return ok and running
end

--- Write data to the process's stdin; waits while the pipe is full. The
-- writes go on from an offset into data (p:write's init): the rest of a
-- large string is never copied after a partial write.
function Handle:sendStdin(data)
  options.self("ProcessHandle:sendStdin", self, Handle)
  options.arg("ProcessHandle:sendStdin", 1, "data", data, options.string)
  local pos, len = 1, #data -- the next byte to write
  while pos <= len do
    local proc = self._proc
    if proc == nil or self.exitCode ~= nil then
      errors.MastraError:raise({ message = ("ProcessHandle:sendStdin: process %s has exited;"
        .. " its stdin is closed"):format(self.pid), code = "EPIPE" }, 0)
    end
    local n, err, name = proc:write(data, pos)
    if n == nil then
      errors.MastraError:raise({ message = ("ProcessHandle:sendStdin: cannot write to the stdin"
        .. " of process %s: %s"):format(self.pid, err), code = name }, 0)
    end
    pos = pos + n
    if pos <= len then
      proc:wantWrite()
      task.wait(proc:id())
    end
  end
end

--- Close the process's stdin (the process then reads end of file).
function Handle:closeStdin()
  options.self("ProcessHandle:closeStdin", self, Handle)
  if self._proc then self._proc:closeStdin() end
end

-- {====== the manager ======

local Manager = { __name = "mastra.ProcessManager" }
Manager.__index = Manager
process.Manager = Manager

-- What a spawned process keeps of each stream unless told otherwise (as
-- upstream: it may run for hours).
process.SPAWN_RETAINED_BYTES = 1048576

--- sandbox: the owner (its _ensureRunning() runs before a spawn);
-- launch(command, opts) -> a handle already running in the background.
-- Handles are duck-typed: pid, command, exitCode, wait(), kill().
function process.newManager(sandbox, launch)
  return setmetatable({
    _sandbox = sandbox,
    _launch = launch,
    _tracked = {},   -- pid -> handle
    _order = {},     -- pids in spawn order
    _dismissed = {}, -- pids read once after exit
  }, Manager)
end

-- Wait for a killed process; its own failure does not matter here, but a
-- cancellation of the waiting task does.
local function wait_killed(h)
  local ok, err = pcall(h.wait, h)
  if not ok and (errors.CancelledError:is(err)
      or errors.InterruptedError:is(err)) then
    error(err, 0)
  end
end

local function untrack(m, pid)
  m._tracked[pid] = nil
  for i, p in ipairs(m._order) do
    if p == pid then table.remove(m._order, i) break end
  end
end

-- A list (a table whose keys are 1..n), or nil.
local function is_list(t)
  if t == nil then return true end
  if type(t) ~= "table" then return false end
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 or k > #t then return false end
  end
  return true
end

--- Start a background process running the shell text `command` followed
-- by `args` (each quoted as one argument), as executeCommand takes them;
-- spawn(command, opts) still works.
function Manager:spawn(command, args, opts)
  options.self("processes:spawn", self, Manager)
  options.arg("processes:spawn", 1, "command", command, options.string)
  if opts == nil and type(args) == "table" and next(args) ~= nil and not is_list(args) then
    args, opts = nil, args -- spawn(command, opts)
  end
  common.checkArgs("processes:spawn", args)
  command = shell.commandLine(command, args)
  -- the options of executeCommand; only maxRetainedBytes's default differs
  opts = options.check("processes:spawn", opts,
    self._sandbox._spawnOptions or common.SPAWN_OPTS)
  self._sandbox:_ensureRunning()
  local launch_opts = {}
  for k, v in pairs(opts) do launch_opts[k] = v end
  launch_opts.maxRetainedBytes = opts.maxRetainedBytes or process.SPAWN_RETAINED_BYTES
  local h = self._launch(command, launch_opts)
  self._tracked[h.pid] = h
  self._order[#self._order + 1] = h.pid
  self._dismissed[h.pid] = nil -- the OS may reuse a pid
  return h
end

--- {pid, command, running, exitCode} for each tracked process.
function Manager:list()
  options.self("processes:list", self, Manager)
  local out = {}
  for _, pid in ipairs(self._order) do
    local h = self._tracked[pid]
    out[#out + 1] = {
      pid = pid,
      command = h.command,
      running = h.exitCode == nil,
      exitCode = h.exitCode,
    }
  end
  return out
end

--- The handle of pid. After the process has exited it is returned once
-- (with its output), then forgotten.
function Manager:get(pid)
  options.self("processes:get", self, Manager)
  pid = tostring(pid)
  if self._dismissed[pid] then return nil end
  local h = self._tracked[pid]
  if h ~= nil and h.exitCode ~= nil then
    untrack(self, pid)
    self._dismissed[pid] = true
  end
  return h
end

--- Kill pid and wait for it to end; true if it was running.
function Manager:kill(pid)
  options.self("processes:kill", self, Manager)
  pid = tostring(pid)
  local h = self:get(pid)
  if h == nil or not h:kill() then return false end
  wait_killed(h)
  untrack(self, pid)
  self._dismissed[pid] = true
  return true
end

--- Kill every running process (the sandbox stops); wait for them to end
-- when the caller can wait.
function Manager:killAll()
  local running = {}
  for _, pid in ipairs(self._order) do
    local h = self._tracked[pid]
    if h:kill() then running[#running + 1] = h end
  end
  if task.canWait() then
    for _, h in ipairs(running) do wait_killed(h) end
  end
end

-- }======

return process
