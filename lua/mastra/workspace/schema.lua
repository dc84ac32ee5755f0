-- The inputs of the workspace tools: a tool's parameter list (name, type,
-- required, default, enum, minimum, maxLength, description) as a JSON
-- schema for the model, and the validation of the input the model sends
-- against it (types coerced where models send "3" or "true").
local core = require "mastra.core"
local options = require "mastra.options"

local schema = {}

--- t encoded by core.jsonEncode with its keys in this order.
local function ordered(order, t)
  return setmetatable(t, { __jsonorder = order })
end
schema.ordered = ordered

--- t encoded by core.jsonEncode as an array (also when empty).
local function array(t)
  return setmetatable(t, core.jsonArray)
end
schema.array = array

local TYPE_TEXT = {
  string = "a string",
  integer = "an integer",
  number = "a number",
  boolean = "a boolean",
  ["string[]"] = "a list of strings",
  ["string|string[]"] = "a string or a list of strings",
}

local function property_schema(p)
  local t = {}
  if p.type == "string[]" then
    t.type = "array"
    t.items = ordered({ "type" }, { type = "string" })
  elseif p.type == "string|string[]" then
    t.anyOf = array{
      ordered({ "type" }, { type = "string" }),
      ordered({ "type", "items" }, { type = "array",
        items = ordered({ "type" }, { type = "string" }) }),
    }
  else
    t.type = p.type
  end
  t.enum = p.enum and array(p.enum)
  t.minimum = p.minimum
  t.maxLength = p.maxLength
  t.default = p.default
  t.description = p.description
  return ordered({ "type", "items", "anyOf", "enum", "minimum", "maxLength", "default",
    "description" }, t)
end

local function input_schema(params)
  local props, order, required = {}, {}, {}
  for _, p in ipairs(params) do
    props[p.name] = property_schema(p)
    order[#order + 1] = p.name
    if p.required then required[#required + 1] = p.name end
  end
  return ordered({ "type", "properties", "required" }, {
    type = "object",
    properties = ordered(order, props),
    required = array(required),
  })
end

local function is_list_of_strings(v)
  if type(v) ~= "table" then return false end
  local n = 0
  for k in pairs(v) do
    if math.type(k) ~= "integer" then return false end
    n = n + 1
  end
  for i = 1, n do
    if type(v[i]) ~= "string" then return false end
  end
  return true
end

-- Coerce v to the type of p, or nil plus what was expected. Models send
-- numbers and booleans as strings now and then; those are accepted.
local function coerce(p, v)
  local t = p.type
  if t == "string" then
    if type(v) == "number" then v = tostring(v) end
    if type(v) ~= "string" then return nil end
    if p.enum then
      for _, e in ipairs(p.enum) do
        if v == e then return v end
      end
      return nil, "one of " .. table.concat(p.enum, ", ")
    end
    if p.maxLength and utf8.len(v) and utf8.len(v) > p.maxLength then
      return nil, ("a string of at most %d characters"):format(p.maxLength)
    end
    return v
  elseif t == "integer" or t == "number" then
    if type(v) == "string" then v = tonumber(v) end
    if type(v) ~= "number" or v ~= v or v == math.huge or v == -math.huge then return nil end
    if t == "integer" then
      v = math.tointeger(v)
      if not v then return nil end
    end
    if p.minimum and v < p.minimum then
      return nil, ("%s >= %s"):format(TYPE_TEXT[t], p.minimum)
    end
    return v
  elseif t == "boolean" then
    if v == "true" then return true elseif v == "false" then return false end
    if type(v) ~= "boolean" then return nil end
    return v
  elseif t == "string[]" then
    if type(v) == "string" then return { v } end
    if not is_list_of_strings(v) then return nil end
    return v
  elseif t == "string|string[]" then
    if type(v) == "string" then return v end
    if not is_list_of_strings(v) then return nil end
    return v
  end
  return nil
end

-- The validated arguments with defaults, or nil and a message for the model.
local function validate(tool, params, input)
  if type(input) == "string" then
    local decoded, err = core.jsonDecode(input)
    if decoded == nil then
      return nil, ("Invalid input for %s: not valid JSON (%s)"):format(tool, err)
    end
    input = decoded
  end
  if input == nil then input = {} end
  if type(input) ~= "table" then
    return nil, ("Invalid input for %s: expected an object of parameters (got %s)")
      :format(tool, type(input))
  end
  local args = {}
  for _, p in ipairs(params) do
    local v = input[p.name]
    if v == core.null then v = nil end
    if v == nil then
      if p.required then
        return nil, ("Invalid input for %s: missing required parameter '%s' (%s: %s)")
          :format(tool, p.name, TYPE_TEXT[p.type], p.description)
      end
      args[p.name] = p.default
    else
      local value, expected = coerce(p, v)
      if value == nil then
        return nil, ("Invalid input for %s: parameter '%s' must be %s (got %s)")
          :format(tool, p.name, expected or TYPE_TEXT[p.type], options.describe(v))
      end
      args[p.name] = value
    end
  end
  return args
end

--- The JSON schema of an object with the parameters of params.
schema.input = input_schema

--- The validated arguments of tool (a table, or a JSON string), defaults
-- filled in; or nil and a message for the model.
schema.validate = validate

return schema
