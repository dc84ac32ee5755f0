-- A fleet of projects: one sandbox each, cloned from one template, the
-- project's name as its stable id; the same work in every one, at most
-- four at a time, and a summary at the end.
local mastra = require "mastra"

local template = mastra.PlatformSandbox.new{ idleTimeoutMinutes = 10 }
local projects = { "api", "web", "worker", "docs", "cli", "infra" }

local summary = mastra.fleet(template, projects, function(sandbox, project)
  local r = sandbox:executeCommand("sh", { "-c",
    'mkdir -p "$1" && echo "hello from $1" > "$1/README" && wc -c < "$1/README"',
    "sh", project })
  if not r.success then error(r.stderr) end
  return ("README of %s bytes"):format(r.stdout:gsub("%s+", ""))
end, { concurrency = 4, quiet = true })

summary:print()
if summary.failed > 0 then os.exit(1) end
