-- The layout's rules, checked on the tree (a CTest test):
--   * no two C files call each other in a circle (from the symbols that
--     each object of the build defines and uses, as nm lists them), and no
--     two Lua modules require each other in a circle;
--   * src/core includes nothing of the binding, the embedding API, the
--     runner or the server; the server includes nothing of the binding;
--   * a source file over 800 lines says why in its header (the word
--     "lines" in its first comment).
-- Usage: lua5.4 test/deps.lua SOURCE_DIR BUILD_DIR
local root, build = arg[1], arg[2]
assert(root and build, "usage: lua5.4 test/deps.lua SOURCE_DIR BUILD_DIR")
local failures = {}

local function fail(fmt, ...) failures[#failures + 1] = fmt:format(...) end

local function lines_of(cmd)
  local out, p = {}, assert(io.popen(cmd))
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  return out
end

local function read(path)
  local f = assert(io.open(root .. "/" .. path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local files = lines_of(("cd %q && (git ls-files src lua 2>/dev/null || find src lua -type f)")
  :format(root))

-- {====== C ======
local dir_of, base = {}, {}
for _, f in ipairs(files) do
  local d, b = f:match("^(src/[%w_]+)/([%w_]+)%.[ch]$")
  if d then dir_of[f], base[d .. "/" .. b] = d, true end
end

-- the headers of ours that a C file includes, with their folders
local function c_includes(f)
  local incs, d = {}, dir_of[f]
  for inc in read(f):gmatch('#include%s+"([^"]+)"') do
    local b = inc:match("^([%w_]+)%.h$")
    for _, dir in ipairs{ d, "src/core", "src/lua", "src/server", "src/embed" } do
      if b and base[dir .. "/" .. b] then
        incs[#incs + 1] = { dir = dir, header = inc }
        break
      end
    end
  end
  return incs
end

for f, d in pairs(dir_of) do
  for _, inc in ipairs(c_includes(f)) do
    if d == "src/core" and inc.dir ~= "src/core" then
      fail("%s includes %s: src/core uses no Lua, embedding, runner or server code",
        f, inc.header)
    elseif d == "src/server" and inc.dir == "src/lua" then
      fail("%s includes %s: the server does not use the Lua binding", f, inc.header)
    end
  end
end

-- calls: which object defines each function, and which functions each uses
local c_graph, defined_by, uses = {}, {}, {}
local objects = lines_of(("find %q -path '*CMakeFiles/*' -name '*.c.o' | grep '/src/'")
  :format(build))
for _, o in ipairs(objects) do
  local src = o:match("(src/[%w_]+/[%w_]+%.c)%.o$")
  if src and dir_of[src] then -- not an object left from a removed file
    uses[src] = uses[src] or {}
    for _, l in ipairs(lines_of(("nm %q"):format(o))) do
      local kind, sym = l:match("%s(%a)%s+([%w_]+)$")
      if kind == "T" then defined_by[sym] = src
      elseif kind == "U" then uses[src][sym] = true end
    end
  end
end
if next(uses) == nil then fail("no object files under %s: build first", build) end
for src, syms in pairs(uses) do
  local seen = {}
  c_graph[src] = {}
  for sym in pairs(syms) do
    local to = defined_by[sym]
    if to and to ~= src and not seen[to] then
      seen[to] = true
      c_graph[src][#c_graph[src] + 1] = to
    end
  end
  table.sort(c_graph[src])
end
-- }======

-- {====== Lua ======
local lua_graph, module_file = {}, {}
for _, f in ipairs(files) do
  local m = f:match("^lua/(.+)%.lua$")
  if m then
    m = m:gsub("/init$", ""):gsub("/", ".")
    module_file[m] = f
  end
end
for m, f in pairs(module_file) do
  lua_graph[m] = {}
  for dep in read(f):gmatch('require%s*%(?%s*["\']([%w_.]+)["\']') do
    if module_file[dep] and dep ~= m then lua_graph[m][#lua_graph[m] + 1] = dep end
  end
end
-- }======

local function find_cycles(graph, what)
  local state, stack = {}, {}
  local function visit(n)
    state[n] = "open"
    stack[#stack + 1] = n
    for _, d in ipairs(graph[n] or {}) do
      if state[d] == "open" then
        local cycle, k = {}, #stack
        while stack[k] ~= d do k = k - 1 end
        for i = k, #stack do cycle[#cycle + 1] = stack[i] end
        cycle[#cycle + 1] = d
        fail("%s call each other in a circle: %s", what, table.concat(cycle, " -> "))
      elseif state[d] == nil then
        visit(d)
      end
    end
    stack[#stack] = nil
    state[n] = "done"
  end
  local nodes = {}
  for n in pairs(graph) do nodes[#nodes + 1] = n end
  table.sort(nodes)
  for _, n in ipairs(nodes) do if state[n] == nil then visit(n) end end
end

find_cycles(c_graph, "C files")
find_cycles(lua_graph, "Lua modules")

for _, f in ipairs(files) do
  if f:match("%.[ch]$") or f:match("%.lua$") then
    local text = read(f)
    local _, n = text:gsub("\n", "")
    if n > 800 then
      local head = f:match("%.lua$") and text:match("^(.-)\n[^-]") or text:match("^/%*(.-)%*/")
      if not (head and head:find("lines")) then
        fail("%s has %d lines: split it, or say why in its header comment", f, n)
      end
    end
  end
end

if #failures > 0 then
  for _, m in ipairs(failures) do io.stderr:write("deps: ", m, "\n") end
  print(("0 passed, %d failed"):format(#failures))
  os.exit(1)
end
print("deps: no cycles among the C files and the Lua modules; the rooms hold")
