-- The embedded default (docs/platform.md): with no platform credentials
-- and no proxy URL, scripts run against a per-user local mastra-platform,
-- found or started here.
--
-- State lives in $MASTRA_PLATFORM_STATE_DIR, else $XDG_STATE_HOME/mastra,
-- else ~/.local/state/mastra:
--   platform.lock    flock'd while a process looks for (or starts) the server;
--                    holds the pid of the last process that took it
--   platform.state   url=, token=, pid=, bin=, version=, protocol= lines of
--                    the running server (its binary's path and --version)
--   platform.out     the server's stdout (its JSON line); platform.log: stderr
-- The server's data is in <state dir>/platform-data. It exits by itself
-- after it has been idle, with no sandbox, for MASTRA_PLATFORM_IDLE_EXIT
-- seconds (default 900).
--
-- Across versions (docs/platform.md "One per user, across versions"): a
-- running server of another binary or version is named in one line on
-- stderr, and used only if its protocol (the major.minor of its version,
-- or the major from 1.0 on) is this client's; otherwise this client starts
-- its own, with the state dir <state dir>/protocol-<protocol>. A recorded
-- server that does not answer an HTTP request within
-- local_platform.probeTimeoutMs is reported as hung, with its pid.
local core = require "mastra.core"
local dotenv = require "mastra.dotenv"
local errors = require "mastra.errors"
local process = require "mastra.process"
local shell = require "mastra.shell"
local task = require "mastra.task"

local local_platform = {}

-- the state directory and its files are the user's alone: the state file
-- holds the token, the log the inspector's one-time login link
local PRIVATE_DIR = 448  -- 0700
local PRIVATE_FILE = 384 -- 0600
-- while the platform builds its base, a line on stderr this often
local BUILD_PROGRESS_MS = 3000

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

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

-- The prefix a module was installed under: PREFIX/share/lua/5.4/mastra/x.lua
-- or PREFIX/lib[64][/multiarch]/lua/5.4/mastra/core.so (a LuaRocks tree,
-- /usr/local, ...), whose PREFIX/bin holds what the rock installed.
local function install_prefix(path)
  if path == nil then return nil end
  return path:match("^(.+)/share/lua/[^/]+/mastra/")
    or path:match("^(.+)/lib[^/]*/lua/[^/]+/mastra/")
    or path:match("^(.+)/lib[^/]*/[^/]+/lua/[^/]+/mastra/")
end

local function module_sibling()
  local here = debug.getinfo(1, "S").source
  local paths = {
    here:sub(1, 1) == "@" and here:sub(2) or nil,
    package.searchpath("mastra.core", package.cpath),
  }
  for i = 1, 2 do
    local prefix = install_prefix(paths[i])
    if prefix and exists(prefix .. "/bin/mastra-platform") then
      return prefix .. "/bin/mastra-platform"
    end
  end
  return nil
end

-- $MASTRA_PLATFORM_BIN, else next to the running executable (mastra-lua
-- and mastra-platform are installed together), else the bin/ of the tree
-- the module was installed into (the rock brings it), else the PATH.
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
  local installed = module_sibling()
  if installed then return installed end
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

--- The protocol of a version: "0.1" for 0.1.x (each 0.x may change it),
-- "1" for 1.y.z; nil for no version.
function local_platform.protocol(version)
  if type(version) ~= "string" then return nil end
  local major, minor = version:match("^(%d+)%.(%d+)")
  if major == nil then return nil end
  if major == "0" then return major .. "." .. minor end
  return major
end

-- Run `bin --version`: "mastra-platform 0.1.0" -> "0.1.0" (nil if it says
-- something else). A task's wait, never a blocking one.
local function binary_version(bin)
  local p = process.start{ command = shell.quote(bin) .. " --version", timeout = 5000 }
  process.pump(p)
  if p.exitCode ~= 0 then return nil end
  return (p.stdout or ""):match("^mastra%-platform (%S+)")
end

-- The size of a file, or 0.
local function file_size(path)
  local f = io.open(path, "rb")
  if not f then return 0 end
  local n = f:seek("end")
  f:close()
  return n or 0
end

-- A server's start takes startMs, or up to baseBuildMs on the first start
-- of a data directory, while its log (from log_from on) says that it
-- builds the namespaces driver's base (the host's tools and npm's
-- TypeScript and tsx: about 10 s here, the npm part bounded at 120 s).
local_platform.startMs = 15000
local_platform.baseBuildMs = 180000

-- MASTRA_PLATFORM_QUIET set (and not "0"): the local platform's lines on
-- stderr are not written
local function quiet()
  local v = os.getenv("MASTRA_PLATFORM_QUIET")
  return v ~= nil and v ~= "" and v ~= "0"
end

local function say(text)
  if not quiet() then io.stderr:write("mastra: ", text, "\n") end
end

local function wait_for_url(out_path, log_path, log_from)
  local started, said = core.now(), 0
  local deadline, building = started + local_platform.startMs, false
  while core.now() < deadline do
    local line = read_file(out_path)
    local url = line and line:match('"url":"([^"]+)"')
    local pid = line and tonumber(line:match('"pid":(%d+)'))
    if url and pid then return url, pid end
    if not building then
      local log = read_file(log_path)
      if log and log:find("building the base", log_from + 1, true) then
        building, deadline = true, started + local_platform.baseBuildMs
        said = core.now()
        say(("the local platform is building the sandboxes' base, once (about 10 s;"
          .. " its log: %s)"):format(log_path))
      end
    elseif core.now() - said >= BUILD_PROGRESS_MS then
      said = core.now()
      say(("still building the base (%.0f s)"):format((said - started) / 1000))
    end
    task.sleep(20)
  end
  return nil, nil, deadline - started
end

local function start_server(dir)
  local bin, why = find_binary()
  if bin == nil then return nil, why end
  local data = dir .. "/platform-data"
  local token_file = dir .. "/platform.token"
  local out_path = dir .. "/platform.out"
  local log_path = dir .. "/platform.log"
  os.remove(out_path)
  -- the user's alone: the output and the log hold the inspector's one-time
  -- login link (made here, 0600, before the shell's redirections open them)
  for _, path in ipairs{ out_path, log_path } do
    local ok, err = core.fsAppend(path, "")
    if ok then ok, err = core.fsChmod(path, PRIVATE_FILE) end
    if not ok then return nil, "cannot create " .. path .. ": " .. err end
  end
  local log_from = file_size(log_path)
  local idle = tonumber(os.getenv("MASTRA_PLATFORM_IDLE_EXIT") or "") or 900
  -- sh starts the server in a session of its own and exits at once; the
  -- wait for sh is a task's wait (never a blocking waitpid)
  local starter = process.start{
    command = ("setsid %s serve --listen 127.0.0.1:0 --data-dir %s"
      .. " --token-file %s --idle-exit %d </dev/null >%s 2>>%s &"):format(shell.quote(bin),
      shell.quote(data), shell.quote(token_file), idle, shell.quote(out_path),
      shell.quote(log_path)),
    env = true, -- the server gets this process's environment
    timeout = 10000,
  }
  process.pump(starter)
  if starter.exitCode ~= 0 then
    return nil, ("cannot start mastra-platform: /bin/sh exited with %s: %s")
      :format(starter.exitCode, starter.stderr)
  end
  local url, pid, waited = wait_for_url(out_path, log_path, log_from)
  if url == nil then
    return nil, ("mastra-platform did not start within %g s; see %s")
      :format(waited / 1000, log_path)
  end
  local token = (read_file(token_file) or ""):gsub("%s+$", "")
  local version = binary_version(bin) or "unknown"
  local state = { url = url, token = token, pid = pid, bin = core.fsRealpath(bin) or bin,
    version = version, protocol = local_platform.protocol(version) or "unknown" }
  -- 0600: it holds the token
  local ok2, werr = core.fsWriteAtomic(dir .. "/platform.state",
    ("url=%s\ntoken=%s\npid=%d\nbin=%s\nversion=%s\nprotocol=%s\n"):format(url, token, pid,
      state.bin, state.version, state.protocol), false, PRIVATE_FILE)
  if not ok2 then return nil, "cannot write its state file: " .. werr end
  return state
end

-- Say on stderr that this process started the local platform: once per
-- start of a platform, not in every script that finds it running
-- (docs/platform.md, "The embedded default").
local function announce(state, started)
  if not started then return end
  say(("using the local platform at %s (started it; set MASTRA_PLATFORM_ACCESS_TOKEN"
    .. " and MASTRA_WORKSPACE_PROXY_URL for a hosted one, MASTRA_PLATFORM_QUIET=1 to"
    .. " silence this)"):format(state.url))
end

-- The lock is taken without blocking the thread: EAGAIN is retried
-- after a sleep that doubles from LOCK_FIRST_SLEEP_MS up to
-- LOCK_MAX_SLEEP_MS, for at most lockDeadlineMs (more than the longest
-- start of a server: baseBuildMs).
local LOCK_FIRST_SLEEP_MS = 10
local LOCK_MAX_SLEEP_MS = 200
local_platform.lockDeadlineMs = local_platform.baseBuildMs + 20000

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

-- {====== another version, another binary, a hung server ======

-- Where this client's own server lives when the recorded one speaks
-- another protocol.
local function own_dir(dir)
  return dir .. "/protocol-" .. (local_platform.protocol(core._VERSION) or "unknown")
end

local noted = {} -- pid -> true: the server was named on stderr

--- Whether this client may use the recorded server: its protocol is this
-- client's. A server of another binary or another version is named in one
-- line on stderr (once per server and process).
local function compatible(state, dir)
  local mine = local_platform.protocol(core._VERSION)
  local theirs = local_platform.protocol(state.version)
  local bin = find_binary()
  bin = bin and (core.fsRealpath(bin) or bin)
  local other = state.version ~= core._VERSION or (bin ~= nil and state.bin ~= bin)
  local ok = theirs ~= nil and theirs == mine
  if other and not noted[state.pid] then
    noted[state.pid] = true
    io.stderr:write(("mastra: the local platform at %s (pid %d) is %s version %s; this client"
      .. " is version %s%s: %s\n"):format(state.url, state.pid,
      state.bin or "a binary it did not record", state.version or "unknown", core._VERSION,
      bin and (" with " .. bin) or "",
      ok and ("using it, its protocol is the same (" .. mine .. ")")
        or ("its protocol is not " .. tostring(mine) .. ", starting another one (state in "
          .. own_dir(dir) .. ")")))
  end
  return ok
end

-- How long a recorded server may take to answer a request before it is
-- reported as hung.
local_platform.probeTimeoutMs = 3000

local answered = {} -- "pid url" -> true: it answered once in this process

--- Whether the recorded server answers HTTP (any status). False when
-- nothing accepts the connection (it is not listening: start another);
-- raises when it accepts and says nothing within probeTimeoutMs: hung.
local function answers(state, dir)
  local key = state.pid .. " " .. state.url
  if answered[key] then return true end
  local req <close> = core.http{ method = "GET", url = state.url .. "/",
    timeout = local_platform.probeTimeoutMs }
  if req == nil then return false end
  while true do
    local status, msg, name = req:result()
    if status then
      answered[key] = true
      return true
    end
    if msg then
      if name ~= "CURLE_OPERATION_TIMEDOUT" then return false end
      errors.MastraError:raise({
        message = ("mastra: the local platform at %s (pid %d) is hung: it did not answer within"
          .. " %g s. Stop it (kill %d; its log is %s/platform.log), then try again"):format(
          state.url, state.pid, local_platform.probeTimeoutMs / 1000, state.pid, dir),
        pid = state.pid, url = state.url, code = name,
      }, 0)
    end
    task.wait(req:id())
  end
end

-- }======

-- Find or start the server, under the cross-process lock.
local function find_or_start(dir)
  local lock <close> = lock_state(dir) -- luacheck: ignore 211
  local state = running_server(dir)
  if state and answers(state, dir) then return state, false end
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
-- it cannot. A server that runs (and answers) is found from the state file
-- (written atomically) without the lock; otherwise concurrent callers share one
-- attempt (a task they wait for), which takes the lock.
function local_platform.ensure()
  dotenv.loadDefault() -- ./.env (dotenv.lua), once per process
  local dir = local_platform.stateDir()
  local state = running_server(dir)
  if state and not compatible(state, dir) then
    dir = own_dir(dir)
    state = running_server(dir)
  end
  if state and answers(state, dir) then
    announce(state, false)
  else
    -- a directory made here is the user's alone; one that was there (a
    -- MASTRA_PLATFORM_STATE_DIR of the user's) keeps its mode
    local existed = core.fsStat(dir) ~= nil
    local ok, err, ename = core.fsMkdir(dir, true)
    if ok and not existed then ok, err, ename = core.fsChmod(dir, PRIVATE_DIR) end
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
