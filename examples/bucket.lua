-- Data both ways between a bucket and a sandbox: a Workspace of a
-- PlatformFilesystem (the bucket) and a PlatformSandbox. A CSV goes into the
-- bucket, ws:upload copies it into the sandbox, a command sorts and counts
-- it there, and ws:download brings the report back into the bucket.
--
--   build/mastra-lua examples/bucket.lua
--
-- The bucket is the platform's default one (the local platform has one;
-- on a hosted platform set MASTRA_PLATFORM_BUCKET_NAME).
local mastra = require "mastra"

local bucket = mastra.PlatformFilesystem.new{}
local sandbox = mastra.PlatformSandbox.new{}
local ws <close> = mastra.Workspace.new{ filesystem = bucket, sandbox = sandbox }
ws:init()

bucket:writeFile("/examples/sales.csv", table.concat({
  "region,amount", "north,120", "south,75", "east,310", "west,42", "north,8",
}, "\n") .. "\n")
print("bucket:  wrote /examples/sales.csv")

local up = ws:upload("/examples/sales.csv", "data/sales.csv")
print(("upload:  %d bytes into the sandbox as data/sales.csv (through %s)")
  :format(up.bytes, up.method))

local r = sandbox:executeCommand("sh", { "-c", [[
  tail -n +2 data/sales.csv | sort -t, -k2 -n -r > data/report.txt
  echo "rows: $(wc -l < data/report.txt)" >> data/report.txt
]] })
if not r.success then error("the report failed: " .. r.stderr) end
print("sandbox: sorted the rows by amount into data/report.txt")

local down = ws:download("data/report.txt", "/examples/report.txt")
print(("download: %d bytes back into the bucket as /examples/report.txt"):format(down.bytes))
print("report, read from the bucket:")
io.write(bucket:readFile("/examples/report.txt"))

bucket:deleteFile("/examples", { recursive = true })
print("bucket:  removed /examples")
