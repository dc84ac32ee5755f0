-- SandboxFilesystem: the files of a sandbox (a PlatformSandbox, a
-- LocalSandbox) as a workspace filesystem, through its exec channel: the
-- tree that its commands see, so that an agent's write_file and its
-- execute_command work on the same files (docs/api.md "Filesystems").
--
-- Each operation is one `sh -c SCRIPT sh ARG...` command (POSIX sh and GNU
-- coreutils: stat -c, find -printf, realpath -m, mv -T, cp -R, base64),
-- run with basePath as its working directory: paths go in as arguments,
-- relative to it, never into the script's text. The working directory,
-- not the absolute basePath, names the tree, so a platform that maps
-- /workspace (the local platform's process driver) works too. The script
-- checks that the path, its symlinks resolved, stays inside basePath, and
-- reports a failure as a last stderr line "mastra-fs: CODE N" (N: which
-- path argument) that becomes the error class LocalFilesystem raises.
--
-- Contents are bytes. A write goes to a temporary file beside the target
-- (".mastra-tmp-*", hidden from readdir), then a rename: readers see the
-- old file or the new one. The bytes go in through the command's stdin
-- where the sandbox takes it (supportsStdin()), and otherwise in base64:
-- in the command itself up to 72 KiB, in part files (one command each, a
-- few at once) above, which the last command joins.
--
-- The checks every method starts with (arguments, options, lazy init, the
-- read-only mode) are fs_common.METHODS, put in front of the methods at the
-- end of this file: each method here holds only what it does.
local errors = require "mastra.errors"
local options = require "mastra.options"
local common = require "mastra.common"
local fs_common = require "mastra.fs_common"
local task = require "mastra.task"
local ext_match, canonical = fs_common.extMatch, fs_common.canonicalPath

local SandboxFilesystem = { __name = "mastra.SandboxFilesystem" }
SandboxFilesystem.__index = SandboxFilesystem

local function sandbox_option(v)
  return type(v) == "table" and type(v.executeCommand) == "function",
    "a sandbox (a PlatformSandbox, a LocalSandbox: a table with executeCommand)"
end

local NEW_OPTS = fs_common.newOpts{
  sandbox = sandbox_option,
  basePath = options.string,
  timeout = options.ms,
}

local TMP_PREFIX = ".mastra-tmp-"     -- in-flight writes, as LocalFilesystem's
local RAW_PER_COMMAND = 73728         -- 96 KiB of base64 in one argument
local PARTS_AT_ONCE = 8               -- part files written concurrently

-- {====== paths ======

local function within(p, root)
  if root == "/" then return true end
  return p == root or p:sub(1, #root + 1) == root .. "/"
end

-- The directory where the sandbox's commands run when they give no cwd.
local function commands_dir(sb)
  local wd = sb.workingDirectory
  if type(wd) == "string" and wd:sub(1, 1) == "/" then return canonical(wd) end
  return "/workspace"
end

local function permission(path, message)
  errors.PermissionError:raise({ message = message, path = path }, 0)
end

--- The path relative to basePath ("." for basePath itself) of a workspace
-- path: an absolute path inside basePath is that path; any other is
-- joined under basePath ("/a" and "a" are <basePath>/a). A ".." that
-- leaves basePath raises PermissionError.
function SandboxFilesystem:_rel(path)
  local base = self.basePath
  if path:sub(1, 1) == "/" then
    local n = canonical(path)
    if within(n, base) then
      if n == base then return "." end
      return n:sub(base == "/" and 2 or #base + 2)
    end
    -- "/workspace/../x" names /x of the sandbox, not <basePath>/x
    if within((path:gsub("/+", "/"):gsub("(.)/$", "%1")), base) then
      permission(path, ('Permission denied: path "%s" resolves to %s, outside the filesystem'
        .. " base path %s (in the sandbox)"):format(path, n, base))
    end
  end
  local parts = {}
  for seg in path:gmatch("[^/]+") do
    if seg == ".." then
      if #parts == 0 then
        permission(path, ('Permission denied: path "%s" leads outside the filesystem base'
          .. " path %s (in the sandbox)"):format(path, base))
      end
      parts[#parts] = nil
    elseif seg ~= "." then
      parts[#parts + 1] = seg
    end
  end
  if #parts == 0 then return "." end
  return table.concat(parts, "/")
end

local function parent_of(rel)
  return rel:match("^(.*)/[^/]*$") or "."
end

local function leaf_of(rel)
  if rel == "." then return "" end
  return rel:match("([^/]*)$")
end

-- A temporary name beside rel (relative to basePath).
local function tmp_beside(rel)
  local name = TMP_PREFIX .. common.randomDigits(12)
  local dir = parent_of(rel)
  if dir == "." then return name end
  return dir .. "/" .. name
end

-- }======

-- the bytes of a write where stdin is not taken travel as base64
local base64 = common.base64

-- {====== the scripts ======

-- Before every script: B, the base (symlinks resolved); fail CODE N and
-- bad N [dir] (a tool failed: its stderr says why) report on path N; chk N
-- REL refuses a path that leaves B through a symlink (itself, or its
-- parent for the entry).
local PRELUDE = [[
export LC_ALL=C
B=$(pwd -P) || exit 5
fail() { printf '\nmastra-fs: %s %s\n' "$1" "$2" >&2; exit 3; }
bad() { printf '\nmastra-fs: ERR %s %s\n' "$1" "${2:-}" >&2; exit 3; }
inb() {
  [ "$B" = / ] && return 0
  r=$(realpath -m -- "$2") || bad "$1"
  case $r in "$B"|"$B"/*) ;; *) fail ESCAPE "$1" ;; esac
}
chk() {
  inb "$1" "$B/$2"
  case $2 in */*) inb "$1" "$B/${2%/*}" ;; esac
}
real() { r=$(realpath -m -- "$1"; echo x); r=${r%?x}; }
]]

-- $1 path, $2 temporary file, $3 w (overwrite) | n (never) | a (append),
-- $4 recursive (0: the parent must exist), $5 where the bytes come from:
-- check (none: only the checks), stdin, inline ($6, base64), parts (the
-- part files $2.p*), empty.
local WRITE = [[
chk 1 "$1"; p=$B/$1; t=$B/$2
case $1 in */*) d=$B/${1%/*} ;; *) d=$B ;; esac
if [ ! -d "$d" ]; then
  [ -e "$d" ] && fail PARENTFILE 1
  [ "$4" = 0 ] && fail NOPARENT 1
  mkdir -p -- "$d" || bad 1
fi
[ -d "$p" ] && fail EISDIR 1
if [ "$3" = n ] && { [ -e "$p" ] || [ -L "$p" ]; }; then fail EEXIST 1; fi
case $5 in
  check) exit 0 ;;
  stdin) cat > "$t" ;;
  inline) printf %s "$6" | base64 -d > "$t" ;;
  parts) cat -- "$t".p* > "$t" && rm -f -- "$t".p* ;;
  *) : > "$t" ;;
esac || { rm -f -- "$t" "$t".p*; bad 1; }
case $3 in
  a) cat -- "$t" >> "$p"; s=$?; rm -f -- "$t"; [ $s = 0 ] || bad 1 ;;
  n) ln -T -- "$t" "$p"; s=$?; rm -f -- "$t"; [ $s = 0 ] || bad 1 ;;
  *) if [ -L "$p" ]; then real "$p"; p=$r; fi
     [ -e "$p" ] && chmod --reference="$p" -- "$t" 2>/dev/null
     mv -fT -- "$t" "$p" || { rm -f -- "$t"; bad 1; } ;;
esac
]]

-- $1 a part file, $2 its bytes in base64
local PART = [[printf %s "$2" | base64 -d > "$1" || bad 1]]
local DROP_PARTS = [[rm -f -- "$1".p* "$1"]]

local READ = [[
chk 1 "$1"; p=$B/$1
[ -d "$p" ] && fail EISDIR 1
cat -- "$p" || bad 1
]]

-- type/size/mtime/ctime (seconds, 3 decimals)
local STAT = [[
chk 1 "$1"
stat -L -c '%F/%s/%.3Y/%.3Z' -- "$B/$1" || bad 1
]]

-- $1 path, $2 max depth: entries "y/Y/size/relative path\0link target\0"
local READDIR = [[
chk 1 "$1"; p=$B/$1
if [ ! -d "$p" ]; then
  [ -e "$p" ] && fail ENOTDIR 1
  stat -L -- "$p" > /dev/null || bad 1 dir
  fail NODIR 1
fi
find -H "$p" -mindepth 1 -maxdepth "$2" -printf '%y/%Y/%s/%P\0%l\0' 2>/dev/null
exit 0
]]

-- $1 path, $2 recursive, $3 force, $4 file | dir (rmdir)
local REMOVE = [[
chk 1 "$1"; p=$B/$1
if [ ! -e "$p" ] && [ ! -L "$p" ]; then
  [ "$3" = 1 ] && exit 0
  stat -- "$p" > /dev/null || bad 1 "$4"
  fail ENOENT 1
fi
if [ -d "$p" ] && [ ! -L "$p" ]; then
  if [ "$2" = 1 ]; then rm -rf -- "$p" || bad 1 "$4"
  elif [ "$4" = dir ]; then rmdir -- "$p" || bad 1 dir
  else fail EISDIR 1
  fi
else
  [ "$4" = dir ] && fail ENOTDIR 1
  rm -f -- "$p" || bad 1
fi
]]

-- $1 path, $2 recursive
local MKDIR = [[
chk 1 "$1"; p=$B/$1
if [ -d "$p" ]; then [ "$2" = 0 ] && fail EEXIST 1; exit 0; fi
{ [ -e "$p" ] || [ -L "$p" ]; } && fail EEXIST 1
if [ "$2" = 0 ]; then mkdir -- "$p" || bad 1 dir; else mkdir -p -- "$p" || bad 1; fi
]]

-- the parent of the destination $2 (made when missing)
local DEST_PARENT = [[
case $2 in */*) q=$B/${2%/*} ;; *) q=$B ;; esac
if [ ! -d "$q" ]; then
  [ -e "$q" ] && fail PARENTFILE 2
  mkdir -p -- "$q" || bad 2
fi
]]

-- $1 src, $2 dest, $3 overwrite, $4 recursive, $5 a temporary file
local COPY = [[
chk 1 "$1"; chk 2 "$2"; s=$B/$1; d=$B/$2; t=$B/$5
if [ ! -e "$s" ]; then stat -L -- "$s" > /dev/null || bad 1; fail ENOENT 1; fi
[ -d "$s" ] && [ "$4" != 1 ] && fail EISDIRCOPY 1
if [ -e "$d" ]; then
  [ "$3" = 0 ] && fail EEXIST 2
  [ -d "$d" ] && [ ! -d "$s" ] && fail EISDIR 2
  [ -d "$s" ] && [ ! -d "$d" ] && fail EEXIST 2
fi
]] .. DEST_PARENT .. [[
if [ -d "$s" ]; then
  mkdir -p -- "$d" && cp -RP -- "$s"/. "$d" || bad 2
else
  if [ -L "$d" ]; then real "$d"; d=$r; fi
  cp -- "$s" "$t" || { rm -f -- "$t"; bad 1; }
  mv -fT -- "$t" "$d" || { rm -f -- "$t"; bad 2; }
fi
]]

-- $1 src, $2 dest, $3 overwrite
local MOVE = [[
chk 1 "$1"; chk 2 "$2"; s=$B/$1; d=$B/$2
if [ ! -e "$s" ] && [ ! -L "$s" ]; then stat -- "$s" > /dev/null || bad 1; fail ENOENT 1; fi
if [ "$3" = 0 ] && { [ -e "$d" ] || [ -L "$d" ]; }; then fail EEXIST 2; fi
]] .. DEST_PARENT .. [[
mv -fT -- "$s" "$d" || bad 2
]]

-- the base, then the path resolved: each ending in NUL
local REALPATH = [[
chk 1 "$1"
printf '%s\0' "$B"; realpath -mz -- "$B/$1" || bad 1
]]

local MAKE_BASE = [[export LC_ALL=C; mkdir -p -- "$1"]]

-- }======

-- {====== errors ======

-- What a tool's message says (LC_ALL=C), as an errno name; the first
-- that matches, so the phrases of mv -T come before strerror's.
local STRERRORS = {
  { "cannot overwrite non%-directory", "ENOTDIR" },
  { "cannot overwrite directory", "EISDIR" },
  { "No such file or directory", "ENOENT" },
  { "Not a directory", "ENOTDIR" },
  { "Is a directory", "EISDIR" },
  { "File exists", "EEXIST" },
  { "Directory not empty", "ENOTEMPTY" },
  { "Permission denied", "EACCES" },
  { "Operation not permitted", "EPERM" },
  { "Read%-only file system", "EROFS" },
  { "No space left on device", "ENOSPC" },
  { "Disk quota exceeded", "EDQUOT" },
  { "File name too long", "ENAMETOOLONG" },
  { "Too many levels of symbolic links", "ELOOP" },
}

local function classify(text)
  for _, s in ipairs(STRERRORS) do
    if text:find(s[1]) then return s[2] end
  end
  return nil
end

local function raise(class, message, path, extra)
  local fields = { message = message, path = path }
  for k, v in pairs(extra or {}) do fields[k] = v end
  class:raise(fields, 0)
end

-- The error of a failed operation: r is the command's result, paths the
-- caller's paths (by argument number), hints extra text by code.
function SandboxFilesystem:_fail(r, paths, hints)
  local stderr = (r.stderr or ""):gsub("%s+$", "")
  local body, code, n, kind = stderr:match("^(.-)\n?mastra%-fs: (%u+) (%d)%s*(%a*)$")
  local path = paths[tonumber(n) or 1] or paths[1]
  hints = hints or {}
  local detail = (body or stderr):gsub("%s+$", ""):match("([^\n]*)$")
  if code == "ERR" then code = classify(body) or "EIO" end
  if code == nil then
    local why = r.timedOut and "the command timed out"
      or ("the command failed with exit code %s"):format(tostring(r.exitCode))
    raise(errors.FilesystemError, ("Filesystem error on %s: %s in sandbox %s%s"):format(path,
      why, tostring(self.sandbox.sandboxId or self.sandbox.id),
      stderr ~= "" and (": " .. stderr:sub(1, 2000)) or ""), path,
      { code = r.timedOut and "ETIMEDOUT" or "EIO", exitCode = r.exitCode, stderr = r.stderr })
  end
  local hint = hints[code] or ""
  if code == "ENOENT" or code == "NODIR" then
    if kind == "dir" or code == "NODIR" then
      raise(errors.DirectoryNotFoundError, "Directory not found: " .. path .. hint, path)
    end
    raise(errors.FileNotFoundError, "File not found: " .. path .. hint, path)
  elseif code == "NOPARENT" then
    raise(errors.DirectoryNotFoundError, "Directory not found: parent of " .. path, path)
  elseif code == "PARENTFILE" then
    raise(errors.NotDirectoryError, "Not a directory: " .. path .. " (its parent is a file)",
      path)
  elseif code == "EEXIST" then
    raise(errors.FileExistsError, "File already exists: " .. path .. hint, path)
  elseif code == "EISDIR" then
    raise(errors.IsDirectoryError, "Is a directory: " .. path .. hint, path)
  elseif code == "EISDIRCOPY" then
    raise(errors.IsDirectoryError, "Is a directory: " .. path .. " (use recursive = true)", path)
  elseif code == "ENOTDIR" then
    raise(errors.NotDirectoryError, "Not a directory: " .. path .. hint, path)
  elseif code == "ENOTEMPTY" then
    raise(errors.DirectoryNotEmptyError, "Directory not empty: " .. path .. hint, path)
  elseif code == "ESCAPE" then
    permission(path, ('Permission denied: path "%s" leads through a symlink outside the'
      .. " filesystem base path %s (in the sandbox)"):format(path, self.basePath))
  elseif code == "EACCES" or code == "EPERM" or code == "EROFS" then
    raise(errors.PermissionError, "Permission denied: " .. path .. " (" .. detail .. ")", path,
      { code = code })
  end
  raise(errors.FilesystemError, ("Filesystem error on %s: %s"):format(path, detail), path,
    { code = code })
end

-- }======

-- {====== running the scripts ======

local function flag(v) return v and "1" or "0" end

-- Run script (after the prelude) with args in the base: the result of a
-- command that succeeded; a failure raises (paths: the caller's, for the
-- messages). opts: stdin, hints (SandboxFilesystem:_fail).
function SandboxFilesystem:_sh(script, args, paths, opts)
  opts = opts or {}
  local argv = { "-c", PRELUDE .. script, "sh" }
  for i = 1, #args do argv[#argv + 1] = args[i] end
  local ok, r = pcall(self.sandbox.executeCommand, self.sandbox, "sh", argv,
    { cwd = self.basePath, timeout = self.timeout, stdin = opts.stdin })
  if not ok then
    -- the base itself is gone (a command removed it): say so
    if errors.DirectoryNotFoundError:is(r) and r.path == self.basePath then
      raise(errors.DirectoryNotFoundError, ("Directory not found: the base path %s of this"
        .. " filesystem is not in the sandbox (fs:init() creates it)"):format(self.basePath),
        paths[1])
    end
    error(r, 0)
  end
  if r.exitCode ~= 0 then self:_fail(r, paths, opts.hints) end
  return r
end

-- Whether the bytes of a write can go through stdin here.
function SandboxFilesystem:_stdin()
  local sb = self.sandbox
  return type(sb.supportsStdin) == "function" and sb:supportsStdin() == true
end

-- A write (how: "w", "n" or "a"; SandboxFilesystem:writeFile) of content
-- to the path (rel: relative to the base).
function SandboxFilesystem:_write(path, rel, content, how, recursive)
  local tmp = tmp_beside(rel)
  local args = { rel, tmp, how, flag(recursive ~= false) }
  local paths = { path }
  if content == "" then
    args[5] = "empty"
    return self:_sh(WRITE, args, paths)
  end
  if self:_stdin() then
    args[5] = "stdin"
    return self:_sh(WRITE, args, paths, { stdin = content })
  end
  if #content <= RAW_PER_COMMAND then
    args[5], args[6] = "inline", base64(content)
    return self:_sh(WRITE, args, paths)
  end
  -- the checks first (nothing is sent for a write that cannot be done),
  -- then the parts, PARTS_AT_ONCE at a time, then the join and the rename
  args[5] = "check"
  self:_sh(WRITE, args, paths)
  local nparts = (#content + RAW_PER_COMMAND - 1) // RAW_PER_COMMAND
  local next_part = 0
  local function writer()
    while next_part < nparts do
      next_part = next_part + 1
      local i = next_part
      local chunk = content:sub((i - 1) * RAW_PER_COMMAND + 1, i * RAW_PER_COMMAND)
      self:_sh(PART, { ("%s.p%08d"):format(tmp, i), base64(chunk) }, paths)
    end
  end
  local writers = {}
  for i = 1, math.min(PARTS_AT_ONCE, nparts) do writers[i] = writer end
  local ok, err = pcall(task.all, writers)
  if ok then
    args[5] = "parts"
    ok, err = pcall(self._sh, self, WRITE, args, paths)
  end
  if not ok then
    if not (errors.CancelledError:is(err) or errors.InterruptedError:is(err)) then
      pcall(self._sh, self, DROP_PARTS, { tmp }, paths)
    end
    error(err, 0)
  end
end

-- }======

function SandboxFilesystem.new(opts)
  local where = "SandboxFilesystem.new"
  opts = options.check(where, opts, NEW_OPTS)
  local sb = opts.sandbox
  if sb == nil then
    error(where .. ": option 'sandbox' is required (the sandbox whose files this is:"
      .. " SandboxFilesystem.new{sandbox = sb})", 2)
  end
  local wd = commands_dir(sb)
  local base = opts.basePath or wd
  if base == "" then
    error(where .. ": option 'basePath' must not be empty", 2)
  end
  if base:find("\0", 1, true) then
    error(where .. ": option 'basePath' must not contain NUL bytes", 2)
  end
  if base:sub(1, 1) ~= "/" then base = wd .. "/" .. base end
  return fs_common.instance(SandboxFilesystem, opts,
    { provider = "sandbox", icon = "terminal", idPrefix = "sandbox-fs" },
    { sandbox = sb, basePath = canonical(base), timeout = opts.timeout, _commandsDir = wd })
end

--- Create basePath in the sandbox (starting it if it is not), unless
-- read-only.
function SandboxFilesystem:init()
  if self.status == "ready" then return end
  self.status = "initializing"
  local ok, err = pcall(function()
    if self.readOnly then return end
    -- from the commands' directory, not "/": a platform may map that one
    local wd, base = self._commandsDir, self.basePath
    local arg = base
    if within(base, wd) then arg = base == wd and "." or base:sub(#wd + 2) end
    local r = self.sandbox:executeCommand("sh", { "-c", MAKE_BASE, "sh", arg },
      { cwd = wd, timeout = self.timeout })
    if r.exitCode ~= 0 then
      errors.FilesystemError:raise({
        message = ("SandboxFilesystem:init: cannot create the base path %s in the sandbox: %s")
          :format(base, (r.stderr or ""):gsub("%s+$", "")),
        path = base, code = classify(r.stderr or "") or "EIO",
      }, 0)
    end
  end)
  if not ok then
    self.status = "error"
    self.error = errors.message(err)
    error(err, 0)
  end
  self.status = "ready"
end

SandboxFilesystem.destroy = fs_common.destroy
SandboxFilesystem.__close = fs_common.destroy

function SandboxFilesystem.__tostring(self)
  return ("mastra.SandboxFilesystem: %s (%s in %s, %s)"):format(self.id, self.basePath,
    tostring(self.sandbox.sandboxId or self.sandbox.id), self.status)
end

function SandboxFilesystem:readFile(path)
  local r = self:_sh(READ, { self:_rel(path) }, { path })
  return r.stdout
end

function SandboxFilesystem:writeFile(path, content, opts)
  self:_write(path, self:_rel(path), content, opts.overwrite == false and "n" or "w",
    opts.recursive)
end

function SandboxFilesystem:appendFile(path, content, opts)
  self:_write(path, self:_rel(path), content, "a", opts.recursive)
end

function SandboxFilesystem:deleteFile(path, opts)
  self:_sh(REMOVE, { self:_rel(path), flag(opts.recursive), flag(opts.force), "file" }, { path },
    { hints = { EISDIR = " (use rmdir, or recursive = true)" } })
end

function SandboxFilesystem:rmdir(path, opts)
  self:_sh(REMOVE, { self:_rel(path), flag(opts.recursive), flag(opts.force), "dir" }, { path })
end

function SandboxFilesystem:mkdir(path, opts)
  self:_sh(MKDIR, { self:_rel(path), flag(opts.recursive ~= false) }, { path })
end

function SandboxFilesystem:copyFile(src, dest, opts)
  local rdest = self:_rel(dest)
  self:_sh(COPY, { self:_rel(src), rdest, flag(opts.overwrite ~= false), flag(opts.recursive),
    tmp_beside(rdest) }, { src, dest })
end

function SandboxFilesystem:moveFile(src, dest, opts)
  self:_sh(MOVE, { self:_rel(src), self:_rel(dest), flag(opts.overwrite ~= false) },
    { src, dest })
end

-- "1796171297.492" -> 1796171297492
local function ms_of(s)
  local sec, frac = s:match("^(%d+)%.?(%d*)$")
  if not sec then return 0 end
  frac = (frac .. "000"):sub(1, 3)
  return math.tointeger(tonumber(sec) * 1000 + tonumber(frac)) or 0
end

function SandboxFilesystem:stat(path)
  local rel = self:_rel(path)
  local r = self:_sh(STAT, { rel }, { path })
  local ftype, size, mtime, ctime = r.stdout:match("^(.-)/(%d+)/([%d.]+)/([%d.]+)")
  if not ftype then
    raise(errors.FilesystemError, ("Filesystem error on %s: stat answered %q"):format(path,
      r.stdout:sub(1, 200)), path, { code = "EIO" })
  end
  local isdir = ftype == "directory"
  local m, c = ms_of(mtime), ms_of(ctime)
  return {
    name = leaf_of(rel), path = rel == "." and "/" or "/" .. rel,
    type = isdir and "directory" or "file",
    size = isdir and 0 or math.tointeger(tonumber(size)) or 0,
    createdAt = math.min(c, m), modifiedAt = m,
  }
end

function SandboxFilesystem:exists(path)
  local ok, err = pcall(self.stat, self, path)
  if ok then return true end
  if errors.FileNotFoundError:is(err) or errors.NotDirectoryError:is(err)
      or errors.DirectoryNotFoundError:is(err) then
    return false
  end
  error(err, 0)
end

function SandboxFilesystem:readdir(path, opts)
  local max = opts.recursive and math.max(opts.maxDepth or 1000000, 1) or 1
  local r = self:_sh(READDIR, { self:_rel(path), tostring(max) }, { path })
  local dirs, files = {}, {}
  local out, pos = r.stdout, 1
  while pos <= #out do
    local z1 = out:find("\0", pos, true)
    if not z1 then break end
    local z2 = out:find("\0", z1 + 1, true) or #out + 1
    local y, yy, size, name = out:sub(pos, z1 - 1):match("^(.)/(.)/(%d+)/(.*)$")
    local target = out:sub(z1 + 1, z2 - 1)
    pos = z2 + 1
    local leaf = name and name:match("([^/]*)$")
    if leaf and leaf:sub(1, #TMP_PREFIX) ~= TMP_PREFIX then
      local entry = { name = name }
      if y == "l" then
        entry.isSymlink = true
        entry.symlinkTarget = target
      end
      if y == "d" or (y == "l" and yy == "d") then
        entry.type = "directory"
        dirs[#dirs + 1] = entry
      elseif ext_match(leaf, opts.extension) then
        entry.type = "file"
        -- a symlink's size is the link's (find -P): 0 rather than that
        entry.size = y == "l" and 0 or math.tointeger(tonumber(size)) or 0
        files[#files + 1] = entry
      end
    end
  end
  table.sort(dirs, function(a, b) return a.name < b.name end)
  table.sort(files, function(a, b) return a.name < b.name end)
  for _, f in ipairs(files) do dirs[#dirs + 1] = f end
  return dirs
end

--- The workspace path of the file that path names, symlinks resolved.
function SandboxFilesystem:realpath(path)
  local r = self:_sh(REALPATH, { self:_rel(path) }, { path })
  local base, real = r.stdout:match("^(.-)\0(.-)\0?$")
  if base == nil then return fs_common.normalizePath(path) end
  if real == base then return "/" end
  if base == "/" then return real end
  if real:sub(1, #base + 1) == base .. "/" then return real:sub(#base + 1) end
  return real
end

--- The path in the sandbox of a workspace path (checked as every
-- operation checks it; no I/O).
function SandboxFilesystem:resolvePath(path)
  local rel = self:_rel(path)
  if rel == "." then return self.basePath end
  return (self.basePath == "/" and "" or self.basePath) .. "/" .. rel
end

function SandboxFilesystem:getInfo()
  local sb = self.sandbox
  return fs_common.info(self, { basePath = self.basePath,
    sandboxId = sb.sandboxId or sb.id, sandboxProvider = sb.provider })
end

function SandboxFilesystem:getInstructions()
  local base = self.basePath
  local default = ('Sandbox filesystem: the files of the sandbox under "%s", the tree that its'
    .. ' commands see. The workspace path "/foo" (or "foo") is "%s/foo" in the sandbox.')
    :format(base, base == "/" and "" or base)
  local text = common.instructions("SandboxFilesystem:getInstructions", self._instructions,
    default)
  return text
end

return fs_common.checkMethods(SandboxFilesystem)
