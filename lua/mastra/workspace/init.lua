-- Workspace: a filesystem and a sandbox, with the agent tools over them
-- (the upstream Workspace's tool names, inputs and instructions; docs/api.md).
--
--   local ws = mastra.Workspace.new{ filesystem = fs, sandbox = sb }
--   ws:init()
--   for _, tool in ipairs(ws:tools()) do ... tool.execute(input) ... end
--   ws:toolDefinitions("anthropic") -- or "openai"
--
-- A tool's execute(input) returns a string for the model, and true as a
-- second value when that string reports an error. Bad input and failures
-- become such results; only cancellation is raised.
--
-- This file holds the class: its options and tool configuration, its
-- lifecycle, its instructions, and the tool list. The tools themselves
-- are in fs_tools.lua and sandbox_tools.lua, their input schemas and
-- validation in schema.lua, glob matching in glob.lua, what the tools
-- share for their results in result.lua, upload/download (files
-- between the filesystem and the sandbox) in transfer.lua, and
-- uploadDir/downloadDir (trees between the host and the sandbox) in
-- transfer_dir.lua; none of them requires this file.
local errors = require "mastra.errors"
local options = require "mastra.options"
local common = require "mastra.common"
local glob = require "mastra.workspace.glob"
local schema = require "mastra.workspace.schema"
local result = require "mastra.workspace.result"
local fs_tools = require "mastra.workspace.fs_tools"
local sandbox_tools = require "mastra.workspace.sandbox_tools"
local transfer = require "mastra.workspace.transfer"
local transfer_dir = require "mastra.workspace.transfer_dir"
local SandboxFilesystem = require "mastra.sandbox_filesystem"
local ordered, array = schema.ordered, schema.array

local Workspace = { __name = "mastra.Workspace" }
Workspace.__index = Workspace

local PREFIX = "mastra_workspace_"

--- glob.match: whether a string matches a glob pattern.
Workspace.globMatch = glob.match

-- {====== tool configuration ======

-- every tool, in the order of the tool list
local DEFS = {}
for _, list in ipairs{ fs_tools.defs, sandbox_tools.defs } do
  for _, def in ipairs(list) do DEFS[#DEFS + 1] = def end
end

local TOOL_IDS = {}
for i, def in ipairs(DEFS) do TOOL_IDS[i] = def.short end

local KNOWN_TOOLS = {}
for _, short in ipairs(TOOL_IDS) do
  KNOWN_TOOLS[short] = PREFIX .. short
  KNOWN_TOOLS[PREFIX .. short] = PREFIX .. short
end

local function tool_name(v)
  return type(v) == "string" and v:match("^[%w_%-]+$") ~= nil and #v <= 64,
    "a tool name of 1 to 64 letters, digits, '_' or '-'"
end

local TOOL_OPTS = {
  name = tool_name,
  enabled = options.boolean,
  requireReadBeforeWrite = options.boolean,
  requireApproval = options.boolean,
  maxOutputTokens = options.positive_integer,
}

local function tools_config(v)
  if type(v) ~= "table" then return false, "a table of tool id = {config}" end
  return true
end

local function is_table(what)
  return function(v) return type(v) == "table", what end
end

local function filesystem_option(v)
  return type(v) == "table" or v == "sandbox",
    'a filesystem (a table with readFile, writeFile, ...), or "sandbox"'
end

local NEW_OPTS = {
  filesystem = filesystem_option,
  sandbox = is_table("a sandbox (a table with executeCommand, ...)"),
  tools = tools_config,
  id = options.string,
  name = options.string,
}

local FS_METHODS = { "readFile", "writeFile", "deleteFile", "mkdir", "rmdir", "readdir", "stat" }

function Workspace.new(opts)
  local where = "Workspace.new"
  opts = options.check(where, opts, NEW_OPTS)
  local fs = opts.filesystem
  if fs == "sandbox" then
    -- the sandbox's own files, where its commands run
    if opts.sandbox == nil then
      error(where .. ': filesystem = "sandbox" needs the option sandbox (the files of'
        .. " that sandbox)", 2)
    end
    if type(opts.sandbox.executeCommand) ~= "function" then
      error(where .. ': filesystem = "sandbox" needs a sandbox with executeCommand', 2)
    end
    fs = SandboxFilesystem.new{ sandbox = opts.sandbox }
  elseif fs then
    for _, m in ipairs(FS_METHODS) do
      if type(fs[m]) ~= "function" then
        error(("%s: option 'filesystem' must have a %s method"):format(where, m), 2)
      end
    end
  end
  local config = {}
  for key, c in pairs(opts.tools or {}) do
    local id = KNOWN_TOOLS[key]
    if not id then
      error(("%s: unknown tool '%s' in option 'tools' (known tools: %s)")
        :format(where, tostring(key), table.concat(TOOL_IDS, ", ")), 2)
    end
    options.check(("%s: tools.%s"):format(where, key), c, TOOL_OPTS)
    if config[id] then
      error(("%s: tool '%s' is configured twice in option 'tools'"):format(where, id), 2)
    end
    config[id] = c
  end
  local names = {}
  for _, short in ipairs(TOOL_IDS) do
    local id = PREFIX .. short
    local c = config[id]
    if not c or c.enabled ~= false then
      local name = c and c.name or id
      if names[name] then
        error(("%s: tools '%s' and '%s' would both be named '%s'")
          :format(where, names[name], id, name), 2)
      end
      names[name] = id
    end
  end
  return setmetatable({
    id = opts.id or "workspace-" .. common.randomDigits(6),
    name = opts.name or "Workspace",
    filesystem = fs,
    sandbox = opts.sandbox,
    status = "pending",
    _config = config,
    _reads = {}, -- normalized path -> modifiedAt seen by read_file (or true)
  }, Workspace)
end

local function check_self(where, self)
  options.self(where, self, Workspace, 4)
  return self
end

function Workspace:init()
  check_self("Workspace:init", self)
  self.status = "initializing"
  local ok, err = pcall(function()
    local fs = self.filesystem
    if fs and type(fs.init) == "function" then fs:init() end
    local sb = self.sandbox
    if sb and type(sb.start) == "function" then sb:start() end
  end)
  if not ok then
    self.status = "error"
    error(err, 0)
  end
  self.status = "ready"
end

function Workspace:destroy()
  check_self("Workspace:destroy", self)
  if self.status == "destroyed" then return end
  self.status = "destroying"
  local sb, fs = self.sandbox, self.filesystem
  local ok, err = true, nil
  if sb and type(sb.destroy) == "function" then ok, err = pcall(sb.destroy, sb) end
  if fs and type(fs.destroy) == "function" then
    local ok2, err2 = pcall(fs.destroy, fs)
    if ok and not ok2 then ok, err = ok2, err2 end
  end
  self.status = "destroyed"
  if not ok then error(err, 0) end
end

Workspace.__close = function(self) self:destroy() end

function Workspace.__tostring(self)
  return ("mastra.Workspace: %s (%s)"):format(self.id, self.status)
end

-- Where the files of the file tools are for shell commands, when the
-- workspace has both and nothing is mounted.
local function files_for_commands(fs, sb)
  local base = fs.basePath
  local wd = sb.workingDirectory
  if getmetatable(fs) == SandboxFilesystem and fs.sandbox == sb then
    wd = fs._commandsDir
    if base == wd then
      return ("Files of the file tools are the sandbox's own files, in the working directory"
        .. ' of shell commands (%s): the file tool path "/notes/a.txt" is "notes/a.txt" (or'
        .. ' "%s/notes/a.txt") in a command. Files and commands share one tree: commands see'
        .. " what the file tools write, and the file tools see what commands create.")
        :format(wd, wd == "/" and "" or wd)
    end
    return ("Files of the file tools are the sandbox's own files, under \"%s\": the file tool"
      .. ' path "/notes/a.txt" is "%s/notes/a.txt" in a command. Files and commands share one'
      .. " tree: commands see what the file tools write, and the file tools see what commands"
      .. " create."):format(base, base == "/" and "" or base)
  end
  if type(base) == "string" and fs.provider == "local" and sb.provider == "local" then
    if base == wd then
      return "Files of the file tools are in the working directory of shell commands:"
        .. ' the file tool path "/notes/a.txt" is "notes/a.txt" in a command.'
    end
    return ('Files of the file tools are on the same disk as shell commands, under "%s":'
      .. ' the file tool path "/notes/a.txt" is "%s/notes/a.txt" in a command.')
      :format(base, base == "/" and "" or base)
  end
  return "Files of the file tools are stored apart from the sandbox: shell commands do not"
    .. " see them, and the file tools do not see files that commands create. Use the file"
    .. " tools for files you read and write yourself, and commands for files that programs use."
end

--- Sandbox instructions, then the mounts or the filesystem's, separated by
-- a blank line (upstream workspace.ts), then where the files of the file
-- tools are for commands.
function Workspace:getInstructions(opts)
  check_self("Workspace:getInstructions", self)
  local parts = {}
  local sb, fs = self.sandbox, self.filesystem
  if sb and type(sb.getInstructions) == "function" then
    local text = sb:getInstructions(opts)
    if type(text) == "string" and text ~= "" then parts[#parts + 1] = text end
  end
  local mounts = sb and type(sb.mounts) == "table" and sb.mounts or nil
  local mounted, workspace_only = {}, {}
  if mounts then
    local paths = {}
    for path in pairs(mounts) do paths[#paths + 1] = path end
    table.sort(paths)
    for _, path in ipairs(paths) do
      local m = mounts[path]
      local mfs = type(m) == "table" and (m.filesystem or m) or {}
      local line = ("  - %s: %s (%s)"):format(path, mfs.displayName or mfs.provider or "filesystem",
        mfs.readOnly and "read-only" or "read-write")
      if type(m) == "table" and m.workspaceOnly then
        workspace_only[#workspace_only + 1] = line
      else
        mounted[#mounted + 1] = line
      end
    end
  end
  if #mounted > 0 or #workspace_only > 0 then
    if #mounted > 0 then
      parts[#parts + 1] = "Sandbox-mounted filesystems (accessible in shell commands):\n"
        .. table.concat(mounted, "\n")
    end
    if #workspace_only > 0 then
      parts[#parts + 1] = "Workspace-only filesystems (use file tools, NOT available in shell"
        .. " commands):\n"
        .. table.concat(workspace_only, "\n")
    end
  elseif fs and type(fs.getInstructions) == "function" then
    local text = fs:getInstructions(opts)
    if type(text) == "string" and text ~= "" then parts[#parts + 1] = text end
  end
  if fs and sb and #mounted == 0 and #workspace_only == 0 then
    parts[#parts + 1] = files_for_commands(fs, sb)
  end
  return table.concat(parts, "\n\n")
end

-- }======

-- {====== the tool list ======

-- What to try next, after a filesystem error of a tool.
local function hint_for(err, args)
  if errors.FileNotFoundError:is(err) or errors.DirectoryNotFoundError:is(err) then
    return " (check the path with list_files)"
  elseif errors.FileExistsError:is(err) and args and args.overwrite == false then
    return " (set overwrite to true to replace it)"
  elseif errors.DirectoryNotEmptyError:is(err) then
    return " (set recursive to true to delete it with its contents)"
  end
  return ""
end

function Workspace:_nameOf(short)
  local id = PREFIX .. short
  local c = self._config[id]
  return c and c.name or id
end

local function available(self, def)
  if def.needs == "filesystem" then return self.filesystem ~= nil end
  local sb = self.sandbox
  if not sb then return false end
  if def.needs == "executeCommand" then return type(sb.executeCommand) == "function" end
  return type(sb.processes) == "table"
end

local function truncate(text, max_tokens)
  if not max_tokens then return text end
  local max = max_tokens * 4
  if #text <= max then return text end
  return result.cut(text, max):gsub("%.%.%.$", "")
    .. ("\n[output truncated: %d of %d characters shown; ask for less, e.g. with"
      .. " offset/limit or tail]")
      :format(max, #text)
end

function Workspace:_makeTool(def)
  local id = PREFIX .. def.short
  local c = self._config[id] or {}
  local params = {}
  for _, p in ipairs(def.params) do
    if not p.processes or type(self.sandbox.processes) == "table" then params[#params + 1] = p end
  end
  local name = c.name or id
  local ws = self
  return {
    id = id,
    name = name,
    description = def.description,
    inputSchema = schema.input(params),
    requireApproval = c.requireApproval or false,
    requireReadBeforeWrite = def.writes and c.requireReadBeforeWrite or nil,
    execute = function(input)
      local args, err = schema.validate(name, params, input)
      if not args then return "Error: " .. err, true end
      local ok, out, is_error = pcall(def.run, ws, args, id)
      if not ok then
        if result.fatal(out) then error(out, 0) end
        local text = result.errorText(out)
        if not result.isToolError(out) then text = text .. hint_for(out, args) end
        return truncate("Error: " .. text, c.maxOutputTokens), true
      end
      return truncate(out, c.maxOutputTokens), is_error or nil
    end,
  }
end

--- The enabled tools for what this workspace has, in a fixed order.
function Workspace:tools()
  check_self("Workspace:tools", self)
  local list = {}
  for _, def in ipairs(DEFS) do
    local c = self._config[PREFIX .. def.short]
    if (not c or c.enabled ~= false) and available(self, def) then
      list[#list + 1] = self:_makeTool(def)
    end
  end
  return list
end

--- The tool named `name` (its configured name, its id, or its short id as
-- Workspace.new{tools = ...} takes it: "read_file"), or nil.
function Workspace:getTool(name)
  check_self("Workspace:getTool", self)
  for _, t in ipairs(self:tools()) do
    if t.name == name or t.id == name or t.id == PREFIX .. tostring(name) then return t end
  end
  return nil
end

--- Run a tool call by name: the result text, and true when it is an error.
function Workspace:callTool(name, input)
  check_self("Workspace:callTool", self)
  local t = self:getTool(name)
  if not t then
    local names = {}
    for _, x in ipairs(self:tools()) do names[#names + 1] = x.name end
    return ("Error: unknown tool '%s' (available: %s)"):format(tostring(name),
      table.concat(names, ", ")), true
  end
  return t.execute(input)
end

--- Copy a file of the filesystem into the sandbox (streaming; stdin where
-- the sandbox takes it, chunked commands elsewhere): {bytes, method}.
function Workspace:upload(path, sandboxPath, opts)
  check_self("Workspace:upload", self)
  local r = transfer.upload(self, path, sandboxPath, opts)
  return r -- not a tail call: errors point at the caller
end

--- Copy a file of the sandbox into the filesystem (streaming): {bytes}.
function Workspace:download(sandboxPath, path, opts)
  check_self("Workspace:download", self)
  local r = transfer.download(self, sandboxPath, path, opts)
  return r -- not a tail call: errors point at the caller
end

--- Copy a directory of the host into the sandbox as one tar stream, whole
-- or not at all: {bytes, method}.
function Workspace:uploadDir(localDir, sandboxDir, opts)
  check_self("Workspace:uploadDir", self)
  local r = transfer_dir.upload(self, localDir, sandboxDir, opts)
  return r -- not a tail call: errors point at the caller
end

--- Copy a directory of the sandbox onto the host, whole or not at all:
-- {bytes}.
function Workspace:downloadDir(sandboxDir, localDir, opts)
  check_self("Workspace:downloadDir", self)
  local r = transfer_dir.download(self, sandboxDir, localDir, opts)
  return r -- not a tail call: errors point at the caller
end

local check_format = options.one_of("anthropic", "openai")

--- The tools as the Anthropic Messages API ("anthropic") or the OpenAI chat
-- API ("openai") takes them; encode with core.jsonEncode.
function Workspace:toolDefinitions(format)
  local where = "Workspace:toolDefinitions"
  check_self(where, self)
  options.arg(where, 1, "format", format, check_format)
  local out = {}
  for _, t in ipairs(self:tools()) do
    if format == "anthropic" then
      out[#out + 1] = ordered({ "name", "description", "input_schema" }, {
        name = t.name, description = t.description, input_schema = t.inputSchema,
      })
    else
      out[#out + 1] = ordered({ "type", "function" }, {
        type = "function",
        ["function"] = ordered({ "name", "description", "parameters" }, {
          name = t.name, description = t.description, parameters = t.inputSchema,
        }),
      })
    end
  end
  return array(out)
end

-- }======

return Workspace
