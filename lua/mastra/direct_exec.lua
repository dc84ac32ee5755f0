-- One command over the direct-exec WebSocket (docs/platform.md, GET
-- /ws/exec): open with the subprotocols [subprotocol, jwt], send init_exec,
-- the stdin frames (binary, tag 2: only where the lease advertises stdin)
-- and stdin_close, collect the tagged output frames until the exit frame,
-- then close(1000) once. stdin goes out while the socket's send queue
-- holds less than STDIN_HIGH bytes (backpressure: the server stops reading
-- while the command's pipe is full, so the queue fills and we wait).
--
-- run() returns the DirectExecResult {exitCode (nil on a transport
-- failure), stdout, stderr, truncated = false, timedOut, opened,
-- closeCode?, closeReason?, stdoutTruncated, stderrTruncated,
-- stdoutDroppedBytes, stderrDroppedBytes}.
-- Cancelling the calling task closes the socket (the local platform then
-- kills the command's process group).
local core = require "mastra.core"
local errors = require "mastra.errors"
local task = require "mastra.task"
local output = require "mastra.output"

local direct_exec = {}

local HANDSHAKE_MS = 30000
-- the fields of init_exec's data, in wire order: the one list of them in the
-- client (a spec of run() carries them under the same names)
local EXEC_FIELDS = { "command", "cwd", "env" }
direct_exec.EXEC_FIELDS = EXEC_FIELDS
local STDIN_HIGH = 1048576
-- what one exec moves over its socket (stdin sent, output taken) before it
-- gives the loop a turn: a stdin source that always has a chunk for a
-- socket that always has room would otherwise hold the thread until its
-- end, and other tasks, a cancel and a SIGTERM would wait for it
local TURN_BYTES = 1048576
direct_exec.TURN_BYTES = TURN_BYTES

local function ordered(t, keys)
  return setmetatable(t, { __jsonorder = keys })
end

-- The longest prefix of s made of whole UTF-8 sequences, and the rest
-- (an incomplete sequence at the end, kept for the next frame).
local function utf8_split(s)
  local n = #s
  for back = 1, math.min(3, n) do
    local c = s:byte(n - back + 1)
    if c >= 0xC0 then -- a lead byte: is its sequence complete?
      local need = c >= 0xF0 and 4 or c >= 0xE0 and 3 or 2
      if back < need then return s:sub(1, n - back), s:sub(n - back + 1) end
      break
    elseif c < 0x80 then
      break
    end
  end
  return s, ""
end
direct_exec.utf8Split = utf8_split

-- A stream: its retained output, the callback, and the bytes held back
-- for it.
local function stream(cb, max)
  return { out = output.new(max), cb = cb, held = "" }
end

local function deliver(st, bytes)
  st.out:append(bytes)
  if st.cb then
    local whole
    whole, st.held = utf8_split(st.held .. bytes)
    if whole ~= "" then st.cb(whole) end
  end
end

local function flush(st)
  if st.cb and st.held ~= "" then
    local rest = st.held
    st.held = ""
    st.cb(rest)
  end
end
-- the streams, for mastra.resume_exec (the same delivery over reattaches)
direct_exec.newStream, direct_exec.deliver, direct_exec.flush = stream, deliver, flush

--- spec: url, subprotocol, jwt, command, cwd?, env? (a table with at least
-- one key, or nil), timeout? (ms > 0), handshakeTimeout? (ms, default
-- 30000), maxRetainedBytes? (default: everything), onStdout?, onStderr?,
-- stdin? (a source: a function that returns the next chunk, nil at the
-- end, or false and a key to wait on when it has nothing now;
-- res.stdinStarted says whether it was called), control? (a table: once
-- control.release is set and the table woken, the command is handed to
-- the platform: {"type":"keep_running"}, the platform's
-- {"type":"kept_running"}, then the close; res.handedOver = true)
function direct_exec.run(spec)
  local res = { exitCode = nil, truncated = false, timedOut = false, opened = false }
  local out = stream(spec.onStdout, spec.maxRetainedBytes)
  local err = stream(spec.onStderr, spec.maxRetainedBytes)
  local timeout = spec.timeout and spec.timeout > 0 and spec.timeout or nil
  -- with a timeout, its timer covers everything; without, the handshake
  -- must complete within its deadline, then the command may run forever
  local limit = timeout or spec.handshakeTimeout or HANDSHAKE_MS
  local deadline = core.now() + limit
  local timer <close> = core.timer(math.ceil(limit))
  local ws <close>, message, errname = core.websocket{
    url = spec.url,
    protocols = { spec.subprotocol, spec.jwt },
    timeout = math.ceil(limit),
  }
  if ws == nil then
    local why = ("the exec lease's wsEndpoint %s cannot be used: %s (%s)")
      :format(spec.url, message, errname)
    local fds = errors.descriptorLimit(why, errname)
    if fds then error(fds, 0) end
    errors.SandboxExecTransportError:raise({
      message = why,
      command = spec.command, wsEndpoint = spec.url, opened = false, code = errname,
    }, 0)
  end
  local sent, exited = false, false
  local feed = spec.stdin
  local control, asked = spec.control, false
  local spent = 0 -- bytes moved since the loop last had a turn
  while true do
    local stdin_key -- the source has nothing now: it wakes this key
    local state = ws:state()
    if state == "open" and not sent then
      local data = {}
      for _, k in ipairs(EXEC_FIELDS) do data[k] = spec[k] end
      data = ordered(data, EXEC_FIELDS)
      ws:send(core.jsonEncode(ordered({ type = "init_exec", data = data }, { "type", "data" })),
        "text")
      if not feed then ws:send('{"type":"stdin_close"}', "text") end
      sent = true
      res.opened = true
    end
    if control and control.release and sent and not asked and state == "open" then
      ws:send('{"type":"keep_running"}', "text")
      asked = true
    end
    while feed and state == "open" and spent < TURN_BYTES
        and ws:bufferedAmount() < STDIN_HIGH do
      res.stdinStarted = true
      local chunk, key = feed()
      if chunk == nil then
        feed = nil
        ws:send('{"type":"stdin_close"}', "text")
      elseif chunk == false then
        stdin_key = key
        break
      else
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
        if #msg > 1 then
          local tag = msg:byte(1)
          if tag == 1 then deliver(out, msg:sub(2))
          elseif tag == 3 then deliver(err, msg:sub(2)) end
        end
      else
        local frame = core.jsonDecode(msg)
        if type(frame) == "table" and frame.type == "exit" then
          local code = type(frame.data) == "table" and frame.data.exit_code
          res.exitCode = math.type(code) == "integer" and code or 0
          exited = true
          break
        elseif asked and type(frame) == "table" and frame.type == "kept_running" then
          res.handedOver = true -- the platform has it: the close lets it run
          exited = true
          break
        end
      end
    end
    if exited then break end
    -- read again: a callback that yielded let the socket close meanwhile
    -- (its wake-up went by while this task waited elsewhere), and every
    -- message queued before the close has been taken above
    if ws:state() == "closed" then
      local code, reason, _, why, _, name = ws:closeInfo()
      if code then
        res.closeCode = code
        res.closeReason = reason or ""
      end
      res.error, res.errname = why, name
      res.opened = res.opened or ws:opened()
      break
    end
    if core.now() >= deadline and (timeout or not res.opened) then
      if timeout then
        res.timedOut = true
        res.exitCode = 124
      end
      break
    end
    if res.opened and not timeout and deadline ~= math.huge then
      deadline = math.huge -- the handshake is done: no deadline any more
      timer:close()
    end
    -- wait only after a turn that took no message: the callbacks of one
    -- that did may have yielded, and what woke meanwhile (room for stdin
    -- in the send queue, the stdin source's key, a detach's control) went
    -- by while this task waited elsewhere; the next turn looks at all of it
    if spent >= TURN_BYTES then
      spent = 0
      task.sleep(0) -- the loop's turn (TURN_BYTES)
    elseif not took then
      spent = 0
      if stdin_key then
        task.wait(ws:id(), timer:id(), stdin_key, control or timer:id())
      else
        task.wait(ws:id(), timer:id(), control or timer:id())
      end
    end
  end
  flush(out)
  flush(err)
  output.fill(res, out.out, err.out)
  if ws:state() ~= "closed" then ws:close(1000, "") end
  return res
end

return direct_exec
