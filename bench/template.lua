-- Templates (bench/README.md, "Templates"; issue 26, part 5): create ->
-- first exec of a sandbox of a built template beside a plain sandbox, on
-- two namespaces-driver servers: one with --warm-pool 0 (both start their
-- own keeper: cold against cold) and one with the default pools (a plain
-- create takes a plain warm member, a template's create a warm member of
-- its template: warm against warm; each pair waits until both pools have a
-- ready member, and says how many had to), the samples interleaved. The
-- template's layer is made by runCmd alone (FILES files, KIB KiB in all):
-- no registry. Then a fleet of the template against plain sandboxes that
-- each run the same install (MASTRA_BENCH_FLEET, default 50; 0: none).
-- Needs root and a base. Not part of bench/run.
--
--   mastra-lua bench/template.lua [PLATFORM_BIN [BASE [N [FILES [KIB]]]]]
--
-- Loopback only, unless MASTRA_BENCH_NPM=1: then also the build time of a
-- template of one `npmInstall` (MASTRA_BENCH_NPM_PACKAGE, default
-- is-number) from the real npm registry, through the server's egress
-- proxy, beside the same `npm install` in a plain sandbox, interleaved
-- (MASTRA_BENCH_NPM_RUNS, default 3; each build a new template).
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local core = require "mastra.core"
local client = require "mastra.platform_client"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local given_base = arg[2] ~= "" and arg[2] or nil
local n = tonumber(arg[3] or "40")
local FILES = tonumber(arg[4] or "2000")
local KIB = tonumber(arg[5] or "20480")
local tmp = os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp"
local NPM = os.getenv("MASTRA_BENCH_NPM") == "1"
local NPM_PACKAGE = os.getenv("MASTRA_BENCH_NPM_PACKAGE") or "is-number"
local NPM_RUNS = tonumber(os.getenv("MASTRA_BENCH_NPM_RUNS") or "3")
assert(NPM_PACKAGE:match("^[%w@/._-]+$"), "MASTRA_BENCH_NPM_PACKAGE: a package name")

local function sh(cmd) return lib.sh(cmd, true) end

if bin:sub(1, 1) ~= "/" then bin = sh("pwd"):gsub("%s+$", "") .. "/" .. bin end
local dir = sh("mktemp -d " .. mastra.quote(tmp .. "/mastra-template-bench.XXXXXX"))
  :gsub("%s+$", "")
sh("chmod 755 " .. mastra.quote(dir))
local base = given_base or (dir .. "/base")
if not given_base then
  sh(mastra.quote(bin) .. " base build --minimal --base " .. mastra.quote(base))
end

local host <close> = mastra.LocalSandbox.new{ workingDirectory = dir .. "/wd", timeout = 0 }
host:start()

local pct = lib.pct

local function serve(name, extra)
  local s = lib.serve(host, { bin = bin, base = base, extra = extra,
    data = dir .. "/data-" .. name, log = dir .. "/platform-" .. name .. ".log" })
  s.name = name
  function s.create(def)
    for _ = 1, 2400 do
      local j = client.request(s.cfg, "POST", "/sandbox",
        { json = { environmentId = "bench", templateDefinition = def } }).json
      if j.id then return j.id end
      assert(j.templatePending, "no id and no templatePending")
      mastra.sleep(j.templatePending.retryAfterMs or 500)
    end
    error("the template was not built in time")
  end
  function s.exec(id, cmd)
    local r = client.request(s.cfg, "POST", "/sandbox/" .. id .. "/exec",
      { json = { command = cmd, timeout = 600000 }, timeout = 600000 }).json
    assert(r.exitCode == 0, name .. ": " .. cmd .. ": " .. tostring(r.stderr)
      .. tostring(r.stdout))
    return r.stdout
  end
  function s.destroy(id) client.request(s.cfg, "DELETE", "/sandbox/" .. id) end
  -- the inspector's warmPool (a blocking curl: between samples only)
  function s.pool()
    local out = lib.sh("curl -s -H " .. mastra.quote("Authorization: Bearer " .. s.token)
      .. " " .. mastra.quote(s.inspector .. "api/health"))
    local ok, j = pcall(core.jsonDecode, out)
    return ok and type(j) == "table" and j.warmPool or nil
  end
  -- wait (up to 5 s) until the plain pool and template key's members have a
  -- ready one each: true if it had to wait at all
  function s.wait_pools(key)
    local waited = false
    for _ = 1, 100 do
      local w = s.pool()
      local tready = 0
      for _, t in ipairs(w and w.templates or {}) do
        if t.key == key then tready = t.ready end
      end
      if w and w.ready >= 1 and tready >= 1 then return waited end
      waited = true
      mastra.sleep(50)
    end
    error(s.name .. ": the pools have no ready member after 5 s")
  end
  function s.stop() -- SIGTERM: it ends what it runs, as a user's stop does
    sh("kill -TERM " .. s.pid)
    for _ = 1, 200 do
      if s.server.exitCode then return end
      mastra.sleep(50)
    end
    s.server:kill()
  end
  return s
end

local each = math.max(1, KIB // FILES)
local INSTALL = ("mkdir -p /opt/app && cd /opt/app && for i in $(seq 1 %d); do"
  .. " head -c %d /dev/urandom > f$i; done"):format(FILES, each * 1024)
local def = mastra.Template.new():runCmd(INSTALL):setWorkdir("/opt/app"):definition()
local FLEET = tonumber(os.getenv("MASTRA_BENCH_FLEET") or "50")
local CONC = tonumber(os.getenv("MASTRA_BENCH_FLEET_CONCURRENCY") or "8")
local PAUSE = tonumber(os.getenv("MASTRA_BENCH_PAUSE_MS") or "150")

-- ms of create -> first exec (`true`) of a sandbox (def: of that template)
local function first_exec(s, d)
  local tt = mastra.now()
  local id = s.create(d or nil)
  s.exec(id, "true")
  local ms = mastra.now() - tt
  s.destroy(id)
  return ms
end

local servers = {}
local ok, err = pcall(function()
  local s, pooled = serve("nopool", " --warm-pool 0"), serve("pool", "")
  servers = { s, pooled }
  -- the build, once per server (its time: the first create that waits for it)
  local t0 = mastra.now()
  local first = s.create(def)
  local build_ms = mastra.now() - t0
  assert(s.exec(first, "ls | wc -l"):match("%d+") == tostring(FILES))
  s.destroy(first)
  local layer = sh("du -sk " .. mastra.quote(s.data) .. "/templates/*/layer | cut -f1")
  pooled.destroy(pooled.create(def)) -- its build; the pool keeps members of it from now
  local key = sh("ls " .. mastra.quote(pooled.data .. "/templates")):match("%x+")
  -- warm up every path
  for _, d in ipairs{ false, def } do
    first_exec(s, d)
    first_exec(pooled, d)
  end
  local plain, tpl, wplain, wtpl, waits = {}, {}, {}, {}, 0
  for i = 1, n do
    -- cold against cold (the order alternates)
    local order = i % 2 == 0 and { def, false } or { false, def }
    for _, d in ipairs(order) do
      if d then tpl[i] = first_exec(s, d) else plain[i] = first_exec(s, d) end
    end
    -- warm against warm: both pools ready first
    if pooled.wait_pools(key) then waits = waits + 1 end
    for _, d in ipairs(order) do
      if d then wtpl[i] = first_exec(pooled, d) else wplain[i] = first_exec(pooled, d) end
    end
    mastra.sleep(PAUSE)
  end
  print(("template: %d files, %s KiB on disk as its layer; built (first create) in %.0f ms")
    :format(FILES, layer:gsub("%s+$", ""), build_ms))
  print(("create->first exec, --warm-pool 0: plain p50 %.1f ms p90 %.1f ms; template p50 %.1f ms"
    .. " p90 %.1f ms (template/plain p50 %.2f) (n=%d, interleaved)"):format(pct(plain, 0.5),
    pct(plain, 0.9), pct(tpl, 0.5), pct(tpl, 0.9), pct(tpl, 0.5) / pct(plain, 0.5), n))
  print(("create->first exec, default pools (a warm member each): plain p50 %.1f ms p90 %.1f ms;"
    .. " template p50 %.1f ms p90 %.1f ms (template/plain p50 %.2f) (n=%d, interleaved;"
    .. " %d pairs waited for a refill first)"):format(pct(wplain, 0.5), pct(wplain, 0.9),
    pct(wtpl, 0.5), pct(wtpl, 0.9), pct(wtpl, 0.5) / pct(wplain, 0.5), n, waits))
  -- a fleet: FLEET sandboxes of the template, ready with its files, beside
  -- FLEET plain ones that each run the same install (CONC at a time)
  if FLEET > 0 then
    local function du(path) return tonumber(sh("du -sk " .. mastra.quote(path)):match("^(%d+)")) end
    local ids = {}
    local function fleet(kind)
      local tt = mastra.now()
      local slots = {}
      for i = 1, FLEET do slots[i] = i end
      local got = mastra.map(slots, function()
        local id = s.create(kind == "template" and def or nil)
        if kind == "plain" then s.exec(id, INSTALL) end
        assert(s.exec(id, "cd /opt/app && ls | wc -l"):match("%d+") == tostring(FILES))
        return id
      end, { concurrency = CONC })
      local wall = mastra.now() - tt
      for _, id in ipairs(got) do ids[#ids + 1] = id end
      return wall
    end
    local before = du(s.data .. "/sandboxes")
    local tw = fleet("template")
    local tdisk = du(s.data .. "/sandboxes") - before
    for _, id in ipairs(ids) do s.destroy(id) end
    ids = {}
    before = du(s.data .. "/sandboxes")
    local pw = fleet("plain")
    local pdisk = du(s.data .. "/sandboxes") - before
    for _, id in ipairs(ids) do s.destroy(id) end
    print(("fleet of %d, %d at a time, until each sees the install's files: template %.1f s,"
      .. " %d KiB of sandbox layers (+ %s KiB its layer, once); plain, each installing: %.1f s,"
      .. " %d KiB"):format(FLEET, CONC, tw / 1000, tdisk, layer:gsub("%s+$", ""), pw / 1000, pdisk))
  end
  -- the real npm registry, through the egress proxy (the pooled server's
  -- defaults: egress on, no policy)
  if NPM then
    local builds, installs, served = {}, {}, {}
    -- the build's own time: builtMs - createdMs of its state.json (the
    -- create's wait rounds it up to the client's polls, 500 ms apart)
    local function build_time(seen)
      for k in sh("ls " .. mastra.quote(pooled.data .. "/templates")):gmatch("%x+") do
        if not seen[k] then
          seen[k] = true
          local f = assert(io.open(pooled.data .. "/templates/" .. k .. "/state.json"))
          local st = core.jsonDecode(f:read("a"))
          f:close()
          return st.builtMs - st.createdMs
        end
      end
      error("no new template")
    end
    local seen = {}
    for k in sh("ls " .. mastra.quote(pooled.data .. "/templates")):gmatch("%x+") do
      seen[k] = true
    end
    local CHECK = "test -f node_modules/" .. NPM_PACKAGE .. "/package.json"
    for i = 1, NPM_RUNS do
      -- a new template each time (its own hash): a build from nothing
      local d = mastra.Template.new():runCmd("echo run-" .. i .. "-" .. os.time() .. " > /opt/run")
        :setWorkdir("/opt/npm"):npmInstall({ NPM_PACKAGE }):definition()
      local tt = mastra.now()
      local id = pooled.create(d)
      served[i] = mastra.now() - tt -- the build, the polls and a cold create
      builds[i] = build_time(seen)
      pooled.exec(id, CHECK)
      pooled.destroy(id)
      tt = mastra.now()
      id = pooled.create(nil)
      pooled.exec(id, "mkdir -p /opt/npm && cd /opt/npm && npm install --no-audit --no-fund "
        .. NPM_PACKAGE .. " >/dev/null && " .. CHECK)
      installs[i] = mastra.now() - tt
      pooled.destroy(id)
    end
    local function list(xs)
      local parts = {}
      for i, x in ipairs(xs) do parts[i] = ("%.2f"):format(x / 1000) end
      return table.concat(parts, ", ")
    end
    print(("npm (%s, registry.npmjs.org through the egress proxy): a template of"
      .. " npmInstall, its build: %s s (p50 %.2f s), its create request -> a sandbox of it:"
      .. " %s s; a plain sandbox's create -> the same npm install done: %s s (p50 %.2f s)"
      .. " (n=%d, interleaved)"):format(NPM_PACKAGE, list(builds), pct(builds, 0.5) / 1000,
      list(served), list(installs), pct(installs, 0.5) / 1000, NPM_RUNS))
  end
end)
for _, s in ipairs(servers) do s.stop() end
sh("rm -rf " .. mastra.quote(dir))
assert(ok, err)
