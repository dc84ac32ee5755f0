-- The leak fixture of the spec tests (test/CMakeLists.txt): every spec_*
-- test requires it, so CTest runs `baseline` before the first of them and
-- `check` after the last, in parallel runs too.
--
--   lua5.4 spec/support/leak-check.lua baseline DIR
--   lua5.4 spec/support/leak-check.lua check DIR
--
-- spec/support/run-busted starts busted for a spec file
--   * in a session of its own, recorded as DIR/sessions/<session id> (the
--     file holds the spec file's name). Everything the spec starts inherits
--     the session (mastra gives a child a process group of its own, in the
--     same session), and the session outlives busted;
--   * with TMPDIR=DIR/tmp/<spec name>, where the specs create their temp
--     files, sandbox directories and platform data dirs
--     (spec/support/util.lua: util.tmpdir).
-- `baseline` starts both afresh. `check` fails, naming the spec file, when
--   * a process still runs in a recorded session, or with its working
--     directory under DIR/tmp (a daemon that made a session of its own,
--     like the local platform's, still runs where its spec put it);
--   * a spec's TMPDIR is not empty.
-- It kills those processes and removes those files, so that nothing stays.
-- What a spec file leaves inside its own process (zombies, descriptors) is
-- checked in that process, by spec/support/file-leaks.lua.
local lfs = require "lfs"

local function fail(msg)
  io.stderr:write("leak-check: ", msg, "\n")
  os.exit(1)
end

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function entries(dir)
  local out = {}
  for name in lfs.dir(dir) do
    if name ~= "." and name ~= ".." then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

-- The mount points under root (a spec that was killed before its own
-- cleanup, such as a tmpfs of a full-disk case), deepest first, each
-- unmounted lazily: an rm -rf of root would fail on them ("Device or
-- resource busy") and fail every later run too.
local function unmount_under(root)
  local found = {}
  for line in (read_file("/proc/self/mounts") or ""):gmatch("[^\n]+") do
    local point = line:match("^%S+ (%S+)")
    point = point and point:gsub("\\(%d%d%d)", function(o) return string.char(tonumber(o, 8)) end)
    if point and point:sub(1, #root + 1) == root .. "/" then found[#found + 1] = point end
  end
  table.sort(found, function(a, b) return #a > #b end)
  for _, point in ipairs(found) do os.execute("umount -l " .. quote(point) .. " 2>/dev/null") end
  return found
end

local command, dir = arg[1], arg[2]
if (command ~= "baseline" and command ~= "check") or not dir or not dir:match("^/.") then
  fail("usage: lua5.4 spec/support/leak-check.lua baseline|check DIR (absolute)")
end
local sessions, tmp = dir .. "/sessions", dir .. "/tmp"

if command == "baseline" then
  unmount_under(dir)
  if not os.execute("rm -rf -- " .. quote(dir)) then fail("cannot remove " .. dir) end
  for _, d in ipairs{ dir, sessions, tmp } do
    local made, err = lfs.mkdir(d)
    if not made then fail(("cannot create %s: %s"):format(d, err)) end
  end
  os.exit(0)
end

for _, d in ipairs{ sessions, tmp } do
  if lfs.attributes(d, "mode") ~= "directory" then
    fail(d .. " is missing: the leaks_baseline test creates it")
  end
end

-- session id -> spec file, from the records
local recorded, nrecorded = {}, 0
for _, name in ipairs(entries(sessions)) do
  if name:match("^%d+$") then
    recorded[tonumber(name)] = (read_file(sessions .. "/" .. name) or ""):gsub("%s+$", "")
    nrecorded = nrecorded + 1
  end
end

-- The spec a process belongs to, or nil: by its session, else by its
-- working directory.
local function owner(pid, sid)
  if recorded[sid] then return recorded[sid] end
  local cwd = lfs.symlinkattributes("/proc/" .. pid .. "/cwd", "target")
  if cwd and cwd:sub(1, #tmp + 1) == tmp .. "/" then
    return "spec/" .. cwd:sub(#tmp + 2):match("^[^/]+") .. ".lua"
  end
  return nil
end

-- Live processes (not zombies) of the specs, as { pid =, line = } sorted
-- by pid.
local function leftovers()
  local out = {}
  for _, name in ipairs(entries("/proc")) do
    local pid = tonumber(name:match("^%d+$"))
    local s = pid and read_file("/proc/" .. name .. "/stat")
    if s then
      local comm, state, sid = s:match("^%d+ %((.*)%) (%S) %d+ %d+ (%d+)")
      local spec = sid and state ~= "Z" and state ~= "X" and owner(pid, tonumber(sid))
      if spec then
        local cmdline = (read_file("/proc/" .. name .. "/cmdline") or "")
          :gsub("%z$", ""):gsub("%z", " ")
        out[#out + 1] = { pid = pid, line = ("%d %s (%s), left by %s: %s")
          :format(pid, comm, state, spec, cmdline) }
      end
    end
  end
  table.sort(out, function(a, b) return a.pid < b.pid end)
  return out
end

-- A process may still be in its SIGTERM grace when its spec ends: wait a
-- little before calling it a leak.
local left = leftovers()
for _ = 1, 50 do
  if #left == 0 then break end
  os.execute("sleep 0.1")
  left = leftovers()
end

local report = {}
if #left > 0 then
  report[#report + 1] = ("processes left running: %d (killed now):"):format(#left)
  for _, p in ipairs(left) do
    report[#report + 1] = "  " .. p.line
    os.execute("kill -KILL " .. p.pid .. " 2>/dev/null")
  end
end

local mounts = unmount_under(tmp)
if #mounts > 0 then
  report[#report + 1] = ("mounts left behind: %d (unmounted now):"):format(#mounts)
  for _, m in ipairs(mounts) do report[#report + 1] = "  " .. m end
end

local files = {}
for _, spec in ipairs(entries(tmp)) do
  local names = entries(tmp .. "/" .. spec)
  if #names > 0 then
    files[#files + 1] = ("  spec/%s.lua: %s"):format(spec, table.concat(names, " "))
    os.execute("rm -rf -- " .. quote(tmp .. "/" .. spec))
  end
end
if #files > 0 then
  report[#report + 1] = "temporary files left behind, in " .. tmp .. " (removed now):"
  table.move(files, 1, #files, #report + 1, report)
end

if #report > 0 then fail(table.concat(report, "\n")) end
print(("leak-check: nothing left behind by %d spec files"):format(nrecorded))
