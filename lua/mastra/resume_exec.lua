-- One command over the direct-exec WebSocket with the "exec-resume/1"
-- extension (docs/api.md "Exactly once", docs/platform.md "exec-resume"):
-- the exec is named by an id the caller minted before the first attempt,
-- so a socket that fails at any point after init_exec may have gone out is
-- followed by a reattach with the same id and the offsets held, never by
-- a second run. platform_exec.lua uses it where the lease lists the
-- extension; elsewhere mastra.direct_exec runs the command (upstream's
-- rule: at least once).
--
-- Per stream it keeps the bytes' offset: an output frame [0x11|0x13][u64 BE
-- offset][bytes] below what is held is dropped (a replay), one above it is
-- a gap, announced by output_gap or else an error (never silent). The
-- raw bytes reach onStdout/onStderr through direct_exec's streams, so a
-- UTF-8 character split by a cut is delivered whole, and each byte once.
-- The exit frame counts only once every byte of its totals is held. The
-- client acknowledges what it holds (output_ack) every 1 MiB or 1 s.
--
-- A failed socket is retried after 0.25 s, then 0.5, 1 ... 8 s, for at
-- most the detach timeout: the lease comes from spec.lease each time (a
-- fresh one after a 401; a destroyed sandbox raises there). Leaving a
-- running exec on purpose (a timeout, a cancellation, an error of a
-- callback, a gap) sends {"type":"signal","data":{"signal":"KILL"}} first:
-- a closed socket no longer ends a resumable command.
local core = require "mastra.core"
local errors = require "mastra.errors"
local task = require "mastra.task"
local output = require "mastra.output"
local direct_exec = require "mastra.direct_exec"

local resume_exec = {}

resume_exec.CAPABILITY = "exec-resume/1"
local HANDSHAKE_MS = 30000
local DETACH_TIMEOUT_MS = 300000
local BACKOFF_FIRST_MS, BACKOFF_MAX_MS = 250, 8000
local ACK_BYTES, ACK_MS = 1048576, 1000
local PREOPEN_ATTEMPTS = 2
-- a platform that refuses connections this long is gone: its execs died
-- with it (a restarted one answers exec_lost), so waiting out the detach
-- timeout would only delay the error
local UNREACHABLE_MS = 10000
local STDIN_HIGH = 1048576
local TURN_BYTES = direct_exec.TURN_BYTES
-- a socket that hears nothing this long (not even a pong, or the
-- platform's own pings: --exec-ping, 10 s) is dead: reattach (docs/net.md)
local KEEPALIVE_MS = 30000
local TAG = { [0x11] = "stdout", [0x13] = "stderr" }

local function ordered(t, keys)
  return setmetatable(t, { __jsonorder = keys })
end

local function text(ws, t, keys)
  ws:send(core.jsonEncode(ordered(t, keys or { "type", "data" })), "text")
end

--- A new exec id: 1-128 characters of [A-Za-z0-9._:-] (time and
-- randomness, base 36).
function resume_exec.newId()
  local digits = {}
  for i = 1, 20 do
    local d = math.random(0, 35)
    digits[i] = string.char(d < 10 and 48 + d or 87 + d)
  end
  return ("x-%d-%s"):format(math.floor(core.time()), table.concat(digits))
end

local function kill(ws)
  if ws and ws:state() == "open" then
    text(ws, { type = "signal", data = ordered({ signal = "KILL" }, { "signal" }) })
  end
end

--- spec: lease(fresh) -> {wsEndpoint, subprotocol, jwt}, execId, command,
-- cwd?, env?, timeout? (ms, the whole call), handshakeTimeout?,
-- detachTimeout? (ms, default 300000), keepalive? (ms, default 30000; 0:
-- none), maxRetainedBytes?, onStdout?,
-- onStderr?, stdin? (direct_exec's source), control? (keepRunning),
-- sandboxId (for errors), signal(name)? (the platform's signal route:
-- for a leave where no signal frame can get through). Returns
-- direct_exec's result, and execId, reason (the exit's), reattaches,
-- stdoutGaps/stderrGaps (the announced {from, to} ranges) and
-- stdoutGapBytes/stderrGapBytes.
function resume_exec.run(spec)
  local res = { exitCode = nil, truncated = false, timedOut = false, opened = false,
    execId = spec.execId, reattaches = 0, stdoutGapBytes = 0, stderrGapBytes = 0,
    stdoutGaps = {}, stderrGaps = {} }
  local streams = {
    stdout = { st = direct_exec.newStream(spec.onStdout, spec.maxRetainedBytes), held = 0,
      acked = 0, name = "stdout" },
    stderr = { st = direct_exec.newStream(spec.onStderr, spec.maxRetainedBytes), held = 0,
      acked = 0, name = "stderr" },
  }
  local timeout = spec.timeout and spec.timeout > 0 and spec.timeout or nil
  local deadline = timeout and core.now() + timeout or math.huge
  local detach = spec.detachTimeout or DETACH_TIMEOUT_MS
  local confirmed = false -- the platform has the exec: reattach, never start
  local fresh_lease = false
  local feed = spec.stdin
  -- stdin: bytes sent, the platform's last stdin_ack, whether it was
  -- closed, and the chunks from `acked` on (resent after a reattach: the
  -- platform drops what it had written)
  local stdin = { sent = 0, acked = 0, closed = false, pending = {}, first = 1, last = 0,
    cut = 0 }
  local function acked_to(k)
    if k <= stdin.acked then return end
    local drop = k - stdin.acked
    stdin.acked = k
    while drop > 0 and stdin.pending[stdin.first] do
      local c = stdin.pending[stdin.first]
      local left = #c - stdin.cut
      if left <= drop then
        stdin.pending[stdin.first] = nil
        stdin.first, stdin.cut, drop = stdin.first + 1, 0, drop - left
      else
        stdin.cut, drop = stdin.cut + drop, 0
      end
    end
  end
  local done = false -- the exec is over (an exit, a hand-over, a timeout's kill)
  local signalled = false
  local control, asked = spec.control, false
  local last = {} -- the last failure

  -- whether a KILL frame just sent on ws may never be read: behind stdin
  -- queued here, or sent but not taken in (the platform stops reading the
  -- socket while stdin waits for a command that does not read it, and the
  -- frame then sits behind that stdin in the kernel's buffers, where an
  -- empty queue does not show it)
  local function kill_may_wait(ws)
    return ws:bufferedAmount() > 0 or stdin.acked < stdin.sent
  end

  local function fail(cls, fields)
    fields.sandboxId, fields.command, fields.execId = spec.sandboxId, spec.command, spec.execId
    cls:raise(fields, 0)
  end

  -- bytes of a stream at offset off: drop what is held, refuse a gap
  local function take(s, off, data)
    if off > s.held then -- attempt's guard kills the command
      fail(errors.SandboxExecGapError, {
        message = ("exec %s in sandbox %s: the platform sent %s from byte %d, but %d byte(s)"
          .. " before it never came and no output_gap announced them; the command was"
          .. " killed (its output cannot be trusted)"):format(spec.execId,
            tostring(spec.sandboxId), s.name, off, off - s.held),
        stream = s.name, held = s.held, offset = off,
      })
    end
    local skip = s.held - off
    if skip >= #data then return end -- a replay of what is held
    s.held = off + #data
    direct_exec.deliver(s.st, skip > 0 and data:sub(skip + 1) or data)
  end

  local function gap(d)
    local s = type(d) == "table" and streams[d.stream]
    if not s or math.type(d.from) ~= "integer" or math.type(d.to) ~= "integer" then return end
    if d.to > s.held and d.from <= s.held then
      local list = res[s.name .. "Gaps"]
      list[#list + 1] = { from = s.held, to = d.to }
      res[s.name .. "GapBytes"] = res[s.name .. "GapBytes"] + (d.to - s.held)
      s.held = d.to
    end
  end

  local function init_frame()
    local resume = ordered({ stdout = streams.stdout.held, stderr = streams.stderr.held,
      stdin = spec.stdin and stdin.acked or nil }, { "stdout", "stderr", "stdin" })
    if confirmed then
      return ordered({ command = ":", durable_session_name = spec.execId, resume = resume },
        { "command", "durable_session_name", "resume" })
    end
    -- the fields of a plain start (direct_exec.EXEC_FIELDS), then the
    -- extension's
    local data, keys = {}, {}
    for i, k in ipairs(direct_exec.EXEC_FIELDS) do data[k], keys[i] = spec[k], k end
    data.exec_id, data.detach_timeout_ms, data.resume = spec.execId, spec.detachTimeout, resume
    table.move({ "exec_id", "detach_timeout_ms", "resume" }, 1, 3, #keys + 1, keys)
    return ordered(data, keys)
  end

  -- one socket: "exit", "timeout", "handedOver" or "failed"
  local function attempt()
    -- the control plane may be down with the data plane: a network
    -- failure or a 5xx is one more failed attempt; the rest (a destroyed
    -- sandbox, a denial) raises
    local got, lease = pcall(spec.lease, fresh_lease)
    if not got then
      if errors.NetworkError:is(lease) or (errors.PlatformApiError:is(lease)
          and type(lease.status) == "number" and lease.status >= 500) then
        -- a refused lease request counts toward UNREACHABLE_MS as a
        -- refused socket does (its code: CURLE_COULDNT_CONNECT)
        last = { error = errors.message(lease),
          errname = errors.NetworkError:is(lease) and lease.code or nil }
        return "failed"
      end
      error(lease, 0)
    end
    fresh_lease = false
    local limit = math.min(spec.handshakeTimeout or HANDSHAKE_MS,
      math.max(1, deadline - core.now()))
    local handshake_until = core.now() + limit
    local ws <close>, message, errname = core.websocket{
      url = lease.wsEndpoint, protocols = { lease.subprotocol, lease.jwt },
      timeout = math.ceil(limit), keepalive = spec.keepalive or KEEPALIVE_MS,
    }
    if ws == nil then
      local fds = errors.descriptorLimit(message, errname)
      if fds then error(fds, 0) end
      last = { error = message, errname = errname, wsEndpoint = lease.wsEndpoint }
      return "failed"
    end
    -- leaving on an error (a callback's, a cancellation): end the command
    local guard <close> = setmetatable({}, { __close = function(_, err)
      if err ~= nil then
        kill(ws)
        signalled = ws:state() == "open" and not kill_may_wait(ws)
      end
    end })
    local _ = guard
    -- timers.main: the handshake's deadline, then the call's (timeout);
    -- timers.ack: the next output_ack
    local timers <close> = setmetatable({}, { __close = function(t)
      for _, x in pairs(t) do x:close() end
    end })
    -- (the handshake may have used the call's last millisecond and more)
    timers.main = core.timer(math.max(0, math.ceil(math.min(limit, deadline - core.now()))))
    local last_ack = core.now()
    local sent, exit = false, nil
    local spent = 0 -- bytes moved since the loop last had a turn (TURN_BYTES)
    while true do
      local stdin_key
      local state = ws:state()
      if state == "open" and not sent then
        text(ws, { type = "init_exec", data = init_frame() })
        -- what the platform had not acknowledged goes again (it drops
        -- what it wrote), then the close if it was sent
        for i = stdin.first, stdin.last do
          local c = stdin.pending[i]
          ws:send("\2" .. (i == stdin.first and stdin.cut > 0 and c:sub(stdin.cut + 1) or c),
            "binary")
        end
        if stdin.closed or not feed then ws:send('{"type":"stdin_close"}', "text") end
        sent, res.opened = true, true
        if timeout then -- the call's deadline is this timer now
          timers.main:close()
          timers.main = core.timer(math.max(1, math.ceil(deadline - core.now())))
        end
      end
      if control and control.release and sent and not asked and state == "open" then
        ws:send('{"type":"keep_running"}', "text")
        asked = true
      end
      while feed and sent and state == "open" and spent < TURN_BYTES
          and ws:bufferedAmount() < STDIN_HIGH do
        local chunk, key = feed()
        res.stdinStarted = true
        if chunk == nil then
          feed = nil
          stdin.closed = true
          ws:send('{"type":"stdin_close"}', "text")
        elseif chunk == false then
          stdin_key = key
          break
        else
          stdin.sent = stdin.sent + #chunk
          stdin.last = stdin.last + 1
          stdin.pending[stdin.last] = chunk
          ws:send("\2" .. chunk, "binary")
          spent = spent + #chunk
        end
      end
      local took = false
      while true do
        local msg, kind = ws:receive()
        if msg == nil then break end
        took = true
        spent = spent + #msg
        if kind == "binary" then
          local s = #msg >= 9 and streams[TAG[msg:byte(1)]]
          if s then
            take(s, string.unpack(">I8", msg, 2), msg:sub(10))
            confirmed = true
          elseif #msg > 1 and (msg:byte(1) == 1 or msg:byte(1) == 3) then
            -- no offsets: the platform did not take the extension
            local t = msg:byte(1) == 1 and streams.stdout or streams.stderr
            take(t, t.held, msg:sub(2))
          end
        else
          local frame = core.jsonDecode(msg)
          local ty = type(frame) == "table" and frame.type
          local d = type(frame) == "table" and type(frame.data) == "table" and frame.data or {}
          if ty == "attached" or ty == "durable_session" then
            confirmed = true
          elseif ty == "output_gap" then
            gap(d)
          elseif ty == "stdin_ack" and math.type(d.offset) == "integer" then
            acked_to(math.min(d.offset, stdin.sent))
          elseif ty == "error" then
            if d.code == "exec_id_conflict" then
              done = true -- nothing of this call runs
              fail(errors.SandboxExecConflictError, {
                message = ("exec id %s is already used in sandbox %s by another command;"
                  .. " nothing was run. Use a new id for a different command")
                  :format(spec.execId, tostring(spec.sandboxId)), code = d.code })
            elseif d.code == "insufficient_storage" or d.code == "output_lost" then
              -- the platform could not keep the output, so it killed the
              -- command: its exit would not be the command's own
              done = true
              local fields = { code = d.code, message = ("exec %s in sandbox %s: the platform"
                .. " killed the command, it could not keep its output (%s: %s); it is not run"
                .. " again"):format(spec.execId, tostring(spec.sandboxId), d.code,
                  tostring(d.message)),
                stdout = streams.stdout.st.out:text(), stderr = streams.stderr.st.out:text() }
              if d.code == "insufficient_storage" then
                fields.status = 507
                fields.message = fields.message
                  .. ". Free space under the platform's data directory"
                fail(errors.PlatformApiError, fields)
              end
              fail(errors.SandboxExecLostError, fields)
            elseif d.code == "exec_lost" or (d.code == "exec_not_found" and confirmed) then
              done = true
              fail(errors.SandboxExecLostError, {
                message = ("the platform lost exec %s in sandbox %s (%s: its server restarted"
                  .. " or dropped the record while the command ran); it was not run again:"
                  .. " its outcome is unknown"):format(spec.execId, tostring(spec.sandboxId),
                    tostring(d.code)), code = d.code,
                stdout = streams.stdout.st.out:text(), stderr = streams.stderr.st.out:text() })
            end
            last.errorCode = d.code
          elseif ty == "exit" then
            exit = d
            break
          elseif asked and ty == "kept_running" then
            if ws:state() == "open" then ws:close(1000, "") end
            done = true
            return "handedOver"
          end
        end
      end
      if exit then
        local t1, t2 = exit.stdout_total, exit.stderr_total
        if (t1 == nil or t1 == streams.stdout.held) and (t2 == nil or t2 == streams.stderr.held)
        then
          res.exitCode = math.type(exit.exit_code) == "integer" and exit.exit_code or 0
          res.reason = exit.reason
          if ws:state() == "open" then ws:close(1000, "") end
          done = true
          return "exit"
        end
        -- bytes are missing: reattach from what is held
        last = { error = "exit before all output", wsEndpoint = lease.wsEndpoint }
        return "failed"
      end
      if ws:state() == "closed" then
        local code, reason, status, why, _, name = ws:closeInfo()
        last = { closeCode = code, closeReason = reason, error = why, errname = name,
          httpStatus = status, wsEndpoint = lease.wsEndpoint, errorCode = last.errorCode }
        -- an upgrade refused (401: an expired lease; a destroyed sandbox:
        -- the lease request says so) asks for the lease again
        if status then fresh_lease = true end
        if code == 4001 then
          fail(errors.SandboxExecTransportError, {
            message = ("exec %s in sandbox %s was taken over by another client (close 4001"
              .. " superseded); this call no longer follows it"):format(spec.execId,
                tostring(spec.sandboxId)),
            closeCode = code, closeReason = reason, opened = true, attempts = res.reattaches + 1,
            wsEndpoint = lease.wsEndpoint })
        end
        return "failed"
      end
      local now = core.now()
      if now >= deadline then
        kill(ws)
        if kill_may_wait(ws) and spec.signal then pcall(spec.signal, "KILL") end
        done = true
        return "timeout"
      end
      if not res.opened and now >= handshake_until then
        last = { error = "the handshake timed out", wsEndpoint = lease.wsEndpoint }
        return "failed"
      end
      local unacked = (streams.stdout.held - streams.stdout.acked)
        + (streams.stderr.held - streams.stderr.acked)
      if unacked > 0 and sent and ws:state() == "open"
          and (unacked >= ACK_BYTES or now - last_ack >= ACK_MS) then
        text(ws, { type = "output_ack", data = ordered({ stdout = streams.stdout.held,
          stderr = streams.stderr.held }, { "stdout", "stderr" }) })
        streams.stdout.acked, streams.stderr.acked = streams.stdout.held, streams.stderr.held
        last_ack = now
        if timers.ack then timers.ack:close() end
        timers.ack = nil
      elseif unacked > 0 and timers.ack == nil then
        timers.ack = core.timer(math.max(1, math.ceil(ACK_MS - (now - last_ack))))
      end
      if spent >= TURN_BYTES then
        spent = 0
        task.sleep(0) -- the loop's turn
      elseif not took then
        spent = 0
        local main = timers.main:id()
        task.wait(ws:id(), main, timers.ack and timers.ack:id() or main, stdin_key or main,
          control or main)
      end
    end
  end

  -- leaving on an error while the exec may run and no signal frame got
  -- through (a cancel during a backoff, or behind queued stdin): the
  -- platform's signal route, from the teardown queue (this task cannot
  -- wait while it unwinds)
  local outer <close> = setmetatable({}, { __close = function(_, err)
    if err ~= nil and not done and not signalled and res.opened and spec.signal then
      task.teardown(function() spec.signal("KILL") end,
        ("exec %s in sandbox %s"):format(spec.execId, tostring(spec.sandboxId)))
    end
  end })
  local _ = outer
  local backoff, failing_since, preopen = BACKOFF_FIRST_MS, nil, 0
  local refused_since
  while true do
    local before = streams.stdout.held + streams.stderr.held
    local outcome = attempt()
    if outcome == "exit" then break end
    if outcome == "handedOver" then
      res.handedOver = true
      break
    end
    if outcome == "timeout" then
      res.timedOut, res.exitCode = true, 124
      break
    end
    -- a socket that moved the exec on starts the backoff again
    if confirmed and streams.stdout.held + streams.stderr.held > before then
      backoff, failing_since = BACKOFF_FIRST_MS, nil
    end
    failing_since = failing_since or core.now()
    if not res.opened then
      -- no init_exec went out yet: nothing to reattach to, upstream's two
      -- attempts (a platform that is down fails in seconds, not minutes)
      preopen = preopen + 1
      if preopen >= PREOPEN_ATTEMPTS then
        local limit = errors.descriptorLimit(last.error, last.errname, true)
        if limit then error(limit, 0) end
        fail(errors.SandboxExecTransportError, {
          message = ("Direct-exec transport failed for sandbox %s after %d attempt(s): %s%s")
            :format(tostring(spec.sandboxId), preopen, tostring(last.error or "no socket"),
              last.errname and (" (" .. last.errname .. ")") or ""),
          attempts = preopen, opened = false, closeCode = last.closeCode,
          closeReason = last.closeReason, wsEndpoint = last.wsEndpoint })
      end
    end
    if last.errname == "CURLE_COULDNT_CONNECT" then
      refused_since = refused_since or core.now()
      if core.now() - refused_since >= UNREACHABLE_MS then
        fail(errors.SandboxExecTransportError, {
          message = ("Direct-exec transport failed for sandbox %s: the platform at %s has"
            .. " refused connections for %d s while exec %s was detached (%s); a platform"
            .. " that is gone took its commands with it, so the call ends here"):format(
              tostring(spec.sandboxId), tostring(last.wsEndpoint), UNREACHABLE_MS // 1000,
              spec.execId, tostring(last.error)),
          attempts = res.reattaches + 1, opened = res.opened, wsEndpoint = last.wsEndpoint })
      end
    else
      refused_since = nil
    end
    local waited = core.now() - failing_since
    if waited + backoff > detach or core.now() + backoff >= deadline then
      if core.now() + backoff >= deadline and waited + backoff <= detach then
        task.sleep(math.max(0, deadline - core.now()))
        -- the deadline, with no socket: the signal route ends the command
        if spec.signal then pcall(spec.signal, "KILL") end
        done = true
        res.timedOut, res.exitCode = true, 124
        break
      end
      local detail = last.closeCode and (" (close %d%s)"):format(last.closeCode,
        (last.closeReason or "") ~= "" and " " .. last.closeReason or "")
        or last.error and (": %s"):format(last.error) or ""
      fail(errors.SandboxExecTransportError, {
        message = ("Direct-exec transport failed for sandbox %s: exec %s could not be"
          .. " reattached within its detach timeout (%d ms, %d attempt(s))%s; it was not run"
          .. " again: the client asks the platform to end it, and the platform ends it"
          .. " anyway when nobody attaches"):format(
            tostring(spec.sandboxId), spec.execId, detach, res.reattaches + 1, detail),
        attempts = res.reattaches + 1, opened = res.opened, closeCode = last.closeCode,
        closeReason = last.closeReason, wsEndpoint = last.wsEndpoint })
    end
    task.sleep(backoff)
    backoff = math.min(backoff * 2, BACKOFF_MAX_MS)
    res.reattaches = res.reattaches + 1
  end
  direct_exec.flush(streams.stdout.st)
  direct_exec.flush(streams.stderr.st)
  output.fill(res, streams.stdout.st.out, streams.stderr.st.out)
  return res
end

return resume_exec
