-- .env files (docs/api.md ".env"): the mastra-lua runner reads one at its
-- start, and under a plain lua5.4 the first PlatformSandbox,
-- PlatformFilesystem or mastra.localPlatform() does.
--
-- Which file: the runner's --env-file FILE (or --no-env-file), else
-- $MASTRA_ENV_FILE (empty: none), else ./.env when it exists. A file that
-- is named explicitly must exist.
--
-- Syntax, as dotenv's: `NAME=value` lines; blank lines and `# comments`;
-- an optional `export ` in front; blanks around `=` and around an unquoted
-- value are dropped, and ` #` starts a comment in it; 'single' and
-- `backtick` quotes keep their text as it is, "double" quotes understand
-- \n \r \t \" \\ \$; quoted values may span lines. No ${VAR} expansion.
-- When a name appears twice, the later one counts.
--
-- A variable that is already in the environment (even empty) wins: the
-- file only adds. The values are set in the process's environment
-- (core.setenv), so os.getenv and child processes see them. They never
-- appear in an error message or on stderr: errors name the file, the line
-- and the variable.
local core = require "mastra.core"

local dotenv = {}

local ESCAPES = { n = "\n", r = "\r", t = "\t", ['"'] = '"', ["\\"] = "\\", ["$"] = "$" }
local QUOTES = { ['"'] = true, ["'"] = true, ["`"] = true }

-- A quoted value from text at p (the opening quote). Returns the value and
-- the position after the closing quote, and the number of newlines inside.
local function quoted(text, p, fail, name)
  local q = text:sub(p, p)
  local buf, i, newlines = {}, p + 1, 0
  while true do
    local ch = text:sub(i, i)
    if ch == "" then
      fail(("the value of %s has no closing %s quote"):format(name, q))
    elseif ch == q then
      return table.concat(buf), i + 1, newlines
    elseif ch == "\\" and q == '"' and ESCAPES[text:sub(i + 1, i + 1)] then
      buf[#buf + 1] = ESCAPES[text:sub(i + 1, i + 1)]
      i = i + 2
    else
      if ch == "\n" then newlines = newlines + 1 end
      buf[#buf + 1] = ch
      i = i + 1
    end
  end
end

--- Parse the text of a .env file; source names it in errors. Returns a
-- list of {name = ..., value = ...} in the order of the file (a repeated
-- name keeps its first place and its last value). Raises "source:LINE:
-- what is wrong" on a malformed line.
function dotenv.parse(text, source)
  if type(text) ~= "string" then
    error(("mastra.dotenv.parse: text must be a string (got %s)"):format(type(text)), 2)
  end
  source = source or ".env"
  text = text:gsub("\r\n", "\n")
  local vars, index = {}, {}
  local pos, lineno = 1, 1
  local function fail(msg)
    error(("%s:%d: %s"):format(source, lineno, msg), 0)
  end
  while pos <= #text do
    local p = text:match("^[ \t]*()", pos)
    local c = text:sub(p, p)
    if c == "\n" or c == "#" or c == "" then -- blank line or comment
      local nl = text:find("\n", p, true)
      if nl == nil then break end
      pos, lineno = nl + 1, lineno + 1
    else
      p = text:match("^export[ \t]+()", p) or p
      local name, after = text:match("^([%a_][%w_]*)()", p)
      if name == nil then
        fail("expected NAME=value (a name is letters, digits and '_', and does not start"
          .. " with a digit)")
      end
      p = text:match("^[ \t]*()", after)
      if text:sub(p, p) ~= "=" then fail(("expected '=' after %s"):format(name)) end
      p = text:match("^[ \t]*()", p + 1)
      local value, newlines
      if QUOTES[text:sub(p, p)] then
        value, p, newlines = quoted(text, p, fail, name)
        lineno, newlines = lineno + newlines, 0 -- a mistake after it is on its last line
        p = text:match("^[ \t]*()", p)
        local rest = text:sub(p, p)
        if rest == "#" then
          p = text:find("\n", p, true) or #text + 1
        elseif rest ~= "\n" and rest ~= "" then
          fail(("unexpected text after the closing quote of %s (quote the whole value)")
            :format(name))
        end
      else
        local eol = text:find("\n", p, true) or #text + 1
        value = text:sub(p, eol - 1):gsub("^#.*", ""):gsub("[ \t]+#.*$", "")
        value = value:match("^(.-)[ \t]*$")
        p, newlines = eol, 0
      end
      if index[name] then
        vars[index[name]].value = value
      else
        vars[#vars + 1] = { name = name, value = value }
        index[name] = #vars
      end
      lineno = lineno + newlines + 1
      pos = p + 1
    end
  end
  return vars
end

local loaded = false -- a file was read (or none chosen) in this process

local function read(path, required)
  local f, err, code = io.open(path, "rb")
  if f == nil then
    if not required and code == 2 then return nil end -- ENOENT: no ./.env
    error(("mastra: cannot read the .env file: %s (MASTRA_ENV_FILE or the runner's"
      .. " --env-file names another file; MASTRA_ENV_FILE= or --no-env-file: none)")
      :format(err), 0)
  end
  local text, rerr = f:read("a")
  f:close()
  if text == nil then
    error(("mastra: cannot read the .env file %s: %s"):format(path, tostring(rerr)), 0)
  end
  return text
end

--- Read a .env file into the environment. file: a path (it must exist),
-- false (none), or nil ($MASTRA_ENV_FILE, empty meaning none, else ./.env
-- if it exists). Returns the names it set (those not already in the
-- environment) and the path it read (nil if none).
function dotenv.load(file)
  if file ~= nil and file ~= false and type(file) ~= "string" then
    error(("mastra.dotenv.load: file must be a path, false or nil (got %s)")
      :format(type(file)), 2)
  end
  loaded = true
  local path, required = file, true
  if file == nil then
    local named = os.getenv("MASTRA_ENV_FILE")
    if named == nil then
      path, required = ".env", false
    elseif named == "" then
      return {}
    else
      path = named
    end
  elseif file == false then
    return {}
  end
  local text = read(path, required)
  if text == nil then return {} end
  local set = {}
  for _, v in ipairs(dotenv.parse(text, path)) do
    if os.getenv(v.name) == nil then
      local ok, err = core.setenv(v.name, v.value)
      if not ok then
        error(("mastra: %s: cannot set %s: %s"):format(path, v.name, err), 0)
      end
      set[#set + 1] = v.name
    end
  end
  return set, path
end

--- dotenv.load() once per process, unless a file was read (or none was
-- chosen) already: what the platform clients call first.
function dotenv.loadDefault()
  if not loaded then dotenv.load() end
end

return dotenv
