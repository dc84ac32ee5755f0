-- LocalSandbox: the sandbox interface on the host, no platform (upstream's
-- LocalSandbox).
--
-- Commands run as `/bin/sh -c <command line>` in their own process group,
-- in `workingDirectory`, with PATH plus the configured env (not the whole
-- parent environment).
local core = require "mastra.core"
local errors = require "mastra.errors"
local common = require "mastra.common"
local options = require "mastra.options"
local process = require "mastra.process"
local shell = require "mastra.shell"
local task = require "mastra.task"

local LocalSandbox = { __name = "mastra.LocalSandbox" }
LocalSandbox.__index = LocalSandbox

local DEFAULT_TIMEOUT = 30000
local DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
local launched = 0 -- commands started by every LocalSandbox: each one's rank

local NEW_OPTS = {
  id = options.string,
  workingDirectory = options.string,
  env = options.env,
  timeout = options.ms,
  instructions = options.string_or_function,
}

local function cwd_or_fail(where)
  local dir, err, name = core.getcwd()
  if not dir then
    errors.MastraError:raise({ message = ("%s: %s (the directory was removed? cd to an existing"
      .. " one, or give an absolute workingDirectory)"):format(where, err), code = name }, 0)
  end
  return dir
end

local function absolute(base, path)
  if path:sub(1, 1) == "/" then return path end
  return (base:gsub("/+$", "")) .. "/" .. path
end

local function copy_env(env)
  local out = {}
  for k, v in pairs(env or {}) do out[k] = tostring(v) end
  return out
end

function LocalSandbox.new(opts)
  opts = options.check("LocalSandbox.new", opts, NEW_OPTS)
  local dir = opts.workingDirectory
  if dir == nil then dir = ".sandbox" end
  local self = setmetatable({
    id = opts.id or common.newId("local-sandbox"),
    name = "LocalSandbox",
    provider = "local",
    status = "pending",
    workingDirectory = absolute(cwd_or_fail("LocalSandbox.new"), dir),
    env = copy_env(opts.env),
    timeout = opts.timeout or DEFAULT_TIMEOUT,
    _instructions = opts.instructions,
    _live = {}, -- handles of running executeCommand calls -> their rank
  }, LocalSandbox)
  self.processes = process.newManager(self, function(command, o)
    return process.background(self:_launch(command, o, o.timeout, true))
  end)
  return self
end

local function check_self(where, self)
  options.self(where, self, LocalSandbox, 4) -- not a tail call: level 4 is the caller
  return self
end

--- Start a process in this sandbox (shell text, already quoted).
function LocalSandbox:_launch(command, opts, timeout, stdin)
  local env = { PATH = os.getenv("PATH") or DEFAULT_PATH }
  for k, v in pairs(self.env) do env[k] = v end
  for k, v in pairs(opts.env or {}) do env[k] = tostring(v) end
  local live = self._live
  local h = process.start{
    command = command,
    cwd = opts.cwd and absolute(self.workingDirectory, opts.cwd) or self.workingDirectory,
    env = env,
    stdin = stdin,
    timeout = timeout,
    maxRetainedBytes = opts.maxRetainedBytes,
    onStdout = opts.onStdout,
    onStderr = opts.onStderr,
    onExit = function(handle) live[handle] = nil end,
  }
  launched = launched + 1
  live[h] = launched -- its rank: a stop kills in the order they started
  return h
end

function LocalSandbox:start()
  check_self("LocalSandbox:start", self)
  if self.status == "destroyed" then
    errors.SandboxNotReadyError:raise({
      message = "Cannot start a destroyed sandbox: " .. self.id, id = self.id,
    }, 2)
  end
  if self.status == "running" then return end
  self.status = "starting"
  local ok, err, name = core.fsMkdir(self.workingDirectory, true)
  if not ok then
    self.status = "error"
    errors.forCode(name):raise({
      message = ("LocalSandbox:start: cannot create the working directory %s: %s")
        :format(self.workingDirectory, err),
      path = self.workingDirectory, code = name,
    }, 0)
  end
  self.createdAt = self.createdAt or core.time()
  self.status = "running"
end

function LocalSandbox:_ensureRunning()
  local s = self.status
  if s == "destroyed" or s == "destroying" then
    errors.SandboxNotReadyError:raise({
      message = "Sandbox is not ready: " .. self.id .. " (it was destroyed)",
      id = self.id,
    }, 3)
  end
  if s ~= "running" and s ~= "stopping" then self:start() end
end

-- Kill what runs: background processes and commands in flight.
local function kill_everything(self)
  self.processes:killAll()
  local running = {}
  for _, h in ipairs(common.inOrder(self._live)) do
    if h:kill() then running[#running + 1] = h end
  end
  if task.canWait() then
    for _, h in ipairs(running) do
      while h.exitCode == nil and h._proc do task.wait(h._proc:id()) end
    end
  end
end

--- Stop: kill every running process. Files stay; start() runs again.
function LocalSandbox:stop()
  check_self("LocalSandbox:stop", self)
  local s = self.status
  if s ~= "running" and s ~= "starting" and s ~= "error" then return end
  self.status = "stopping"
  kill_everything(self)
  self.status = "stopped"
end

--- Destroy: stop, and refuse to start again. The working directory stays
-- (it is the user's directory, not ours).
function LocalSandbox:destroy()
  check_self("LocalSandbox:destroy", self)
  if self.status == "destroyed" then return end
  if self.status ~= "pending" then
    self.status = "destroying"
    kill_everything(self)
  end
  self.status = "destroyed"
end

-- `local sb <close>`: destroy at the end of the scope. In a failed or
-- cancelled task (nothing can wait there) the process groups are signalled
-- now, and a teardown task (mastra.task) waits until they are reaped.
function LocalSandbox.__close(self)
  if task.canWait() or self.status == "destroyed" then return self:destroy() end
  if self.status ~= "pending" then
    kill_everything(self) -- signals only: nothing waits here
    task.teardown(LocalSandbox.destroy, self)
  else
    self.status = "destroyed"
  end
end

function LocalSandbox.__tostring(self)
  return ("mastra.LocalSandbox: %s (%s)"):format(self.id, self.status)
end

--- Run `command` (shell text) with `args` (quoted, each one argument).
-- Returns {stdout, stderr, exitCode, success, executionTimeMs, timedOut,
-- killed, command, args, stdoutTruncated, stderrTruncated,
-- stdoutDroppedBytes, stderrDroppedBytes}. A timeout kills the process group
-- and returns exitCode 124 with the output received so far.
function LocalSandbox:executeCommand(command, args, opts)
  local where = "LocalSandbox:executeCommand"
  opts = common.checkExec(where, LocalSandbox, self, command, args, opts)
  self:_ensureRunning()
  local timeout = opts.timeout
  if timeout == nil then timeout = self.timeout end
  local h <close> = self:_launch(shell.commandLine(command, args), opts, timeout,
    opts.stdin ~= nil)
  if opts.stdin == nil then
    process.pump(h)
    return h:result(args)
  end
  -- stdin goes in from a task of its own while this one reads the output
  local feed = common.stdinSource(opts.stdin)
  local writer = task.spawn(function()
    while true do
      local chunk = feed()
      if chunk == nil then break end
      local ok, err = pcall(h.sendStdin, h, chunk)
      if not ok then
        -- the command stopped reading (EPIPE) or exited: the rest is dropped,
        -- as a shell pipe drops it
        if errors.MastraError:is(err)
            and (err.code == "EPIPE" or err.code == "EBADF" or h.exitCode ~= nil) then
          break
        end
        error(err, 0)
      end
    end
    h:closeStdin()
  end)
  local ok, err = pcall(process.pump, h)
  if not ok then
    writer:cancel()
    error(err, 0)
  end
  local wok, werr = pcall(writer.wait, writer)
  if not wok then error(werr, 0) end
  return h:result(args)
end

--- Commands here always take stdin.
function LocalSandbox.supportsStdin(self)
  check_self("LocalSandbox:supportsStdin", self)
  return true
end

function LocalSandbox:getInfo()
  check_self("LocalSandbox:getInfo", self)
  return {
    id = self.id,
    name = self.name,
    provider = self.provider,
    status = self.status,
    createdAt = self.createdAt or core.time(),
    metadata = { workingDirectory = self.workingDirectory },
  }
end

function LocalSandbox:getInstructions()
  check_self("LocalSandbox:getInstructions", self)
  local default = ('Local command execution. Working directory: "%s".')
    :format(self.workingDirectory)
  local text = common.instructions("LocalSandbox:getInstructions", self._instructions, default)
  return text -- not a tail call: errors point at the caller
end

return LocalSandbox
