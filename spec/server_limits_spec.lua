-- mastra-platform's bounds (issue 14; docs/platform.md "Limits"), each
-- against the real server:
--
--   3  env: at most 4096 names and 256 KiB an object, 400 past it; the
--      merge of the creation env and the exec env keeps its rules
--   4  leases: at most 64 live a sandbox (a mint past that drops the
--      oldest), dropped when they expire or their sandbox is destroyed
--   6  a DELETE removes the tree off the loop (DATA/trash)
--   10 a destroyed record is kept --destroyed-ttl seconds, then freed and
--      its file removed; an expired record is not loaded at start; at most
--      --destroyed-max destroyed records are kept (the oldest go first),
--      at start too
--   11 legacy exec output is kept up to 8 MiB a stream (truncated: true);
--      the bodies read at once are bounded (503 past the bound)
--
-- Needs MASTRA_PLATFORM and MASTRA_WS_EXEC (set by CTest). Timings are
-- printed with MASTRA_SPEC_FIGURES=1; bench/soak.lua measures them at
-- scale.
local lfs = require "lfs"
local mastra = require "mastra"
local platform = require "spec.support.platform"
local null = platform.null

local P = "/v1/railway/projects/proj-limits"

local function figure(fmt, ...)
  if os.getenv("MASTRA_SPEC_FIGURES") then io.stderr:write(fmt:format(...), "\n") end
end

local function create(srv, body)
  local r = srv:json("POST", P .. "/sandbox", body or { environmentId = "env" })
  assert.are.equal(201, r.status, r.body)
  return r.json
end

local function legacy(srv, id, body)
  return srv:json("POST", P .. "/sandbox/" .. id .. "/exec", body)
end

local function env_of(n, prefix, value)
  local e = platform.object()
  for i = 1, n do e[(prefix or "V") .. i] = value or tostring(i) end
  return e
end

describe("mastra-platform limits", function()
  local srv

  after_each(function()
    if srv then srv:close() end
    srv = nil
  end)

  describe("3: env", function()
    it("refuses more than 4096 names or 256 KiB with a 400 that says so", function()
      srv = platform.start()
      local r = srv:json("POST", P .. "/sandbox", { environmentId = "e", env = env_of(4097) })
      assert.are.equal(400, r.status)
      assert.matches("more than 4096 variables", r.json.error.message)
      r = srv:json("POST", P .. "/sandbox", { environmentId = "e",
        env = env_of(3, "BIG", ("x"):rep(100 * 1024)) })
      assert.are.equal(400, r.status)
      assert.matches("larger than 262144 bytes", r.json.error.message)
      local sb = create(srv)
      r = legacy(srv, sb.id, { command = "true", env = env_of(5000) })
      assert.are.equal(400, r.status)
      assert.matches("more than 4096", r.json.error.message)
      local w = srv:wsExec(srv:lease(P, sb.id), "true", { env = env_of(4097) })
      assert.are.equal(1008, w.summary.close)
      assert.is_nil(w.exitCode)
    end)

    it("takes 960 KiB of env an exec, as its lease says, and refuses more", function()
      -- 960 KiB under a stack limit of 8 MiB or more (execve takes a quarter of it)
      local p = assert(io.popen("sh -c 'ulimit -s'"))
      local stack = p:read("a"):gsub("%s+$", "")
      p:close()
      if stack ~= "unlimited" and tonumber(stack) < 8192 then
        pending("the stack limit is " .. stack .. " KiB: the bound is smaller")
        return
      end
      srv = platform.start()
      local sb = create(srv)
      local lease = srv:lease(P, sb.id)
      assert.are.same({ execEnvBytes = 983040 }, lease.limits)
      -- 7 values of 130,000 bytes (one execve string is at most 128 KiB)
      local value = ("y"):rep(130000)
      local r = legacy(srv, sb.id, { command = 'printf %s "$BIG1$BIG7" | wc -c',
        env = env_of(7, "BIG", value) })
      assert.are.equal(200, r.status, r.body)
      assert.are.equal("260000\n", r.json.stdout)
      r = legacy(srv, sb.id, { command = "true", env = env_of(8, "BIG", value) })
      assert.are.equal(400, r.status)
      assert.matches("larger than 983040 bytes", r.json.error.message)
      -- a creation env keeps its 256 KiB
      r = srv:json("POST", P .. "/sandbox", { environmentId = "e",
        env = env_of(3, "BIG", value) })
      assert.are.equal(400, r.status)
      assert.matches("larger than 262144 bytes", r.json.error.message)
    end)

    it("merges 4096 creation names with 4095 exec names: the exec's win, PATH may change,"
      .. " the marker may not", function()
      srv = platform.start()
      local cenv = env_of(4095, "N")
      cenv.PATH = "/nowhere:/usr/bin:/bin"
      local sb = create(srv, { environmentId = "e", env = cenv })
      local xenv = env_of(4094, "N", "exec")
      xenv.MASTRA_SANDBOX_ID = "forged"
      local t0 = mastra.now()
      local r = legacy(srv, sb.id, { command = "env", env = xenv })
      figure("an exec merging 4096 + 4095 names: %.0f ms", mastra.now() - t0)
      assert.are.equal(200, r.status, r.body)
      local seen = {}
      for k, v in r.json.stdout:gmatch("([%w_]+)=([^\n]*)") do seen[k] = v end
      assert.are.equal("exec", seen.N1)
      assert.are.equal("exec", seen.N4094)
      assert.are.equal("4095", seen.N4095)
      assert.are.equal("/nowhere:/usr/bin:/bin", seen.PATH)
      assert.are.equal(sb.id, seen.MASTRA_SANDBOX_ID)
      local n = 0
      for _ in r.json.stdout:gmatch("\nN%d+=") do n = n + 1 end
      assert.is_true(n >= 4094, "names lost in the merge: " .. n)
    end)
  end)

  describe("4: leases", function()
    it("keeps 64 live leases a sandbox: the oldest goes, the newest work", function()
      srv = platform.start()
      local sb = create(srv)
      local leases = {}
      for i = 1, 70 do leases[i] = srv:lease(P, sb.id) end
      local w = srv:wsExec(leases[1], "echo old")
      assert.are.equal(401, w.summary.httpStatus)
      w = srv:wsExec(leases[6], "echo old")
      assert.are.equal(401, w.summary.httpStatus)
      w = srv:wsExec(leases[7], "echo kept")
      assert.are.equal("kept\n", w.stdout)
      w = srv:wsExec(leases[70], "echo newest")
      assert.are.equal("newest\n", w.stdout)
      -- a destroy drops its leases
      assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. sb.id).status)
      w = srv:wsExec(leases[70], "echo gone")
      assert.are.equal(401, w.summary.httpStatus)
    end)

    it("drops a lease once it expires (--lease-ttl)", function()
      srv = platform.start{ args = { "--lease-ttl", "1" } }
      local sb = create(srv)
      local lease = srv:lease(P, sb.id)
      assert.are.equal("ok\n", srv:wsExec(lease, "echo ok").stdout)
      mastra.sleep(1300)
      assert.are.equal(401, srv:wsExec(lease, "echo late").summary.httpStatus)
      assert.are.equal("fresh\n", srv:wsExec(srv:lease(P, sb.id), "echo fresh").stdout)
    end)
  end)

  it("6: a DELETE moves the tree away at once and removes it off the loop", function()
    srv = platform.start()
    local sb = create(srv)
    local r = legacy(srv, sb.id, { command = "mkdir -p d && cd d && seq 1 20000 | xargs touch"
      .. " && head -c 50000000 /dev/zero > big && ls | wc -l" })
    assert.are.equal(200, r.status, r.body)
    assert.are.equal("20001", r.json.stdout:match("%d+"))
    local t0 = mastra.now()
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. sb.id).status)
    figure("DELETE of a tree of 20,001 files and 50 MB: %.0f ms (curl included)",
      mastra.now() - t0)
    assert.is_nil(lfs.attributes(srv.dataDir .. "/sandboxes/" .. sb.id))
    assert.is_true(platform.waitUntil(function()
      for f in lfs.dir(srv.dataDir .. "/trash") do
        if f ~= "." and f ~= ".." then return false end
      end
      return true
    end, 60000, 100), "the trash was not emptied")
    -- a GET of the destroyed record still answers
    assert.is_string(srv:curl("GET", P .. "/sandbox/" .. sb.id).json.destroyedAt)
    -- trees moved in while a removal runs go with the next one: a burst
    -- of destroys behind a big tree leaves an empty trash too
    local big = create(srv)
    assert.are.equal(200, legacy(srv, big.id, { command = "seq 1 20000 | xargs touch" }).status)
    local ids = { big.id }
    for i = 1, 10 do ids[i + 1] = create(srv).id end
    for _, id in ipairs(ids) do
      assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. id).status)
    end
    assert.is_true(platform.waitUntil(function()
      for f in lfs.dir(srv.dataDir .. "/trash") do
        if f ~= "." and f ~= ".." then return false end
      end
      return true
    end, 60000, 100), "the trash was not emptied after a burst of destroys")
  end)

  it("10: a destroyed record is kept --destroyed-ttl, then freed and not reloaded", function()
    local dir = platform.tmpdir()
    srv = platform.start{ dataDir = dir .. "/data", args = { "--destroyed-ttl", "2" } }
    local a, b = create(srv), create(srv)
    assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. a.id).status)
    local r = srv:curl("GET", P .. "/sandbox/" .. a.id)
    assert.are.equal(200, r.status)
    assert.is_string(r.json.destroyedAt)
    local file = srv.dataDir .. "/state/sandboxes/" .. a.id .. ".json"
    assert.is_not_nil(lfs.attributes(file))
    assert.is_true(platform.waitUntil(function()
      return srv:curl("GET", P .. "/sandbox/" .. a.id).status == 404
    end, 10000, 250), "the destroyed record was not freed")
    assert.is_nil(lfs.attributes(file), "its file is still there")
    assert.are.equal(200, srv:curl("GET", P .. "/sandbox/" .. b.id).status)
    assert.are.equal(0, srv:stop())
    -- a record destroyed long ago is removed at start, a live one is loaded
    local old = srv.dataDir .. "/state/sandboxes/sbx_0123456789abcdef01234567.json"
    platform.writeFile(old, platform.encode{ id = "sbx_0123456789abcdef01234567",
      projectId = "proj-limits", environmentId = "e", createdMs = 1000, destroyedMs = 2000 })
    srv = platform.start{ dataDir = dir .. "/data", args = { "--destroyed-ttl", "2" } }
    assert.are.equal(404, srv:curl("GET", P .. "/sandbox/sbx_0123456789abcdef01234567").status)
    assert.is_nil(lfs.attributes(old))
    assert.are.equal(200, srv:curl("GET", P .. "/sandbox/" .. b.id).status)
    assert.are.equal(0, srv:stop())
    srv = nil
    platform.rm_rf(dir)
  end)

  it("10: at most --destroyed-max destroyed records are kept, the newest, after a restart too",
    function()
    local dir = platform.tmpdir()
    srv = platform.start{ dataDir = dir .. "/data", args = { "--destroyed-max", "3" } }
    local live = create(srv)
    local ids = {}
    for i = 1, 7 do
      ids[i] = create(srv).id
      assert.are.equal(204, srv:curl("DELETE", P .. "/sandbox/" .. ids[i]).status)
    end
    local function file(id) return srv.dataDir .. "/state/sandboxes/" .. id .. ".json" end
    for i = 1, 7 do
      local r = srv:curl("GET", P .. "/sandbox/" .. ids[i])
      if i > 4 then
        assert.are.equal(200, r.status, "sandbox " .. i)
        assert.is_string(r.json.destroyedAt)
        assert.is_not_nil(lfs.attributes(file(ids[i])))
      else
        assert.are.equal(404, r.status, "sandbox " .. i)
        assert.is_nil(lfs.attributes(file(ids[i])), "the file of sandbox " .. i)
      end
    end
    -- a live record is not a destroyed one: it stays
    assert.are.equal(null, srv:curl("GET", P .. "/sandbox/" .. live.id).json.destroyedAt)
    assert.are.equal(0, srv:stop())
    -- a restart with a smaller bound loads the newest two of the three
    srv = platform.start{ dataDir = dir .. "/data", args = { "--destroyed-max", "2" } }
    local left = 0
    for f in lfs.dir(srv.dataDir .. "/state/sandboxes") do
      if f:match("%.json$") then left = left + 1 end
    end
    assert.are.equal(3, left) -- the live one and two destroyed
    assert.are.equal(404, srv:curl("GET", P .. "/sandbox/" .. ids[5]).status)
    assert.is_nil(lfs.attributes(file(ids[5])))
    for i = 6, 7 do
      assert.is_string(srv:curl("GET", P .. "/sandbox/" .. ids[i]).json.destroyedAt)
    end
    assert.are.equal(200, srv:curl("GET", P .. "/sandbox/" .. live.id).status)
    assert.are.equal(0, srv:stop())
    srv = nil
    -- a bound that is not a count is refused, saying what it wants
    local err = dir .. "/err"
    local ok, _, code = os.execute(mastra.quote(platform.binary()) .. " serve --data-dir "
      .. mastra.quote(dir .. "/data") .. " --destroyed-max 0 2>" .. mastra.quote(err))
    assert.is_nil(ok)
    assert.are.equal(2, code)
    local f = assert(io.open(err))
    assert.matches("--destroyed-max wants a count between 1 and", f:read("a"), 1, true)
    f:close()
    -- and --session-history, a count too, says so (it once asked for seconds)
    ok, _, code = os.execute(mastra.quote(platform.binary()) .. " serve --data-dir "
      .. mastra.quote(dir .. "/data") .. " --session-history x 2>" .. mastra.quote(err))
    assert.is_nil(ok)
    assert.are.equal(2, code)
    f = assert(io.open(err))
    assert.are.equal("mastra-platform: --session-history wants a count between 1 and"
      .. " 100000 (got 'x')\n", f:read("a"))
    f:close()
    platform.rm_rf(dir)
  end)

  describe("11: memory", function()
    it("keeps 8 MiB of legacy exec output a stream and says it truncated", function()
      srv = platform.start()
      local sb = create(srv)
      local r = legacy(srv, sb.id, { command = "head -c 20000000 /dev/zero | tr '\\0' a;"
        .. " echo err >&2" })
      assert.are.equal(200, r.status)
      assert.is_true(r.json.truncated)
      assert.are.equal(8 * 1024 * 1024, #r.json.stdout)
      assert.are.equal("err\n", r.json.stderr)
      assert.are.equal(0, r.json.exitCode)
    end)

    it("holds no bucket PUT body in memory: past 512 MiB announced, no 503; an unfinished"
      .. " PUT leaves nothing", function()
      srv = platform.start()
      local B = P .. "/fs/bkt/"
      local head = ("PUT %s%%s HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer %s\r\n"
        .. "Content-Length: %d\r\n\r\nsome bytes"):format(B, srv.token, 200 * 1024 * 1024)
      local holders = {}
      -- three 200 MiB uploads that send a few bytes of their bodies: the
      -- bodies go to temporary files, so the third is not refused (503)
      for i = 1, 3 do
        local req = srv.scratch .. "/head" .. i
        platform.writeFile(req, head:format("big" .. i))
        holders[i] = srv.sandbox.processes:spawn("exec bash -c " .. mastra.quote(
          ("exec 3<>/dev/tcp/127.0.0.1/%d; cat %s >&3; echo sent; cat <&3")
            :format(srv.port, mastra.quote(req))))
      end
      assert.is_true(platform.waitUntil(function()
        for _, h in ipairs(holders) do
          if h.stdout ~= "sent\n" then return false end
        end
        return true
      end, 10000))
      mastra.sleep(300)
      for _, h in ipairs(holders) do
        assert.are.equal("sent\n", h.stdout) -- no answer: each waits for its body
        assert.is_nil(h.exitCode)
      end
      assert.are.equal(200, srv:curl("PUT", B .. "small", { body = "x" }).status)
      for _, h in ipairs(holders) do h:kill() end
      -- the connections dropped mid-body: no object, and no temporary file
      local bucket_dir = srv.dataDir .. "/buckets/proj-limits/bkt"
      assert.is_true(platform.waitUntil(function()
        local p = assert(io.popen("ls -A " .. mastra.quote(bucket_dir)))
        local names = p:read("a")
        p:close()
        return not names:find("mpb%-tmp")
      end, 10000, 100))
      for i = 1, 3 do
        assert.are.equal(404, srv:curl("GET", B .. "big" .. i, { allowFail = true }).status)
      end
      assert.are.equal("x", srv:curl("GET", B .. "small").body)
    end)
  end)
end)
