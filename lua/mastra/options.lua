-- Validation of options tables and arguments. Every message names the
-- function, the option or argument, what was expected and what came.
local options = {}

local function describe(v)
  local t = type(v)
  if t == "number" or t == "boolean" then return ("%s %s"):format(t, tostring(v)) end
  if t == "string" then return ("string %q"):format(#v > 40 and v:sub(1, 40) .. "..." or v) end
  return t
end
options.describe = describe

-- Checkers: function(v) -> ok, what was expected.
function options.string(v)
  return type(v) == "string", "a string"
end

function options.boolean(v)
  return type(v) == "boolean", "a boolean"
end

function options.func(v)
  return type(v) == "function", "a function"
end

function options.ms(v)
  return type(v) == "number" and v == v and v >= 0 and v < math.huge,
    "a finite number of milliseconds >= 0"
end

function options.positive_integer(v)
  return math.type(v) == "integer" and v >= 1, "an integer >= 1"
end

function options.string_or_function(v)
  return type(v) == "string" or type(v) == "function", "a string or a function"
end

-- An environment map: string keys, string or number values.
function options.env(v)
  if type(v) ~= "table" then return false, "a table of NAME = value strings" end
  for k, val in pairs(v) do
    if type(k) ~= "string" or k == "" or k:find("[=%z]") then
      return false, ("a table of NAME = value strings (bad name %s)"):format(describe(k))
    end
    if type(val) ~= "string" and type(val) ~= "number" then
      return false, ("a table of NAME = value strings (%s is a %s)"):format(k, type(val))
    end
  end
  return true
end

function options.one_of(...)
  local allowed = { ... }
  local text = "one of " .. table.concat(allowed, ", ")
  return function(v)
    for _, a in ipairs(allowed) do
      if v == a then return true end
    end
    return false, text
  end
end

local function sorted_keys(spec)
  local keys = {}
  for k in pairs(spec) do keys[#keys + 1] = k end
  table.sort(keys)
  return table.concat(keys, ", ")
end

--- Validate opts (nil or a table) against spec {name = checker}. Raises at
-- `level` (default: the caller of the function that calls check).
function options.check(where, opts, spec, level)
  level = level or 3
  if opts == nil then return {} end
  if type(opts) ~= "table" then
    error(("%s: options must be a table (got %s)"):format(where, describe(opts)), level)
  end
  for k, v in pairs(opts) do
    local checker = spec[k]
    if checker == nil then
      error(("%s: unknown option '%s' (known options: %s)")
        :format(where, tostring(k), sorted_keys(spec)), level)
    end
    local ok, expected = checker(v)
    if not ok then
      error(("%s: option '%s' must be %s (got %s)")
        :format(where, k, expected, describe(v)), level)
    end
  end
  return opts
end

--- Check one positional argument.
function options.arg(where, n, name, v, checker, level)
  local ok, expected = checker(v)
  if not ok then
    error(("%s: argument #%d (%s) must be %s (got %s)")
      :format(where, n, name, expected, describe(v)), level or 3)
  end
  return v
end

--- Check that self is an instance of class (a method called with ':').
function options.self(where, self, class, level)
  if getmetatable(self) ~= class then
    error(("%s: expected a %s as self (call it with ':')")
      :format(where, class.__name or "object"), level or 3)
  end
  return self
end

return options
