-- The control-plane client of the Mastra Platform workspace proxy:
-- configuration, URLs, headers, requests, and PlatformApiError.
local core = require "mastra.core"
local errors = require "mastra.errors"
local dotenv = require "mastra.dotenv"
local local_platform = require "mastra.local_platform"
local task = require "mastra.task"

local client = {}

local DEFAULT_TIMEOUT = 60000
local REGIONS = {
  us = "https://workspaces.us.mastra.ai",
  eu = "https://workspaces.eu.mastra.ai",
}
local DEFAULT_URL = "https://workspaces.mastra.ai"

local function nonblank(v)
  if type(v) == "string" and v:match("%S") then return v end
  return nil
end

local function trim(s)
  return s and (s:match("^%s*(.-)%s*$"))
end

--- encodeURIComponent: everything but A-Z a-z 0-9 - _ . ! ~ * ' ( ).
function client.encodeComponent(s)
  return (s:gsub("[^%w%-_%.!~%*'%(%)]", function(c)
    return ("%%%02X"):format(c:byte())
  end))
end

--- URLSearchParams form encoding of one value (space as +).
local function form_encode(s)
  return (s:gsub("[^%w%-_%.%*]", function(c)
    if c == " " then return "+" end
    return ("%%%02X"):format(c:byte())
  end))
end

--- Resolve the connection settings of a PlatformSandbox or
-- PlatformFilesystem from its options and the environment. With nothing
-- configured, the local platform is found or started.
function client.resolve(opts, where)
  dotenv.loadDefault() -- ./.env (dotenv.lua), once per process
  local cfg = {
    actingUserId = nonblank(trim(opts.actingUserId)),
    sessionId = opts.sessionId,
    threadId = opts.threadId,
    fetch = opts.fetch,
    requestTimeout = opts.requestTimeout or DEFAULT_TIMEOUT,
  }
  local token = nonblank(opts.accessToken)
    or nonblank(os.getenv("MASTRA_PLATFORM_ACCESS_TOKEN"))
    or nonblank(os.getenv("MASTRA_PLATFORM_SECRET_KEY"))
  local proxy = nonblank(opts.proxyUrl) or nonblank(os.getenv("MASTRA_WORKSPACE_PROXY_URL"))
  local defaults = {}
  if token == nil and proxy == nil and opts.fetch == nil then
    local lp = local_platform.ensure()
    token, proxy, defaults = lp.token, lp.url, lp
  end
  if token == nil then
    error(where .. ": accessToken is required (option accessToken, or set"
      .. " MASTRA_PLATFORM_ACCESS_TOKEN)", 3)
  end
  cfg.accessToken = token
  if proxy == nil then
    local region = trim(os.getenv("MASTRA_PLATFORM_REGION") or "")
    if region ~= "" and REGIONS[region:lower()] == nil then
      local known = {}
      for name in pairs(REGIONS) do known[#known + 1] = name end
      table.sort(known)
      error(("%s: MASTRA_PLATFORM_REGION is %q, which is not a known region (known: %s;"
        .. " unset it for %s, or set MASTRA_WORKSPACE_PROXY_URL)")
        :format(where, region, table.concat(known, ", "), DEFAULT_URL), 3)
    end
    proxy = REGIONS[region:lower()] or DEFAULT_URL
  end
  cfg.baseUrl = proxy:gsub("/$", "")
  cfg.projectId = nonblank(opts.projectId) or nonblank(os.getenv("MASTRA_PROJECT_ID"))
    or defaults.projectId
  if cfg.projectId == nil then
    error(where .. ": projectId is required (option projectId, or set MASTRA_PROJECT_ID)", 3)
  end
  local provider = nonblank(trim(opts.sandboxProvider))
    or nonblank(trim(os.getenv("SANDBOX_PROVIDER") or "")) or "railway"
  if provider == "e2b" then
    error(where .. ': sandboxProvider "e2b" is not supported (mastra-lua speaks'
      .. ' the Railway direct-exec data plane); use "railway"', 3)
  elseif provider ~= "railway" then
    error(where .. ': SANDBOX_PROVIDER must be either "railway" or "e2b"', 3)
  end
  cfg.provider = provider
  cfg.defaultEnvironmentId = defaults.environmentId
  cfg.defaultBucketName = defaults.bucketName
  return cfg
end

--- PlatformApiError from a non-2xx answer.
function client.apiError(status, body)
  body = body or ""
  local code, proxyMessage
  local j = core.jsonDecode(body)
  if type(j) == "table" and type(j.error) == "table"
      and type(j.error.message) == "string" and type(j.error.type) == "string" then
    code, proxyMessage = j.error.type, j.error.message
  end
  local message = "Platform proxy request failed with " .. status
  if code then
    message = message .. ": " .. code .. ": " .. proxyMessage
  elseif body ~= "" then
    message = message .. ": " .. body
  end
  if status == 401 then
    message = message .. " (the token is accessToken, or MASTRA_PLATFORM_ACCESS_TOKEN:"
      .. " check that it is this platform's)"
  end
  return errors.PlatformApiError:new{
    message = message, status = status, code = code,
    proxyMessage = proxyMessage, body = body,
  }
end

--- Whether err says the sandbox was destroyed: a PlatformApiError with
-- status 410, or whose error type is "sandbox_destroyed" (the hosted
-- platform's newer type; older ones said "gone"), whatever the status.
function client.isDestroyed(err)
  return errors.PlatformApiError:is(err)
    and (err.status == 410 or err.code == "sandbox_destroyed")
end

-- NetworkError (or the descriptor limit) for a request to url that failed.
local function unreachable(url, msg, name)
  local why = ("cannot reach %s: %s (%s)"):format(url, msg, name)
  -- libcurl's "Couldn't connect" does not say that socket() failed with
  -- EMFILE: descriptorLimit looks at the descriptors themselves
  local limit = errors.descriptorLimit(why, name, name == "CURLE_COULDNT_CONNECT")
  if limit then error(limit, 0) end
  errors.NetworkError:raise({ message = why, url = url, code = name }, 0)
end
client.unreachable = unreachable

-- One HTTP exchange through libcurl, waiting in the current task.
local function transport(spec)
  local req <close>, msg, name = core.http(spec)
  if not req then unreachable(spec.url, msg, name) end
  while true do
    local status, a, b = req:result()
    if status then return { status = status, headers = a, body = b } end
    if a then unreachable(spec.url, a, b) end
    task.wait(req:id())
  end
end

-- The URL, headers and body of a request under the project prefix.
local function prepare(cfg, path, opts)
  local url = ("%s/v1/%s/projects/%s%s"):format(cfg.baseUrl, cfg.provider,
    client.encodeComponent(cfg.projectId), path)
  if opts.query and #opts.query > 0 then
    local parts = {}
    for i, kv in ipairs(opts.query) do
      parts[i] = form_encode(kv[1]) .. "=" .. form_encode(tostring(kv[2]))
    end
    url = url .. "?" .. table.concat(parts, "&")
  end
  local headers = { authorization = "Bearer " .. cfg.accessToken }
  if cfg.actingUserId then headers["x-acting-user-id"] = cfg.actingUserId end
  if cfg.sessionId then headers["x-mastra-session-id"] = cfg.sessionId end
  if cfg.threadId then headers["x-mastra-thread-id"] = cfg.threadId end
  local body = opts.body
  if opts.json ~= nil then
    body = core.jsonEncode(opts.json)
    headers["content-type"] = "application/json"
  elseif opts.contentType then
    headers["content-type"] = opts.contentType
  end
  for k, v in pairs(opts.headers or {}) do headers[k] = v end
  return url, headers, body
end

--- Send a request under the project prefix. opts: json (a table, encoded
-- with its __jsonorder), query (a list of {name, value}), timeout,
-- freshConnection (a new connection, never a kept-alive one that libcurl
-- would silently send the request on again if it dropped: for a create).
-- Returns {status, headers, body, json}; a non-2xx answer raises
-- PlatformApiError.
function client.request(cfg, method, path, opts)
  opts = opts or {}
  local url, headers, body = prepare(cfg, path, opts)
  local res
  if cfg.fetch then
    res = cfg.fetch{ method = method, url = url, headers = headers, body = body }
    if type(res) ~= "table" or math.type(res.status) ~= "integer" then
      error("fetch must return a table {status = <integer>, headers =, body =}", 2)
    end
    res.headers = res.headers or {}
    res.body = res.body or ""
  else
    res = transport{ method = method, url = url, headers = headers, body = body,
      timeout = opts.timeout or cfg.requestTimeout, freshConnection = opts.freshConnection }
  end
  if res.status < 200 or res.status > 299 then
    error(client.apiError(res.status, res.body), 2)
  end
  if res.body ~= "" and opts.expectJson ~= false then
    res.json = core.jsonDecode(res.body)
  end
  return res
end

--- A streamed request under the project prefix (core.http with
-- streamResponse, and bodyStream when opts.bodyStream): the caller reads
-- and writes it, and closes it. opts as client.request's (query, headers,
-- contentType, timeout: default none), and bodyLength. Raises
-- NetworkError when it cannot start.
function client.stream(cfg, method, path, opts)
  local url, headers = prepare(cfg, path, opts)
  local req, msg, name = core.http{ method = method, url = url, headers = headers,
    timeout = opts.timeout or 0, streamResponse = true,
    bodyStream = opts.bodyStream or nil, bodyLength = opts.bodyLength }
  if not req then unreachable(url, msg, name) end
  return req, url
end

--- Milliseconds since the epoch of an ISO-8601 UTC time, or nil.
function client.parseTime(s)
  if type(s) ~= "string" then return nil end
  local y, mo, d, h, mi, sec, frac, zone =
    s:match("^(%d%d%d%d)%-(%d%d)%-(%d%d)T(%d%d):(%d%d):(%d%d)(%.?%d*)(.*)$")
  if not y then return nil end
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  -- days from the civil date (proleptic Gregorian), 1970-01-01 = 0
  local yy = mo <= 2 and y - 1 or y
  local era = (yy >= 0 and yy or yy - 399) // 400
  local yoe = yy - era * 400
  local doy = (153 * (mo > 2 and mo - 3 or mo + 9) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  local days = era * 146097 + doe - 719468
  local ms = ((days * 24 + tonumber(h)) * 60 + tonumber(mi)) * 60000
    + tonumber(sec) * 1000
  if frac ~= "" and frac ~= "." then
    ms = ms + math.floor(tonumber("0" .. frac) * 1000 + 0.5)
  end
  if zone == "Z" or zone == "" then return ms end
  local sign, zh, zm = zone:match("^([+-])(%d%d):?(%d%d)$")
  if not sign then return nil end
  local offset = (tonumber(zh) * 60 + tonumber(zm)) * 60000
  return sign == "+" and ms - offset or ms + offset
end

return client
