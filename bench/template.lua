-- Templates (bench/README.md, "Templates"; issue 26, part 5): create ->
-- first exec of a sandbox of a built template beside a plain sandbox, on
-- one namespaces-driver server with --warm-pool 0 (a template's sandboxes
-- never come from the warm pool, so the pool would measure the pool), the
-- samples interleaved; then the plain sandbox with the default warm pool,
-- for what a plain create costs as users see it. The template's layer is
-- made by runCmd alone (FILES files, KIB KiB in all): no registry. Needs
-- root and a base. Not part of bench/run.
--
--   mastra-lua bench/template.lua [PLATFORM_BIN [BASE [N [FILES [KIB]]]]]
--
-- Loopback only.
package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local mastra = require "mastra"
local client = require "mastra.platform_client"
local lib = require "lib"

local here = arg[0]:match("(.*/)") or "./"
local bin = arg[1] or (here .. "../build/mastra-platform")
local given_base = arg[2] ~= "" and arg[2] or nil
local n = tonumber(arg[3] or "40")
local FILES = tonumber(arg[4] or "2000")
local KIB = tonumber(arg[5] or "20480")
local tmp = os.getenv("MASTRA_BENCH_TMPDIR") or "/var/tmp"

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
    assert(r.exitCode == 0, name .. ": " .. cmd .. ": " .. tostring(r.stderr))
    return r.stdout
  end
  function s.destroy(id) client.request(s.cfg, "DELETE", "/sandbox/" .. id) end
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

local servers = {}
local ok, err = pcall(function()
  local s, pooled = serve("nopool", " --warm-pool 0"), serve("pool", "")
  servers = { s, pooled }
  -- the build, once (its time: the first create that waits for it)
  local t0 = mastra.now()
  local first = s.create(def)
  local build_ms = mastra.now() - t0
  assert(s.exec(first, "ls | wc -l"):match("%d+") == tostring(FILES))
  s.destroy(first)
  local layer = sh("du -sk " .. mastra.quote(s.data) .. "/templates/*/layer | cut -f1")
  -- warm up both paths
  for _, d in ipairs{ false, def } do
    local id = s.create(d or nil)
    s.exec(id, "true")
    s.destroy(id)
  end
  local plain, tpl, warm = {}, {}, {}
  for i = 1, n do
    for _, d in ipairs{ false, def } do
      local tt = mastra.now()
      local id = s.create(d or nil)
      s.exec(id, "true")
      local ms = mastra.now() - tt
      s.destroy(id)
      if d then tpl[i] = ms else plain[i] = ms end
    end
    local tt = mastra.now()
    local id = pooled.create(nil)
    pooled.exec(id, "true")
    warm[i] = mastra.now() - tt
    pooled.destroy(id)
    mastra.sleep(tonumber(os.getenv("MASTRA_BENCH_PAUSE_MS") or "150"))
  end
  print(("template: %d files, %s KiB on disk as its layer; built (first create) in %.0f ms")
    :format(FILES, layer:gsub("%s+$", ""), build_ms))
  print(("create->first exec, --warm-pool 0: plain p50 %.1f ms p90 %.1f ms; template p50 %.1f ms"
    .. " p90 %.1f ms (template/plain p50 %.2f) (n=%d, interleaved)"):format(pct(plain, 0.5),
    pct(plain, 0.9), pct(tpl, 0.5), pct(tpl, 0.9), pct(tpl, 0.5) / pct(plain, 0.5), n))
  print(("create->first exec, plain with the default warm pool: p50 %.1f ms p90 %.1f ms")
    :format(pct(warm, 0.5), pct(warm, 0.9)))
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
end)
for _, s in ipairs(servers) do s.stop() end
sh("rm -rf " .. mastra.quote(dir))
assert(ok, err)
