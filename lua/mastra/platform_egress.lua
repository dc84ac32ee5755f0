-- A PlatformSandbox's own egress rules (its option `egress`; docs/api.md,
-- docs/platform.md "Networks"): the option's check, and their setting at
-- start, after the create and before any command, where the platform
-- advertises them.
local core = require "mastra.core"
local errors = require "mastra.errors"
local options = require "mastra.options"
local client = require "mastra.platform_client"
local platform_exec = require "mastra.platform_exec"

local egress = {}

-- egress = {allow = {rules}, deny = {rules}}: rules are strings, each a
-- CIDR, an address, a domain name or *.name (docs/api.md)
function egress.check(v)
  local what = "a table {allow = {rules}, deny = {rules}} of rule strings (CIDRs,"
    .. " addresses, domain names, *.names)"
  if type(v) ~= "table" or next(v) == nil then return false, what end
  local unknown = {}
  for k in pairs(v) do
    if k ~= "allow" and k ~= "deny" then unknown[#unknown + 1] = options.describe(k) end
  end
  if #unknown > 0 then
    table.sort(unknown)
    return false, ("%s (unknown key %s)"):format(what, table.concat(unknown, ", "))
  end
  for _, k in ipairs{ "allow", "deny" } do
    local list = v[k]
    if list ~= nil and type(list) ~= "table" then
      return false, ("%s (%s is a %s)"):format(what, k, type(list))
    end
    local n = 0
    for _ in pairs(list or {}) do n = n + 1 end
    for i = 1, n do
      local r = list[i]
      if type(r) ~= "string" or r == "" or r:find("[,%s]") then
        return false, ("%s (%s[%d] is %s: one rule a string, without spaces or commas)")
          :format(what, k, i, options.describe(r))
      end
    end
  end
  return true
end

local function same_list(a, b)
  if (a == nil) ~= (b == nil) then return false end
  if a == nil then return true end
  if #a ~= #b then return false end
  for i = 1, #a do if a[i] ~= b[i] then return false end end
  return true
end

-- The sandbox's own egress rules (option egress), which narrow the
-- platform's policy: set once, after the create and before any command,
-- where the exec lease lists "egressRules" (the local platform's
-- namespaces driver). Elsewhere the start fails, and destroys what it made:
-- rules that would not hold are worse than none (docs/api.md).
local function set_egress(self, res)
  local id, want = self._sandboxId, self._opts.egress
  local path = "/sandbox/" .. client.encodeComponent(id)
  if not platform_exec.supports(self, id, "egressRules") then
    error("PlatformSandbox:start: this platform does not support egress rules (its exec"
      .. ' lease does not advertise "egressRules": the hosted platform and the local'
      .. " process driver have none); leave the egress option out, or run on the local"
      .. " platform's namespaces driver", 0)
  end
  local body = {}
  for k, list in pairs(want) do
    body[k] = setmetatable({ table.unpack(list) }, core.jsonArray)
  end
  local ok, r = pcall(client.request, self._cfg, "PUT", path .. "/egress", { json = body })
  if ok then return end
  -- joined a live sandbox of this id: its rules, set by its first start,
  -- must be these
  if res.outcome == "connected" and errors.PlatformApiError:is(r) and r.status == 409 then
    local got = (client.request(self._cfg, "GET", path).json or {}).egressRules or {}
    if same_list(got.allow, want.allow) and same_list(got.deny or {}, want.deny or {}) then
      return
    end
    error(("PlatformSandbox:start: sandbox %s has other egress rules already (a sandbox's"
      .. " rules are set once, at its first start): give the same egress option, or"
      .. " another id"):format(id), 0)
  end
  error(r, 0)
end

--- Set the rules of self (started: res is its start's outcome); a sandbox
-- this start made goes again when they cannot be set.
function egress.start(self, res)
  local ok, err = pcall(set_egress, self, res)
  if ok then return end
  if res.outcome ~= "connected" then
    pcall(client.request, self._cfg, "DELETE",
      "/sandbox/" .. client.encodeComponent(self._sandboxId))
    self._sandboxId = nil
    self._lease = nil
  end
  error(err, 0)
end

return egress
