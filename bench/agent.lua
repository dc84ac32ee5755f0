-- mastra.Agent at scale: N agents of 3 steps each (two tool calls, then an
-- answer) at once on one thread, against the scripted model server
-- (spec/support/model_server.lua on fault-platform), whose every response
-- waits DELAY ms before its first byte. It prints
--   * the wall time of the whole fleet beside the scripted delays (3 x
--     DELAY: what a run that waits for nothing but the model takes);
--   * the client's RSS per agent (the peak over the baseline, sampled);
--   * the loop's own cost per step: the client's CPU time (os.clock) over
--     the steps, which includes libcurl, SSE parsing, JSON and the tools.
--
--   LUA_PATH_5_4="lua/?.lua;lua/?/init.lua;./?.lua;;" LUA_CPATH_5_4="build/lua/?.so;;" \
--   MASTRA_FAULT_PLATFORM=build/spec-support/fault-platform lua5.4 bench/agent.lua [N] [DELAY]
--
-- With MASTRA_BENCH_SAMPLES set, the figures are appended to that samples
-- file (bench/lib.lua's format). All traffic is loopback.
local mastra = require "mastra"
local ms = require "spec.support.model_server"

local N = tonumber(arg[1]) or 200
local DELAY = tonumber(arg[2]) or 100
local O = ms.openai

local function rss_kib()
  local f = io.open("/proc/self/status", "r")
  if not f then return 0 end
  local kb = tonumber(f:read("a"):match("VmRSS:%s+(%d+)")) or 0
  f:close()
  return kb
end

local routes = {}
for i = 1, N do
  routes[i] = { method = "POST", path = ("/a%d/v1/chat/completions"):format(i), responses = {
    O.toolUse({ { id = "s1", name = "noop", input = { step = 1 } } }, { firstDelayMs = DELAY }),
    O.toolUse({ { id = "s2", name = "noop", input = { step = 2 } } }, { firstDelayMs = DELAY }),
    O.text("done", { firstDelayMs = DELAY }),
  } }
end
local srv = ms.start{ routes = routes }
local ok, err = pcall(function()
  local noop = { description = "Do nothing.", inputSchema = { type = "object",
    properties = { step = { type = "integer" } } }, execute = function() return "ok" end }
  local agents = {}
  for i = 1, N do
    agents[i] = mastra.Agent.new{ id = "bench-" .. i, instructions = "bench",
      model = { id = "openai/gpt-bench", url = ("%s/a%d/v1"):format(srv.url, i), apiKey = "k" },
      tools = { noop = noop } }
  end
  collectgarbage("collect")
  local base = rss_kib()
  local peak = base
  local done = false
  local sampler = mastra.spawn(function()
    while not done do
      peak = math.max(peak, rss_kib())
      mastra.sleep(10)
    end
  end)
  local cpu0, t0 = os.clock(), mastra.now()
  local results = mastra.map(agents, function(a) return a:generate("go") end,
    { concurrency = N })
  local wall, cpu = mastra.now() - t0, (os.clock() - cpu0) * 1000
  done = true
  sampler:wait()
  local steps = 0
  for _, r in ipairs(results) do
    assert(r.text == "done" and #r.steps == 3, "a run did not take its 3 steps")
    steps = steps + #r.steps
  end
  local per_agent = (peak - base) / N
  print(("agents: %d x 3 steps, scripted delay %d ms a response"):format(N, DELAY))
  print(("wall time: %.0f ms (the scripted delays alone: %d ms; overhead %.0f ms)")
    :format(wall, 3 * DELAY, wall - 3 * DELAY))
  print(("client RSS: %.0f KiB at peak over a %d KiB baseline: %.1f KiB per agent")
    :format(peak - base, base, per_agent))
  print(("loop cost: %.3f ms of client CPU per step (%d steps, %.0f ms CPU)")
    :format(cpu / steps, steps, cpu))
  local path = os.getenv("MASTRA_BENCH_SAMPLES")
  if path and path ~= "" then
    local f = assert(io.open(path, "a"))
    f:write(("agent.fleet_wall\tms\t%.4f\n"):format(wall))
    f:write(("agent.rss_per_agent\tKiB\t%.4f\n"):format(per_agent))
    f:write(("agent.cpu_per_step\tms\t%.4f\n"):format(cpu / steps))
    f:close()
  end
end)
srv:close()
if not ok then error(err, 0) end
