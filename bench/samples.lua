-- The samples file of bench/run: lines "key<TAB>unit<TAB>v1 v2 ...", where
-- the lines of one key (one per round, or more) are merged. Read by
-- report.lua and compare (plain Lua: no mastra module needed).
local samples = {}

--- key -> {unit = ..., xs = {...}} (in file order), and the keys in the
-- order they first appear. Raises if the file cannot be read.
function samples.load(path)
  local f = assert(io.open(path))
  local data, order = {}, {}
  for line in f:lines() do
    local key, unit, rest = line:match("^([^\t]+)\t([^\t]+)\t(.*)$")
    if key then
      if not data[key] then
        data[key] = { unit = unit, xs = {} }
        order[#order + 1] = key
      end
      local xs = data[key].xs
      for v in rest:gmatch("%S+") do xs[#xs + 1] = tonumber(v) end
    end
  end
  f:close()
  return data, order
end

return samples
