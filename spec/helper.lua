-- Runs once before the specs: fail fast with a clear message when the
-- module paths are not set up (see .busted).
local ok, err = pcall(require, "mastra.core")
if not ok then
  error("spec/helper.lua: cannot load mastra.core; build first and set"
    .. " LUA_CPATH_5_4 (scripts/test does both): " .. tostring(err), 0)
end
