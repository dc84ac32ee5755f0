-- A fleet: one sandbox per project, each cloned from one template with the
-- project's name as its stable id, a small build in each, a progress line
-- (on a terminal) and a summary. Run it twice: the second run restores each
-- project's sandbox from the checkpoint its first run left, and the build
-- finds its earlier output.
--
--   build/mastra-lua examples/fleet.lua
--
-- Ctrl-C (or SIGTERM) in the middle destroys every sandbox it started.
local mastra = require "mastra"

local template = mastra.PlatformSandbox.new{}
local projects = { "api", "web", "worker", "docs", "cli" }

local summary = mastra.fleet(template, projects, function(sandbox, project)
  -- the "build": sources, then an artifact; a restored sandbox has it already
  local r = sandbox:executeCommand("sh", { "-c", [[
    if [ -f dist/app.txt ]; then
      echo "up to date (built $(cat dist/built-at))"
      exit 0
    fi
    mkdir -p src dist
    printf 'print("%s")\n' "$1" > src/main.lua
    wc -c < src/main.lua > dist/app.txt
    date -u +%H:%M:%S > dist/built-at
    echo "built dist/app.txt at $(cat dist/built-at)"
  ]], "build", project })
  if not r.success then
    error(("the build of %s failed (exit %d): %s"):format(project, r.exitCode, r.stderr))
  end
  return (r.stdout:gsub("\n$", ""))
end, { concurrency = 3, label = "build" })

summary:print()
if summary.failed > 0 then error(("%d of the builds failed"):format(summary.failed), 0) end
