-- The exec channel of a PlatformSandbox (platform_sandbox.lua installs
-- these as its _ensureLease, _runDirectExec and _supports): exec leases,
-- cached per sandbox and minted once for concurrent callers; one direct
-- exec over the lease's WebSocket (mastra.direct_exec) with upstream's
-- retry policy; and the capabilities a lease advertises.
local core = require "mastra.core"
local errors = require "mastra.errors"
local common = require "mastra.common"
local task = require "mastra.task"
local client = require "mastra.platform_client"
local direct_exec = require "mastra.direct_exec"
local resume_exec = require "mastra.resume_exec"

local platform_exec = {}

-- a cached lease is renewed this long before it expires
local LEASE_REFRESH_MARGIN_MS = 60000

local function fetch_lease(self, command, attempt, id)
  local ok, res = pcall(client.request, self._cfg, "POST",
    "/sandbox/" .. client.encodeComponent(id or "") .. "/exec-lease")
  if not ok then
    if client.isDestroyed(res) then
      if self._sandboxId == id then -- still this object's sandbox
        self._lease = nil
        self._sandboxId = nil
        self.status = "stopped"
      end
      errors.SandboxDestroyedError:raise({
        message = ("Sandbox %s was destroyed; /exec-lease returned %d"):format(id or "(unknown)",
          res.status),
        sandboxId = id, command = command, attempts = attempt, status = res.status,
        code = res.code,
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
    capabilities = j.capabilities, limits = type(j.limits) == "table" and j.limits or nil,
    target = id,
  }
  if self._sandboxId == id then self._lease = lease end
  return lease
end

--- A lease for the sandbox `target` (default: this object's): the cached
-- one while it is valid, else a new one (concurrent mints of one target
-- share a request). A command is bound to the sandbox it started on: a
-- retry never lands in another one.
function platform_exec.ensureLease(self, command, attempt, target)
  target = target or self._sandboxId
  local l = self._lease
  if l and l.target == target and l.expiresAtMs
      and l.expiresAtMs - LEASE_REFRESH_MARGIN_MS > core.time() then
    return l
  end
  local mints = rawget(self, "_mints")
  if mints == nil then
    mints = {}
    self._mints = mints
  end
  return task.shared(mints, target or "", function()
    return fetch_lease(self, command, attempt, target)
  end)
end

-- Bytes of r's output that reached the caller's onStdout/onStderr.
local function delivered(r, opts)
  local n = 0
  if opts.onStdout then n = n + #(r.stdout or "") + (r.stdoutDroppedBytes or 0) end
  if opts.onStderr then n = n + #(r.stderr or "") + (r.stderrDroppedBytes or 0) end
  return n
end

local function has_capability(lease, name)
  if type(lease.capabilities) ~= "table" then return false end
  for _, c in ipairs(lease.capabilities) do
    if c == name then return true end
  end
  return false
end

-- exec-resume/1: one exec id for the whole call, reattached on any
-- failure of the socket (mastra.resume_exec); never a second run
local function run_resumable(self, target, command, cwd, env, timeout, opts, exec_id, first)
  local used
  return resume_exec.run{
    execId = exec_id, sandboxId = target,
    lease = function(fresh)
      if used == nil then
        used = first
      else
        if fresh and self._lease == used then self._lease = nil end
        used = platform_exec.ensureLease(self, command, 1, target)
      end
      return used
    end,
    command = command, cwd = cwd, env = env, timeout = timeout,
    handshakeTimeout = self._handshakeTimeout, detachTimeout = self._detachTimeout,
    keepalive = self._keepalive,
    maxRetainedBytes = opts.maxRetainedBytes,
    onStdout = opts.onStdout, onStderr = opts.onStderr,
    stdin = opts.stdin ~= nil and common.stdinSource(opts.stdin) or nil,
    control = opts._control,
    -- POST /sandbox/{id}/execs/{exec_id}/signal, best effort: an exec
    -- already gone (404, 409), a sandbox destroyed (410) or a platform
    -- out of reach (it ends a detached exec itself) needs nothing more
    signal = function(name)
      local ok, err = pcall(client.request, self._cfg, "POST", "/sandbox/"
        .. client.encodeComponent(target or "") .. "/execs/" .. client.encodeComponent(exec_id)
        .. "/signal", { json = { signal = name } })
      if not ok and not errors.NetworkError:is(err) and not (errors.PlatformApiError:is(err)
          and (err.status == 404 or err.status == 409 or err.status == 410)) then
        error(err, 0)
      end
    end,
  }
end

--- The DirectExecResult of `command`. Where the lease lists
-- "exec-resume/1": exactly once (run_resumable). Elsewhere upstream's
-- retry policy: a transport failure (no exit code, not timed out) is
-- retried once, with a fresh lease unless another exec cached one
-- meanwhile. The retry runs the command again (at-least-once,
-- docs/api.md), so it is not made once output reached onStdout/onStderr:
-- SandboxExecInterruptedError instead.
function platform_exec.runDirectExec(self, target, command, cwd, env, timeout, opts)
  -- the id is minted before the lease: every attempt of this call shares it
  local exec_id = resume_exec.newId()
  local first = platform_exec.ensureLease(self, command, 1, target)
  if has_capability(first, resume_exec.CAPABILITY) then
    return run_resumable(self, target, command, cwd, env, timeout, opts, exec_id, first)
  end
  local last, last_lease
  local attempts = 0
  for attempt = 1, 2 do
    attempts = attempt
    local lease = attempt == 1 and first or platform_exec.ensureLease(self, command, attempt,
      target)
    local r = direct_exec.run{
      url = lease.wsEndpoint, subprotocol = lease.subprotocol, jwt = lease.jwt,
      command = command, cwd = cwd, env = env, timeout = timeout,
      handshakeTimeout = self._handshakeTimeout, maxRetainedBytes = opts.maxRetainedBytes,
      onStdout = opts.onStdout, onStderr = opts.onStderr,
      stdin = opts.stdin ~= nil and common.stdinSource(opts.stdin) or nil,
      control = opts._control,
    }
    if r.exitCode ~= nil or r.timedOut or r.handedOver then return r end
    last, last_lease = r, lease
    if self._lease == lease then self._lease = nil end
    local seen = delivered(r, opts)
    if seen > 0 then
      errors.SandboxExecInterruptedError:raise({
        message = ("Direct-exec transport failed for sandbox %s after %d byte(s) of output"
          .. " reached onStdout/onStderr; the command was not run again (it may still have"
          .. " run to its end)"):format(target or "(unknown)", seen),
        sandboxId = target, command = command, attempts = attempt,
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
      :format(target or "(unknown)", attempts, detail),
    sandboxId = target, command = command, attempts = attempts,
    opened = last.opened, closeCode = last.closeCode, closeReason = last.closeReason,
    wsEndpoint = last_lease.wsEndpoint,
  }, 0)
end

--- Whether the exec lease of the sandbox `target` lists the capability
-- `name` (no start: target is a sandbox this object runs or ran).
function platform_exec.supports(self, target, name)
  return has_capability(platform_exec.ensureLease(self, name, 1, target), name)
end

--- The bound `name` that the exec lease of the sandbox `target` states
-- (the local platform's "limits", e.g. execEnvBytes), or nil: a positive
-- integer, or nothing (the hosted platform states none).
function platform_exec.limit(self, target, name)
  local limits = platform_exec.ensureLease(self, name, 1, target).limits
  local v = limits and limits[name]
  if math.type(v) == "float" and v == math.floor(v) then v = math.tointeger(v) end
  if math.type(v) ~= "integer" or v <= 0 then return nil end
  return v
end

return platform_exec
