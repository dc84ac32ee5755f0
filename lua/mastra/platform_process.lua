-- The background processes of a PlatformSandbox (processes:spawn): a
-- handle over an executeCommand run as a task, with its retained output,
-- wait, kill, and, where the exec lease advertises "stdin", sendStdin and
-- closeStdin. Split from platform_sandbox.lua, which calls spawn().
--
-- A process is bound to the sandbox it was spawned on (its sandboxId, at
-- once): its task may start after a detach() or a destroy(), and it never
-- provisions a sandbox of its own. keepRunning: detach() hands it over
-- (handOver): its exec sends {"type":"keep_running"}, waits for the
-- platform's {"type":"kept_running"}, and closes; the platform keeps the
-- command running (docs/platform.md).
local core = require "mastra.core"
local errors = require "mastra.errors"
local common = require "mastra.common"
local options = require "mastra.options"
local task = require "mastra.task"
local output = require "mastra.output"

local platform_process = {}

local Handle = { __name = "mastra.PlatformProcessHandle" }

-- stdout and stderr are the handle's retained output (mastra.output)
Handle.__index = output.index(Handle)

local function handed_over_error(h, where)
  errors.MastraError:raise({
    message = ("%s: process %s was left running in sandbox %s by detach() (keepRunning):"
      .. " this handle no longer follows it"):format(where, h.pid, h.sandboxId),
    code = "DETACHED",
  }, 0)
end

function Handle:wait()
  options.self("ProcessHandle:wait", self, Handle)
  self._task:wait()
  if self.handedOver then handed_over_error(self, "ProcessHandle:wait") end
  return self._result
end

--- Closing the exec socket ends the command (the local platform kills its
-- process group). True while it runs, false after it has exited.
function Handle:kill()
  options.self("ProcessHandle:kill", self, Handle)
  if self.exitCode ~= nil or self.error ~= nil or self.handedOver then return false end
  self.killed = true
  return self._task:cancel()
end

-- {====== stdin of a background process ======
--
-- Where the exec lease advertises "stdin", a background command's stdin
-- stays open: sendStdin queues bytes that its exec sends as stdin frames
-- (direct_exec.lua, with the WebSocket's backpressure), closeStdin ends
-- it. Elsewhere the command reads end of file at once, sendStdin raises
-- and closeStdin has nothing to do.

-- sendStdin waits while more than this is queued and not yet sent.
local STDIN_QUEUED_MAX = 1048576

local function new_stdin_queue()
  return { first = 1, last = 0, bytes = 0, closed = false, ended = false,
    ready = {}, room = {} } -- ready, room: the keys woken
end

-- The stdin source of the exec (common.stdinSource's form): the next
-- queued piece, nil once closed, or false and the key to wait on.
local function stdin_feed(q)
  return function()
    if q.first <= q.last then
      local piece = q[q.first]
      q[q.first] = nil
      q.first = q.first + 1
      q.bytes = q.bytes - #piece
      task.wake(q.room)
      return piece
    end
    if q.closed then return nil end
    return false, q.ready
  end
end

local function stdin_closed(h, why)
  errors.MastraError:raise({ message = ("ProcessHandle:sendStdin: process %s %s; its"
    .. " stdin is closed"):format(h.pid, why), code = "EPIPE" }, 0)
end

--- Write data to the process's stdin; waits while more than 1 MiB is
-- queued. Raises where the platform does not take stdin, and once the
-- process has exited or its stdin was closed (code EPIPE).
function Handle:sendStdin(data)
  options.self("ProcessHandle:sendStdin", self, Handle)
  options.arg("ProcessHandle:sendStdin", 1, "data", data, options.string)
  local q = self._stdin
  if q.ended or self.exitCode ~= nil or self.error ~= nil then stdin_closed(self, "has exited") end
  if self._stdinOk == nil then self._stdinOk = self._sandbox:supportsStdin() end
  if not self._stdinOk then
    error("ProcessHandle:sendStdin: this platform does not support stdin (its exec lease"
      .. ' does not advertise the "stdin" capability: the hosted platform closes stdin at'
      .. " once, and the command read end of file). Write the data to a file instead:"
      .. " ws:upload() or the filesystem tools", 2)
  end
  if q.closed then stdin_closed(self, "had closeStdin() called") end
  if data == "" then return end
  q.last = q.last + 1
  q[q.last] = data
  q.bytes = q.bytes + #data
  task.wake(q.ready)
  while q.bytes > STDIN_QUEUED_MAX do
    task.wait(q.room)
    if q.ended then stdin_closed(self, "has exited") end
  end
end

--- Close the process's stdin (the process then reads end of file once
-- what was sent before has gone).
function Handle:closeStdin()
  options.self("ProcessHandle:closeStdin", self, Handle)
  local q = self._stdin
  if q.closed then return end
  q.closed = true
  task.wake(q.ready)
end

-- }======

--- Start `command` in the background on `sandbox` (its
-- processes:spawn, opts validated there): the handle, at once.
function platform_process.spawn(sandbox, command, opts)
  local target = sandbox._sandboxId -- processes:spawn started it
  if opts.keepRunning and not sandbox:_supports(target, "keepRunning") then
    error("processes:spawn: this platform does not support keepRunning (its exec lease"
      .. ' does not advertise the "keepRunning" capability): a process cannot outlive'
      .. " the script there; leave keepRunning out, or run it on the local platform", 0)
  end
  sandbox._pidCounter = sandbox._pidCounter + 1
  local h = setmetatable({
    pid = ("platform-proc-%s-%s"):format(common.base36(core.time()),
      common.base36(sandbox._pidCounter - 1)),
    command = command,
    sandboxId = target,
    keepRunning = opts.keepRunning == true,
    _control = {}, -- direct_exec's: handOver sets release and wakes it
    _out = output.pair(opts.maxRetainedBytes),
  }, Handle)
  -- its rank among the sandbox's processes: a stop kills them in the order
  -- they were spawned (PlatformSandbox's teardown)
  h._rank = sandbox._pidCounter
  sandbox._running = sandbox._running or {}
  sandbox._running[h] = h
  local function out(chunk)
    h._out.stdout:append(chunk)
    if opts.onStdout then opts.onStdout(chunk) end
  end
  local function err(chunk)
    h._out.stderr:append(chunk)
    if opts.onStderr then opts.onStderr(chunk) end
  end
  h._sandbox = sandbox
  h._stdin = new_stdin_queue()
  h._task = task.spawn(function()
    -- the handle keeps the output: the command's own result keeps none
    local ok, r = pcall(function()
      h._stdinOk = sandbox:_supports(target, "stdin")
      return sandbox:_execOn(target, command, nil, {
        cwd = opts.cwd, env = opts.env, timeout = opts.timeout, maxRetainedBytes = 0,
        onStdout = out, onStderr = err,
        stdin = h._stdinOk and stdin_feed(h._stdin) or nil,
        _control = h._control,
      })
    end)
    h._stdin.ended = true
    task.wake(h._stdin.room)
    sandbox._running[h] = nil
    if ok and r.handedOver then
      h.handedOver = true -- running in the sandbox; nobody follows it
      return
    end
    if ok then
      h.exitCode = r.exitCode
      h._result = output.fill(r, h._out.stdout, h._out.stderr)
      return
    end
    if errors.CancelledError:is(r) and h.killed then
      -- killed through the handle: a result, as for a local process
      h.exitCode = 137
      h._result = output.fill({ exitCode = 137, success = false, timedOut = false,
        killed = true, command = command }, h._out.stdout, h._out.stderr)
      return
    end
    h.error = r -- reported honestly: exited with an error, not running
    error(r, 0)
  end)
  return h
end

--- detach(): hand h over to the platform if it is a keepRunning process
-- that still runs (true), else nothing (false: a process that ends with
-- its exec goes on in the detached sandbox, followed by its handle).
function platform_process.handOver(h)
  if not h.keepRunning or h.exitCode ~= nil or h.error ~= nil or h.killed then
    return false
  end
  h._control.release = true
  task.wake(h._control)
  return true
end

--- Wait until the platform has h (or it ended meanwhile).
function platform_process.waitHandedOver(h)
  pcall(h._task.wait, h._task)
end

return platform_process
