-- PlatformFilesystem: a Mastra Platform bucket as a workspace filesystem
-- (the platform's /fs routes, with the filesystem interface of docs/api.md).
--
-- Objects live at /fs/{bucket}/{key} under the project prefix; a key is
-- the normalized path without its leading "/", percent-encoded segment by
-- segment. Directories are prefixes: mkdir stores the marker object
-- "dir/", and a path is a directory when something is stored under it.
--
-- Contents are Lua strings, which are bytes: readFile returns the bytes
-- whether or not `encoding` ("utf-8"/"utf8") is given (with it, the bytes
-- are the UTF-8 text as stored). Times (createdAt, modifiedAt) are
-- milliseconds since the epoch.
--
-- Where this client differs from upstream (on purpose, for the
-- conformance cases and to behave as LocalFilesystem does; the shared
-- suite in spec/filesystem_spec.lua runs every case on both):
-- copyFile/moveFile map a 404 to FileNotFoundError, copy and move a
-- directory (a prefix) object by object (a copy needs recursive = true,
-- else IsDirectoryError), and refuse a file onto a directory
-- (IsDirectoryError); mkdir where a file is raises FileExistsError, rmdir of
-- a file NotDirectoryError;
-- rmdir without `recursive` refuses a non-empty directory
-- (DirectoryNotEmptyError); readdir of a path with nothing under it raises
-- NotDirectoryError (an object is stored there) or DirectoryNotFoundError;
-- a recursive readdir names entries by their path relative to the listed
-- directory ("sub/nested.txt") and includes the directories.
--
-- The checks every method starts with (arguments, options, lazy init, the
-- read-only mode) are fs_common.METHODS, put in front of the methods at the
-- end of this file: each method here holds only what it does.
local core = require "mastra.core"
local errors = require "mastra.errors"
local options = require "mastra.options"
local fs_common = require "mastra.fs_common"
local ext_match = fs_common.extMatch
local client = require "mastra.platform_client"
local common = require "mastra.common"
local task = require "mastra.task"

local PlatformFilesystem = { __name = "mastra.PlatformFilesystem" }
PlatformFilesystem.__index = PlatformFilesystem

local NEW_OPTS = fs_common.newOpts{
  bucketName = options.string,
  accessToken = options.string,
  projectId = options.string,
  sandboxProvider = options.string,
  actingUserId = options.string,
  sessionId = options.string,
  threadId = options.string,
  fetch = options.func,
  requestTimeout = options.ms,
  proxyUrl = options.string,
}

--- fs_common.normalizePath: POSIX normalize under "/", a trailing "/" kept.
PlatformFilesystem.normalizePath = fs_common.normalizePath
local normalize = fs_common.normalizePath

local function encode_key(key)
  local out = {}
  for seg in (key .. "/"):gmatch("([^/]*)/") do
    out[#out + 1] = client.encodeComponent(seg)
  end
  return table.concat(out, "/")
end

local function last_segment(p)
  return p:gsub("/+$", ""):match("([^/]*)$")
end

local MONTHS = { Jan = 1, Feb = 2, Mar = 3, Apr = 4, May = 5, Jun = 6,
  Jul = 7, Aug = 8, Sep = 9, Oct = 10, Nov = 11, Dec = 12 }

-- ms since the epoch of an HTTP date (RFC 1123) or an ISO-8601 time; 0.
local function parse_date(s)
  if type(s) ~= "string" then return 0 end
  local d, mon, y, h, mi, sec = s:match("^%a+, (%d+) (%a+) (%d+) (%d+):(%d+):(%d+) GMT")
  if d and MONTHS[mon] then
    s = ("%04d-%02d-%02dT%s:%s:%sZ"):format(tonumber(y), MONTHS[mon], tonumber(d), h, mi, sec)
  end
  return client.parseTime(s) or 0
end

function PlatformFilesystem.new(opts)
  opts = options.check("PlatformFilesystem.new", opts, NEW_OPTS)
  local cfg = client.resolve(opts, "PlatformFilesystem.new")
  local bucket = opts.bucketName
  if bucket == nil or bucket == "" then
    bucket = os.getenv("MASTRA_PLATFORM_BUCKET_NAME")
    if bucket == "" then bucket = nil end
    bucket = bucket or cfg.defaultBucketName
  end
  if bucket == nil or bucket == "" then
    error("PlatformFilesystem.new: bucketName is required (option bucketName or"
      .. " MASTRA_PLATFORM_BUCKET_NAME)", 2)
  end
  return fs_common.instance(PlatformFilesystem, opts,
    { provider = "platform", icon = "cloud", idPrefix = "platform-fs" },
    { bucketName = bucket, _cfg = cfg })
end

--- Lazy init: no I/O for this provider.
function PlatformFilesystem:init()
  if self.status == "ready" then return end
  self.status = "initializing"
  self.status = "ready"
end

PlatformFilesystem.destroy = fs_common.destroy
PlatformFilesystem.__close = fs_common.destroy

function PlatformFilesystem.__tostring(self)
  return ("mastra.PlatformFilesystem: %s (bucket %s, %s)"):format(self.id, self.bucketName,
    self.status)
end

local function object_path(self, key)
  return "/fs/" .. client.encodeComponent(self.bucketName) .. "/" .. encode_key(key)
end

-- One request on /fs/{bucket}/{key}. Returns the response, or nil and the
-- PlatformApiError when its status is one of `statuses`.
function PlatformFilesystem:_fs(method, key, opts, statuses)
  opts = opts or {}
  opts.expectJson = false
  local path = object_path(self, key)
  local ok, res = pcall(client.request, self._cfg, method, path, opts)
  if ok then return res end
  if statuses and errors.PlatformApiError:is(res) and statuses[res.status] then
    return nil, res
  end
  error(res, 0)
end

-- The listing under key (a "dir/" prefix, or "" for the root).
function PlatformFilesystem:_list(prefix, recursive)
  local query = {}
  if not recursive then query[#query + 1] = { "delimiter", "/" } end
  if prefix ~= "" then query[#query + 1] = { "prefix", prefix } end
  local res = self:_fs("GET", "", { query = query })
  local j = res.body ~= "" and core.jsonDecode(res.body) or {}
  if type(j) ~= "table" then j = {} end
  local contents = type(j.contents) == "table" and j.contents or {}
  local prefixes = type(j.commonPrefixes) == "table" and j.commonPrefixes or {}
  return contents, prefixes
end

local function dir_prefix(key)
  if key == "" then return "" end
  if key:sub(-1) ~= "/" then return key .. "/" end
  return key
end

local function not_found(path)
  errors.FileNotFoundError:raise({ message = "File not found: " .. path, path = path }, 3)
end

-- The key of the file at path; a path that names a directory (the root,
-- or one ending in "/") raises IsDirectoryError.
local function file_key(path)
  local key = normalize(path):sub(2)
  if key == "" or key:sub(-1) == "/" then
    errors.IsDirectoryError:raise({ message = "Is a directory: " .. path, path = path }, 3)
  end
  return key
end

function PlatformFilesystem:readFile(path)
  local key = file_key(path)
  local res = self:_fs("GET", key, nil, { [404] = true })
  if not res then not_found(path) end
  return res.body
end

function PlatformFilesystem:writeFile(path, content, opts)
  local key = file_key(path)
  local headers = {}
  if opts.overwrite == false then headers["if-none-match"] = "*" end
  -- as fetch does: text gets text/plain;charset=UTF-8, bytes get none
  local ctype = opts.mimeType
  if ctype == nil and core.isUtf8(content) then ctype = "text/plain;charset=UTF-8" end
  local res = self:_fs("PUT", key, { body = content, contentType = ctype, headers = headers },
    { [412] = true })
  if not res then
    errors.FileExistsError:raise({ message = "File already exists: " .. path, path = path }, 2)
  end
end

-- {====== streams (Workspace:upload and download: workspace/transfer.lua) ======
--
-- An object's bytes come as the GET's response arrives and go out as the
-- PUT's body (chunked), through core.http's streams, so that a transfer
-- holds a few hundred KiB whatever its size. The bucket API has no ranges:
-- one request carries the whole object. A PUT that does not finish (the
-- source failed, the task was cancelled, the connection dropped) is
-- aborted, and the platform stores nothing.

-- core.http's send queue is drained below this before more is written.
local SEND_LOW = 256 * 1024

-- The next piece of req's response body, or nil at its end; a broken
-- transfer raises NetworkError.
local function next_piece(req, url)
  while true do
    local piece = req:read()
    if piece then return piece end
    local status, msg, name = req:result()
    if status then return nil end
    if msg then client.unreachable(url, msg, name) end
    task.wait(req:id())
  end
end

-- The response's status (waiting for it); a non-2xx one raises, 404 as
-- FileNotFoundError for path.
local function await_status(req, url, path)
  local status
  while true do
    status = req:head()
    if status then break end
    local done, msg, name = req:result()
    if done == nil and msg then client.unreachable(url, msg, name) end
    task.wait(req:id())
  end
  if status >= 200 and status <= 299 then return status end
  local parts = {}
  for piece in next_piece, req, url do parts[#parts + 1] = piece end
  if status == 404 and path then
    errors.FileNotFoundError:raise({ message = "File not found: " .. path, path = path }, 0)
  end
  error(client.apiError(status, table.concat(parts)), 0)
end

--- The bytes of the file at path as they arrive: a function returning the
-- next piece, nil at the end, and a function that abandons the rest.
function PlatformFilesystem:_readStream(path)
  local key = file_key(path)
  if self._cfg.fetch then return common.stdinSource(self:readFile(path)) end
  local req, url = client.stream(self._cfg, "GET", object_path(self, key), {})
  local ok, err = pcall(await_status, req, url, path)
  if not ok then
    req:close()
    error(err, 0)
  end
  local function close()
    if req then
      req:close()
      req = nil
    end
  end
  -- several tasks may ask at once (the chunked commands' writers): each
  -- looks again after its wait
  local function source()
    while req do
      local piece = req:read()
      if piece then return piece end
      local status, msg, name = req:result()
      if status then
        close()
        return nil
      end
      if msg then
        close()
        client.unreachable(url, msg, name)
      end
      task.wait(req:id())
    end
    return nil
  end
  return source, close
end

--- A sink for the file at path: write(chunk) sends it (waiting while
-- core.http's queue is full), close() ends the PUT and returns the bytes
-- written, abort() cancels the PUT (nothing is stored).
function PlatformFilesystem:_writeStream(path)
  local key = file_key(path)
  local bytes = 0
  local sink = {}
  if self._cfg.fetch then -- a fetch takes whole bodies
    local parts = {}
    function sink.write(chunk)
      parts[#parts + 1] = chunk
      bytes = bytes + #chunk
    end
    function sink.close()
      self:writeFile(path, table.concat(parts))
      return bytes
    end
    function sink.abort() parts = {} end
    return sink
  end
  -- the PUT starts with the first bytes (or the close of an empty file):
  -- a source that fails before giving any opens no request at all, and
  -- one that is slow to start does not hold an idle one
  local req, url
  local function started()
    if req == nil then
      req, url = client.stream(self._cfg, "PUT", object_path(self, key), { bodyStream = true })
    end
    return req
  end
  -- the platform answered before the end of the body: an error
  local function answered_early()
    local ok, err = pcall(await_status, req, url, path)
    req:close()
    if ok then err = ("%s: the platform answered the PUT of %s before its end")
      :format(url, path) end
    error(err, 0)
  end
  function sink.write(chunk)
    if not started():write(chunk) then answered_early() end
    bytes = bytes + #chunk
    while req:bufferedAmount() >= SEND_LOW do
      local done, msg = req:result()
      if done or msg then answered_early() end
      task.wait(req:id())
    end
  end
  function sink.close()
    if not started():finish() then answered_early() end
    local ok, err = pcall(function()
      await_status(req, url, path)
      while next_piece(req, url) do end
    end)
    req:close()
    if not ok then error(err, 0) end
    return bytes
  end
  function sink.abort()
    if req then req:close() end
  end
  return sink
end

-- }======

function PlatformFilesystem:appendFile(path, content, opts)
  local key = file_key(path)
  -- not atomic: concurrent appends are last-write-wins (as upstream)
  local res = self:_fs("GET", key, nil, { [404] = true })
  local old = res and res.body or ""
  self:_fs("PUT", key, { body = old .. content, contentType = opts.mimeType })
end

function PlatformFilesystem:deleteFile(path, opts)
  local key = normalize(path):sub(2)
  local query = {}
  if opts.recursive ~= nil then query[1] = { "recursive", opts.recursive } end
  local res = self:_fs("DELETE", key, { query = query }, { [404] = true })
  if not res and not opts.force then not_found(path) end
end

-- Whether an object is stored at key (a file).
function PlatformFilesystem:_isFile(key)
  if key == "" or key:sub(-1) == "/" then return false end
  return self:_fs("HEAD", key, nil, { [404] = true }) ~= nil
end

-- Whether something is stored under key/ (a directory).
function PlatformFilesystem:_isDir(key)
  if key == "" then return true end
  local contents, prefixes = self:_list(dir_prefix(key), false)
  return #contents > 0 or #prefixes > 0
end

local function strip_slash(key)
  return (key:gsub("/+$", ""))
end

-- One object: POST with op "copy" or "rename"; false when it is missing.
function PlatformFilesystem:_copyObject(op, from, to)
  return self:_fs("POST", from, {
    query = { { "op", op } },
    json = setmetatable({ destination = to }, { __jsonorder = { "destination" } }),
  }, { [404] = true }) ~= nil
end

-- copyFile and moveFile. A file is one POST with op "copy" or "rename". A
-- directory (a prefix) is every object under it, one POST each, and its
-- markers made again under the destination; as on a LocalFilesystem, a
-- copy needs recursive = true and a move does not.
local function copy_or_move(self, method, op, src, dest, opts)
  if opts.overwrite == false then
    error(("PlatformFilesystem.%s does not support overwrite: false"
      .. " \u{2014} the proxy always overwrites."):format(method), 3)
  end
  local skey = strip_slash(normalize(src):sub(2))
  local dkey = strip_slash(normalize(dest):sub(2))
  if self:_isFile(skey) then
    if self:_isDir(dkey) then
      errors.IsDirectoryError:raise({ message = "Is a directory: " .. dest, path = dest }, 3)
    end
    if not self:_copyObject(op, skey, dkey) then not_found(src) end
    return
  end
  local prefix = dir_prefix(skey)
  local contents = prefix ~= "" and self:_list(prefix, true) or {}
  if #contents == 0 then not_found(src) end
  if op == "copy" and not opts.recursive then
    errors.IsDirectoryError:raise({
      message = "Is a directory: " .. src .. " (use recursive = true)", path = src }, 3)
  end
  local dprefix = dir_prefix(dkey)
  for _, c in ipairs(contents) do
    local key = c.key
    if type(key) == "string" and key:sub(1, #prefix) == prefix then
      local rel = key:sub(#prefix + 1)
      if rel == "" or rel:sub(-1) == "/" then -- a directory's marker
        self:_fs("POST", strip_slash(dprefix .. rel), { query = { { "op", "mkdir" } } })
      elseif not self:_copyObject(op, key, dprefix .. rel) then
        not_found(src .. "/" .. rel) -- removed meanwhile
      end
    end
  end
  if op == "rename" then -- the markers that stayed behind
    self:_fs("DELETE", prefix, { query = { { "recursive", true } } }, { [404] = true })
  end
end

function PlatformFilesystem:copyFile(src, dest, opts)
  copy_or_move(self, "copyFile", "copy", src, dest, opts)
end

function PlatformFilesystem:moveFile(src, dest, opts)
  copy_or_move(self, "moveFile", "rename", src, dest, opts)
end

function PlatformFilesystem:mkdir(path)
  -- recursive is moot: a prefix needs no parents
  local key = strip_slash(normalize(path):sub(2))
  if self:_isFile(key) then
    errors.FileExistsError:raise({ message = "File already exists: " .. path, path = path }, 2)
  end
  self:_fs("POST", key, { query = { { "op", "mkdir" } } })
end

function PlatformFilesystem:rmdir(path, opts)
  local prefix = dir_prefix(normalize(path):sub(2))
  if not opts.recursive then
    local contents, prefixes = self:_list(prefix, false)
    local marker = false
    for _, c in ipairs(contents) do
      if c.key == prefix then
        marker = true
      else
        prefixes[#prefixes + 1] = c.key
      end
    end
    if #prefixes > 0 then
      errors.DirectoryNotEmptyError:raise({
        message = "Directory not empty: " .. path, path = path }, 2)
    end
    if not marker then
      if self:_isFile(strip_slash(prefix)) then
        errors.NotDirectoryError:raise({ message = "Not a directory: " .. path, path = path }, 2)
      end
      if opts.force then return end
      not_found(path)
    end
  end
  local res = self:_fs("DELETE", prefix, { query = { { "recursive", true } } }, { [404] = true })
  if not res then
    if self:_isFile(strip_slash(prefix)) then
      errors.NotDirectoryError:raise({ message = "Not a directory: " .. path, path = path }, 2)
    end
    if not opts.force then not_found(path) end
  end
end

function PlatformFilesystem:readdir(path, opts)
  local key = normalize(path):sub(2)
  local prefix = dir_prefix(key)
  local recursive = opts.recursive and opts.maxDepth ~= 0
  local contents, prefixes = self:_list(prefix, recursive)
  if prefix ~= "" and #contents == 0 and #prefixes == 0 then
    local res = self:_fs("HEAD", key:gsub("/$", ""), nil, { [404] = true })
    if res then
      errors.NotDirectoryError:raise({ message = "Not a directory: " .. path, path = path }, 2)
    end
    errors.DirectoryNotFoundError:raise({
      message = "Directory not found: " .. path, path = path }, 2)
  end
  local dirs, files = {}, {}
  if not recursive then
    for _, p in ipairs(prefixes) do
      if type(p) == "string" then
        dirs[#dirs + 1] = { name = last_segment(p), type = "directory" }
      end
    end
    for _, c in ipairs(contents) do
      local k = c.key
      if type(k) == "string" and k ~= "" and k:sub(-1) ~= "/" then
        local name = last_segment(k)
        if ext_match(name, opts.extension) then
          files[#files + 1] = { name = name, type = "file", size = math.tointeger(c.size) or 0 }
        end
      end
    end
  else
    local max = opts.maxDepth or math.huge
    local seen = {}
    local function add_dir(rel)
      if rel ~= "" and not seen[rel] then
        seen[rel] = true
        local _, slashes = rel:gsub("/", "")
        if slashes + 1 <= max then dirs[#dirs + 1] = { name = rel, type = "directory" } end
      end
    end
    for _, c in ipairs(contents) do
      local k = c.key
      if type(k) == "string" and k:sub(1, #prefix) == prefix then
        local rel = k:sub(#prefix + 1)
        local parent = ""
        for seg in rel:gmatch("([^/]+)/") do
          parent = parent == "" and seg or (parent .. "/" .. seg)
          add_dir(parent)
        end
        if rel ~= "" and rel:sub(-1) ~= "/" then
          local _, slashes = rel:gsub("/", "")
          if slashes + 1 <= max and ext_match(rel, opts.extension) then
            files[#files + 1] = { name = rel, type = "file", size = math.tointeger(c.size) or 0 }
          end
        end
      end
    end
    table.sort(dirs, function(a, b) return a.name < b.name end)
  end
  for _, f in ipairs(files) do dirs[#dirs + 1] = f end
  return dirs
end

local function root_stat()
  return { name = "", path = "/", type = "directory", size = 0, createdAt = 0, modifiedAt = 0 }
end

function PlatformFilesystem:stat(path)
  local norm = normalize(path)
  if norm == "/" then return root_stat() end
  local key = norm:sub(2)
  local res = self:_fs("HEAD", key, nil, { [404] = true })
  if res then
    local h = res.headers or {}
    local t = parse_date(h["last-modified"])
    return {
      name = last_segment(norm), path = norm,
      type = norm:sub(-1) == "/" and "directory" or "file",
      size = math.tointeger(tonumber(h["content-length"])) or 0,
      createdAt = t, modifiedAt = t, mimeType = h["content-type"],
    }
  end
  local contents, prefixes = self:_list(dir_prefix(key), false)
  if #contents > 0 or #prefixes > 0 then
    return { name = last_segment(norm), path = norm, type = "directory", size = 0,
      createdAt = 0, modifiedAt = 0 }
  end
  not_found(path)
end

function PlatformFilesystem:exists(path)
  local ok, err = pcall(self.stat, self, path)
  if ok then return true end
  if errors.FileNotFoundError:is(err) or (type(err) == "table" and err.status == 404) then
    return false
  end
  error(err, 0)
end

function PlatformFilesystem.realpath(_, path)
  return normalize(path)
end

function PlatformFilesystem:getInfo()
  return fs_common.info(self, { bucketName = self.bucketName })
end

function PlatformFilesystem:getInstructions()
  local default = ("Platform filesystem backed by Mastra Platform bucket %s."
    .. " Use absolute workspace paths."):format(self.bucketName)
  local text = common.instructions("PlatformFilesystem:getInstructions", self._instructions,
    default)
  return text
end

return fs_common.checkMethods(PlatformFilesystem)
