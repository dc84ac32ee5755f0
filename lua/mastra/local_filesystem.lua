-- LocalFilesystem: a directory of the host as a workspace filesystem
-- (the filesystem interface of docs/api.md, as PlatformFilesystem has it).
--
-- A workspace path is joined under basePath (a leading "/" is stripped;
-- an absolute path inside one of `allowedPaths` is used as it is). With
-- `contained` (the default) a path that leaves basePath and the allowed
-- roots, by ".." or through a symlink (the deepest existing ancestor is
-- resolved with realpath), raises PermissionError before any I/O on it.
-- Writes go to a temporary file beside the target, then rename: a reader
-- or a concurrent writer never sees a torn file. Contents are Lua strings
-- (bytes); `encoding` ("utf-8"/"utf8") returns them as they are. Times are
-- milliseconds since the epoch.
--
-- The checks every method starts with (arguments, options, lazy init, the
-- read-only mode) are fs_common.METHODS, put in front of the methods at the
-- end of this file: each method here holds only what it does.
local core = require "mastra.core"
local errors = require "mastra.errors"
local options = require "mastra.options"
local common = require "mastra.common"
local fs_common = require "mastra.fs_common"
local ext_match, canonical = fs_common.extMatch, fs_common.canonicalPath

local LocalFilesystem = { __name = "mastra.LocalFilesystem" }
LocalFilesystem.__index = LocalFilesystem

local function string_list(v)
  if type(v) ~= "table" then return false, "a list of strings" end
  for i = 1, #v do
    if type(v[i]) ~= "string" then return false, "a list of strings" end
  end
  return true
end

local NEW_OPTS = fs_common.newOpts{
  basePath = options.string,
  contained = options.boolean,
  allowedPaths = string_list,
}

local TMP_PREFIX = ".mastra-tmp-" -- in-flight atomic writes (src/core/util.h)

-- {====== paths ======

local function cwd()
  local dir, err, ename = core.getcwd()
  if not dir then
    errors.MastraError:raise({ message = "LocalFilesystem: " .. err, code = ename }, 0)
  end
  return dir
end

local function absolute(p)
  if p:sub(1, 1) ~= "/" then p = cwd() .. "/" .. p end
  return canonical(p)
end

local function split(p)
  local parent, name = p:match("^(.*)/([^/]*)$")
  if parent == "" then parent = "/" end
  return parent, name
end

local function join(dir, name)
  if dir == "/" then return "/" .. name end
  return dir .. "/" .. name
end

local function within(p, root)
  if root == "/" then return true end
  return p == root or p:sub(1, #root + 1) == root .. "/"
end

-- The path with every symlink resolved: realpath of the deepest existing
-- ancestor, then the rest; a dangling symlink is followed by hand.
local function real_of(p, hops)
  hops = hops or 0
  local r = core.fsRealpath(p)
  if r then return r end
  if p == "/" then return "/" end
  local parent, name = split(p)
  local st = core.fsLstat(p)
  if st and st.type == "symlink" and hops < 40 then
    local target = core.fsReadlink(p) or ""
    if target:sub(1, 1) ~= "/" then target = join(parent, target) end
    return real_of(canonical(target), hops + 1)
  end
  return join(real_of(parent, hops), name)
end

-- }======

function LocalFilesystem.new(opts)
  opts = options.check("LocalFilesystem.new", opts, NEW_OPTS)
  local self = fs_common.instance(LocalFilesystem, opts,
    { provider = "local", icon = "folder", idPrefix = "local-fs" },
    { basePath = absolute(opts.basePath or "."), contained = opts.contained ~= false })
  self:setAllowedPaths(opts.allowedPaths or {})
  return self
end

--- Replace the extra roots (resolved against the current directory).
function LocalFilesystem:setAllowedPaths(paths)
  options.self("LocalFilesystem:setAllowedPaths", self, LocalFilesystem)
  options.arg("LocalFilesystem:setAllowedPaths", 1, "paths", paths, string_list)
  local list = {}
  for i, p in ipairs(paths) do list[i] = absolute(p) end
  self.allowedPaths = list
end

function LocalFilesystem:init()
  if self.status == "ready" then return end
  self.status = "initializing"
  if not self.readOnly then
    local ok, err, ename = core.fsMkdir(self.basePath, true)
    if not ok then
      self.status = "error"
      self.error = err
      errors.forCode(ename):raise({ message = "LocalFilesystem:init: cannot create the base path: "
        .. err, path = self.basePath, code = ename }, 0)
    end
  end
  self.status = "ready"
end

LocalFilesystem.destroy = fs_common.destroy
LocalFilesystem.__close = fs_common.destroy

function LocalFilesystem.__tostring(self)
  return ("mastra.LocalFilesystem: %s (%s, %s)"):format(self.id, self.basePath, self.status)
end

local function raise(class, message, path, extra, level)
  local fields = { message = message, path = path }
  for k, v in pairs(extra or {}) do fields[k] = v end
  class:raise(fields, (level or 2) + 1)
end

-- A failed primitive (message, errno name) as the error class it means.
local function fail(path, msg, ename, kind)
  if ename == "ENOENT" then
    if kind == "dir" then
      raise(errors.DirectoryNotFoundError, "Directory not found: " .. path, path)
    end
    raise(errors.FileNotFoundError, "File not found: " .. path, path)
  elseif ename == "EEXIST" then
    raise(errors.FileExistsError, "File already exists: " .. path, path)
  elseif ename == "EISDIR" then
    raise(errors.IsDirectoryError, "Is a directory: " .. path, path)
  elseif ename == "ENOTDIR" then
    raise(errors.NotDirectoryError, "Not a directory: " .. path, path)
  elseif ename == "ENOTEMPTY" then
    raise(errors.DirectoryNotEmptyError, "Directory not empty: " .. path, path)
  elseif ename == "EACCES" or ename == "EPERM" or ename == "EROFS" then
    raise(errors.PermissionError, "Permission denied: " .. path .. " (" .. msg .. ")", path)
  end
  raise(errors.FilesystemError, ("Filesystem error on %s: %s"):format(path, msg), path,
    { code = ename })
end

-- Resolve a workspace path: returns the host path with symlinks resolved
-- (for operations that follow links) and the entry itself (its parent
-- resolved, for unlink and rename). Raises PermissionError for an escape.
function LocalFilesystem:_resolve(path)
  local lexical
  if path:sub(1, 1) == "/" then
    local n = absolute(path)
    for _, root in ipairs(self.allowedPaths) do
      if within(n, root) then lexical = n break end
    end
  end
  if not lexical then
    lexical = absolute(join(self.basePath, (path:gsub("^/+", ""))))
  end
  if not self.contained then
    local parent, name = split(lexical)
    return real_of(lexical), lexical == "/" and "/" or join(real_of(parent), name), lexical
  end
  local roots = { self.basePath }
  for _, r in ipairs(self.allowedPaths) do roots[#roots + 1] = r end
  local function inside(p, real)
    for _, root in ipairs(roots) do
      if within(p, real and real_of(root) or root) then return true end
    end
    return false
  end
  if not inside(lexical, false) then
    raise(errors.PermissionError, ('Permission denied: path "%s" resolves to %s, outside the'
      .. ' filesystem base path %s'):format(path, lexical, self.basePath), path, nil, 2)
  end
  local real = real_of(lexical)
  local parent, name = split(lexical)
  local entry = lexical == self.basePath and real or join(real_of(parent), name)
  if not inside(real, true) or not inside(entry, true) then
    raise(errors.PermissionError, ('Permission denied: path "%s" leads through a symlink to'
      .. ' %s, outside the filesystem base path %s'):format(path, real, self.basePath),
      path, nil, 2)
  end
  return real, entry, lexical
end

-- The workspace path of a host path ("/" + the part under basePath).
function LocalFilesystem:_workspacePath(lexical)
  if within(lexical, self.basePath) then
    local rel = lexical:sub(#self.basePath + 2)
    return "/" .. rel
  end
  return lexical
end

local function ensure_parent(real, path, recursive)
  local parent = split(real)
  local st = core.fsStat(parent)
  if st then
    if st.type ~= "directory" then
      raise(errors.NotDirectoryError, "Not a directory: " .. path .. " (its parent is a file)",
        path, nil, 3)
    end
    return
  end
  if recursive == false then
    raise(errors.DirectoryNotFoundError, "Directory not found: parent of " .. path, path, nil, 3)
  end
  local ok, err, ename = core.fsMkdir(parent, true)
  if not ok then fail(path, err, ename) end
end

-- Remove a tree without following symlinks (never leaves it).
local function remove_tree(p)
  local st, msg, ename = core.fsLstat(p)
  if not st then return nil, msg, ename end
  if st.type == "directory" then
    local names, m2, e2 = core.fsReaddir(p)
    if not names then return nil, m2, e2 end
    for _, n in ipairs(names) do
      local ok, m3, e3 = remove_tree(join(p, n))
      if not ok and e3 ~= "ENOENT" then return nil, m3, e3 end
    end
    return core.fsRmdir(p)
  end
  return core.fsUnlink(p)
end

-- Copy a tree (files and directories; symlinks are copied as what they
-- point to inside the roots, and skipped when dangling).
local function copy_tree(src, dst, exclusive)
  local st, msg, ename = core.fsStat(src)
  if not st then return nil, msg, ename end
  if st.type == "directory" then
    local ok, m, e = core.fsMkdir(dst, true)
    if not ok then return nil, m, e end
    local names, m2, e2 = core.fsReaddir(src)
    if not names then return nil, m2, e2 end
    for _, n in ipairs(names) do
      if n:sub(1, #TMP_PREFIX) ~= TMP_PREFIX then
        local ok2, m3, e3 = copy_tree(join(src, n), join(dst, n), exclusive)
        if not ok2 and e3 ~= "ENOENT" then return nil, m3, e3 end
      end
    end
    return true
  end
  local data, m4, e4 = core.fsReadFile(src)
  if not data then return nil, m4, e4 end
  return core.fsWriteAtomic(dst, data, exclusive)
end

function LocalFilesystem:readFile(path)
  local real = self:_resolve(path)
  local data, msg, ename = core.fsReadFile(real)
  if not data then fail(path, msg, ename) end
  return data
end

function LocalFilesystem:writeFile(path, content, opts)
  local real = self:_resolve(path)
  ensure_parent(real, path, opts.recursive)
  local ok, msg, ename = core.fsWriteAtomic(real, content, opts.overwrite == false)
  if not ok then fail(path, msg, ename) end
end

function LocalFilesystem:appendFile(path, content, opts)
  local real = self:_resolve(path)
  ensure_parent(real, path, opts.recursive)
  local ok, msg, ename = core.fsAppend(real, content)
  if not ok then fail(path, msg, ename) end
end

-- The entry at path (not followed) and its lstat, for a removal; nil when
-- nothing is there and force is set.
local function removal_target(self, path, force, kind)
  local _, entry = self:_resolve(path)
  local st, msg, ename = core.fsLstat(entry)
  if not st then
    if force and (ename == "ENOENT" or ename == "ENOTDIR") then return nil end
    fail(path, msg, ename, kind)
  end
  return st, entry
end

function LocalFilesystem:deleteFile(path, opts)
  local st, entry = removal_target(self, path, opts.force)
  if not st then return end
  local ok, msg, ename
  if st.type == "directory" then
    if not opts.recursive then
      raise(errors.IsDirectoryError, "Is a directory: " .. path
        .. " (use rmdir, or recursive = true)", path)
    end
    ok, msg, ename = remove_tree(entry)
  else
    ok, msg, ename = core.fsUnlink(entry)
  end
  if not ok and not (opts.force and ename == "ENOENT") then fail(path, msg, ename) end
end

function LocalFilesystem:copyFile(src, dest, opts)
  local rsrc = self:_resolve(src)
  local rdest = self:_resolve(dest)
  local st, msg, ename = core.fsStat(rsrc)
  if not st then fail(src, msg, ename) end
  if st.type == "directory" and not opts.recursive then
    raise(errors.IsDirectoryError, "Is a directory: " .. src .. " (use recursive = true)", src)
  end
  local dst = core.fsStat(rdest)
  if dst and opts.overwrite == false then
    raise(errors.FileExistsError, "File already exists: " .. dest, dest)
  end
  if dst and dst.type == "directory" and st.type ~= "directory" then
    raise(errors.IsDirectoryError, "Is a directory: " .. dest, dest)
  end
  ensure_parent(rdest, dest)
  local ok
  ok, msg, ename = copy_tree(rsrc, rdest, opts.overwrite == false)
  if not ok then fail(ename == "EEXIST" and dest or src, msg, ename) end
end

function LocalFilesystem:moveFile(src, dest, opts)
  local _, esrc = self:_resolve(src)
  local rdest = self:_resolve(dest)
  local st, msg, ename = core.fsLstat(esrc)
  if not st then fail(src, msg, ename) end
  if opts.overwrite == false and core.fsLstat(rdest) then
    raise(errors.FileExistsError, "File already exists: " .. dest, dest)
  end
  ensure_parent(rdest, dest)
  local ok
  ok, msg, ename = core.fsRename(esrc, rdest)
  if not ok and ename == "EXDEV" then
    ok, msg, ename = copy_tree(esrc, rdest, opts.overwrite == false)
    if ok then ok, msg, ename = remove_tree(esrc) end
  end
  if not ok then
    if ename == "EISDIR" or ename == "ENOTEMPTY" or ename == "EEXIST" then
      fail(dest, msg, ename)
    end
    fail(src, msg, ename)
  end
end

function LocalFilesystem:mkdir(path, opts)
  local real = self:_resolve(path)
  local st = core.fsStat(real)
  if st then
    if st.type == "directory" and opts.recursive ~= false then return end
    raise(errors.FileExistsError, "File already exists: " .. path, path)
  end
  local ok, msg, ename
  if opts.recursive == false then
    ok, msg, ename = core.fsMkdir(real)
    if not ok then fail(path, msg, ename, "dir") end
  else
    ok, msg, ename = core.fsMkdir(real, true)
    if not ok then fail(path, msg, ename) end
  end
end

function LocalFilesystem:rmdir(path, opts)
  local st, entry = removal_target(self, path, opts.force, "dir")
  if not st then return end
  if st.type ~= "directory" then
    raise(errors.NotDirectoryError, "Not a directory: " .. path, path)
  end
  local ok, msg, ename
  if opts.recursive then
    ok, msg, ename = remove_tree(entry)
  else
    ok, msg, ename = core.fsRmdir(entry)
    if ename == "EEXIST" then ename = "ENOTEMPTY" end
  end
  if not ok and not (opts.force and ename == "ENOENT") then fail(path, msg, ename, "dir") end
end

function LocalFilesystem:readdir(path, opts)
  local real = self:_resolve(path)
  local st, msg, ename = core.fsStat(real)
  if not st then fail(path, msg, ename, "dir") end
  if st.type ~= "directory" then
    raise(errors.NotDirectoryError, "Not a directory: " .. path, path)
  end
  local max = opts.recursive and (opts.maxDepth or math.huge) or 1
  local dirs, files = {}, {}
  local function walk(dir, rel, level)
    local names, m, e = core.fsReaddir(dir)
    if not names then
      if level == 1 then fail(path, m, e, "dir") end
      return
    end
    table.sort(names)
    for _, n in ipairs(names) do
      if n:sub(1, #TMP_PREFIX) ~= TMP_PREFIX then
        local p = join(dir, n)
        local name = rel == "" and n or (rel .. "/" .. n)
        local l = core.fsLstat(p)
        if l then
          local entry = { name = name }
          local t = l
          if l.type == "symlink" then
            entry.isSymlink = true
            entry.symlinkTarget = core.fsReadlink(p)
            t = core.fsStat(p) or { type = "file", size = 0 }
          end
          if t.type == "directory" then
            entry.type = "directory"
            dirs[#dirs + 1] = entry
            -- never descend through a symlink (loops, escapes)
            if level < max and not entry.isSymlink then walk(p, name, level + 1) end
          elseif ext_match(n, opts.extension) then
            entry.type = "file"
            entry.size = t.size
            files[#files + 1] = entry
          end
        end
      end
    end
  end
  walk(real, "", 1)
  table.sort(dirs, function(a, b) return a.name < b.name end)
  table.sort(files, function(a, b) return a.name < b.name end)
  for _, f in ipairs(files) do dirs[#dirs + 1] = f end
  return dirs
end

function LocalFilesystem:stat(path)
  local real, _, lexical = self:_resolve(path)
  local st, msg, ename = core.fsStat(real)
  if not st then fail(path, msg, ename) end
  local wpath = self:_workspacePath(lexical)
  local name = wpath:match("([^/]*)$")
  return {
    name = name, path = wpath,
    type = st.type == "directory" and "directory" or "file",
    size = st.type == "directory" and 0 or st.size,
    createdAt = math.min(st.ctime, st.mtime), modifiedAt = st.mtime,
  }
end

function LocalFilesystem:exists(path)
  local ok, err = pcall(self.stat, self, path)
  if ok then return true end
  if errors.FileNotFoundError:is(err) or errors.NotDirectoryError:is(err) then return false end
  error(err, 0)
end

--- The workspace path of the file that path names, symlinks resolved.
function LocalFilesystem:realpath(path)
  local real = self:_resolve(path)
  local base = real_of(self.basePath)
  if within(real, base) then return "/" .. real:sub(#base + 2) end
  return real
end

--- The host path of a workspace path (checked like every operation).
function LocalFilesystem:resolvePath(path)
  local _, _, lexical = self:_resolve(path)
  return lexical
end

local STREAM_CHUNK = 65536

--- The bytes of the file at path, 64 KiB at a time: a function returning
-- the next chunk, nil at the end (Workspace:upload).
function LocalFilesystem:_readStream(path)
  local real = self:_resolve(path)
  local st, msg, ename = core.fsStat(real)
  if not st then fail(path, msg, ename) end
  if st.type == "directory" then fail(path, "is a directory", "EISDIR") end
  local f, err = io.open(real, "rb")
  if not f then fail(path, err, "EACCES") end
  return function()
    if not f then return nil end
    local chunk = f:read(STREAM_CHUNK)
    if chunk == nil then
      f:close()
      f = nil
    end
    return chunk
  end
end

--- A sink for the file at path (Workspace:download): write(chunk) appends
-- to a temporary file beside it, close() renames it over the file and
-- returns the bytes written, abort() removes it.
function LocalFilesystem:_writeStream(path)
  local real = self:_resolve(path)
  ensure_parent(real, path, true)
  local dir, name = split(real)
  local tmp = join(dir, TMP_PREFIX .. common.randomDigits(8) .. "-" .. name)
  local f, err = io.open(tmp, "wb")
  if not f then fail(path, err, "EACCES") end
  local bytes = 0
  local sink = {}
  function sink.write(chunk)
    local ok, werr = f:write(chunk)
    if not ok then fail(path, werr, "EIO") end
    bytes = bytes + #chunk
  end
  function sink.close()
    f:close()
    local ok, msg, ename = core.fsRename(tmp, real)
    if not ok then
      os.remove(tmp)
      fail(path, msg, ename)
    end
    return bytes
  end
  function sink.abort()
    f:close()
    os.remove(tmp)
  end
  return sink
end

function LocalFilesystem:getInfo()
  return fs_common.info(self, { basePath = self.basePath, contained = self.contained })
end

function LocalFilesystem:getInstructions()
  local default = ('Local filesystem at "%s". Files at workspace path "/foo" are stored at'
    .. ' "%s/foo" on disk.'):format(self.basePath, self.basePath == "/" and "" or self.basePath)
  local text = common.instructions("LocalFilesystem:getInstructions", self._instructions, default)
  return text
end

return fs_common.checkMethods(LocalFilesystem)
