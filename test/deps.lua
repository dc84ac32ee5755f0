-- The layout's rules, checked on the tree (a CTest test):
--   * no two C files call each other in a circle (from the symbols that
--     each object of the build defines and uses, as nm lists them), and no
--     two Lua modules require each other in a circle;
--   * src/core includes nothing of the binding, the embedding API, the
--     runner or the server; the server includes nothing of the binding;
--   * src/server's rooms (folders at any depth, mapped in README.md) include
--     and call only the rooms that server_rooms below lists for them, a
--     list without circles; mastra-ns-init's folder includes only itself;
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
local dir_of, exists = {}, {}
for _, f in ipairs(files) do
  local d = f:match("^(src/.+)/[%w_]+%.[ch]$")
  if d then dir_of[f], exists[f] = d, true end
end

-- The rooms of src/server (README.md's Layout has the map) and the rooms each may use:
-- a room includes, and calls, nothing of a room outside its list, so the
-- list is the layering (checked below to have no circle). The top (".",
-- main.c, the composition root) uses every room; server.h, the server's
-- state, is the top's header that every room but the init may include.
local server_rooms = {
  ["util"] = {},
  ["drivers/ns/init"] = {},  -- mastra-ns-init: libc and its own folder only
  ["http"] = { "util" },
  ["bucket"] = { "util" },
  ["net"] = { "util", "drivers/ns/init" },
  ["sandbox"] = { "util", "bucket" },
  ["drivers/process"] = { "util", "sandbox" },
  ["drivers/ns"] = { "util", "sandbox", "net", "drivers/ns/init" },
  ["drivers"] = { "util", "sandbox", "drivers/process", "drivers/ns" },
  ["api"] = { "util", "http", "bucket", "sandbox" },
  ["inspector"] = { "util", "http", "bucket", "sandbox" },
}
local function room_of(f)
  local r = f:match("^src/server/(.+)/[^/]+$")
  if r then return r end
  if f:match("^src/server/[^/]+$") then return "." end
end
local may_use = {}
for room, deps in pairs(server_rooms) do
  may_use[room] = {}
  for _, d in ipairs(deps) do may_use[room][d] = true end
end
for f in pairs(dir_of) do
  local r = room_of(f)
  if r and r ~= "." and not server_rooms[r] then
    fail("%s is in src/server/%s, a room that test/deps.lua does not know: add it to "
      .. "server_rooms with the rooms it uses, and to the map in README.md's Layout", f, r)
  end
end
-- may room a use room b (the top uses all)?
local function room_allows(a, b)
  return a == b or a == "." or (b == "." and a ~= "drivers/ns/init")
    or (may_use[a] ~= nil and may_use[a][b] == true)
end

-- the headers of ours that a C file includes: the first of its folder, the
-- server's include root and the other folders of src/ that holds it
local function c_includes(f)
  local incs, d = {}, dir_of[f]
  for inc in read(f):gmatch('#include%s+"([^"]+)"') do
    for _, dir in ipairs{ d, "src/server", "src/core", "src/lua", "src/embed" } do
      local path = dir .. "/" .. inc
      if exists[path] then
        incs[#incs + 1] = { dir = dir_of[path], path = path, header = inc }
        break
      end
    end
  end
  return incs
end

local sorted_files = {}
for f in pairs(dir_of) do sorted_files[#sorted_files + 1] = f end
table.sort(sorted_files)
for _, f in ipairs(sorted_files) do
  local d, room = dir_of[f], room_of(f)
  for _, inc in ipairs(c_includes(f)) do
    local top = inc.dir:match("^src/[%w_]+")
    local to_room = room_of(inc.path)
    if d == "src/core" and inc.dir ~= "src/core" then
      fail("%s includes %s: src/core uses no Lua, embedding, runner or server code",
        f, inc.header)
    elseif room and top == "src/lua" then
      fail("%s includes %s: the server does not use the Lua binding", f, inc.header)
    elseif room == "drivers/ns/init" and to_room ~= room then
      fail("%s includes %s: mastra-ns-init is libc and src/server/drivers/ns/init only",
        f, inc.header)
    elseif room and to_room and not room_allows(room, to_room) then
      fail("%s includes %s: src/server/%s does not use src/server/%s (test/deps.lua, "
        .. "server_rooms)", f, inc.header, room, to_room)
    end
  end
end

-- the rooms' list itself is a layering: no circle through it
local room_graph = {}
for room, deps in pairs(server_rooms) do
  room_graph[room] = {}
  for _, dep in ipairs(deps) do room_graph[room][#room_graph[room] + 1] = dep end
  table.sort(room_graph[room])
end
-- calls: which object defines each function, and which functions each uses
local c_graph, defined_by, uses = {}, {}, {}
local objects = lines_of(("find %q -path '*CMakeFiles/*' -name '*.c.o' | grep '/src/'")
  :format(build))
for _, o in ipairs(objects) do
  local src = o:match("%.dir/(src/[%w_/]+%.c)%.o$")
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
find_cycles(room_graph, "rooms of src/server (server_rooms)")
-- a call from one room into another follows the rooms' list too
for _, src in ipairs(sorted_files) do
  for _, to in ipairs(c_graph[src] or {}) do
    local a, b = room_of(src), room_of(to)
    if a and b and not room_allows(a, b) then
      fail("%s calls into %s: src/server/%s does not use src/server/%s (test/deps.lua, "
        .. "server_rooms)", src, to, a, b)
    end
  end
end
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
