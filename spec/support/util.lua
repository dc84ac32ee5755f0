-- Helpers shared by the specs: temporary directories, files, processes,
-- and waiting on the event loop.
local lfs = require "lfs"
local mastra = require "mastra"

local util = {}

--- The directory for temporary files: $TMPDIR, else /tmp.
-- spec/support/run-busted gives each spec file a TMPDIR of its own, which
-- the leaks_check test finds empty unless the spec left something there.
function util.tmproot()
  local root = os.getenv("TMPDIR")
  if root == nil or root == "" then return "/tmp" end
  return root
end

--- A fresh empty file under util.tmproot() (os.tmpname ignores TMPDIR).
function util.tmpname()
  local p = assert(io.popen("mktemp " .. mastra.quote(util.tmproot() .. "/lua_XXXXXX")))
  local name = p:read("l")
  p:close()
  assert(name and name ~= "", "mktemp failed in " .. util.tmproot())
  return name
end

--- A fresh directory (and the reserved temp file name beside it).
function util.tmpdir()
  local base = util.tmpname() -- a file: it reserves the name
  local dir = base .. ".d"
  assert(lfs.mkdir(dir))
  return dir, base
end

function util.rm_rf(...)
  for _, p in ipairs{ ... } do
    if p ~= nil and p ~= "" and p ~= "/" then
      os.execute("rm -rf -- " .. mastra.quote(p))
    end
  end
end

--- The output of shell text cmd, its stderr included, and whether it
-- exited 0. LD_PRELOAD is unset for it: under AddressSanitizer the specs'
-- runtime is preloaded (spec/support/run-busted), and the host's tools
-- (ip, nft, setpriv, du...) are not instrumented.
function util.sh(cmd)
  local p = io.popen("unset LD_PRELOAD; " .. cmd .. " 2>&1")
  local out = p:read("a")
  local ok = p:close()
  return out, ok == true
end

--- Whether this process runs as root (uid 0).
function util.is_root()
  return util.trim((util.sh("id -u"))) == "0"
end

function util.trim(s)
  return (s:match("^%s*(.-)%s*$"))
end

function util.read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

--- The lines of /proc/self/mountinfo that name text (a path, or part of
-- one).
function util.mounts(text)
  local info = assert(util.read_file("/proc/self/mountinfo"), "cannot read /proc/self/mountinfo")
  local found = {}
  for line in info:gmatch("[^\n]+") do
    if line:find(text, 1, true) then found[#found + 1] = line end
  end
  return found
end

--- Alive and not a zombie (killed grandchildren may stay zombies when
-- PID 1 does not reap them).
function util.alive(pid)
  local s = util.read_file("/proc/" .. tostring(pid) .. "/stat")
  if not s then return false end
  local state = s:match(".*%) (%a)")
  return state ~= nil and state ~= "Z"
end

--- Drive the loop until pred() holds or ms (default 5000) have passed.
function util.wait_until(pred, ms, step)
  local deadline = mastra.now() + (ms or 5000)
  while not pred() do
    if mastra.now() > deadline then return pred() and true or false end
    mastra.sleep(step or 10)
  end
  return true
end

--- A started LocalSandbox whose working directory is <fresh dir>/wd;
-- returns the sandbox, the directory and the reserved name beside it
-- (give all three to util.dropSandbox).
function util.tempSandbox()
  local dir, base = util.tmpdir()
  local sb = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd" }
  sb:start()
  return sb, dir, base
end

function util.dropSandbox(sb, dir, base)
  if sb then sb:destroy() end
  util.rm_rf(dir, base)
end

--- The maxRetainedBytes contract of sb:executeCommand, any sandbox: the
-- result keeps the newest bytes of a stream and counts the others, while
-- onStdout sees everything (300003 bytes of stdout, over several reads or
-- frames).
function util.checkRetainedOutput(sb)
  local check = require "luassert" -- busted's assert lives in the specs' own environment
  local seen = 0
  local r = sb:executeCommand("head -c 300000 /dev/zero | tr '\\0' x; printf end; echo e >&2",
    nil, { maxRetainedBytes = 10, onStdout = function(chunk) seen = seen + #chunk end })
  check.are.equal(0, r.exitCode)
  check.are.equal(300003, seen)
  check.are.equal("xxxxxxxend", r.stdout)
  check.is_true(r.stdoutTruncated)
  check.are.equal(300003 - 10, r.stdoutDroppedBytes)
  check.are.equal("e\n", r.stderr)
  check.is_false(r.stderrTruncated)
  check.are.equal(0, r.stderrDroppedBytes)
  r = sb:executeCommand("printf abc", nil, { maxRetainedBytes = 0 })
  check.are.equal("", r.stdout)
  check.are.equal(3, r.stdoutDroppedBytes)
  -- by default an exec keeps everything
  r = sb:executeCommand("head -c 300000 /dev/zero | tr '\\0' x")
  check.are.equal(300000, #r.stdout)
  check.is_false(r.stdoutTruncated)
  check.are.equal(0, r.stdoutDroppedBytes)
end

--- A list and a callback that appends to it (for onStdout/onStderr).
function util.collector()
  local chunks = {}
  return chunks, function(s) chunks[#chunks + 1] = s end
end

return util
