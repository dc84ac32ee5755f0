-- The headline example: an agent whose model drives a workspace's tools.
-- The model comes from the environment (examples/agent_model.lua says
-- which variables); with none set it says what to set and exits.
--
--   ANTHROPIC_API_KEY=... build/mastra-lua examples/agent.lua
--   OPENAI_BASE_URL=http://127.0.0.1:8080/v1 lua5.4 examples/agent.lua
--
-- The workspace is a LocalFilesystem and a LocalSandbox over one scratch
-- directory, removed at the end.
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local mastra = require "mastra"
local core = require "mastra.core"
local model = require("agent_model").required("examples/agent.lua")

local dir = ("%s/mastra-agent-%d"):format(os.getenv("TMPDIR") or "/tmp", math.random(1, 1e9))
local ws <close> = mastra.Workspace.new{
  filesystem = mastra.LocalFilesystem.new{ basePath = dir },
  sandbox = mastra.LocalSandbox.new{ workingDirectory = dir },
}
ws:init()

local agent = mastra.Agent.new{
  id = "code-agent",
  name = "Code Agent",
  instructions = "You are a coding assistant working in this workspace.",
  model = model,
  workspace = ws,
}

print("model: " .. model)
local r = agent:generate('Print "Hello, world!" and show the current working directory.', {
  onStepFinish = function(step)
    for _, c in ipairs(step.toolCalls) do
      print(("  step %d: %s %s"):format(step.stepNumber, c.toolName, core.jsonEncode(c.input)))
    end
  end,
})
print(r.text)
print(("(%d steps, stopped by %s%s)"):format(#r.steps, r.stoppedBy,
  r.usage and r.usage.totalTokens and (", " .. r.usage.totalTokens .. " tokens") or ""))
for _, w in ipairs(r.warnings) do print("warning: " .. w) end
os.execute("rm -rf " .. mastra.quote(dir))
