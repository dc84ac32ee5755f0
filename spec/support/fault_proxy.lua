-- The fault proxy (spec/support/fault_proxy.py, whose top comment
-- describes the plan and the events in full): a TCP proxy on loopback
-- between a PlatformSandbox and a real mastra-platform that breaks the
-- exec WebSocket where the spec says.
--
--   local fault_proxy = require "spec.support.fault_proxy"
--   local px = fault_proxy.start(srv.url)     -- srv: spec/support/platform.lua
--   local sb = mastra.PlatformSandbox.new(srv:sandboxOptions{ proxyUrl = px.url })
--   px:plan{ { cut = "down", at = 5000 }, {} } -- the next upgrades: cut, then pass
--   px:events()          -- every event so far, decoded, in order
--   px:count("ws")       -- how many events of that kind
--   px:stop()            -- SIGTERM; nothing is left running
--
-- It runs as a background process of a mastra LocalSandbox (its destroy
-- kills what is left), as spec/support/fault.lua does.
local core = require "mastra.core"
local mastra = require "mastra"
local util = require "spec.support.util"

local fault_proxy = {}

local START_TIMEOUT_MS = 15000
local STOP_TIMEOUT_MS = 15000

local function script_path()
  local src = os.getenv("MASTRA_SOURCE_DIR") or "."
  return src .. "/spec/support/fault_proxy.py"
end

local Proxy = {}
Proxy.__index = Proxy

--- Start the proxy in front of `upstream` (the server's http://HOST:PORT).
function fault_proxy.start(upstream)
  local hostport = assert(upstream:match("^http://([^/]+)"), "fault_proxy.start: an http:// URL")
  local dir, base = util.tmpdir()
  local self = setmetatable({ dir = dir, base = base, planFile = dir .. "/plan.json",
    stdout = {}, stderrTail = "", planId = 0 }, Proxy)
  local sb = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 120000 }
  sb:start()
  self.sandbox = sb
  local words = { "python3", script_path(), "--watch-stdin", hostport, self.planFile }
  for i, w in ipairs(words) do words[i] = mastra.quote(w) end
  self.handle = sb.processes:spawn("exec " .. table.concat(words, " "), {
    onStdout = function(s) self.stdout[#self.stdout + 1] = s end,
    onStderr = function(s)
      local t = self.stderrTail .. s
      if #t > 16384 then t = t:sub(-16384) end
      self.stderrTail = t
    end,
  })
  local line
  util.wait_until(function()
    line = table.concat(self.stdout):match("^([^\n]*)\n")
    return line ~= nil or self.handle.exitCode ~= nil
  end, START_TIMEOUT_MS, 10)
  local info = line and core.jsonDecode(line)
  if type(info) ~= "table" or type(info.url) ~= "string" then
    local stderr = self.stderrTail
    self:_release()
    error("fault_proxy.py did not print its URL line; stderr:\n" .. stderr, 2)
  end
  self.url, self.ws, self.pid = info.url, info.ws, math.tointeger(info.pid)
  return self
end

--- The next WebSocket upgrades follow entries (a list; the last repeats;
-- {} or nil: pass everything).
function Proxy:plan(entries)
  self.planId = self.planId + 1
  local tmp = self.planFile .. ".tmp"
  local f = assert(io.open(tmp, "wb"))
  local list = setmetatable({}, core.jsonArray)
  for i, e in ipairs(entries or {}) do
    list[i] = next(e) == nil and setmetatable({}, { __jsonorder = {} }) or e
  end
  assert(f:write(core.jsonEncode{ id = self.planId, ws = list }))
  assert(f:close())
  assert(os.rename(tmp, self.planFile))
end

--- Every event so far (complete lines after the URL line), decoded.
function Proxy:events()
  local text = table.concat(self.stdout)
  local events, first = {}, true
  for l in text:gmatch("([^\n]*)\n") do
    if first then
      first = false
    else
      events[#events + 1] = assert(core.jsonDecode(l))
    end
  end
  return events
end

--- The events of one kind (since event number `from`, default 1).
function Proxy:only(kind, from)
  local out = {}
  for i, ev in ipairs(self:events()) do
    if i >= (from or 1) and ev.event == kind then out[#out + 1] = ev end
  end
  return out
end

function Proxy:count(kind, from)
  return #self:only(kind, from)
end

function Proxy:_release()
  if self.released then return end
  self.released = true
  pcall(self.sandbox.destroy, self.sandbox)
  util.rm_rf(self.dir, self.base)
end

--- SIGTERM and wait (the sandbox's destroy kills it if it lingers).
function Proxy:stop()
  if self.released then return end
  if self.handle.exitCode == nil and self.pid then
    self.sandbox:executeCommand("kill -TERM " .. self.pid)
    util.wait_until(function() return self.handle.exitCode ~= nil end, STOP_TIMEOUT_MS, 10)
  end
  self:_release()
end

fault_proxy.Proxy = Proxy
return fault_proxy
