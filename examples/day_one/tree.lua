-- A tree in and out: a project directory of the host goes into the
-- sandbox in one piece (modes and symlinks kept), a build runs there, and
-- its output directory comes back onto the host.
local mastra = require "mastra"

-- a small project on the host, in a fresh temporary directory
local tmp = io.popen("mktemp -d"):read("l")
os.execute(("mkdir -p %s/project/src && cd %s/project && printf 'a\\nb\\n' > src/one.txt"
  .. " && printf 'c\\n' > src/two.txt && printf '#!/bin/sh\\ncat src/*.txt | wc -l\\n'"
  .. " > build.sh && chmod +x build.sh && ln -s src/one.txt first"):format(tmp, tmp))

local ws <close> = mastra.Workspace.new{ sandbox = mastra.PlatformSandbox.new{} }
ws:init()

local up = ws:uploadDir(tmp .. "/project", "project")
print(("uploaded %d bytes of tar (%s)"):format(up.bytes, up.method))

local r = ws.sandbox:executeCommand("sh", { "-c",
  "mkdir -p dist && ./build.sh > dist/lines.txt && ls -l first | cut -c1" }, { cwd = "project" })
print("in the sandbox, ./first is a link: " .. tostring(r.stdout == "l\n"))

ws:downloadDir("project/dist", tmp .. "/dist")
print("dist/lines.txt on the host: " .. io.open(tmp .. "/dist/lines.txt"):read("l"))
os.execute("rm -rf " .. mastra.quote(tmp))
