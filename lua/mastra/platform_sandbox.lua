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
local direct_exec = require "mastra.direct_exec"
local process = require "mastra.process"
local platform_process = require "mastra.platform_process"

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
  local make = lazy[k]
  if make then
    v = make(self)
    rawset(self, k, v)
    return v
  end
  return nil
end

local LEASE_REFRESH_MARGIN_MS = 60000
local CREATE_ATTEMPTS = 3
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
  requestTimeout = options.ms,
  proxyUrl = options.string,
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

--- Run fn once for every concurrent caller: the callers that arrive while
-- it runs wait for the same task and get the same results or error.
-- spawn: task.spawn, or task.spawnShielded for work that a teardown needs
-- to see finish.
local function coalesce(self, slot, fn, spawn)
  local t = self[slot]
  if t == nil then
    t = (spawn or task.spawn)(fn)
    self[slot] = t
  end
  local ok, a = pcall(t.wait, t)
  if self[slot] == t then self[slot] = nil end
  if not ok then error(a, 0) end
  return a
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
    sandboxId = opts.sandboxId,
    environmentId = envId,
    idleTimeoutMinutes = opts.idleTimeoutMinutes,
    networkIsolation = opts.networkIsolation,
    env = copy_env(opts.env),
    timeout = opts.timeout,
    workingDirectory = opts.workingDirectory,
    seedCheckpointName = opts.seedCheckpointName,
    _opts = opts,
    _cfg = intern_cfg(cfg),
    _instructions = opts.instructions,
    _retryDelay = opts.createRetryDelayMs,
    _handshakeTimeout = opts.handshakeTimeout,
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
  local res
  for attempt = 1, CREATE_ATTEMPTS do
    -- a fresh connection: never sent twice by libcurl (docs/platform.md)
    local ok, r = pcall(client.request, self._cfg, "POST", "/sandbox",
      { json = body, freshConnection = true })
    if ok then
      res = r
      break
    end
    if not (errors.PlatformApiError:is(r) and r.status >= 500)
        or attempt == CREATE_ATTEMPTS then
      error(r, 0)
    end
    task.sleep(self._retryDelay * attempt)
  end
  local j = res.json or {}
  if type(j.id) ~= "string" then
    errors.PlatformApiError:raise({
      message = "the platform answered POST /sandbox without an id",
      status = res.status, body = res.body,
    }, 0)
  end
  self.sandboxId = j.id
  self.createdAt = j.createdAt or core.time()
  self.templatePending = j.templatePending
  self.instanceUrl = j.instanceUrl
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
    if self.sandboxId then
      local gok, r = pcall(client.request, self._cfg, "GET",
        "/sandbox/" .. client.encodeComponent(self.sandboxId))
      if gok and not (r.json and r.json.destroyedAt) then
        self.createdAt = (r.json and r.json.createdAt) or self.createdAt
        return { outcome = "connected" }
      end
      if not gok and not (errors.PlatformApiError:is(r) and r.status == 404) then
        error(r, 0)
      end
      self.sandboxId = nil
      self._lease = nil
    end
    return create(self)
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
  -- shielded: a start cancelled halfway could leave a sandbox that nobody
  -- knows of; it finishes, and the owner's teardown destroys what it made
  return coalesce(self, "_starting", function() return do_start(self) end,
    task.spawnShielded)
end

function PlatformSandbox:_ensureRunning(command)
  if self.status ~= "running" and self.status ~= "stopping"
      and self.status ~= "destroying" then
    self:start()
  end
  if self.sandboxId == nil then
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
  if ok or (errors.PlatformApiError:is(err) and (err.status == 404 or err.status == 410)) then
    return nil
  end
  return err
end

local holds_remote, queue_teardown

local function teardown(self, final_status, drop_checkpoint)
  check_self("PlatformSandbox:" .. (final_status == "stopped" and "stop" or "destroy"), self)
  if not task.canWait() and holds_remote(self) then
    -- a failing task's <close> (this sandbox's, or that of an object that
    -- owns it), a finalizer: nothing can wait here, the teardown queue does it
    queue_teardown(self, final_status, drop_checkpoint)
    return
  end
  if self._starting then pcall(self._starting.wait, self._starting) end
  local id = self.sandboxId
  for _, h in pairs(self._running or {}) do h:kill() end
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
  if not ok and not (errors.PlatformApiError:is(err) and err.status == 404) then
    -- the sandbox may still be there: sandboxId stays, so that a later
    -- destroy (the teardown queue's, at the latest at exit) sends it again
    self.status = "error"
    error(err, 0)
  end
  self.sandboxId = nil
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
-- timeout still applies.
function PlatformSandbox:detach()
  check_self("PlatformSandbox:detach", self)
  if self._starting then pcall(self._starting.wait, self._starting) end
  local id = self.sandboxId
  self.sandboxId = nil
  self._lease = nil
  self.status = "detached"
  return id
end

-- Whether the platform may hold a sandbox of this object.
function holds_remote(self)
  return self.sandboxId ~= nil or self._starting ~= nil
end

-- Hand the teardown to the queue of the scheduler (once).
local function destroy_dropping(self)
  return PlatformSandbox.destroy(self, { keepCheckpoint = false })
end

function queue_teardown(self, final_status, drop_checkpoint)
  if holds_remote(self) and not self._teardownQueued then
    self._teardownQueued = true
    task.teardown(final_status == "stopped" and PlatformSandbox.stop
      or drop_checkpoint and destroy_dropping or PlatformSandbox.destroy, self)
  end
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
    self.sandboxId and ", " .. self.sandboxId or "")
end

-- }======

-- {====== commands ======

local function fetch_lease(self, command, attempt)
  local id = self.sandboxId
  local ok, res = pcall(client.request, self._cfg, "POST",
    "/sandbox/" .. client.encodeComponent(id or "") .. "/exec-lease")
  if not ok then
    if errors.PlatformApiError:is(res) and res.status == 410 then
      self._lease = nil
      self.sandboxId = nil
      self.status = "stopped"
      errors.SandboxDestroyedError:raise({
        message = ("Sandbox %s was destroyed; /exec-lease returned 410"):format(id or "(unknown)"),
        sandboxId = id, command = command, attempts = attempt,
      }, 0)
    end
    error(res, 0)
  end
  local j = res.json or {}
  if j.provider == "e2b" then
    error("PlatformSandbox: the platform handed out an E2B lease; mastra-lua speaks"
      .. " only the Railway direct-exec data plane", 0)
  end
  if type(j.jwt) ~= "string" or type(j.wsEndpoint) ~= "string" then
    errors.PlatformApiError:raise({
      message = "the exec lease has no jwt or wsEndpoint", status = res.status, body = res.body,
    }, 0)
  end
  local lease = {
    provider = j.provider, sandboxId = j.sandboxId, providerResourceId = j.providerResourceId,
    jwt = j.jwt, wsEndpoint = j.wsEndpoint, subprotocol = j.subprotocol or "railway-shell",
    expiresAt = j.expiresAt, expiresAtMs = client.parseTime(j.expiresAt),
    capabilities = j.capabilities,
  }
  self._lease = lease
  return lease
end

function PlatformSandbox:_ensureLease(command, attempt)
  local l = self._lease
  if l and l.expiresAtMs and l.expiresAtMs - LEASE_REFRESH_MARGIN_MS > core.time() then
    return l
  end
  return coalesce(self, "_minting", function() return fetch_lease(self, command, attempt) end)
end

-- Bytes of r's output that reached the caller's onStdout/onStderr.
local function delivered(r, opts)
  local n = 0
  if opts.onStdout then n = n + #(r.stdout or "") + (r.stdoutDroppedBytes or 0) end
  if opts.onStderr then n = n + #(r.stderr or "") + (r.stderrDroppedBytes or 0) end
  return n
end

--- The DirectExecResult of `command`, with upstream's retry policy: a
-- transport failure (no exit code, not timed out) is retried once, with a
-- fresh lease unless another exec cached one meanwhile. The retry runs the
-- command again (at-least-once, docs/api.md), so it is not made once
-- output reached onStdout/onStderr: SandboxExecInterruptedError instead.
function PlatformSandbox:_runDirectExec(command, cwd, env, timeout, opts)
  local last, last_lease
  local attempts = 0
  for attempt = 1, 2 do
    attempts = attempt
    local lease = self:_ensureLease(command, attempt)
    local r = direct_exec.run{
      url = lease.wsEndpoint, subprotocol = lease.subprotocol, jwt = lease.jwt,
      command = command, cwd = cwd, env = env, timeout = timeout,
      handshakeTimeout = self._handshakeTimeout, maxRetainedBytes = opts.maxRetainedBytes,
      onStdout = opts.onStdout, onStderr = opts.onStderr,
      stdin = opts.stdin ~= nil and common.stdinSource(opts.stdin) or nil,
    }
    if r.exitCode ~= nil or r.timedOut then return r end
    last, last_lease = r, lease
    if self._lease == lease then self._lease = nil end
    local seen = delivered(r, opts)
    if seen > 0 then
      errors.SandboxExecInterruptedError:raise({
        message = ("Direct-exec transport failed for sandbox %s after %d byte(s) of output"
          .. " reached onStdout/onStderr; the command was not run again (it may still have"
          .. " run to its end)"):format(self.sandboxId or "(unknown)", seen),
        sandboxId = self.sandboxId, command = command, attempts = attempt,
        delivered = seen, opened = r.opened, closeCode = r.closeCode,
        closeReason = r.closeReason, wsEndpoint = lease.wsEndpoint,
      }, 0)
    end
    -- a stdin function already read from cannot be sent again
    if r.stdinStarted and type(opts.stdin) == "function" then break end
  end
  if self._lease == last_lease then self._lease = nil end
  local detail = ""
  if last.closeCode then
    detail = (" (close %d%s)"):format(last.closeCode,
      (last.closeReason or "") ~= "" and " " .. last.closeReason or "")
  elseif last.error then
    detail = (": %s (%s)"):format(last.error, tostring(last.errname))
  end
  if not last.opened then
    -- a socket that never opened: out of descriptors, if we are at the limit
    local limit = errors.descriptorLimit(last.error, last.errname, true)
    if limit then error(limit, 0) end
  end
  errors.SandboxExecTransportError:raise({
    message = ("Direct-exec transport failed for sandbox %s after %d attempt(s)%s")
      :format(self.sandboxId or "(unknown)", attempts, detail),
    sandboxId = self.sandboxId, command = command, attempts = attempts,
    opened = last.opened, closeCode = last.closeCode, closeReason = last.closeReason,
    wsEndpoint = last_lease.wsEndpoint,
  }, 0)
end

local function merged_env(self, extra)
  local env, n = {}, 0
  for k, v in pairs(self.env) do env[k] = v; n = n + 1 end
  for k, v in pairs(extra or {}) do env[k] = tostring(v); n = n + 1 end
  if n == 0 then return nil end
  return env
end

local function has_capability(lease, name)
  if type(lease.capabilities) ~= "table" then return false end
  for _, c in ipairs(lease.capabilities) do
    if c == name then return true end
  end
  return false
end

--- Whether commands may be given stdin here: the exec lease of the
-- platform lists "stdin" in its capabilities (the local platform does, the
-- hosted one does not). Starts the sandbox and fetches a lease.
function PlatformSandbox:supportsStdin()
  check_self("PlatformSandbox:supportsStdin", self)
  self:_ensureRunning("supportsStdin")
  return has_capability(self:_ensureLease("supportsStdin", 1), "stdin")
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
  if opts.stdin ~= nil and not has_capability(self:_ensureLease(full, 1), "stdin") then
    error(where .. ": this platform does not support stdin (its exec lease does not"
      .. ' advertise the "stdin" capability: the hosted platform closes stdin at once).'
      .. " Write the data to a file instead: ws:upload() or the filesystem tools,"
      .. " or a here-document in the command", 2)
  end
  local timeout = opts.timeout
  if timeout == nil then timeout = self.timeout end
  local cwd = opts.cwd or self.workingDirectory
  if cwd == "" then cwd = nil end
  local r = self:_runDirectExec(full, cwd, merged_env(self, opts.env), timeout, opts)
  local code = r.exitCode or 124
  return {
    stdout = r.stdout, stderr = r.stderr, exitCode = code, success = code == 0,
    executionTimeMs = math.floor(core.now() - started), timedOut = r.timedOut,
    command = full, args = args,
    stdoutTruncated = r.stdoutTruncated, stderrTruncated = r.stderrTruncated,
    stdoutDroppedBytes = r.stdoutDroppedBytes, stderrDroppedBytes = r.stderrDroppedBytes,
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

function PlatformSandbox:getInfo()
  check_self("PlatformSandbox:getInfo", self)
  if self.sandboxId == nil then
    return { id = self.id, name = self.name, provider = self.provider,
      status = self.status, createdAt = self.createdAt or core.time() }
  end
  local res = client.request(self._cfg, "GET",
    "/sandbox/" .. client.encodeComponent(self.sandboxId))
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
    :format(self.sandboxId and " " .. self.sandboxId or "")
  local text = common.instructions("PlatformSandbox:getInstructions", self._instructions, default)
  return text -- not a tail call: errors point at the caller
end

-- }======

return PlatformSandbox
