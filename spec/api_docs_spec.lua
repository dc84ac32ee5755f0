-- The API reference has no gaps: every public name that the runtime has is
-- documented. The spec walks the tables at run time (mastra, its classes
-- and their instances, the processes and their handles, tasks, the errors,
-- mastra.core) and fails on any name that docs/api.md (docs/core.md for
-- mastra.core) does not document.
--
-- Public: every key that does not start with "_" (metamethods and the
-- private "_x" fields and methods are skipped), plus _VERSION and _NAME of
-- the modules. Methods are the keys of the metatable's __index (a table, or
-- the class a function __index reads from).
--
-- Documented: a name is documented when the reference writes it with its
-- receiver (`mastra.spawn`, `sb:start`, `sb.sandboxId`, `handle:result`,
-- `mastra.errors.TimeoutError`, `core.jsonEncode`...) anywhere, or writes it
-- in code (between backticks) or in a ### heading of the section (## ...)
-- that documents its owner. So documenting a new name is all it takes.
local mastra = require "mastra"
local core = require "mastra.core"
local util = require "spec.support.util"

local root = os.getenv("MASTRA_SOURCE_DIR") or "."

local function read(path)
  local f = assert(io.open(root .. "/" .. path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- {====== the documents ======

-- The sections of a markdown file: heading text -> body (the text up to the
-- next "## " heading).
local function sections(text)
  local out, current = {}, nil
  for line in text:gmatch("[^\n]*") do
    local h2 = line:match("^## (.+)$")
    if h2 then
      current = h2
      out[current] = out[current] or ""
    elseif current then
      out[current] = out[current] .. line .. "\n"
    end
  end
  return out
end

-- The code of a text: its `code spans` and ### headings, joined.
local function code_of(text)
  local parts = {}
  for span in text:gmatch("`([^`\n]+)`") do parts[#parts + 1] = span end
  for h in text:gmatch("\n###+ ([^\n]+)") do parts[#parts + 1] = h end
  for h in text:gmatch("^###+ ([^\n]+)") do parts[#parts + 1] = h end
  return "\n" .. table.concat(parts, "\n") .. "\n"
end

local function has_word(text, word)
  local pattern = "%f[%w_]" .. word:gsub("%p", "%%%0") .. "%f[^%w_]"
  return text:find(pattern) ~= nil
end

local API = read("docs/api.md")
local API_SECTIONS = sections(API)
local CORE = read("docs/core.md")

-- Whether `name` of an owner is documented: with a receiver anywhere in
-- doc, or in the code of one of the owner's sections.
local function documented(doc, secs, owner, name)
  for _, recv in ipairs(owner.receivers) do
    if has_word(doc, recv .. "." .. name) or has_word(doc, recv .. ":" .. name) then
      return true
    end
  end
  for _, title in ipairs(owner.sections or {}) do
    local body = secs[title]
    assert(body, ("docs: no section '## %s' (owner %s)"):format(title, owner.label))
    if has_word(code_of(body), name) then return true end
  end
  return false
end

-- }======

-- {====== the names ======

local PUBLIC_UNDERSCORE = { _VERSION = true, _NAME = true }

local function public(k)
  return type(k) == "string" and (not k:find("^_") or PUBLIC_UNDERSCORE[k])
end

-- The class behind a function __index (output.index(class) reads class[k]).
local function class_of_index(fn)
  for i = 1, 20 do
    local name, v = debug.getupvalue(fn, i)
    if name == nil then break end
    if type(v) == "table" then return v end
  end
  return nil
end

-- The public names of a value: its own keys (fields) and, if asked, those
-- of its metatable's __index chain (methods).
local function names_of(value, with_methods)
  local names, seen = {}, {}
  local function add(t)
    for k in pairs(t) do
      if public(k) and not seen[k] then
        seen[k] = true
        names[#names + 1] = k
      end
    end
  end
  add(value)
  local mt, depth = getmetatable(value), 0
  while with_methods and mt and depth < 8 do
    local idx = rawget(mt, "__index")
    if type(idx) == "function" then idx = class_of_index(idx) end
    if type(idx) ~= "table" or idx == value then break end
    add(idx)
    mt, depth = getmetatable(idx), depth + 1
  end
  table.sort(names)
  return names
end

-- }======

describe("the API reference", function()
  local dir, base, lsb, psb, lfs, pfs, sfs, ws, handle
  local owners = {}

  local function owner(label, value, o)
    o.label = label
    o.names = names_of(value, o.methods ~= false)
    for _, extra in ipairs(o.virtual or {}) do o.names[#o.names + 1] = extra end
    if o.internal then -- fields that are not API (see where they are listed)
      local kept = {}
      for _, n in ipairs(o.names) do
        if not o.internal[n] then kept[#kept + 1] = n end
      end
      o.names = kept
    end
    owners[#owners + 1] = o
  end

  setup(function()
    dir, base = util.tmpdir()
    lsb = mastra.LocalSandbox.new{ workingDirectory = dir .. "/sb" }
    -- the connection settings are given: no local platform is started, no I/O
    local conn = { accessToken = "t", proxyUrl = "http://127.0.0.1:9", projectId = "p" }
    psb = mastra.PlatformSandbox.new{ accessToken = conn.accessToken, proxyUrl = conn.proxyUrl,
      projectId = conn.projectId, environmentId = "e" }
    lfs = mastra.LocalFilesystem.new{ basePath = dir }
    pfs = mastra.PlatformFilesystem.new{ accessToken = conn.accessToken,
      proxyUrl = conn.proxyUrl, projectId = conn.projectId, bucketName = "b" }
    sfs = mastra.SandboxFilesystem.new{ sandbox = lsb, timeout = 1000 } -- no I/O until used
    ws = mastra.Workspace.new{ filesystem = lfs, sandbox = lsb }
    handle = lsb.processes:spawn("true")
    handle:wait()

    local Agent = mastra.Agent -- loaded on first use: now a key of mastra
    owner("mastra", mastra, { receivers = { "mastra" }, methods = false })
    local agent = Agent.new{ model = { id = "x/y", url = "http://127.0.0.1:9" }, workspace = ws }
    owner("Agent", Agent, { receivers = { "mastra.Agent", "Agent", "agent" },
      sections = { "mastra.Agent" } })
    owner("an Agent", agent, { receivers = { "agent" }, sections = { "mastra.Agent" } })
    owner("a rate limiter", Agent.rateLimiter{ requestsPerMinute = 60 }, { receivers = { "l" },
      sections = { "mastra.Agent" } })
    local stream = agent:stream("hi")
    stream:cancel()
    pcall(stream.result, stream)
    owner("an agent stream", stream, { receivers = { "s" }, sections = { "mastra.Agent" } })
    owner("LocalSandbox", mastra.LocalSandbox, { receivers = { "mastra.LocalSandbox",
      "LocalSandbox", "sb" }, sections = { "LocalSandbox" } })
    owner("a LocalSandbox", lsb, { receivers = { "sb" }, sections = { "LocalSandbox" } })
    owner("PlatformSandbox", mastra.PlatformSandbox, { receivers = { "mastra.PlatformSandbox",
      "PlatformSandbox", "sb" }, sections = { "PlatformSandbox", "LocalSandbox" } })
    owner("a PlatformSandbox", psb, { receivers = { "sb" },
      sections = { "PlatformSandbox", "LocalSandbox" } })
    for _, c in ipairs{ { "LocalFilesystem", lfs }, { "PlatformFilesystem", pfs },
      { "SandboxFilesystem", sfs } } do
      owner(c[1], mastra[c[1]], { receivers = { "mastra." .. c[1], c[1], "fs" },
        sections = { "Filesystems" } })
      owner("a " .. c[1], c[2], { receivers = { "fs" }, sections = { "Filesystems" } })
    end
    owner("Workspace", mastra.Workspace, { receivers = { "mastra.Workspace", "Workspace", "ws" },
      sections = { "Workspace" } })
    owner("a Workspace", ws, { receivers = { "ws" }, sections = { "Workspace" } })
    for _, s in ipairs{ lsb, psb } do
      owner("processes", s.processes, { receivers = { "processes", "sb.processes" },
        sections = { "Processes (sb.processes)" } })
    end
    -- stdout and stderr are read through __index (the retained output)
    owner("a process handle", handle, { receivers = { "handle" },
      sections = { "Processes (sb.processes)" }, virtual = { "stdout", "stderr" } })
    -- a task's coroutine, arguments and state are its scheduler's
    -- (task:status() is the API): lua/mastra/task/scheduler.lua
    local t = mastra.spawn(function() end)
    owner("a task", t, { receivers = { "task" },
      sections = { "Tasks" }, internal = { co = true, args = true, state = true } })
    t:wait()
    owner("mastra.errors", mastra.errors, { receivers = { "mastra.errors", "errors" },
      sections = { "Errors" }, methods = false })
    -- the error classes share their methods (new, raise, is) and fields:
    -- one owner for all of them, and every instance
    local classes, instances = {}, {}
    for name, class in pairs(mastra.errors) do
      if type(class) == "table" then
        classes[name] = class
        instances[name] = class:new{ message = "m" }
      end
    end
    local union = {}
    for _, group in ipairs{ classes, instances } do
      for _, v in pairs(group) do
        for _, n in ipairs(names_of(v, true)) do union[n] = true end
      end
    end
    owner("an error class", union, { receivers = { "mastra.errors.Name", "err" },
      sections = { "Errors" }, methods = false })
  end)

  teardown(function()
    if lsb then lsb:destroy() end
    util.rm_rf(dir, base)
  end)

  it("documents every public name in docs/api.md", function()
    local missing = {}
    for _, o in ipairs(owners) do
      for _, name in ipairs(o.names) do
        if not documented(API, API_SECTIONS, o, name) then
          missing[#missing + 1] = ("%s: %s"):format(o.label, name)
        end
      end
    end
    table.sort(missing)
    assert.are.same({}, missing, "document each name of these owners in docs/api.md:"
      .. " with its receiver (`sb:name`, `mastra.errors.Name:name`, ...) anywhere, or in"
      .. " code in the section of its owner")
  end)

  it("documents every name of mastra.core in docs/core.md", function()
    local missing = {}
    local o = { label = "mastra.core", receivers = { "core" } }
    for _, name in ipairs(names_of(core, false)) do
      if not documented(CORE, {}, o, name) then missing[#missing + 1] = name end
    end
    assert.are.same({}, missing)
  end)

  it("finds the names it checks (the walk itself works)", function()
    local seen = {}
    for _, o in ipairs(owners) do
      for _, name in ipairs(o.names) do seen[o.label .. " " .. name] = true end
    end
    for _, expected in ipairs{ "mastra spawn", "mastra _VERSION", "a LocalSandbox executeCommand",
        "a LocalSandbox status", "a process handle result", "a process handle stdout",
        "processes killAll", "a task wait", "mastra.errors forCode",
        "an error class is", "an error class raise", "PlatformFilesystem normalizePath",
        "Workspace globMatch", "mastra Agent", "an Agent generate", "an Agent workspace",
        "Agent rateLimiter", "an agent stream chunks", "a rate limiter acquire" } do
      assert.is_true(seen[expected] == true, expected)
    end
    -- and a name nobody documents is caught
    assert.is_false(documented(API, API_SECTIONS, { receivers = { "sb" },
      sections = { "LocalSandbox" } }, "frobnicateTheSandbox"))
  end)
end)
