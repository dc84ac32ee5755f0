-- The flags of `mastra-platform serve` (a CTest test): every flag that
-- --help lists (main.c's own, and each driver's from its table, walked
-- through the registry) is described in the man page, and every flag the
-- man page describes for `serve` is one that --help lists. --help exits 0.
-- Usage: lua5.4 test/flags.lua SOURCE_DIR MASTRA_PLATFORM
local root, bin = arg[1], arg[2]
assert(root and bin, "usage: lua5.4 test/flags.lua SOURCE_DIR MASTRA_PLATFORM")
local failures = {}
local function fail(fmt, ...) failures[#failures + 1] = fmt:format(...) end

local p = assert(io.popen(("%q serve --help 2>&1; echo \"status $?\""):format(bin)))
local help = p:read("a")
p:close()
if not help:find("\nstatus 0\n$") then fail("serve --help did not exit 0:\n%s", help) end
local in_help = {}
for flag in help:gmatch("\n  (%-%-[%w-]+)") do in_help[flag] = true end

local f = assert(io.open(root .. "/man/mastra-platform.1", "rb"))
local man = f:read("a")
f:close()
-- the options list of `serve`: from its .Bl up to the .El that ends it
local list = man:match("\n%.Bl %-tag[^\n]*\n(.-)\n%.El\n")
assert(list, "man/mastra-platform.1 has no option list")
local in_man = {}
for flag in list:gmatch("%.It Fl Fl ([%w-]+)") do in_man["--" .. flag] = true end
in_man["--version"] = nil -- `mastra-platform --version`, not a flag of serve

local function sorted(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end
for _, flag in ipairs(sorted(in_help)) do
  if flag ~= "--help" and not in_man[flag] then
    fail("%s is in serve --help but not in man/mastra-platform.1's option list", flag)
  end
end
for _, flag in ipairs(sorted(in_man)) do
  if not in_help[flag] then
    fail("%s is in man/mastra-platform.1 but serve --help does not list it", flag)
  end
end
if next(in_help) == nil then fail("serve --help lists no flag") end

if #failures > 0 then
  for _, m in ipairs(failures) do io.stderr:write("flags: ", m, "\n") end
  print(("0 passed, %d failed"):format(#failures))
  os.exit(1)
end
print("flags: serve --help and the man page name the same flags")
