-- The Workspace tools as a model uses them. A scripted list of tool calls
-- stands in for the model: each call goes through ws:callTool, and its
-- result is the text the model would read. Tool names are the short ids
-- (write_file) or the full ones (mastra_workspace_write_file).
--
--   build/mastra-lua examples/agent_tools.lua
--
-- ws:toolDefinitions("anthropic") or ("openai") gives the tool list in the
-- shape an LLM API takes.
local mastra = require "mastra"

-- files and commands share one scratch directory, removed at the end
local dir = ("%s/mastra-agent-example-%d"):format(os.getenv("TMPDIR") or "/tmp",
  math.random(1, 1e9))
local ws <close> = mastra.Workspace.new{
  filesystem = mastra.LocalFilesystem.new{ basePath = dir },
  sandbox = mastra.LocalSandbox.new{ workingDirectory = dir },
}
ws:init()

local names = {}
for _, tool in ipairs(ws:tools()) do names[#names + 1] = tool.name end
print(("%d tools: %s"):format(#names, table.concat(names, ", ")))
print()

local script = {
  { "write_file", { path = "notes/todo.md", content = "- write tests\n- ship it\n" } },
  { "read_file", { path = "notes/todo.md" } },
  { "edit_file", { path = "notes/todo.md", old_string = "ship it", new_string = "ship it today" } },
  { "list_files", { path = "." } },
  { "execute_command", { command = "grep -c '^- ' notes/todo.md" } },
  { "read_file", { path = "notes/missing.md" } }, -- an error result, as a model would see it
  { "delete", { path = "notes", recursive = true } },
}
for i, call in ipairs(script) do
  local text, is_error = ws:callTool(call[1], call[2])
  local args = {}
  for k, v in pairs(call[2]) do args[#args + 1] = ("%s=%q"):format(k, v) end
  table.sort(args)
  print(("%d. %s(%s)"):format(i, call[1], table.concat(args, ", "):gsub("\\\n", "\\n")))
  print(("   -> %s%s"):format(is_error and "(error) " or "",
    (text:gsub("\n", "\n      "))))
end
print()
print("the model's view of the setup (the instructions):")
print("   " .. ws:getInstructions():gsub("\n", "\n   "))
os.remove(dir) -- empty again: the last call deleted notes/
