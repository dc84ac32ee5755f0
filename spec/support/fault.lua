-- A scripted fault server for specs (spec/support/fault-platform.c, whose
-- top comment describes the script and the log in full).
--
--   local fault = require "spec.support.fault"
--   local srv = fault.start{ routes = {
--     { method = "POST", path = "/v1/railway/projects/p/sandbox", responses = {
--       { status = 503, body = '{"error":{"message":"busy","type":"internal_error"}}' },
--       { status = 201, json = { id = "sbx_1", status = "ready" } } } },
--     { method = "GET", path = "/ws/exec", ws = {
--       { frames = { { binary = "\1hello\n" },
--                    { json = { type = "exit", data = { exit_code = 0 } } } } },
--       { close = 1011, reason = "server_error" },
--       { drop = true } } },
--   } }
--   srv.url, srv.ws          -- "http://127.0.0.1:PORT", "ws://127.0.0.1:PORT"
--   srv:log()                -- every recorded event, in arrival order
--   srv:requests()           -- the HTTP ones;  srv:sessions(): the WebSocket ones
--   srv:waitFor(function(log) return #log >= 3 end)
--   srv:stop()               -- SIGTERM; raises unless the server exits with 0
--                            -- (log() then gives the final log)
--
-- The methods work with a colon or a dot (srv.log() is srv:log()).
--
-- Events as the log holds them, with byte strings made exact: an HTTP
-- event's `body` is the exact body (from bodyHex), `headers` is the list
-- of {name, value} pairs (lower-cased names, arrival order) and `header`
-- maps each name to its value (repeated names joined with ", "); each
-- message of a WebSocket session has `opcode` (1 text, 2 binary) and
-- `data` (the exact bytes). A session is logged once it is over (see
-- waitFor).
--
-- Strings of the script may hold bytes cJSON cannot carry (NUL): frames'
-- `binary` and `text`, and responses' `body`, are sent in hex when needed;
-- the `data` of a streamed response's chunks always is (a piece may end
-- inside a UTF-8 character).
--
-- The server runs as a background process of a mastra LocalSandbox (its
-- destroy kills what is left); srv:sh(command, args, opts) runs shell text
-- in that sandbox (curl, ws-exec), srv:curl(method, path, opts) is
-- spec/support/platform.lua's curl without Authorization by default.
-- The binary comes from MASTRA_FAULT_PLATFORM (CTest sets it).
local core = require "mastra.core"
local mastra = require "mastra"
local util = require "spec.support.util"
local platform = require "spec.support.platform"

local fault = {}

local START_TIMEOUT_MS = 15000
local STOP_TIMEOUT_MS = 15000

--- The fault-platform executable (raises when MASTRA_FAULT_PLATFORM is
-- unset or names no file). env: a getenv replacement (for specs).
function fault.binary(getenv)
  local v = (getenv or os.getenv)("MASTRA_FAULT_PLATFORM")
  if v == nil or v == "" then
    error("spec/support/fault.lua: MASTRA_FAULT_PLATFORM is not set: it must name the"
      .. " fault-platform executable (build/spec-support/fault-platform; CTest sets it;"
      .. " by hand: MASTRA_FAULT_PLATFORM=$PWD/build/spec-support/fault-platform busted ...)",
      2)
  end
  local f = io.open(v, "rb")
  if f == nil then
    error(("spec/support/fault.lua: MASTRA_FAULT_PLATFORM=%s does not exist (build the"
      .. " fault-platform target first)"):format(v), 2)
  end
  f:close()
  return v
end

local function tohex(s)
  return (s:gsub(".", function(c) return ("%02x"):format(c:byte()) end))
end

local function fromhex(h)
  return (h:gsub("%x%x", function(x) return string.char(tonumber(x, 16)) end))
end
fault.tohex, fault.fromhex = tohex, fromhex

-- A copy of the script where strings cJSON would cut (NUL) go in hex,
-- and every binary frame goes in hex (its bytes need not be UTF-8).
local function prepare(script)
  local function copy(t)
    if type(t) ~= "table" then return t end
    local out = {}
    for k, v in pairs(t) do out[k] = copy(v) end
    return setmetatable(out, getmetatable(t))
  end
  local s = copy(script)
  for _, route in ipairs(s.routes or {}) do
    for _, r in ipairs(route.responses or {}) do
      if type(r.body) == "string" and r.body:find("\0", 1, true) then
        r.bodyHex, r.body = tohex(r.body), nil
      end
      for _, ch in ipairs(r.chunks or {}) do
        -- a piece may end inside a UTF-8 character: always in hex
        if type(ch.data) == "string" then ch.dataHex, ch.data = tohex(ch.data), nil end
      end
    end
    for _, e in ipairs(route.ws or {}) do
      if type(e.body) == "string" and e.body:find("\0", 1, true) then
        e.bodyHex, e.body = tohex(e.body), nil
      end
      for _, f in ipairs(e.frames or {}) do
        if type(f.binary) == "string" then
          f.binaryHex, f.binary = tohex(f.binary), nil
        end
        if type(f.text) == "string" and f.text:find("\0", 1, true) then
          f.textHex, f.text = tohex(f.text), nil
        end
      end
    end
  end
  return s
end

-- An event with its byte strings made exact.
local function refine(ev)
  if ev.type == "http" then
    ev.body = fromhex(ev.bodyHex or "")
  end
  local header = {}
  for _, pair in ipairs(ev.headers or {}) do
    local k, v = pair[1], pair[2]
    header[k] = header[k] and (header[k] .. ", " .. v) or v
  end
  ev.header = header
  for _, m in ipairs(ev.messages or {}) do
    m.data = fromhex(m.hex or "")
  end
  return ev
end

--- Start the server on `script` (a Lua table, see the top comment).
-- opts: timeout (ms to wait for the URL line, default 15000).
function fault.start(script, opts)
  opts = opts or {}
  assert(type(script) == "table", "fault.start: the script must be a table")
  local bin = fault.binary()
  local dir, base = util.tmpdir()
  local self = {
    dir = dir,
    scriptFile = dir .. "/script.json",
    logFile = dir .. "/log.jsonl",
    stdout = {},
    stderrTail = "",
  }
  local f = assert(io.open(self.scriptFile, "wb"))
  assert(f:write(core.jsonEncode(prepare(script))))
  assert(f:close())
  local sb = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 120000 }
  sb:start()
  self.sandbox = sb
  local words = { bin, "--log", self.logFile, "--watch-stdin", self.scriptFile }
  for i, w in ipairs(words) do words[i] = mastra.quote(w) end
  self.command = table.concat(words, " ")
  self.handle = sb.processes:spawn("exec " .. self.command, {
    onStdout = function(s) self.stdout[#self.stdout + 1] = s end,
    onStderr = function(s)
      local t = self.stderrTail .. s
      if #t > 16384 then t = t:sub(-16384) end
      self.stderrTail = t
    end,
  })
  local released = false
  local function release()
    if released then return end
    released = true
    pcall(sb.destroy, sb)
    self.finalLog = util.read_file(self.logFile) or ""
    util.rm_rf(dir, base)
  end
  local line
  util.wait_until(function()
    line = table.concat(self.stdout):match("^([^\n]*)\n")
    return line ~= nil or self.handle.exitCode ~= nil
  end, opts.timeout or START_TIMEOUT_MS, 10)
  if line == nil then
    util.wait_until(function() return self.handle.exitCode ~= nil end, 2000, 10)
    local exited, stderr = self.handle.exitCode, self.stderrTail
    release()
    error(("fault-platform did not print its URL line (%s); stderr:\n%s"):format(
      exited and ("it exited with " .. tostring(exited)) or "still running", stderr), 2)
  end
  local info = core.jsonDecode(line)
  if type(info) ~= "table" or type(info.url) ~= "string" then
    release()
    error("fault-platform printed an unexpected first line: " .. line, 2)
  end
  self.url, self.ws, self.pid = info.url, info.ws, info.pid
  self.port = tonumber(info.url:match(":(%d+)$"))

  --- Every recorded event so far, in arrival order (seq). After stop():
  -- the final log.
  function self.log()
    local text = self.finalLog or util.read_file(self.logFile) or ""
    local events = {}
    for l in text:gmatch("([^\n]*)\n") do -- complete lines only
      local ev, err = core.jsonDecode(l)
      if ev == nil then error("fault-platform log: bad line: " .. tostring(err) .. ": " .. l, 2) end
      events[#events + 1] = refine(ev)
    end
    table.sort(events, function(a, b) return a.seq < b.seq end)
    return events
  end

  local function only(kind)
    local out = {}
    for _, ev in ipairs(self.log()) do
      if ev.type == kind then out[#out + 1] = ev end
    end
    return out
  end
  function self.requests() return only("http") end
  function self.sessions() return only("ws") end

  --- Drive the loop until pred(log) holds; returns the log, or raises
  -- after ms (default 5000).
  function self.waitFor(a, b, c)
    local pred, ms = a, b
    if type(a) ~= "function" then pred, ms = b, c end -- srv:waitFor(pred, ms)
    local log
    local ok = util.wait_until(function()
      log = self.log()
      return pred(log) and true or false
    end, ms or 5000, 10)
    if not ok then
      error(("fault-platform: the log did not reach the expected state within %d ms;"
        .. " it holds %d event(s)"):format(ms or 5000, #log), 2)
    end
    return log
  end

  --- Shell text in the server's sandbox.
  function self.sh(a, ...)
    if a == self then return sb:executeCommand(...) end
    return sb:executeCommand(a, ...)
  end

  --- platform.lua's curl (no Authorization unless opts.token is given).
  function self.curl(a, ...)
    local method, path, o
    if a == self then method, path, o = ... else method, path, o = a, ... end
    local copy = {}
    for k, v in pairs(o or {}) do copy[k] = v end
    if copy.token == nil then copy.token = false end
    self.scratch = self.scratch or dir
    return platform.Server.curl(self, method, path, copy)
  end

  function self.running() return self.handle.exitCode == nil end

  --- SIGTERM, wait, raise unless the exit status is 0. Runs once.
  function self.stop()
    if released then return self.exitCode end
    if self.handle.exitCode == nil then
      sb:executeCommand("kill -TERM " .. math.tointeger(self.pid))
      util.wait_until(function() return self.handle.exitCode ~= nil end, STOP_TIMEOUT_MS, 10)
    end
    local code, signal, stderr = self.handle.exitCode, self.handle.signal, self.stderrTail
    self.exitCode = code
    release()
    if code ~= 0 or signal ~= nil then
      error(("fault-platform (pid %s) %s after SIGTERM (want exit status 0); stderr:\n%s")
        :format(tostring(self.pid), code == nil and "did not exit"
          or ("exited with " .. tostring(code) .. (signal and (" (signal " .. signal .. ")")
            or "")), stderr), 2)
    end
    return code
  end

  --- Stop for teardown: never raises.
  function self.close()
    if not released then
      local ok = pcall(self.stop)
      if not ok then release() end
    end
  end

  return self
end

return fault
