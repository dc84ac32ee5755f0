-- Helpers shared by the specs: temporary directories, files, processes,
-- and waiting on the event loop.
local lfs = require "lfs"
local mastra = require "mastra"

local util = {}

--- A fresh directory (and the reserved temp file name beside it).
function util.tmpdir()
  local base = os.tmpname() -- a file: it reserves the name
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

--- A list and a callback that appends to it (for onStdout/onStderr).
function util.collector()
  local chunks = {}
  return chunks, function(s) chunks[#chunks + 1] = s end
end

return util
