-- The namespaces driver of mastra-platform (docs/platform.md, "Drivers"):
-- what a command inside a sandbox cannot reach (the data directory, the
-- token, another sandbox, the host's /root and processes, anything outside
-- its layer), what contains a fork bomb and a memory hog, the tools of the
-- base, and exact checkpoints of the upper layer. Against a real server
-- forced to --driver namespaces; skipped, saying why, where that driver
-- cannot run (not root).
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local trim = util.trim

-- Can the namespaces driver run here? It needs root (drivers.c).
local function ns_unavailable()
  local p = io.popen("id -u")
  local uid = trim(p:read("a"))
  p:close()
  if uid ~= "0" then
    return "the namespaces driver needs root here (uid " .. uid .. "): skipped"
  end
  return nil
end

local skip_reason = ns_unavailable()

describe("the namespaces driver", function()
  if skip_reason then
    pending(skip_reason)
    return
  end

  local srv

  local function new(extra)
    return srv:startSandbox(extra)
  end

  local function run(sb, cmd, opts)
    return sb:executeCommand(cmd, nil, opts)
  end

  -- shell text on the host (the server's helper sandbox)
  local function host(cmd)
    return srv:sh(cmd)
  end

  setup(function()
    srv = platform.start{ args = { "--driver", "namespaces", "--sandbox-pids-max", "128",
      "--sandbox-memory-max", "256m" } }
  end)

  teardown(function()
    if srv then srv:stop() end
  end)

  it("reports its driver in getInfo", function()
    local sb = new()
    assert.are.equal("namespaces", sb:getInfo().metadata.driver)
    sb:destroy()
  end)

  it("hides the data directory, the token, another sandbox and the host's /root", function()
    local a, b = new(), new()
    assert.are.equal(0, run(a, "echo secret-a > mine.txt").exitCode)
    local aid = a.sandboxId
    local adir = srv.dataDir .. "/sandboxes/" .. aid
    -- the host sees it in A's layer
    assert.are.equal("secret-a", trim(util.read_file(adir .. "/upper/workspace/mine.txt")))
    for _, path in ipairs{ srv.dataDir, srv.tokenFile, srv.dataDir .. "/token",
      adir .. "/upper/workspace/mine.txt", adir, "/root/.bashrc", "/root/.pyenv" } do
      local r = run(b, "cat " .. mastra.quote(path) .. " || ls " .. mastra.quote(path))
      assert.are_not.equal(0, r.exitCode, path .. " is visible: " .. r.stdout)
      assert.is_nil(r.stdout:find(srv.token, 1, true))
    end
    assert.are_not.equal(0, run(b, "cat /workspace/mine.txt").exitCode)
    -- /root of the sandbox is its own, empty
    assert.are.equal("", run(b, "ls -A /root").stdout)
    -- the token is nowhere in the sandbox's own tree (the base's /usr aside)
    local r = run(b, "grep -rl --devices=skip " .. mastra.quote(srv.token)
      .. " /etc /root /home /workspace /tmp /var /run /opt 2>/dev/null | head -3")
    assert.are.equal("", r.stdout)
    -- its mountinfo names no path of the data directory (the overlays name
    -- their layers relative to the sandbox's directory) but the sources of
    -- the read-only files on /etc (resolv.conf, a PRIVATE network's hosts)
    local mi = run(b, "cat /proc/self/mountinfo")
    assert.matches("lowerdir=lower%-base", mi.stdout)
    for line in mi.stdout:gmatch("[^\n]+") do
      if line:find(srv.dataDir, 1, true) then assert.matches(" /etc/[%w.]+ ro,", line) end
    end
    a:destroy()
    b:destroy()
  end)

  it("shows only the sandbox's processes and cannot signal the host's", function()
    local sb = new()
    local r = run(sb, "ps -e -o pid=,comm=")
    assert.are.equal(0, r.exitCode, r.stderr)
    local n = 0
    for line in r.stdout:gmatch("[^\n]+") do
      n = n + 1
      local pid = tonumber(line:match("^%s*(%d+)"))
      assert.is_true(pid < 100, "a host pid is visible: " .. line)
      assert.is_nil(line:find("mastra%-platform"), line)
    end
    assert.is_true(n >= 2 and n <= 6, r.stdout)
    -- a host process: the sandbox cannot name it, let alone signal it
    local h = host("sleep 60 >/dev/null 2>&1 & echo $!")
    local hpid = trim(h.stdout)
    assert.matches("^%d+$", hpid)
    local k = run(sb, "kill -9 " .. hpid .. "; kill -9 " .. srv.pid)
    assert.are_not.equal(0, k.exitCode)
    assert.is_true(util.alive(tonumber(hpid)))
    assert.is_true(srv:running())
    host("kill " .. hpid)
    -- hostname is the sandbox id, and it cannot be changed
    assert.are.equal(sb.sandboxId, trim(run(sb, "hostname").stdout))
    assert.are_not.equal(0, run(sb, "hostname other").exitCode)
    sb:destroy()
  end)

  it("reaps the orphans of its commands: no zombie is left in the sandbox", function()
    local sb = new()
    -- each command leaves a child that outlives it and exits later: the
    -- sandbox's pid 1 adopts it and must reap it
    for _ = 1, 3 do
      assert.are.equal(0, run(sb, "sleep 0.2 >/dev/null 2>&1 & exit 0").exitCode)
    end
    local zombies
    assert.is_true(platform.waitUntil(function()
      zombies = run(sb, "ps -e -o stat= | grep -c '^Z' || true").stdout
      return trim(zombies) == "0"
    end, 10000), "zombies in the sandbox: " .. tostring(zombies))
    sb:destroy()
  end)

  it("writes only into its own layer", function()
    local sb = new()
    local marker = "mastra-ns-" .. sb.sandboxId
    local r = run(sb, ("id -u; touch /usr/bin/%s; echo x > /etc/%s; mount -t tmpfs x /mnt;"
      .. " echo ok > /workspace/%s"):format(marker, marker, marker))
    assert.are.equal("0", trim(r.stdout:match("^[^\n]*")))
    for _, p in ipairs{ "/usr/bin/" .. marker, "/etc/" .. marker,
      os.getenv("MASTRA_PLATFORM_BASE") and (os.getenv("MASTRA_PLATFORM_BASE") .. "/etc/" .. marker)
        or "/nonexistent" } do
      assert.is_nil(util.read_file(p), p .. " was written")
    end
    assert.are.equal("ok\n", util.read_file(srv.dataDir .. "/sandboxes/" .. sb.sandboxId
      .. "/upper/workspace/" .. marker))
    -- root inside is not root outside: the file is owned by the mapped uid
    local st = host("stat -c %u " .. mastra.quote(srv.dataDir .. "/sandboxes/" .. sb.sandboxId
      .. "/upper/workspace/" .. marker))
    assert.are_not.equal("0", trim(st.stdout))
    -- loopback, and eth0: its link to the egress proxy (spec/egress_spec.lua)
    local net = run(sb, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' | sort")
    assert.are.equal("eth0\nlo", trim(net.stdout))
    sb:destroy()
  end)

  it("contains a fork bomb and a memory hog: the server and another sandbox answer", function()
    local bomb, other = new(), new()
    local t = mastra.spawn(function()
      return run(bomb, "bomb() { bomb | bomb & }; bomb; sleep 8", { timeout = 20000 })
    end)
    mastra.sleep(2000)
    local t0 = mastra.now()
    local r = run(other, "echo alive")
    assert.are.equal("alive\n", r.stdout)
    assert.is_true(mastra.now() - t0 < 10000)
    local count = run(bomb, "ps -e | wc -l")
    -- the pids limit holds (128; the command itself may not even start)
    assert.is_true(count.exitCode ~= 0 or tonumber(trim(count.stdout)) <= 130, count.stdout)
    bomb:destroy()
    pcall(t.wait, t)
    local hog = run(other, "python3 -c 'x = bytearray(1 << 30); print(len(x))'")
    assert.are_not.equal(0, hog.exitCode)
    assert.are.equal("alive\n", run(other, "echo alive").stdout)
    assert.is_true(srv:running())
    other:destroy()
  end)

  it("runs python3 and node (tsc and tsx when the base has them)", function()
    local sb = new()
    assert.are.equal("3\n", run(sb, "python3 -c 'print(1 + 2)'").stdout)
    assert.are.equal("3\n", run(sb, "node -e 'console.log(1 + 2)'").stdout)
    local has = run(sb, "command -v tsc && command -v tsx")
    if has.exitCode ~= 0 then
      print("namespaces_spec: the base has no tsc/tsx (a minimal base): their check is skipped")
    else
      assert.are.equal(0, run(sb, "printf 'const x: number = 2; console.log(x)' > a.ts"
        .. " && tsc a.ts && node a.js").exitCode)
      assert.are.equal("2\n", run(sb, "tsx a.ts").stdout)
    end
    sb:destroy()
  end)

  -- a digest of /workspace: paths, types, modes, link targets and contents
  local DIGEST = "cd /workspace && find . -printf '%p %y %m %l\\n' | LC_ALL=C sort | sha256sum;"
    .. " find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum"

  it("restores a checkpoint exactly; a different id starts clean", function()
    local sb = new{ id = "ns-exact" }
    local setup_cmd = table.concat({
      "printf 'hello\\nworld\\n' > text.txt",
      "head -c 65536 /dev/urandom > binary.bin",
      "printf '#!/bin/sh\\necho run\\n' > script.sh && chmod 0755 script.sh",
      "ln -s text.txt link",
      "mkdir -p empty/inner",
      "echo doomed > gone.txt",
      "chmod 0640 text.txt",
    }, " && ")
    assert.are.equal(0, run(sb, setup_cmd).exitCode)
    sb:destroy()
    -- second life: gone.txt is deleted, and stays deleted
    sb:start()
    assert.are.equal("doomed\n", run(sb, "cat gone.txt").stdout)
    assert.are.equal(0, run(sb, "rm gone.txt && rm /root/.x 2>/dev/null; true").exitCode)
    local before = run(sb, DIGEST)
    assert.are.equal(0, before.exitCode, before.stderr)
    sb:destroy()
    sb:start()
    local after = run(sb, DIGEST)
    assert.are.equal(before.stdout, after.stdout)
    assert.are_not.equal(0, run(sb, "test -e gone.txt").exitCode)
    assert.are.equal("run\n", run(sb, "./script.sh").stdout)
    assert.are.equal("text.txt\n", run(sb, "readlink link").stdout)
    assert.are.equal("640\n", run(sb, "stat -c %a text.txt").stdout)
    sb:destroy()
    local other = new{ id = "ns-other" }
    assert.are.equal("", run(other, "ls -A /workspace").stdout)
    other:destroy()
  end)

  it("refuses a working directory that does not exist in a running sandbox, as the"
    .. " process driver does", function()
    local sb = new()
    assert.are.equal(0, run(sb, "true").exitCode) -- its init is running
    local path = "/v1/railway/projects/proj/sandbox/" .. sb.sandboxId .. "/exec"
    local r = srv:json("POST", path, { command = "pwd", cwd = "/nope" })
    assert.are.equal(400, r.status, r.body)
    assert.matches("cannot run in directory '/nope': No such file or directory", r.body)
    r = srv:json("POST", path, { command = "pwd", cwd = "/etc/hostname" })
    assert.are.equal(400, r.status, r.body)
    assert.matches("Not a directory", r.body)
    -- a symlink resolves inside the sandbox's root (/bin -> usr/bin)
    assert.are.equal("/usr/bin\n", run(sb, "pwd -P", { cwd = "/bin" }).stdout)
    sb:destroy()
  end)

  it("starts sandboxes through mastra-platform itself without mastra-ns-init"
    .. " beside it, and says so", function()
    -- the init is normally mastra-ns-init, beside the server's binary
    local dir = platform.tmpdir()
    local bin = dir .. "/mastra-platform"
    assert(os.execute("cp " .. mastra.quote(platform.binary()) .. " " .. mastra.quote(bin)))
    local alone = platform.start{ bin = bin, args = { "--driver", "namespaces" } }
    local ok, err = pcall(function()
      local sb = mastra.PlatformSandbox.new{ accessToken = alone.token, proxyUrl = alone.url,
        projectId = "proj", environmentId = "env" }
      sb:start()
      local r = run(sb, "hostname; echo $$")
      assert.are.equal(0, r.exitCode, r.stderr)
      assert.are.equal(sb.sandboxId .. "\n", r.stdout:match("^[^\n]*\n"))
      sb:destroy()
      assert.matches("mastra%-ns%-init is not beside", alone.stderrTail)
    end)
    alone:close()
    platform.rm_rf(dir)
    assert(ok, err)
  end)
end)
