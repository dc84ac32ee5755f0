-- A mastra-platform server for specs.
--
--   local platform = require "spec.support.platform"
--   local srv = platform.start{ dataDir = dir .. "/data", tokenFile = dir .. "/token" }
--   local r = srv:curl("GET", "/v1/railway/projects/p/sandbox/sbx_x")
--   -- r.status, r.headers (lower-case names), r.body, r.json
--   srv:stop()  -- SIGTERM; raises unless the server exits with status 0
--
-- The server runs as a background process of a mastra LocalSandbox (its
-- destroy kills the process group, so nothing outlives the spec). Every
-- client (curl, $MASTRA_WS_EXEC, bash) runs through the same sandbox's
-- executeCommand, so the loop keeps draining the server's output while a
-- spec waits for an answer. The binaries come from the environment:
--   MASTRA_PLATFORM   the mastra-platform executable
--   MASTRA_WS_EXEC    spec/support/ws-exec, the test client of /ws/exec
local lfs = require "lfs"
local json = require "dkjson"
local mastra = require "mastra"
local util = require "spec.support.util"

local platform = {}
platform.json = json
platform.null = json.null

local START_TIMEOUT_MS = 15000
local STOP_TIMEOUT_MS = 15000

-- {====== small helpers ======

local function env_path(name, what)
  local v = os.getenv(name)
  if v == nil or v == "" then
    error(("spec/support/platform.lua: %s is not set: it must name %s (CTest sets it;"
      .. " by hand: %s=/path/to/it busted ...)"):format(name, what, name), 3)
  end
  local f = io.open(v, "rb")
  if f == nil then
    error(("spec/support/platform.lua: %s=%s does not exist (build it first)")
      :format(name, v), 3)
  end
  f:close()
  return v
end

function platform.binary()
  return env_path("MASTRA_PLATFORM", "the mastra-platform executable")
end

function platform.wsExecBinary()
  return env_path("MASTRA_WS_EXEC", "the ws-exec test client (spec/support/ws-exec)")
end

--- A fresh temporary directory (removed by platform.rm_rf).
function platform.tmpdir()
  local base = util.tmpname() -- a file: it reserves the name
  os.remove(base)
  assert(lfs.mkdir(base))
  return base
end

platform.rm_rf = util.rm_rf
platform.readFile = util.read_file

function platform.writeFile(path, data)
  local f = assert(io.open(path, "wb"))
  assert(f:write(data))
  assert(f:close())
end

function platform.decode(text)
  if text == nil or text == "" then return nil end
  local v = json.decode(text, 1, json.null)
  return v
end

function platform.encode(v)
  return json.encode(v)
end

--- t (default {}) marked to encode as a JSON object even when empty.
function platform.object(t)
  return setmetatable(t or {}, { __jsontype = "object" })
end

--- Drive the loop until pred() holds or ms have passed; true if it held.
function platform.waitUntil(pred, ms, step)
  return util.wait_until(pred, ms, step or 20)
end

-- The last header block of a curl -D file (after 100 Continue and the
-- like): status line, then lower-cased names; repeated names are joined
-- with ", ".
local function parse_headers(text)
  local blocks = {}
  for block in ((text or ""):gsub("\r\n", "\n") .. "\n\n"):gmatch("(.-)\n\n") do
    if block:match("^HTTP/") then blocks[#blocks + 1] = block end
  end
  local headers = {}
  local last = blocks[#blocks]
  if last == nil then return headers, nil end
  local statusLine = last:match("^([^\n]*)")
  for line in last:gmatch("[^\n]+") do
    local k, v = line:match("^([^:%s]+):%s*(.-)%s*$")
    if k then
      k = k:lower()
      headers[k] = headers[k] and (headers[k] .. ", " .. v) or v
    end
  end
  return headers, statusLine
end
platform.parseHeaders = parse_headers

-- }======

-- {====== the server ======

local Server = {}
Server.__index = Server

local counter = 0
local function next_name(self, what)
  counter = counter + 1
  return ("%s/%s-%d"):format(self.scratch, what, counter)
end

--- Start mastra-platform. opts: dataDir, tokenFile (defaults: in a
-- scratch directory of this server), driver (default: the one CTest chose),
-- args (extra command-line words), bin (default: platform.binary()), user
-- (a uid: the server runs as that uid and gid with no supplementary groups,
-- through setpriv; the scratch directory is chowned to it, a dataDir given
-- is the caller's to chown), cgroup (a cgroup directory the server starts
-- in), base (false: not the base CTest chose: the server's own, in its data
-- directory), preload (a shared library the server runs with, through
-- LD_PRELOAD: spec/support/preempt.c).
function platform.start(opts)
  opts = opts or {}
  local bin = opts.bin or platform.binary()
  local scratch = platform.tmpdir()
  local self = setmetatable({
    scratch = scratch,
    dataDir = opts.dataDir or (scratch .. "/data"),
    tokenFile = opts.tokenFile or (scratch .. "/token"),
    stdout = {},
    stderrTail = "",
  }, Server)
  local sb = mastra.LocalSandbox.new{ workingDirectory = scratch .. "/wd", timeout = 120000 }
  sb:start()
  self.sandbox = sb
  local words = { bin, "serve", "--listen", "127.0.0.1:0", "--data-dir", self.dataDir,
    "--token-file", self.tokenFile }
  -- the driver and the base CTest chose (test/CMakeLists.txt): the server's
  -- sandbox runs with PATH only, so they go on the command line
  for var, flag in pairs{ MASTRA_PLATFORM_DRIVER = "--driver", MASTRA_PLATFORM_BASE = "--base" } do
    local v = os.getenv(var)
    if var == "MASTRA_PLATFORM_DRIVER" and opts.driver then v = opts.driver end
    if var == "MASTRA_PLATFORM_BASE" and opts.base == false then v = nil end
    if v ~= nil and v ~= "" then
      words[#words + 1] = flag
      words[#words + 1] = v
    end
  end
  for _, a in ipairs(opts.args or {}) do words[#words + 1] = a end
  if opts.preload then
    -- under ASan the runtime must stay first (MASTRA_TEST_PRELOAD)
    local asan = os.getenv("MASTRA_TEST_PRELOAD")
    local list = (asan and asan ~= "") and (asan .. ":" .. opts.preload) or opts.preload
    table.insert(words, 1, "env")
    table.insert(words, 2, "LD_PRELOAD=" .. list)
  end
  if opts.user then
    assert(math.type(opts.user) == "integer", "platform.start: user must be a uid")
    local r = sb:executeCommand("chown", { tostring(opts.user) .. ":" .. tostring(opts.user),
      scratch })
    assert(r.exitCode == 0, "chown " .. scratch .. ": " .. r.stderr)
    table.insert(words, 1, "setpriv")
    table.insert(words, 2, "--reuid=" .. opts.user)
    table.insert(words, 3, "--regid=" .. opts.user)
    table.insert(words, 4, "--clear-groups")
    table.insert(words, 5, "--")
  end
  if opts.cgroup then
    -- the shell joins it, then execs the rest (same pid)
    for i, w in ipairs{ "sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"',
      opts.cgroup } do
      table.insert(words, i, w)
    end
  end
  local quoted = {}
  for i, w in ipairs(words) do quoted[i] = mastra.quote(w) end
  self.command = table.concat(quoted, " ")
  self.handle = sb.processes:spawn("exec " .. self.command, {
    onStdout = function(s) self.stdout[#self.stdout + 1] = s end,
    onStderr = function(s)
      local t = self.stderrTail .. s
      if #t > 16384 then t = t:sub(-16384) end
      self.stderrTail = t
    end,
  })
  local line
  platform.waitUntil(function()
    line = table.concat(self.stdout):match("^([^\n]*)\n")
    return line ~= nil or self.handle.exitCode ~= nil
  end, START_TIMEOUT_MS)
  if line == nil then
    local exited = self.handle.exitCode
    self:_release()
    error(("mastra-platform did not print its JSON line within %d ms (%s); stderr:\n%s")
      :format(START_TIMEOUT_MS, exited and ("it exited with " .. tostring(exited))
        or "still running", self.stderrTail), 2)
  end
  local info = platform.decode(line)
  if type(info) ~= "table" or type(info.url) ~= "string" or math.type(info.pid) ~= "integer" then
    self:kill9()
    error("mastra-platform printed an unexpected first line: " .. line, 2)
  end
  self.info = info
  self.url = info.url
  self.pid = info.pid
  self.port = tonumber(info.url:match(":(%d+)$"))
  self.token = (platform.readFile(self.tokenFile) or ""):gsub("%s+$", "")
  if self.token == "" then
    self:kill9()
    error("mastra-platform started but " .. self.tokenFile .. " holds no token", 2)
  end
  return self
end

-- Destroy the sandbox (kills whatever is left) and remove the scratch
-- directory. Runs once.
function Server:_release()
  if self.released then return end
  self.released = true
  pcall(self.sandbox.destroy, self.sandbox)
  platform.rm_rf(self.scratch)
end

--- Run shell text in the server's sandbox (curl, kill, bash ...).
--- The options of a PlatformSandbox of this server (project "proj",
-- environment "env"), then `extra`.
function Server:sandboxOptions(extra)
  local o = { accessToken = self.token, proxyUrl = self.url, projectId = "proj",
    environmentId = "env" }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

--- A started PlatformSandbox of this server (sandboxOptions(extra)).
function Server:startSandbox(extra)
  local sb = mastra.PlatformSandbox.new(self:sandboxOptions(extra))
  sb:start()
  return sb
end

function Server:sh(command, args, opts)
  return self.sandbox:executeCommand(command, args, opts)
end

function Server:running()
  return self.handle.exitCode == nil
end

local function wait_exit(self, ms)
  platform.waitUntil(function() return self.handle.exitCode ~= nil end, ms, 10)
  return self.handle.exitCode ~= nil
end

--- SIGTERM, wait, and raise unless the server exits with status 0.
-- Returns the exit code.
function Server:stop()
  if self.released then return self.exitCode end
  if self.handle.exitCode == nil then
    self:sh("kill -TERM " .. self.pid)
    if not wait_exit(self, STOP_TIMEOUT_MS) then
      self:kill9()
      error(("mastra-platform (pid %d) did not exit within %d ms of SIGTERM; stderr:\n%s")
        :format(self.pid, STOP_TIMEOUT_MS, self.stderrTail), 2)
    end
  end
  self.exitCode, self.signal = self.handle.exitCode, self.handle.signal
  self:_release()
  if self.exitCode ~= 0 or self.signal ~= nil then
    error(("mastra-platform (pid %d) exited with %s%s after SIGTERM (want 0); stderr:\n%s")
      :format(self.pid, tostring(self.exitCode),
        self.signal and (" (signal " .. self.signal .. ")") or "", self.stderrTail), 2)
  end
  return self.exitCode
end

--- kill -9 and wait for the process to be gone.
function Server:kill9()
  if self.released then return end
  if self.handle.exitCode == nil then
    self:sh("kill -KILL " .. self.pid)
    wait_exit(self, STOP_TIMEOUT_MS)
  end
  self.exitCode, self.signal = self.handle.exitCode, self.handle.signal
  self:_release()
end

--- Stop if still running (for teardown); never raises.
function Server:close()
  if self.released then return end
  local ok = pcall(self.stop, self)
  if not ok then self:kill9() end
end

--- curl(method, path, opts) -> {status, headers, body, json, statusLine,
-- timeMs}. path: relative to the server's URL (or a full URL). opts:
--   headers   {name = value}; value "" removes a header curl adds
--   body      request body (bytes); bodyFile: a file to send instead
--   token     false: no Authorization; a string: that token
--   raw       true: send the path as it is (--path-as-is)
--   maxTime   seconds (default 60)
--   args      extra curl words
--   allowFail true: return {curlExit, curlError} instead of raising when
--             curl itself fails
function Server:curl(method, path, opts)
  opts = opts or {}
  local out, hdr = next_name(self, "body"), next_name(self, "headers")
  local args = { "-s", "-S", "-g", "-o", out, "-D", hdr, "-w", "%{http_code}",
    "--max-time", tostring(opts.maxTime or 60) }
  if method == "HEAD" then
    args[#args + 1] = "-I"
  else
    args[#args + 1] = "-X"
    args[#args + 1] = method
  end
  if opts.raw then args[#args + 1] = "--path-as-is" end
  if opts.token ~= false then
    args[#args + 1] = "-H"
    args[#args + 1] = "Authorization: Bearer " .. (opts.token or self.token)
  end
  for k, v in pairs(opts.headers or {}) do
    args[#args + 1] = "-H"
    args[#args + 1] = v == "" and (k .. ":") or (k .. ": " .. v)
  end
  local bodyFile = opts.bodyFile
  local tmpBody
  if opts.body ~= nil then
    tmpBody = next_name(self, "request")
    platform.writeFile(tmpBody, opts.body)
    bodyFile = tmpBody
  end
  if bodyFile then
    args[#args + 1] = "--data-binary"
    args[#args + 1] = "@" .. bodyFile
  end
  for _, a in ipairs(opts.args or {}) do args[#args + 1] = a end
  args[#args + 1] = path:match("^%a+://") and path or (self.url .. path)
  local r = self:sh("curl", args, { timeout = ((opts.maxTime or 60) + 15) * 1000 })
  local headers, statusLine = parse_headers(platform.readFile(hdr))
  local res = {
    status = tonumber(r.stdout),
    headers = headers,
    statusLine = statusLine,
    body = platform.readFile(out) or "",
    timeMs = r.executionTimeMs,
    curlExit = r.exitCode,
    curlError = r.stderr,
  }
  os.remove(out)
  os.remove(hdr)
  if tmpBody then os.remove(tmpBody) end
  if r.exitCode ~= 0 and not opts.allowFail then
    error(("curl %s %s failed (exit %s): %s"):format(method, path, tostring(r.exitCode),
      r.stderr), 2)
  end
  local first = res.body:match("^%s*([%[{])")
  if first then
    local ok, v = pcall(platform.decode, res.body)
    if ok then res.json = v end
  end
  return res
end

--- curl with a JSON body (a Lua table, or a string sent as it is).
function Server:json(method, path, body, opts)
  opts = opts or {}
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.headers = o.headers or {}
  o.headers["Content-Type"] = o.headers["Content-Type"] or "application/json"
  if body ~= nil then
    o.body = type(body) == "string" and body or json.encode(body)
  end
  return self:curl(method, path, o)
end

--- Many requests over one curl process (one connection, kept alive).
-- Each request: {method, path, bodyFile?, output?, headers?}. Returns the
-- list of statuses (numbers) and the curl result.
function Server:curlMany(requests, opts)
  opts = opts or {}
  local cfg = next_name(self, "curl-config")
  local lines = {}
  local function q(s)
    return '"' .. s:gsub("\\", "\\\\"):gsub('"', '\\"') .. '"'
  end
  for i, req in ipairs(requests) do
    if i > 1 then lines[#lines + 1] = "next" end
    local url = req.path:match("^%a+://") and req.path or (self.url .. req.path)
    lines[#lines + 1] = "url = " .. q(url)
    lines[#lines + 1] = "request = " .. q(req.method)
    lines[#lines + 1] = "globoff"
    lines[#lines + 1] = "header = " .. q("Authorization: Bearer " .. self.token)
    for k, v in pairs(req.headers or {}) do
      lines[#lines + 1] = "header = " .. q(k .. ": " .. v)
    end
    if req.bodyFile then lines[#lines + 1] = "data-binary = " .. q("@" .. req.bodyFile) end
    lines[#lines + 1] = "output = " .. q(req.output or "/dev/null")
    lines[#lines + 1] = "write-out = " .. q("%{http_code}\\n")
  end
  platform.writeFile(cfg, table.concat(lines, "\n") .. "\n")
  local r = self:sh("curl", { "-s", "-S", "-K", cfg },
    { timeout = opts.timeout or 300000 })
  os.remove(cfg)
  local statuses = {}
  for code in r.stdout:gmatch("(%d+)\n") do statuses[#statuses + 1] = tonumber(code) end
  return statuses, r
end

--- POST /sandbox/{id}/exec-lease under prefix; the decoded lease (raises
-- unless 200).
function Server:lease(prefix, sandboxId)
  local r = self:curl("POST", prefix .. "/sandbox/" .. sandboxId .. "/exec-lease")
  if r.status ~= 200 or type(r.json) ~= "table" then
    error(("exec-lease of %s answered %s: %s"):format(sandboxId, tostring(r.status), r.body), 2)
  end
  return r.json
end

-- The command line of $MASTRA_WS_EXEC (spec/support/ws-exec.c) for
-- command over lease ({wsEndpoint, jwt}). opts: cwd, env ({K = V}),
-- closeAfterMs, and url / jwt / protocol overrides; for resumable execs
-- initJson (a table merged into init_exec's data), frames (a file that
-- gets a line a frame), cutAfterBytes, ack, noStdinClose, stdinFile (its
-- bytes go as stdin), stdinFrom, cutAfterStdin, hello (exec_hello first),
-- stdinChunk (bytes a stdin frame, default 16384).
function platform.wsExecCommandLine(lease, command, opts)
  opts = opts or {}
  local words = { platform.wsExecBinary() }
  local function add(...)
    for _, w in ipairs{ ... } do words[#words + 1] = w end
  end
  if opts.cwd then add("--cwd", opts.cwd) end
  local names = {}
  for k in pairs(opts.env or {}) do names[#names + 1] = k end
  table.sort(names)
  for _, k in ipairs(names) do add("--env", k .. "=" .. opts.env[k]) end
  if opts.closeAfterMs then add("--close-after-ms", tostring(opts.closeAfterMs)) end
  if opts.protocol then add("--protocol", opts.protocol) end
  -- exec-resume/1 (docs/platform.md "Resumable execs")
  if opts.initJson then add("--init-json", json.encode(opts.initJson)) end
  if opts.frames then add("--frames", opts.frames) end
  if opts.cutAfterBytes then add("--cut-after-bytes", tostring(opts.cutAfterBytes)) end
  if opts.ack then add("--ack") end
  if opts.noStdinClose then add("--no-stdin-close") end
  if opts.hello then add("--hello") end
  if opts.stdinFile then add("--stdin-file", opts.stdinFile) end
  if opts.stdinFrom then add("--stdin-from", tostring(opts.stdinFrom)) end
  if opts.cutAfterStdin then add("--cut-after-stdin", tostring(opts.cutAfterStdin)) end
  if opts.stdinChunk then add("--stdin-chunk", tostring(opts.stdinChunk)) end
  add("--", opts.url or lease.wsEndpoint, opts.jwt or lease.jwt, command)
  local quoted = {}
  for i, w in ipairs(words) do quoted[i] = mastra.quote(w) end
  return table.concat(quoted, " ")
end

--- Split what ws-exec wrote: its own lines ("ws-exec: ...") come last on
-- stderr, after the command's bytes (which need not end with a newline).
-- Returns {exitCode (nil when no exit frame came), stdout, stderr (the
-- command's), summary = {exit, close, opened, httpStatus, httpBody,
-- reason, log}, status (ws-exec's own exit status)}.
function platform.wsResult(stdout, stderr, status)
  local log = {}
  while true do
    local before, line = stderr:match("^(.-)(ws%-exec: [^\n]*)\n$")
    if before == nil then break end
    table.insert(log, 1, line)
    stderr = before
  end
  local summary = { log = log }
  for i, line in ipairs(log) do
    local e, c, o = line:match("^ws%-exec: exit=(%S+) close=(%S+) opened=(%d)$")
    if e then
      summary.exit, summary.close, summary.opened = tonumber(e), tonumber(c), o == "1"
    end
    local st = line:match("^ws%-exec: handshake failed: HTTP (%d+)$")
    if st then
      summary.httpStatus = tonumber(st)
      summary.httpBody = log[i + 1] and log[i + 1]:match("^ws%-exec: (.*)$")
    end
    local reason = line:match("^ws%-exec: close reason: (.*)$")
    if reason then summary.reason = reason end
  end
  return {
    exitCode = summary.exit,
    stdout = stdout,
    stderr = stderr,
    summary = summary,
    status = status,
  }
end

--- Run command over the exec WebSocket with $MASTRA_WS_EXEC and wait for
-- it (see wsExecCommandLine and platform.wsResult; opts.timeout: ms for
-- the client process, default 120 s). Adds timeMs.
function Server:wsExec(lease, command, opts)
  opts = opts or {}
  local r = self:sh(platform.wsExecCommandLine(lease, command, opts), nil,
    { timeout = opts.timeout or 120000 })
  local res = platform.wsResult(r.stdout, r.stderr, r.exitCode)
  res.timeMs = r.executionTimeMs
  return res
end

--- Start ws-exec in the background; returns the process handle (its
-- stdout/stderr/exitCode fill in; platform.wsResult(h.stdout, h.stderr,
-- h.exitCode) once it has exited).
function Server:wsExecSpawn(lease, command, opts)
  return self.sandbox.processes:spawn(platform.wsExecCommandLine(lease, command, opts))
end

-- }======

platform.Server = Server

return platform
