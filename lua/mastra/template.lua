-- mastra.Template: a sandbox recipe in the shape of upstream's Template()
-- (docs/api.md "Template"): chained operations (runCmd, setWorkdir,
-- setEnvs, aptInstall, pipInstall, npmInstall, cpuCount, memoryMB), an
-- optional family name, and template:build{...}, which asks the platform to
-- build it (POST /sandbox/templates/builds) and waits until it is ready.
--
-- The definition travels as {"schemaVersion": 1, "family"?, "operations":
-- [{"method", "args"}]}, checked here with upstream's limits (256
-- operations, 32 KiB a string, 512 items a list or map, 256 KiB
-- serialized); a message names the operation. Build-only values
-- (setEnvs(envs, {ephemeral = true})) go to templateBuildEnvs, never into
-- the definition (nor its hash, which is the template's identity).
local core = require "mastra.core"
local errors = require "mastra.errors"
local options = require "mastra.options"
local task = require "mastra.task"
local client = require "mastra.platform_client"

local Template = { __name = "mastra.Template" }
Template.__index = Template

Template.SCHEMA_VERSION = 1
Template.MAX_OPERATIONS = 256
Template.MAX_STRING_LENGTH = 32 * 1024
Template.MAX_COLLECTION_ITEMS = 512
Template.MAX_SERIALIZED_BYTES = 256 * 1024
Template.MAX_FAMILY_LENGTH = 200

local DEFAULT_BUILD_TIMEOUT_MS = 15 * 60 * 1000
local DEFAULT_POLL_MS = 1000
local MIN_POLL_MS = 100

local function array(t) return setmetatable(t or {}, core.jsonArray) end

local NEW_OPTS = { family = options.string }

--- A new, empty recipe. opts: {family = name} (as withFamily).
function Template.new(opts)
  opts = options.check("Template.new", opts, NEW_OPTS)
  local self = setmetatable({ _ops = {}, _buildEnvs = nil }, Template)
  if opts.family ~= nil then self:withFamily(opts.family) end
  return self
end

--- Whether v is a Template.
function Template.is(v)
  return getmetatable(v) == Template
end

-- {====== checks ======

local function check_self(where, self)
  options.self(where, self, Template, 4)
end

-- where: "Template:runCmd (operation #3)"
local function op_where(self, method)
  return ("Template:%s (operation #%d)"):format(method, #self._ops + 1)
end

local function fail(where, fmt, ...)
  error(where .. ": " .. fmt:format(...), 4)
end

local function check_string(where, what, s)
  if type(s) ~= "string" then
    fail(where, "%s must be a string (got %s)", what, options.describe(s))
  end
  if #s > Template.MAX_STRING_LENGTH then
    fail(where, "%s is %d bytes, more than the limit of %d", what, #s,
      Template.MAX_STRING_LENGTH)
  end
  if s:find("%z") then fail(where, "%s holds a NUL byte", what) end
end

-- a string or a non-empty list of strings -> a JSON array
local function string_list(where, what, v)
  if type(v) == "string" then v = { v } end
  if type(v) ~= "table" then
    fail(where, "%s must be a string or a list of strings (got %s)", what,
      options.describe(v))
  end
  local n = #v
  for k in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 or k > n then
      fail(where, "%s must be a list of strings (it has the key %s)", what, tostring(k))
    end
  end
  if n == 0 then fail(where, "%s is empty", what) end
  if n > Template.MAX_COLLECTION_ITEMS then
    fail(where, "%s has %d items, more than the limit of %d", what, n,
      Template.MAX_COLLECTION_ITEMS)
  end
  local out = array()
  for i = 1, n do
    check_string(where, ("%s[%d]"):format(what, i), v[i])
    out[i] = v[i]
  end
  return out
end

local function check_env(where, envs)
  local ok, expected = options.env(envs)
  if not ok then fail(where, "envs must be %s", expected) end
  local out, n = {}, 0
  for k, v in pairs(envs) do
    n = n + 1
    if not k:match("^[%a_][%w_]*$") then
      fail(where, "envs: %q is not a variable name (letters, digits and _)", k)
    end
    check_string(where, "envs." .. k, tostring(v))
    out[k] = tostring(v)
  end
  if n > Template.MAX_COLLECTION_ITEMS then
    fail(where, "envs has %d names, more than the limit of %d", n,
      Template.MAX_COLLECTION_ITEMS)
  end
  return out, n
end

local function check_opts(where, opts, spec)
  -- level 4: the caller of the chained method
  return options.check(where, opts, spec, 4)
end

local function add(self, where, method, args)
  if #self._ops >= Template.MAX_OPERATIONS then
    fail(where, "a template holds at most %d operations", Template.MAX_OPERATIONS)
  end
  self._ops[#self._ops + 1] = setmetatable({ method = method, args = array(args) },
    { __jsonorder = { "method", "args" } })
  return self
end

-- }======

-- {====== the operations ======

--- Run a shell command (or a list of them, in order) in the build.
function Template:runCmd(command)
  check_self("Template:runCmd", self)
  local where = op_where(self, "runCmd")
  if type(command) == "table" then
    return add(self, where, "runCmd", { string_list(where, "command", command) })
  end
  check_string(where, "command", command)
  if command == "" then fail(where, "command is empty") end
  return add(self, where, "runCmd", { command })
end

--- The working directory of the operations after it (made if missing),
-- and of the template's sandboxes.
function Template:setWorkdir(path)
  check_self("Template:setWorkdir", self)
  local where = op_where(self, "setWorkdir")
  check_string(where, "path", path)
  if path:sub(1, 1) ~= "/" then fail(where, "path must be absolute (got %q)", path) end
  return add(self, where, "setWorkdir", { path })
end

local ENV_OPTS = { ephemeral = options.boolean }

--- Environment variables of the operations after it and of the template's
-- sandboxes. With {ephemeral = true} they are the build's only: sent as
-- templateBuildEnvs, never kept in the definition or its hash.
function Template:setEnvs(envs, opts)
  check_self("Template:setEnvs", self)
  local where = op_where(self, "setEnvs")
  opts = check_opts(where, opts, ENV_OPTS)
  local out, n = check_env(where, envs)
  if opts.ephemeral then
    local b = self._buildEnvs or {}
    for k, v in pairs(out) do b[k] = v end
    self._buildEnvs = b
    return self
  end
  if n == 0 then fail(where, "envs is empty") end
  return add(self, where, "setEnvs", { out })
end

local APT_OPTS = { noInstallRecommends = options.boolean, fixMissing = options.boolean }
local PIP_OPTS = { g = options.boolean }
local NPM_OPTS = { g = options.boolean, dev = options.boolean }

local function copy_opts(opts)
  if next(opts) == nil then return nil end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  return o
end

--- apt-get install the packages (as root, in the build).
function Template:aptInstall(packages, opts)
  check_self("Template:aptInstall", self)
  local where = op_where(self, "aptInstall")
  opts = check_opts(where, opts, APT_OPTS)
  return add(self, where, "aptInstall", { string_list(where, "packages", packages),
    copy_opts(opts) })
end

-- pip and npm: packages may be left out (then the project's
-- requirements.txt / package.json); options without packages send null
local function installer(method, spec)
  return function(self, packages, opts)
    check_self("Template:" .. method, self)
    local where = op_where(self, method)
    if opts == nil and type(packages) == "table" and getmetatable(packages) == nil
        and packages[1] == nil and next(packages) ~= nil then
      opts, packages = packages, nil -- npmInstall{ g = true }
    end
    opts = check_opts(where, opts, spec)
    local o = copy_opts(opts)
    local list = packages ~= nil and string_list(where, "packages", packages) or nil
    if list then return add(self, where, method, { list, o }) end
    if o then return add(self, where, method, { core.null, o }) end
    return add(self, where, method, {})
  end
end

--- pip install the packages (or -r requirements.txt).
Template.pipInstall = installer("pipInstall", PIP_OPTS)
--- npm install the packages (or the package.json of the workdir).
Template.npmInstall = installer("npmInstall", NPM_OPTS)

local function count(method, what, max)
  return function(self, n)
    check_self("Template:" .. method, self)
    local where = op_where(self, method)
    if math.type(n) ~= "integer" or n < 1 or n > max then
      fail(where, "%s must be an integer between 1 and %d (got %s)", what, max,
        options.describe(n))
    end
    return add(self, where, method, { n })
  end
end

--- The CPUs of the template's sandboxes (a cgroup limit where the driver
-- has them).
Template.cpuCount = count("cpuCount", "count", 64)
--- The memory of the template's sandboxes in MiB (a cgroup limit where
-- the driver has them).
Template.memoryMB = count("memoryMB", "megabytes", 1024 * 1024)

--- A family name: shown with the template, not part of its identity.
function Template:withFamily(name)
  check_self("Template:withFamily", self)
  check_string("Template:withFamily", "name", name)
  if #name == 0 or #name > Template.MAX_FAMILY_LENGTH then
    fail("Template:withFamily", "name must be 1 to %d characters (got %d)",
      Template.MAX_FAMILY_LENGTH, #name)
  end
  self._family = name
  return self
end

-- }======

-- {====== the wire ======

local function deep_copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = deep_copy(x) end
  return setmetatable(out, getmetatable(v))
end

--- The definition as it is sent (a copy): {schemaVersion, family?,
-- operations}. Raises when it is over 256 KiB serialized or empty.
function Template:definition()
  check_self("Template:definition", self)
  if #self._ops == 0 then
    error("Template:definition: the template has no operations (add runCmd, setWorkdir, ...)",
      2)
  end
  local def = setmetatable({ schemaVersion = Template.SCHEMA_VERSION, family = self._family,
    operations = array(deep_copy(self._ops)) },
    { __jsonorder = { "schemaVersion", "family", "operations" } })
  local size = #core.jsonEncode(def)
  if size > Template.MAX_SERIALIZED_BYTES then
    error(("Template:definition: the definition is %d bytes serialized, more than the"
      .. " limit of %d"):format(size, Template.MAX_SERIALIZED_BYTES), 2)
  end
  return def
end

--- The build-only environment (setEnvs{...}, {ephemeral = true}), a copy,
-- or nil.
function Template:buildEnvs()
  check_self("Template:buildEnvs", self)
  if self._buildEnvs == nil then return nil end
  return deep_copy(self._buildEnvs)
end

--- The definition as JSON text.
function Template:toJSON()
  check_self("Template:toJSON", self)
  return core.jsonEncode(self:definition())
end

--- A copy (clones of a sandbox share their parent's recipe; a copy is
-- for changing one without the other).
function Template:copy()
  check_self("Template:copy", self)
  return setmetatable({ _ops = deep_copy(self._ops), _buildEnvs = deep_copy(self._buildEnvs),
    _family = self._family }, Template)
end

-- }======

-- {====== build ======

local BUILD_OPTS = {
  accessToken = options.string,
  projectId = options.string,
  environmentId = options.string,
  proxyUrl = options.string,
  fetch = options.func,
  requestTimeout = options.ms,
  actingUserId = options.string,
  sessionId = options.string,
  sandboxProvider = options.string,
  timeout = options.ms,       -- the whole wait (default 15 min)
  pollIntervalMs = options.ms, -- when the platform gives no retryAfterMs
  onProgress = options.func,  -- fn{status, templateId, elapsedMs, attempt}
}

local function build_error(id, message)
  errors.PlatformTemplateBuildError:raise({
    message = "Sandbox template build failed" .. (message and message ~= ""
      and ": " .. message or ""),
    template = id, templateId = id, buildError = message,
  }, 0)
end

--- Wait for the next answer: retryAfterMs (at least 100 ms), bounded by
-- the time left.
function Template._pollDelay(retry_after, fallback, left)
  local d = math.tointeger(retry_after) or fallback
  if d < MIN_POLL_MS then d = MIN_POLL_MS end
  if left ~= nil and d > left then d = math.max(0, math.floor(left)) end
  return d
end

--- Ask the platform to build the template (POST /sandbox/templates/builds,
-- idempotent: a built one answers ready at once) and wait until it is
-- ready, honouring the platform's retryAfterMs. Returns {templateId,
-- status = "ready", elapsedMs}. A failed build raises
-- PlatformTemplateBuildError (its message the platform's: the failing
-- operation, its exit code, its output's tail); the timeout
-- PlatformTemplateBuildTimeoutError.
function Template:build(opts)
  local where = "Template:build"
  check_self(where, self)
  opts = options.check(where, opts, BUILD_OPTS)
  local cfg = client.resolve(opts, where)
  local envId = opts.environmentId or os.getenv("MASTRA_ENVIRONMENT_ID")
  if envId == nil or envId == "" then envId = cfg.defaultEnvironmentId end
  if envId == nil or envId == "" then
    error(where .. ": environmentId is required. Pass it or set MASTRA_ENVIRONMENT_ID.", 2)
  end
  local body = setmetatable({ environmentId = envId, templateDefinition = self:definition(),
    templateBuildEnvs = self._buildEnvs },
    { __jsonorder = { "environmentId", "templateDefinition", "templateBuildEnvs" } })
  local timeout = opts.timeout or DEFAULT_BUILD_TIMEOUT_MS
  local started = core.now()
  local attempt = 0
  while true do
    attempt = attempt + 1
    local res = client.request(cfg, "POST", "/sandbox/templates/builds", { json = body })
    local j = res.json or {}
    local id = type(j.templateId) == "string" and j.templateId or nil
    local elapsed = math.floor(core.now() - started)
    if opts.onProgress then
      opts.onProgress{ status = j.status, templateId = id, elapsedMs = elapsed,
        attempt = attempt }
    end
    if j.status == "ready" then
      self._templateId = id
      return { templateId = id, status = "ready", elapsedMs = elapsed }
    elseif j.status == "failed" then
      build_error(id, type(j.error) == "string" and j.error or nil)
    elseif j.status ~= "pending" then
      errors.PlatformApiError:raise({
        message = ("the platform answered POST /sandbox/templates/builds with status %s"
          .. " (expected ready, pending or failed)"):format(options.describe(j.status)),
        status = res.status, body = res.body,
      }, 0)
    end
    local left = timeout - (core.now() - started)
    if left <= 0 then
      errors.PlatformTemplateBuildTimeoutError:raise({
        message = ("Sandbox template %s was not ready within %dms"):format(id or "?",
          math.floor(timeout)),
        template = id, templateId = id, timeoutMs = timeout,
      }, 0)
    end
    task.sleep(Template._pollDelay(j.retryAfterMs, opts.pollIntervalMs or DEFAULT_POLL_MS,
      left))
  end
end

--- A create's wait for a template that is building (platform_sandbox.lua):
-- a function(templatePending) that sleeps retryAfterMs and returns true,
-- or raises PlatformTemplateBuildTimeoutError once timeoutMs (default 15
-- min) has passed.
function Template._createWait(timeoutMs)
  local timeout = timeoutMs or DEFAULT_BUILD_TIMEOUT_MS
  local started = core.now()
  return function(pending)
    local id = type(pending.templateId) == "string" and pending.templateId or "?"
    local left = timeout - (core.now() - started)
    if left <= 0 then
      errors.PlatformTemplateBuildTimeoutError:raise({
        message = ("Sandbox template %s was not ready within %dms"):format(id,
          math.floor(timeout)),
        template = id, templateId = id, timeoutMs = timeout,
      }, 0)
    end
    task.sleep(Template._pollDelay(pending.retryAfterMs, DEFAULT_POLL_MS, left))
    return true
  end
end

-- }======

return Template
