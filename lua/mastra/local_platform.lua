-- The embedded default (docs/platform.md): with no platform credentials
-- and no proxy URL, scripts run against a per-user local mastra-platform,
-- found or started here.
--
-- State lives in $MASTRA_PLATFORM_STATE_DIR, else $XDG_STATE_HOME/mastra,
-- else ~/.local/state/mastra:
--   platform.lock    flock'd while a process looks for (or starts) the server;
--                    holds the pid of the last process that took it
--   platform.state   url=, token=, pid= lines of the running server
--   platform.out     the server's stdout (its JSON line); platform.log: stderr
-- The server's data is in <state dir>/platform-data. It exits by itself
-- after it has been idle, with no sandbox, for MASTRA_PLATFORM_IDLE_EXIT
-- seconds (default 900).
local core = require "mastra.core"
local errors = require "mastra.errors"
local process = require "mastra.process"
local shell = require "mastra.shell"
local task = require "mastra.task"

local local_platform = {}

local DEFAULTS = {
  projectId = "local",
  environmentId = "local",
  bucketName = "local",
}
local_platform.defaults = DEFAULTS

local function nonblank(v)
  if v ~= nil and v:match("%S") then return v end
  return nil
end

--- Whether the environment names a real platform (a token or a proxy).
function local_platform.configured()
  return nonblank(os.getenv("MASTRA_PLATFORM_ACCESS_TOKEN")) ~= nil
    or nonblank(os.getenv("MASTRA_PLATFORM_SECRET_KEY")) ~= nil
    or nonblank(os.getenv("MASTRA_WORKSPACE_PROXY_URL")) ~= nil
end

function local_platform.stateDir()
  local dir = nonblank(os.getenv("MASTRA_PLATFORM_STATE_DIR"))
  if dir then return dir end
  local xdg = nonblank(os.getenv("XDG_STATE_HOME"))
  if xdg then return xdg .. "/mastra" end
  return (os.getenv("HOME") or "/tmp") .. "/.local/state/mastra"
end


local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

-- The mastra-platform binary: $MASTRA_PLATFORM_BIN, next to the running
-- executable (mastra-lua and mastra-platform are installed together), or
-- the PATH.
local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local function find_binary()
  local bin = nonblank(os.getenv("MASTRA_PLATFORM_BIN"))
  if bin then
    if exists(bin) then return bin end
    return nil, ("MASTRA_PLATFORM_BIN is %s, which does not exist"):format(bin)
  end
  local exe = core.fsReadlink("/proc/self/exe")
  if exe then
    local sibling = exe:gsub("[^/]*$", "") .. "mastra-platform"
    if exists(sibling) then return sibling end
  end
  for dir in (os.getenv("PATH") or ""):gmatch("[^:]+") do
    local candidate = dir .. "/mastra-platform"
    if exists(candidate) then return candidate end
  end
  return nil, "cannot find the mastra-platform binary: set MASTRA_PLATFORM_BIN,"
    .. " or put it on the PATH (or set MASTRA_PLATFORM_ACCESS_TOKEN and"
    .. " MASTRA_WORKSPACE_PROXY_URL to use a hosted platform)"
end

local function parse_state(text)
  local state = {}
  for k, v in (text or ""):gmatch("([%w_]+)=([^\n]*)") do state[k] = v end
  if state.url and state.token and tonumber(state.pid) then
    state.pid = tonumber(state.pid)
    return state
  end
  return nil
end

-- A server from the state file that is still running.
local function running_server(dir)
  local state = parse_state(read_file(dir .. "/platform.state"))
  if state == nil or not core.pidAlive(state.pid) then return nil end
  local cmdline = read_file("/proc/" .. state.pid .. "/cmdline") or ""
  if not cmdline:find("mastra-platform", 1, true) then return nil end
  return state
end

local function wait_for_url(out_path, deadline)
  while core.now() < deadline do
    local line = read_file(out_path)
    local url = line and line:match('"url":"([^"]+)"')
    local pid = line and tonumber(line:match('"pid":(%d+)'))
    if url and pid then return url, pid end
    task.sleep(20)
  end
  return nil
end

local function start_server(dir)
  local bin, why = find_binary()
  if bin == nil then return nil, why end
  local data = dir .. "/platform-data"
  local token_file = dir .. "/platform.token"
  local out_path = dir .. "/platform.out"
  os.remove(out_path)
  local idle = tonumber(os.getenv("MASTRA_PLATFORM_IDLE_EXIT") or "") or 900
  -- sh starts the server in a session of its own and exits at once; the
  -- wait for sh is a task's wait (never a blocking waitpid)
  local starter = process.start{
    command = ("setsid %s serve --listen 127.0.0.1:0 --data-dir %s --token-file %s"
      .. " --idle-exit %d </dev/null >%s 2>>%s &"):format(shell.quote(bin),
      shell.quote(data), shell.quote(token_file), idle, shell.quote(out_path),
      shell.quote(dir .. "/platform.log")),
    env = true, -- the server gets this process's environment
    timeout = 10000,
  }
  process.pump(starter)
  if starter.exitCode ~= 0 then
    return nil, ("cannot start mastra-platform: /bin/sh exited with %s: %s")
      :format(starter.exitCode, starter.stderr)
  end
  local url, pid = wait_for_url(out_path, core.now() + 15000)
  if url == nil then
    return nil, ("mastra-platform did not start within 15 s; see %s/platform.log")
      :format(dir)
  end
  local token = (read_file(token_file) or ""):gsub("%s+$", "")
  local state = { url = url, token = token, pid = pid }
  local ok2, werr = core.fsWriteAtomic(dir .. "/platform.state",
    ("url=%s\ntoken=%s\npid=%d\n"):format(url, token, pid))
  if not ok2 then return nil, "cannot write its state file: " .. werr end
  return state
end

local announced = false

-- Say once on stderr which server this process uses.
local function announce(state, started)
  if announced then return end
  announced = true
  io.stderr:write(("mastra: using the local platform at %s (%s; set"
    .. " MASTRA_PLATFORM_ACCESS_TOKEN and MASTRA_WORKSPACE_PROXY_URL for a"
    .. " hosted one)\n"):format(state.url, started and "started it" or "already running"))
end

-- The lock is taken without blocking the thread: EAGAIN is retried
-- after a sleep that doubles from LOCK_FIRST_SLEEP_MS up to
-- LOCK_MAX_SLEEP_MS, for at most lockDeadlineMs (twice the 15 s a server's
-- start may take).
local LOCK_FIRST_SLEEP_MS = 10
local LOCK_MAX_SLEEP_MS = 200
local_platform.lockDeadlineMs = 30000

local function lock_state(dir)
  local path = dir .. "/platform.lock"
  local deadline = core.now() + local_platform.lockDeadlineMs
  local pause = LOCK_FIRST_SLEEP_MS
  while true do
    local lock, err, name = core.lock(path, true)
    if lock then
      -- the holder's pid, for the message of a process that gives up
      local f = io.open(path, "r+b")
      if f then
        f:write((core.fsReadlink("/proc/self") or "0") .. "\n")
        f:close()
      end
      return lock
    end
    if name ~= "EAGAIN" and name ~= "EWOULDBLOCK" then
      errors.forCode(name):raise({ message = "mastra: cannot lock the local platform state: "
        .. tostring(err), path = path, code = name }, 0)
    end
    if core.now() >= deadline then
      local holder = tonumber((read_file(path) or ""):match("^(%d+)"))
      errors.MastraError:raise({
        message = ("mastra: cannot lock the local platform state: %s is held by %s for"
          .. " more than %g s (a mastra process that is starting the local platform;"
          .. " if it hangs, stop it)"):format(path,
          holder and holder > 0 and ("pid " .. holder) or "another process",
          local_platform.lockDeadlineMs / 1000),
        path = path, holderPid = holder, code = name,
      }, 0)
    end
    task.sleep(pause)
    pause = math.min(pause * 2, LOCK_MAX_SLEEP_MS)
  end
end

-- Find or start the server, under the cross-process lock.
local function find_or_start(dir)
  local lock <close> = lock_state(dir) -- luacheck: ignore 211
  local state = running_server(dir)
  if state then return state, false end
  local serr
  state, serr = start_server(dir)
  if state == nil then
    errors.MastraError:raise({ message = "mastra: cannot start the local platform: " .. serr }, 0)
  end
  return state, true
end

local finding  -- the task looking for the server; concurrent callers wait for it

--- Find or start the local platform. Returns {url, token, pid, projectId,
-- environmentId, bucketName}; raises with a message saying what to do when
-- it cannot. A server that runs is found from the state file (written
-- atomically) without the lock; otherwise concurrent callers share one
-- attempt (a task they wait for), which takes the lock.
function local_platform.ensure()
  local dir = local_platform.stateDir()
  local state = running_server(dir)
  if state then
    announce(state, false)
  else
    local ok, err, ename = core.fsMkdir(dir, true)
    if not ok then
      errors.forCode(ename):raise({ message = ("mastra: cannot create the local platform's state"
        .. " directory: %s (set MASTRA_PLATFORM_STATE_DIR to a writable directory)"):format(err),
        path = dir, code = ename }, 0)
    end
    if finding == nil or finding.dir ~= dir then
      local t = task.spawnShielded(function()
        local s, started = find_or_start(dir)
        announce(s, started)
        return s
      end)
      finding = { task = t, dir = dir }
    end
    local attempt = finding
    local wok, r = pcall(attempt.task.wait, attempt.task)
    if finding == attempt then finding = nil end
    if not wok then
      if type(r) == "string" then r = r:gsub("\nstack traceback:.*", "") end
      error(r, 2)
    end
    state = r
  end
  return {
    url = state.url,
    token = state.token,
    pid = state.pid,
    projectId = DEFAULTS.projectId,
    environmentId = DEFAULTS.environmentId,
    bucketName = DEFAULTS.bucketName,
  }
end

return local_platform
