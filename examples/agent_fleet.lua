-- One agent run per project, all at once on one thread: each project gets
-- a workspace of its own (a scratch directory with a small project in
-- it), and the same agent (it holds no run state) checks each one.
--
--   OPENAI_API_KEY=... build/mastra-lua examples/agent_fleet.lua
--
-- The model comes from the environment as in examples/agent.lua.
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local mastra = require "mastra"
local model = require("agent_model").required("examples/agent_fleet.lua")

local projects = { "api", "web", "worker", "docs", "cli" }
local root = ("%s/mastra-agent-fleet-%d"):format(os.getenv("TMPDIR") or "/tmp",
  math.random(1, 1e9))

local agent = mastra.Agent.new{
  id = "checker",
  instructions = function(ctx)
    return ("You check the project %q. Run its test script (sh test.sh) with the"
      .. " execute_command tool and answer in one line: PASS or FAIL, then why.")
      :format(ctx.requestContext.project)
  end,
  model = model,
}

local results = mastra.map(projects, function(name)
  local dir = root .. "/" .. name
  local ws <close> = mastra.Workspace.new{
    filesystem = mastra.LocalFilesystem.new{ basePath = dir },
    sandbox = mastra.LocalSandbox.new{ workingDirectory = dir },
  }
  ws:init()
  ws.filesystem:writeFile("/test.sh", name == "worker" and "echo 'queue test failed'; exit 1\n"
    or "echo 'all tests passed'\n")
  -- the agent's tools are this workspace's: one agent, a workspace per run
  local a = mastra.Agent.new{ id = "checker-" .. name, instructions = agent.instructions,
    model = agent.model, workspace = ws }
  local ok, r = pcall(a.generate, a, "Check this project.", {
    requestContext = { project = name }, maxSteps = 4 })
  if not ok then return { name = name, text = "error: " .. mastra.errors.message(r) } end
  return { name = name, text = r.text:gsub("\n.*", ""), steps = #r.steps }
end, { concurrency = 8 })

for _, r in ipairs(results) do
  print(("%-7s %s%s"):format(r.name, r.text, r.steps and (" (" .. r.steps .. " steps)") or ""))
end
os.execute("rm -rf " .. mastra.quote(root))
