-- PlatformSandbox: a remote sandbox of a Mastra Platform environment: the
-- control plane, direct exec, the process manager, errors, identity and
-- status of upstream's client (docs/api.md "PlatformSandbox").
--
-- start() provisions (POST /sandbox, 5xx retried) or reattaches
-- (GET /sandbox/:id); executeCommand() runs over the direct-exec WebSocket
-- with a cached, coalesced exec lease and at most two attempts; destroy()
-- (and its alias stop()) releases the VM and keeps the checkpoint of a
-- stable `id`, so a later start() provisions again from it;
-- destroy{keepCheckpoint = false} deletes the checkpoint first.
local core = require "mastra.core"
local errors = require "mastra.errors"
local common = require "mastra.common"
local options = require "mastra.options"
local shell = require "mastra.shell"
local task = require "mastra.task"
local client = require "mastra.platform_client"
local process = require "mastra.process"
local platform_process = require "mastra.platform_process"
local platform_exec = require "mastra.platform_exec"
local Template = require "mastra.template"
local egress = require "mastra.platform_egress"

local PlatformSandbox = { __name = "mastra.PlatformSandbox" }

-- An idle handle stays small (at most 1 KiB; bench/platform.lua measures
-- 10,000): what every handle shares lives in the class (name, provider,
-- the defaults), equal settings share one cfg table (intern_cfg), and
-- `env` and `processes` are made on first use.
PlatformSandbox.name = "PlatformSandbox"
PlatformSandbox.provider = "platform"
PlatformSandbox._pidCounter = 0

local lazy = {}

PlatformSandbox.__index = function(self, k)
  local v = PlatformSandbox[k]
  if v ~= nil then return v end
  -- the platform's id of the sandbox, only while it runs (upstream's
  -- getter): a constructor hint is not reported until the platform has
  -- confirmed it, and nothing after destroy, detach or a 410
  if k == "sandboxId" then
    if rawget(self, "status") == "running" then return rawget(self, "_sandboxId") end
    return nil
  end
  local make = lazy[k]
  if make then
    v = make(self)
    rawset(self, k, v)
    return v
  end
  return nil
end

local CREATE_ATTEMPTS = 3
-- An `id` the caller gave (new, or clone's id / checkpointName) is said to
-- be explicit at create: the local platform then keeps its checkpoint for
-- its full retention even before a create has restored it (an id made up
-- here is never looked up again; docs/platform.md "Checkpoints"). Other
-- platforms ignore the header.
local EXPLICIT_KEY_HEADERS = { ["x-mastra-recovery-key"] = "explicit" }
local DEFAULT_RETRY_DELAY_MS = 2000
PlatformSandbox._retryDelay = DEFAULT_RETRY_DELAY_MS

local function network(v)
  return v == "ISOLATED" or v == "PRIVATE", '"ISOLATED" or "PRIVATE"'
end

local NEW_OPTS = {
  accessToken = options.string,
  projectId = options.string,
  environmentId = options.string,
  sandboxId = options.string,
  idleTimeoutMinutes = options.ms,
  networkIsolation = network,
  env = options.env,
  timeout = options.ms,
  instructions = options.string_or_function,
  id = options.string,
  sandboxProvider = options.string,
  actingUserId = options.string,
  sessionId = options.string,
  threadId = options.string,
  fetch = options.func,
  workingDirectory = options.string,
  seedCheckpointName = options.string,
  createRetryDelayMs = options.ms,
  handshakeTimeout = options.ms,
  execDetachTimeout = function(v)
    return math.type(v) == "integer" and v >= 1000 and v <= 3600000,
      "an integer number of milliseconds from 1000 to 3600000 (an hour)"
  end,
  execKeepalive = function(v)
    return math.type(v) == "integer" and (v == 0 or (v >= 100 and v <= 3600000)),
      "0 (off) or an integer number of milliseconds from 100 to 3600000 (an hour)"
  end,
  requestTimeout = options.ms,
  proxyUrl = options.string,
  template = function(v) return Template.is(v), "a mastra.Template" end,
  templateTimeout = options.ms,
  egress = egress.check,
}

local CLONE_OPTS = {
  id = options.string,
  checkpointName = options.string,
  sandboxId = options.string,
  env = options.env,
  idleTimeoutMinutes = options.ms,
  actingUserId = options.string,
  seedCheckpointName = options.string,
}

local DESTROY_OPTS = {
  keepCheckpoint = options.boolean,
}

-- processes:spawn's options here: those of executeCommand without stdin,
-- and keepRunning (a process that detach() leaves running)
PlatformSandbox._spawnOptions = { keepRunning = options.boolean }
for k, v in pairs(common.SPAWN_OPTS) do PlatformSandbox._spawnOptions[k] = v end

local function copy_env(env)
  if env == nil or next(env) == nil then return nil end -- made on first use
  local out = {}
  for k, v in pairs(env) do out[k] = tostring(v) end
  return out
end

function lazy.env() return {} end

-- One cfg table for every handle with the same settings (handles never
-- change theirs: clone copies before it changes one).
local cfgs = setmetatable({}, { __mode = "v" })
local CFG_KEYS = { "accessToken", "baseUrl", "projectId", "provider", "requestTimeout",
  "actingUserId", "sessionId", "threadId", "fetch", "defaultEnvironmentId",
  "defaultBucketName" }

local function intern_cfg(cfg)
  local parts = {}
  for i, k in ipairs(CFG_KEYS) do parts[i] = tostring(cfg[k]) end
  for k in pairs(cfg) do
    if type(k) ~= "string" then return cfg end
  end
  local key = table.concat(parts, "\0")
  local known = cfgs[key]
  if known then
    for k, v in pairs(cfg) do
      if known[k] ~= v then return cfg end -- a key not in CFG_KEYS differs
    end
    return known
  end
  cfgs[key] = cfg
  return cfg
end

local function check_self(where, self)
  options.self(where, self, PlatformSandbox, 4) -- not a tail call: level 4
  return self
end

local construct

function PlatformSandbox.new(opts)
  local where = "PlatformSandbox.new"
  opts = options.check(where, opts, NEW_OPTS)
  return construct(opts, client.resolve(opts, where), where)
end

function construct(opts, cfg, where)
  local envId = opts.environmentId or os.getenv("MASTRA_ENVIRONMENT_ID")
  if envId == nil or envId == "" then envId = cfg.defaultEnvironmentId or "" end
  if envId == "" and opts.sandboxId == nil then
    error(where .. ": environmentId is required (option environmentId, or set"
      .. " MASTRA_ENVIRONMENT_ID)", 3)
  end
  local self = setmetatable({
    id = opts.id or common.newId("platform-sandbox"),
    status = "pending",
    _sandboxId = opts.sandboxId,
    environmentId = envId,
    idleTimeoutMinutes = opts.idleTimeoutMinutes,
    networkIsolation = opts.networkIsolation,
    env = copy_env(opts.env),
    timeout = opts.timeout,
    workingDirectory = opts.workingDirectory,
    seedCheckpointName = opts.seedCheckpointName,
    template = opts.template,
    _opts = opts,
    _cfg = intern_cfg(cfg),
    _instructions = opts.instructions,
    _retryDelay = opts.createRetryDelayMs,
    _handshakeTimeout = opts.handshakeTimeout,
    _detachTimeout = opts.execDetachTimeout,
    _keepalive = opts.execKeepalive,
  }, PlatformSandbox)
  return self
end

function lazy.processes(self)
  return process.newManager(self, function(command, o)
    return self:_spawnProcess(command, o)
  end)
end

-- {====== lifecycle ======

local function create(self)
  if self.environmentId == "" then
    error("PlatformSandbox:start: environmentId is required (option environmentId, or set"
      .. " MASTRA_ENVIRONMENT_ID)", 0)
  end
  local body = setmetatable({
    id = self.id,
    seedCheckpointName = self.seedCheckpointName,
    environmentId = self.environmentId,
    idleTimeoutMinutes = self.idleTimeoutMinutes,
    networkIsolation = self.networkIsolation,
    env = self.env,
  }, { __jsonorder = { "id", "seedCheckpointName", "templateDefinition",
    "templateBuildEnvs", "environmentId", "idleTimeoutMinutes",
    "networkIsolation", "env" } })
  -- a create without a template waits too: the checkpoint it restores may
  -- need its template rebuilt (docs/platform.md "Templates")
  local tpl_wait = Template._createWait(self._opts.templateTimeout)
  if self.template then
    body.templateDefinition = self.template:definition()
    body.templateBuildEnvs = self.template:buildEnvs()
  end
  local res, j
  repeat
    res = nil
    for attempt = 1, CREATE_ATTEMPTS do
      -- a fresh connection: never sent twice by libcurl (docs/platform.md)
      local ok, r = pcall(client.request, self._cfg, "POST", "/sandbox",
        { json = body, freshConnection = true, headers = self._opts.id ~= nil
          and EXPLICIT_KEY_HEADERS or nil })
      if ok then
        res = r
        break
      end
      if errors.PlatformApiError:is(r) and r.code == "template_build_failed" then
        errors.PlatformTemplateBuildError:raise({
          message = "Sandbox template build failed: " .. tostring(r.proxyMessage),
          buildError = r.proxyMessage, status = r.status, body = r.body,
        }, 0)
      end
      if not (errors.PlatformApiError:is(r) and r.status >= 500)
          or attempt == CREATE_ATTEMPTS then
        error(r, 0)
      end
      task.sleep(self._retryDelay * attempt)
    end
    j = res.json or {}
    -- the template is still building: no sandbox yet; ask again after
    -- retryAfterMs (template.lua, docs/platform.md "Templates")
  until not (j.id == nil and type(j.templatePending) == "table"
    and tpl_wait(j.templatePending))
  if type(j.id) ~= "string" then
    errors.PlatformApiError:raise({
      message = "the platform answered POST /sandbox without an id",
      status = res.status, body = res.body,
    }, 0)
  end
  self._sandboxId = j.id
  self.createdAt = j.createdAt or core.time()
  self.templatePending = j.templatePending
  self.instanceUrl = j.instanceUrl
  -- getOrCreate: the platform answered with the live sandbox of this id
  -- (a retried create, another instance with the same id: one sandbox)
  if j.outcome == "connected" then return { outcome = "connected" } end
  -- a restore is still a creation: code written for upstream's two
  -- outcomes keeps working (docs/decisions.md)
  if j.restoredFromCheckpoint == true then
    return { outcome = "created", restored = true,
      checkpointName = type(j.restoredCheckpointName) == "string"
        and j.restoredCheckpointName or nil }
  end
  return { outcome = "created" }
end

local function do_start(self)
  self.status = "starting"
  local ok, res = pcall(function()
    if self._sandboxId then
      local gok, r = pcall(client.request, self._cfg, "GET",
        "/sandbox/" .. client.encodeComponent(self._sandboxId))
      if gok and not (r.json and r.json.destroyedAt) then
        self.createdAt = (r.json and r.json.createdAt) or self.createdAt
        return { outcome = "connected" }
      end
      -- 404, or 410 sandbox_destroyed (upstream's newer rule): provision
      if not gok and not (errors.PlatformApiError:is(r)
          and (r.status == 404 or client.isDestroyed(r))) then
        error(r, 0)
      end
      self._sandboxId = nil
      self._lease = nil
    end
    local made = create(self)
    if self._opts.egress then egress.start(self, made) end
    return made
  end)
  if not ok then
    self.status = "error"
    error(res, 0)
  end
  self.status = "running"
  return res
end

--- Provision the sandbox, or reattach to `sandboxId`. Returns
-- {outcome = "created" | "connected"}; a creation that restored a
-- checkpoint adds restored = true and its checkpointName. Concurrent calls
-- share one request.
function PlatformSandbox:start()
  check_self("PlatformSandbox:start", self)
  if self.status == "running" then return { outcome = "connected" } end
  if self.status == "detached" then
    errors.SandboxNotReadyError:raise({
      message = ("PlatformSandbox:start: %s was detached (from %s): this object no longer"
        .. " holds a sandbox; PlatformSandbox.new{sandboxId = ...} attaches to it again")
        :format(self.id, self._detachedId or "no sandbox"),
      id = self.id,
    }, 2)
  end
  -- shielded: a start cancelled halfway could leave a sandbox that nobody
  -- knows of; it finishes, and the owner's teardown destroys what it made
  return task.shared(self, "_starting", function() return do_start(self) end,
    task.spawnShielded)
end

-- Why a command cannot run on this object now (nil: it can, starting
-- it if needed): destroyed (a start() provisions again), detached.
local function not_ready_reason(self)
  local s = self.status
  if s == "destroyed" or s == "destroying" then
    return "it was destroyed (sb:start() provisions it again, from the checkpoint of its id)"
  elseif s == "detached" then
    return ("it was detached (from %s): PlatformSandbox.new{sandboxId = ...} attaches"
      .. " to that sandbox"):format(self._detachedId or "no sandbox")
  end
  return nil
end

function PlatformSandbox:_ensureRunning(command)
  local why = not_ready_reason(self)
  if why then
    errors.SandboxNotReadyError:raise({
      message = ("Sandbox is not ready: %s (%s)"):format(self.id, why),
      id = self.id, command = command,
    }, 3)
  end
  if self.status ~= "running" and self.status ~= "stopping" then
    self:start()
  end
  if self._sandboxId == nil then
    errors.SandboxNotReadyError:raise({
      message = "Sandbox is not ready: " .. self.id, id = self.id, command = command,
    }, 3)
  end
end

-- DELETE /sandbox/:id/checkpoint for the recovery key, as upstream's
-- destroy sends it: nil, or the error to raise once the sandbox is gone
-- (404 and 410 mean there is nothing to delete).
local function delete_checkpoint(self, id)
  local ok, err = pcall(client.request, self._cfg, "DELETE",
    "/sandbox/" .. client.encodeComponent(id) .. "/checkpoint",
    { json = { id = self.id }, expectJson = false })
  if ok or (errors.PlatformApiError:is(err) and (err.status == 404 or client.isDestroyed(err))) then
    return nil
  end
  return err
end

local holds_remote, queue_teardown, missing_cwd

-- A background process's rank among the sandbox's (platform_process.lua).
local function rank_of(h) return h._rank end

local function teardown(self, final_status, drop_checkpoint)
  check_self("PlatformSandbox:" .. (final_status == "stopped" and "stop" or "destroy"), self)
  -- detached: nothing here is this object's any more (what it started
  -- goes on in the detached sandbox)
  if self.status == "detached" then return end
  if not task.canWait() and holds_remote(self) then
    -- a failing task's <close> (this sandbox's, or that of an object that
    -- owns it), a finalizer: nothing can wait here, the teardown queue does it
    queue_teardown(self, final_status, drop_checkpoint)
    return
  end
  if self._starting then pcall(self._starting.wait, self._starting) end
  local id = self._sandboxId
  for _, h in ipairs(common.inOrder(self._running, rank_of)) do h:kill() end
  if id == nil then
    self._teardownQueued = nil
    if self.status ~= "pending" or final_status == "destroyed" then
      self.status = final_status
    end
    return
  end
  self.status = final_status == "stopped" and "stopping" or "destroying"
  local ckpt_err = drop_checkpoint and delete_checkpoint(self, id)
  local ok, err = pcall(client.request, self._cfg, "DELETE",
    "/sandbox/" .. client.encodeComponent(id), { expectJson = false })
  -- from here a finalizer may queue the teardown again (if it failed)
  self._teardownQueued = nil
  self._lease = nil
  if not ok and not (errors.PlatformApiError:is(err)
      and (err.status == 404 or client.isDestroyed(err))) then
    -- the sandbox may still be there: sandboxId stays, so that a later
    -- destroy (the teardown queue's, at the latest at exit) sends it again
    self.status = "error"
    error(err, 0)
  end
  self._sandboxId = nil
  self.createdAt = nil
  self.status = final_status
  if ckpt_err then error(ckpt_err, 0) end
end

--- Release the remote sandbox (DELETE /sandbox/:id). The checkpoint of a
-- stable `id` is kept: a later start() provisions again from it. With
-- {keepCheckpoint = false}, DELETE /sandbox/:id/checkpoint goes first (as
-- upstream's destroy sends it), and the next start() begins empty.
function PlatformSandbox:destroy(opts)
  opts = options.check("PlatformSandbox:destroy", opts, DESTROY_OPTS)
  return teardown(self, "destroyed", opts.keepCheckpoint == false)
end

--- The same as destroy() on the wire; the status says "stopped".
function PlatformSandbox:stop()
  return teardown(self, "stopped")
end

--- Let go of the remote sandbox without destroying it: this object
-- forgets it (status "detached"), so neither `<close>`, the finalizer nor
-- the exit destroys it. Returns its sandboxId, which a later
-- PlatformSandbox.new{sandboxId = id} attaches to. The platform's idle
-- timeout still applies. What the object started goes on in that
-- sandbox: commands and background processes run there to their end
-- (each is bound to its sandbox when it starts), and those spawned with
-- keepRunning = true are handed to the platform, which keeps them running
-- after the script (detach waits until it has them). Later commands,
-- spawns and start() raise SandboxNotReadyError.
function PlatformSandbox:detach()
  check_self("PlatformSandbox:detach", self)
  if self._starting then pcall(self._starting.wait, self._starting) end
  local id = self._sandboxId
  self._sandboxId = nil
  self._lease = nil
  self._detachedId = id
  self.status = "detached"
  local handed = {}
  for _, h in ipairs(common.inOrder(self._running, rank_of)) do
    if platform_process.handOver(h) then handed[#handed + 1] = h end
  end
  if task.canWait() then
    for _, h in ipairs(handed) do platform_process.waitHandedOver(h) end
  end
  return id
end

-- Whether the platform may hold a sandbox of this object.
function holds_remote(self)
  return self._sandboxId ~= nil or self._starting ~= nil
end

-- Hand the teardown to the queue of the scheduler (once).
local function destroy_dropping(self)
  return PlatformSandbox.destroy(self, { keepCheckpoint = false })
end

function queue_teardown(self, final_status, drop_checkpoint)
  if holds_remote(self) and not self._teardownQueued then
    self._teardownQueued = true
    -- the task is what waitTeardown() waits for
    self._teardownTask = task.teardown(final_status == "stopped" and PlatformSandbox.stop
      or drop_checkpoint and destroy_dropping or PlatformSandbox.destroy, self)
  end
end

--- Whether a start() is under way: until it ends, a sandbox it provisions
-- may exist on the platform before `sandboxId` says so.
function PlatformSandbox:isStarting()
  check_self("PlatformSandbox:isStarting", self)
  return self._starting ~= nil
end

--- Wait until the destroy that this sandbox handed to the teardown queue
-- (its `<close>` left by an error, a cancellation) has finished, at most
-- timeoutMs (default: no limit). True once it has finished, or if none was
-- queued; false if timeoutMs passed first. It waits on the teardown task
-- itself (and a timer): no polling.
function PlatformSandbox:waitTeardown(timeoutMs)
  local where = "PlatformSandbox:waitTeardown"
  check_self(where, self)
  if timeoutMs ~= nil then options.arg(where, 1, "timeoutMs", timeoutMs, options.ms) end
  local t = self._teardownTask
  if t == nil then return true end
  local deadline = timeoutMs and core.now() + timeoutMs
  while not t:done() do
    if deadline == nil then
      task.waitAs(where, t)
    else
      local left = deadline - core.now()
      if left <= 0 then return false end
      local timer <close> = core.timer(math.ceil(left))
      task.waitAs(where, t, timer:id())
    end
  end
  if self._teardownTask == t then self._teardownTask = nil end
  return true
end

-- `local sb <close>`: destroy at the end of the scope. When the scope ends
-- by an error (a failed or cancelled task, where nothing can wait, or an
-- error in a plain lua5.4 chunk), the destroy goes to the teardown queue
-- (mastra.task), which runs it in a task of its own and bounds the wait
-- for it at exit.
function PlatformSandbox.__close(self, err)
  if err ~= nil then
    queue_teardown(self, "destroyed")
  else
    self:destroy()
  end
end

-- A started sandbox that is collected (or still referenced when the Lua
-- state closes) is destroyed: the finalizer only queues the teardown. A
-- teardown already queued is the queue's (which starts it again at the
-- close of the state). A destroy under way in a task of the program is
-- seen here only at the close of the state, where its request has been
-- finalized: it is sent again.
function PlatformSandbox.__gc(self)
  if holds_remote(self) and not self._teardownQueued then
    task.teardownCollected(PlatformSandbox.destroy, self)
  end
end

function PlatformSandbox.__tostring(self)
  return ("mastra.PlatformSandbox: %s (%s%s)"):format(self.id, self.status,
    self._sandboxId and ", " .. self._sandboxId or "")
end

-- }======

-- {====== commands ======

-- the exec channel (leases, the retry policy, capabilities):
-- mastra.platform_exec
PlatformSandbox._ensureLease = platform_exec.ensureLease
PlatformSandbox._runDirectExec = platform_exec.runDirectExec
PlatformSandbox._supports = platform_exec.supports
PlatformSandbox._limit = platform_exec.limit

-- The platform could not enter the command's cwd (exit 127, and the
-- local platform's message on stderr: "cannot run in directory '...':
-- <strerror>"): the error a LocalSandbox raises for it. Elsewhere (a
-- platform that says nothing) the exit code stands.
local CWD_ERRORS = {
  ["No such file or directory"] = { errors.DirectoryNotFoundError, "ENOENT", "does not exist" },
  ["Not a directory"] = { errors.DirectoryNotFoundError, "ENOTDIR", "is not a directory" },
  ["Permission denied"] = { errors.PermissionError, "EACCES",
    "cannot be entered (permission denied)" },
}
-- mastra-ns-init names the errno (the server's own check says strerror's
-- text): the first command of a sandbox whose init is still starting
CWD_ERRORS.ENOENT = CWD_ERRORS["No such file or directory"]
CWD_ERRORS.ENOTDIR = CWD_ERRORS["Not a directory"]
CWD_ERRORS.EACCES = CWD_ERRORS["Permission denied"]

function missing_cwd(full, cwd, stderr)
  local seen, why = (stderr or ""):match("^[%w%-]*:? ?cannot run in directory '(.-)': ([^\n]+)\n?$")
  local e = why and CWD_ERRORS[why]
  if not e then return end
  e[1]:raise({
    message = ("cannot run %q: the working directory %s %s in the sandbox (%s; create it,"
      .. " or give an existing cwd)"):format(full, cwd, e[3], seen),
    path = cwd, code = e[2],
  }, 0)
end

local function merged_env(self, extra)
  local env, n = {}, 0
  for k, v in pairs(self.env) do env[k] = v; n = n + 1 end
  for k, v in pairs(extra or {}) do env[k] = tostring(v); n = n + 1 end
  if n == 0 then return nil end
  return env
end

--- Whether commands may be given stdin here: the exec lease of the
-- platform lists "stdin" in its capabilities (the local platform does, the
-- hosted one does not). Starts the sandbox and fetches a lease.
function PlatformSandbox:supportsStdin()
  check_self("PlatformSandbox:supportsStdin", self)
  self:_ensureRunning("supportsStdin")
  return self:_supports(self._sandboxId, "stdin")
end

--- The bytes of NAME=value strings an exec's env may hold here, as the
-- exec lease states it (the local platform does), or nil (unstated: the
-- hosted platform). Starts the sandbox and fetches a lease.
function PlatformSandbox:_execEnvBytes()
  check_self("PlatformSandbox:_execEnvBytes", self)
  self:_ensureRunning("_execEnvBytes")
  return self:_limit(self._sandboxId, "execEnvBytes")
end

--- Run `command` (shell text) with `args` (each quoted as one argument) in
-- the sandbox. Returns {stdout, stderr, exitCode, success,
-- executionTimeMs, timedOut, command, args, stdoutTruncated,
-- stderrTruncated, stdoutDroppedBytes, stderrDroppedBytes}; a timeout gives
-- exitCode 124. opts.stdin (bytes, or a function returning chunks) is
-- streamed where the platform advertises stdin, and an error elsewhere.
function PlatformSandbox:executeCommand(command, args, opts)
  local where = "PlatformSandbox:executeCommand"
  opts = common.checkExec(where, PlatformSandbox, self, command, args, opts)
  local started = core.now()
  local full = shell.commandLine(command, args)
  self:_ensureRunning(full)
  local target = self._sandboxId
  if opts.stdin ~= nil and not self:_supports(target, "stdin") then
    error(where .. ": this platform does not support stdin (its exec lease does not"
      .. ' advertise the "stdin" capability: the hosted platform closes stdin at once).'
      .. " Write the data to a file instead: ws:upload() or the filesystem tools,"
      .. " or a here-document in the command", 2)
  end
  return self:_execOn(target, full, args, opts, started)
end

--- executeCommand's work on the sandbox `target` (no start, no checks of
-- the options: the caller did them; a background process runs here).
function PlatformSandbox:_execOn(target, full, args, opts, started)
  started = started or core.now()
  local timeout = opts.timeout
  if timeout == nil then timeout = self.timeout end
  local cwd = opts.cwd or self.workingDirectory
  if cwd == "" then cwd = nil end
  local r = self:_runDirectExec(target, full, cwd, merged_env(self, opts.env), timeout, opts)
  if r.handedOver then return r end
  local code = r.exitCode or 124
  if code == 127 and cwd and not r.timedOut then missing_cwd(full, cwd, r.stderr) end
  return {
    stdout = r.stdout, stderr = r.stderr, exitCode = code, success = code == 0,
    executionTimeMs = math.floor(core.now() - started), timedOut = r.timedOut,
    killed = r.timedOut, -- the timeout ended it (the socket's close kills it)
    command = full, args = args,
    stdoutTruncated = r.stdoutTruncated, stderrTruncated = r.stderrTruncated,
    stdoutDroppedBytes = r.stdoutDroppedBytes, stderrDroppedBytes = r.stderrDroppedBytes,
    execId = r.execId, reattaches = r.reattaches, -- exec-resume/1 only
  }
end

-- }======

-- {====== processes ======

--- A background command (processes:spawn): mastra.platform_process.
function PlatformSandbox:_spawnProcess(command, opts)
  return platform_process.spawn(self, command, opts)
end

-- }======

-- {====== clone, info, instructions ======

--- An unstarted sibling with the same settings (no I/O). id = opts.id or
-- opts.checkpointName (a stable recovery key), else a fresh one.
function PlatformSandbox:clone(opts)
  check_self("PlatformSandbox:clone", self)
  opts = options.check("PlatformSandbox:clone", opts, CLONE_OPTS)
  local o = {}
  for k, v in pairs(self._opts) do o[k] = v end
  o.id = opts.id or opts.checkpointName
  o.sandboxId = opts.sandboxId
  o.env = opts.env or self._opts.env
  o.idleTimeoutMinutes = opts.idleTimeoutMinutes or self.idleTimeoutMinutes
  o.actingUserId = opts.actingUserId or self._opts.actingUserId
  o.seedCheckpointName = opts.seedCheckpointName or self.seedCheckpointName
  o.environmentId = self.environmentId
  local cfg = {}
  for k, v in pairs(self._cfg) do cfg[k] = v end
  cfg.actingUserId = o.actingUserId
  return construct(o, cfg, "PlatformSandbox:clone")
end

--- What the sandbox is. Until it runs (before start(), after destroy(),
-- detach() or a 410) it answers here, with no request, as upstream's
-- newer client does; while it runs, from GET /sandbox/:id. A sandbox the
-- platform says was destroyed raises SandboxDestroyedError (and the next
-- start() provisions again).
function PlatformSandbox:getInfo()
  check_self("PlatformSandbox:getInfo", self)
  local id = self._sandboxId
  if id == nil or self.status ~= "running" then
    return { id = self.id, name = self.name, provider = self.provider,
      status = self.status, createdAt = self.createdAt or core.time() }
  end
  local ok, res = pcall(client.request, self._cfg, "GET",
    "/sandbox/" .. client.encodeComponent(id))
  if not ok then
    if client.isDestroyed(res) and self._sandboxId == id then
      self._sandboxId = nil
      self._lease = nil
      self.status = "stopped"
    end
    if client.isDestroyed(res) then
      errors.SandboxDestroyedError:raise({
        message = ("Sandbox %s was destroyed; GET /sandbox/%s returned %d%s"):format(id, id,
          res.status, res.code and " " .. res.code or ""),
        sandboxId = id, attempts = 1, status = res.status, code = res.code,
      }, 2)
    end
    error(res, 0)
  end
  local j = res.json or {}
  return {
    id = j.id, name = self.name, provider = self.provider, status = self.status,
    createdAt = j.createdAt or self.createdAt or core.time(),
    metadata = { sandboxId = j.id, providerResourceId = j.providerResourceId,
      platformStatus = j.status, restoredFromCheckpoint = j.restoredFromCheckpoint == true,
      restoredCheckpointName = type(j.restoredCheckpointName) == "string"
        and j.restoredCheckpointName or nil,
      -- the local platform's driver (process | namespaces); nil elsewhere
      driver = type(j.driver) == "string" and j.driver or nil,
      -- the namespaces driver's limits: "cgroup v1", "cgroup v2" (with
      -- " (delegated)" without root) or "none: <why>"; nil elsewhere
      limits = type(j.limits) == "string" and j.limits or nil,
      -- the local platform's counts of the sandbox's outbound connections
      -- ({connections, allowed, refused, open, bytesOut, bytesIn,
      -- dnsQueries}; the log: GET /sandbox/{id}/egress); nil elsewhere
      egress = type(j.egress) == "table" and j.egress or nil },
  }
end

function PlatformSandbox:getInstructions()
  check_self("PlatformSandbox:getInstructions", self)
  local default = ("Platform sandbox%s. Execute commands with the sandbox command APIs.")
    :format(self._sandboxId and " " .. self._sandboxId or "")
  local text = common.instructions("PlatformSandbox:getInstructions", self._instructions, default)
  return text -- not a tail call: errors point at the caller
end

-- }======

return PlatformSandbox
