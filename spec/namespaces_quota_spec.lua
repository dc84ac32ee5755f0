-- A disk and an inode quota per sandbox (issue 30, item 4; docs/platform.md,
-- "Disk and inode quota"): with --sandbox-disk-max and --sandbox-inodes-max
-- each sandbox of the namespaces driver has a sparse ext4 image of its own,
-- loop-mounted at its tree. A writer past its bytes or its inodes gets
-- ENOSPC, and its neighbours and the server are unaffected; checkpoints
-- work as before; a destroy, the server's exit, a kill -9 and the next
-- start leave no mount, loop device or image behind; a create without
-- room for its image answers 507 and leaves nothing. Root only (loop
-- devices and mounts): skipped, saying why, otherwise.
local lfs = require "lfs"
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local P = "/v1/railway/projects/proj"
local sh, trim = util.sh, util.trim

local LIMITS = { "--sandbox-disk-max", "64M", "--sandbox-inodes-max", "2000" }

local function serve(opts)
  opts = opts or {}
  local args = { "--driver", "namespaces" }
  for _, a in ipairs(LIMITS) do args[#args + 1] = a end
  for _, a in ipairs(opts.args or {}) do args[#args + 1] = a end
  return platform.start{ dataDir = opts.dataDir, tokenFile = opts.tokenFile, args = args,
    bin = opts.bin }
end

local function create(srv, body)
  local r = srv:json("POST", P .. "/sandbox", body or { environmentId = "env" })
  assert.are.equal(201, r.status, "POST /sandbox: " .. r.body)
  return r.json
end

local function exec(srv, id, command)
  return srv:wsExec(srv:lease(P, id), command)
end

local function run(srv, id, command)
  local w = exec(srv, id, command)
  assert.are.equal(0, w.exitCode, command .. ": " .. w.stderr)
  return w.stdout
end

local function destroy(srv, id)
  local r = srv:curl("DELETE", P .. "/sandbox/" .. id)
  assert.are.equal(204, r.status, r.body)
end

local mounts = util.mounts

-- the loop devices whose backing file's path names text
local function loops(text)
  local found = {}
  for name in lfs.dir("/sys/block") do
    local f = util.read_file("/sys/block/" .. name .. "/loop/backing_file")
    if f and f:find(text, 1, true) then found[#found + 1] = name .. ": " .. trim(f) end
  end
  return found
end

local function exists(path) return lfs.attributes(path, "mode") ~= nil end

local function image(srv, id) return srv.dataDir .. "/disks/" .. id .. ".img" end

-- the KiB an image holds on the host's disk
local function image_kib(srv, id)
  return tonumber((sh("du -k " .. mastra.quote(image(srv, id))):match("^(%d+)")))
end

-- fn(disk, keep) with a tmpfs of size mounted at disk; the server fn
-- hands to keep is closed before the tmpfs is unmounted
local function on_small_disk(size, fn)
  local disk = platform.tmpdir()
  local out, mounted = sh(("mount -t tmpfs -o size=%s mastra-quota-disk %s")
    :format(size, mastra.quote(disk)))
  assert(mounted, out)
  local srv
  local ok, err = pcall(fn, disk, function(s) srv = s end)
  if srv then srv:close() end
  util.wait_until(function() return #loops(disk) == 0 end, 5000)
  sh("umount " .. mastra.quote(disk))
  platform.rm_rf(disk)
  assert(ok, err)
end

describe("a disk and inode quota per sandbox", function()
  if not util.is_root() then
    pending("a sandbox's own disk is a loop device and a mount: needs root; skipped")
    return
  end

  describe("on one server", function()
    local srv
    setup(function() srv = serve() end)
    teardown(function() if srv then srv:close() end end)

    it("the inspector's health says the disk's settings", function()
      local h = srv:curl("GET", srv.info.inspector .. "api/health").json
      assert.are.same({ maxBytes = 64 * 1024 * 1024, inodes = 2000, reserve = true },
        h.sandboxDisk)
    end)

    it("a writer past its disk gets ENOSPC; a neighbour writes, runs and the"
      .. " server answers", function()
      local a, b = create(srv), create(srv)
      -- its own file system at its tree, of the flag's size
      assert.are.equal(1, #mounts(srv.dataDir .. "/sandboxes/" .. a.id .. " "))
      assert.is_true(exists(image(srv, a.id)))
      local w = exec(srv, a.id, "dd if=/dev/zero of=/workspace/f bs=1M count=200")
      assert.are_not.equal(0, w.exitCode)
      assert.matches("No space left", w.stderr)
      -- at most its disk's size was written, on the host too
      local size = tonumber(trim(run(srv, a.id, "stat -c %s /workspace/f")))
      assert.is_true(size < 64 * 1024 * 1024, "wrote " .. size)
      assert.are.equal("ok\n", run(srv, b.id,
        "dd if=/dev/zero of=/workspace/g bs=1M count=8 2>/dev/null && sync && echo ok"))
      assert.are.equal("8388608\n", run(srv, b.id, "stat -c %s /workspace/g"))
      assert.are.equal("hi\n", run(srv, b.id, "echo hi"))
      assert.are.equal(200, srv:json("GET", P .. "/sandbox/" .. a.id).status)
      -- the full one still runs commands, and has room once it deletes
      assert.are.equal("ok\n", run(srv, a.id, "rm /workspace/f && sync && echo ok"))
      -- reserved (--sandbox-disk-reserve's default): the image holds its
      -- whole size on the host, before and after
      assert.is_true(image_kib(srv, a.id) >= 64 * 1024, image_kib(srv, a.id) .. " KiB")
      assert.is_true(image_kib(srv, b.id) >= 64 * 1024, image_kib(srv, b.id) .. " KiB")
      destroy(srv, a.id)
      destroy(srv, b.id)
    end)

    it("a writer past its inodes gets ENOSPC part way; a neighbour makes files",
      function()
      local a, b = create(srv), create(srv)
      local w = exec(srv, a.id, "mkdir /workspace/many && cd /workspace/many && i=0;"
        .. " while [ $i -lt 5000 ]; do true > f$i || { echo made $i; exit 1; }; i=$((i+1)); done")
      assert.are_not.equal(0, w.exitCode)
      assert.matches("No space left", w.stderr)
      local made = tonumber(w.stdout:match("made (%d+)"))
      assert.is_true(made ~= nil and made > 1000 and made < 2000,
        "made " .. tostring(made) .. ": " .. w.stdout .. w.stderr)
      assert.are.equal("300\n", run(srv, b.id, "mkdir /workspace/few && cd /workspace/few"
        .. " && i=0; while [ $i -lt 300 ]; do true > f$i; i=$((i+1)); done; ls | wc -l"))
      destroy(srv, a.id)
      destroy(srv, b.id)
    end)

    it("a checkpoint round trip works with the image", function()
      local sb = create(srv, { id = "quota-ckpt", environmentId = "env" })
      run(srv, sb.id, "mkdir -p /workspace/d && echo one > /workspace/d/a"
        .. " && head -c 1048576 /dev/urandom > /workspace/d/b && md5sum /workspace/d/b"
        .. " > /workspace/sum")
      destroy(srv, sb.id)
      local again = create(srv, { id = "quota-ckpt", environmentId = "env" })
      assert.are.equal(true, again.restoredFromCheckpoint)
      assert.are.equal("one\n", run(srv, again.id, "cat /workspace/d/a"))
      run(srv, again.id, "md5sum -c /workspace/sum")
      -- restored into a disk of its own
      assert.are.equal(1, #mounts(srv.dataDir .. "/sandboxes/" .. again.id .. " "))
      assert.is_true(exists(image(srv, again.id)))
      destroy(srv, again.id)
    end)

    it("a destroy leaves no mount, loop device or image", function()
      local sb = create(srv)
      run(srv, sb.id, "echo x > /workspace/x")
      local img = image(srv, sb.id)
      assert.are.equal(1, #loops(sb.id))
      destroy(srv, sb.id)
      assert.are.same({}, mounts(sb.id))
      assert.is_false(exists(img))
      -- the device goes with the file system's last user, the sandbox's
      -- own mount namespace
      assert.is_true(util.wait_until(function() return #loops(sb.id) == 0 end, 5000),
        table.concat(loops(sb.id), "\n"))
    end)

    it("builds a template without a disk of its own; its sandboxes, warm ones"
      .. " too, have theirs", function()
      local t = mastra.Template.new()
        :runCmd("mkdir -p /opt/app && echo built > /opt/app/ready.txt")
      local r = t:build(srv:sandboxOptions())
      assert.are.equal("ready", r.status, srv.stderrTail)
      local function check(sb)
        assert.are.equal("built\n", sb:executeCommand("cat /opt/app/ready.txt").stdout)
        assert.are.equal(1, #mounts(srv.dataDir .. "/sandboxes/" .. sb.sandboxId .. " "))
        local w = sb:executeCommand("dd if=/dev/zero of=/opt/app/f bs=1M count=100")
        assert.are_not.equal(0, w.exitCode)
        assert.matches("No space left", w.stderr)
      end
      local a = srv:startSandbox{ template = t }
      check(a)
      -- the pool warms a member of the template (with its disk), which the
      -- next create takes
      assert.is_true(util.wait_until(function()
        local h = srv:curl("GET", srv.info.inspector .. "api/health").json
        local tpl = h and h.warmPool and h.warmPool.templates or {}
        return tpl[1] ~= nil and tpl[1].ready == 1
      end, 10000), srv.stderrTail)
      local b = srv:startSandbox{ template = t }
      check(b)
      a:destroy()
      b:destroy()
    end)

    it("a sparse file past the limit is captured and restored sparse", function()
      local sb = create(srv, { id = "quota-sparse", environmentId = "env" })
      run(srv, sb.id, "truncate -s 10G /workspace/big && printf end >> /workspace/big")
      destroy(srv, sb.id)
      local again = create(srv, { id = "quota-sparse", environmentId = "env" })
      assert.are.equal(true, again.restoredFromCheckpoint)
      local out = run(srv, again.id, "stat -c %s /workspace/big; tail -c 3 /workspace/big; echo")
      assert.are.equal(tostring(10 * 1024 * 1024 * 1024 + 3) .. "\nend\n", out)
      destroy(srv, again.id)
    end)
  end)

  it("the server's exit unmounts; the next start mounts a live sandbox's disk"
    .. " again, and one after kill -9 adopts it", function()
    local dir = platform.tmpdir() -- outlives the servers' scratch
    local opts = { dataDir = dir .. "/data", tokenFile = dir .. "/token" }
    local srv, again, third = serve(opts), nil, nil
    local ok, err = pcall(function()
      local sb = create(srv)
      run(srv, sb.id, "echo kept > /workspace/kept")
      srv:stop()
      assert.are.same({}, mounts(opts.dataDir))
      assert.is_true(util.wait_until(function() return #loops(opts.dataDir) == 0 end, 5000),
        table.concat(loops(opts.dataDir), "\n"))
      assert.is_true(exists(opts.dataDir .. "/disks/" .. sb.id .. ".img"))
      again = serve(opts)
      assert.are.equal("kept\n", run(again, sb.id, "cat /workspace/kept"))
      assert.are.equal(1, #mounts(opts.dataDir .. "/sandboxes/" .. sb.id .. " "))
      again:kill9()
      -- the image of no live sandbox (a server killed between a create's
      -- image and its record) and an empty one of other flags: swept
      local stale = opts.dataDir .. "/disks/sbx_000000000000000000000000.img"
      local other = opts.dataDir .. "/disks/empty-1-1.img"
      platform.writeFile(stale, "x")
      platform.writeFile(other, "x")
      -- a killed server's mounts stay (the pool's too) until the next start
      third = serve(opts)
      assert.is_false(exists(stale))
      assert.is_false(exists(other))
      assert.is_true(exists(opts.dataDir .. "/disks/" .. sb.id .. ".img"))
      assert.are.equal("kept\n", run(third, sb.id, "cat /workspace/kept"))
      assert.are.equal(1, #mounts(opts.dataDir .. "/sandboxes/" .. sb.id .. " "))
      -- no mount left of the killed server's warm pool: the new one's only
      for _, line in ipairs(mounts(opts.dataDir .. "/pool/")) do
        assert.matches(" /dev/loop", line)
      end
      assert.are.equal(2, #mounts(opts.dataDir .. "/pool/"))
      destroy(third, sb.id)
      third:stop()
      assert.are.same({}, mounts(opts.dataDir))
      assert.is_true(util.wait_until(function() return #loops(opts.dataDir) == 0 end, 5000),
        table.concat(loops(opts.dataDir), "\n"))
    end)
    for _, s in ipairs{ third, again, srv } do if s then s:close() end end
    platform.rm_rf(dir)
    assert(ok, err)
  end)

  it("a restore whose checkpoint does not fit in the disk answers 507 and"
    .. " leaves nothing", function()
    local dir = platform.tmpdir()
    local opts = { dataDir = dir .. "/data", tokenFile = dir .. "/token" }
    local before, after
    local ok, err = pcall(function()
      -- made without a quota: 80 MiB of data
      before = platform.start{ dataDir = opts.dataDir, tokenFile = opts.tokenFile,
        args = { "--driver", "namespaces", "--warm-pool", "0" } }
      local sb = create(before, { id = "quota-big", environmentId = "env" })
      run(before, sb.id, "head -c 83886080 /dev/urandom > /workspace/big")
      destroy(before, sb.id)
      before:stop()
      after = serve{ dataDir = opts.dataDir, tokenFile = opts.tokenFile,
        args = { "--warm-pool", "0" } }
      local r = after:json("POST", P .. "/sandbox", { id = "quota-big", environmentId = "env" })
      assert.are.equal(507, r.status, r.body)
      assert.matches("insufficient_storage", r.body)
      assert.is_true(util.wait_until(function()
        return #mounts(opts.dataDir .. "/sandboxes/") == 0 and #loops(opts.dataDir) == 0
      end, 5000), table.concat(mounts(opts.dataDir .. "/sandboxes/"), "\n"))
      for name in lfs.dir(opts.dataDir .. "/disks") do
        assert.is_nil(name:match("^sbx_"), name)
      end
      after:stop()
    end)
    for _, s in ipairs{ after, before } do if s then s:close() end end
    platform.rm_rf(dir)
    assert(ok, err)
  end)

  it("a create without room for its image answers 507 and leaves nothing", function()
    on_small_disk("160m", function(disk, keep)
      local srv = serve{ dataDir = disk .. "/data", args = { "--warm-pool", "0" } }
      keep(srv)
      local first = create(srv)
      sh("dd if=/dev/zero of=" .. mastra.quote(disk .. "/filler") .. " bs=1M")
      local r = srv:json("POST", P .. "/sandbox", { environmentId = "env" })
      assert.are.equal(507, r.status, r.body)
      assert.matches("insufficient_storage", r.body)
      -- only the first sandbox's image, mount and loop device
      local imgs = {}
      for name in lfs.dir(srv.dataDir .. "/disks") do
        if name:match("^sbx_.*%.img$") then imgs[#imgs + 1] = name end
      end
      assert.are.same({ first.id .. ".img" }, imgs)
      assert.are.equal(1, #mounts(srv.dataDir .. "/sandboxes/"))
      assert.are.equal(1, #loops(srv.dataDir))
      os.remove(disk .. "/filler")
      assert.are.equal(201, srv:json("POST", P .. "/sandbox", { environmentId = "env" }).status)
      srv:stop()
      assert.are.same({}, mounts(disk .. "/"))
    end)
  end)

  it("reserved, a sandbox within its limit keeps its writes when the data disk"
    .. " fills; a create without room for a whole disk answers 507", function()
    on_small_disk("112m", function(disk, keep)
      local srv = serve{ dataDir = disk .. "/data", args = { "--warm-pool", "0" } }
      keep(srv)
      local sb = create(srv)
      -- room for one disk of 64M, not two: the second is refused whole
      local r = srv:json("POST", P .. "/sandbox", { environmentId = "env" })
      assert.are.equal(507, r.status, r.body)
      assert.matches("no room for a sandbox's disk", r.body)
      -- the data disk fills up under the sandbox, which then writes 48 MB
      sh("dd if=/dev/zero of=" .. mastra.quote(disk .. "/filler") .. " bs=1M")
      assert.are.equal("ok\n", run(srv, sb.id, "head -c 50331648 /dev/urandom > /workspace/f"
        .. " && md5sum /workspace/f > /workspace/sum && sync && echo ok"))
      -- read back past the page cache: every block was on the data disk
      sh("sync; echo 3 > /proc/sys/vm/drop_caches")
      run(srv, sb.id, "md5sum -c /workspace/sum")
      os.remove(disk .. "/filler")
      destroy(srv, sb.id)
      srv:stop()
    end)
  end)

  it("--sandbox-disk-reserve off: the image is sparse and gives back what is"
    .. " deleted", function()
    local srv = serve{ args = { "--sandbox-disk-reserve", "off", "--warm-pool", "0" } }
    local ok, err = pcall(function()
      local sb = create(srv)
      assert.is_true(image_kib(srv, sb.id) < 16 * 1024, image_kib(srv, sb.id) .. " KiB")
      run(srv, sb.id, "head -c 33554432 /dev/zero > /workspace/f && sync")
      assert.is_true(image_kib(srv, sb.id) >= 32 * 1024, image_kib(srv, sb.id) .. " KiB")
      -- mounted with discard: the freed blocks are punched out again
      run(srv, sb.id, "rm /workspace/f && sync")
      assert.is_true(util.wait_until(function()
        return image_kib(srv, sb.id) < 16 * 1024
      end, 5000), image_kib(srv, sb.id) .. " KiB")
      destroy(srv, sb.id)
    end)
    srv:close()
    assert(ok, err)
  end)

  it("a create without a loop device answers 500 with the reason and leaves"
    .. " nothing", function()
    local dir = platform.tmpdir()
    -- the server in a mount namespace of its own whose /dev/loop-control
    -- is /dev/null: its LOOP_CTL_GET_FREE fails (ENOTTY)
    local wrap = dir .. "/wrap"
    platform.writeFile(wrap, "#!/bin/sh\nexec unshare -m --propagation private sh -c"
      .. " 'mount --bind /dev/null /dev/loop-control && exec \"$0\" \"$@\"' "
      .. mastra.quote(platform.binary()) .. ' "$@"\n')
    sh("chmod +x " .. mastra.quote(wrap))
    local srv
    local ok, err = pcall(function()
      srv = serve{ dataDir = dir .. "/data", tokenFile = dir .. "/token", bin = wrap,
        args = { "--warm-pool", "0" } }
      local r = srv:json("POST", P .. "/sandbox", { environmentId = "env" })
      assert.are.equal(500, r.status, r.body)
      assert.matches("no free loop device", r.body)
      for name in lfs.dir(srv.dataDir .. "/disks") do
        assert.is_nil(name:match("^sbx_"), name)
      end
      for name in lfs.dir(srv.dataDir .. "/sandboxes") do
        assert.is_true(name == "." or name == "..", name)
      end
      srv:stop()
    end)
    if srv then srv:close() end
    platform.rm_rf(dir)
    assert(ok, err)
  end)

  it("refuses the flags where they cannot work, saying why", function()
    local bin = mastra.quote(platform.binary())
    local dir = platform.tmpdir()
    local function start(args)
      return sh("timeout 20 " .. bin .. " serve --listen 127.0.0.1:0 --data-dir "
        .. mastra.quote(dir .. "/data") .. " --token-file " .. mastra.quote(dir .. "/token")
        .. " " .. args .. " </dev/null")
    end
    finally(function() platform.rm_rf(dir) end)
    local cases = {
      { "--driver process --sandbox-disk-max 64M", "need the namespaces driver, run as root" },
      { "--driver namespaces --sandbox-disk-max 1X", "%-%-sandbox%-disk%-max wants a size" },
      { "--driver namespaces --sandbox-disk-max 1M",
        "%-%-sandbox%-disk%-max wants a size from 16M" },
      { "--driver namespaces --sandbox-inodes-max many",
        "%-%-sandbox%-inodes%-max wants a number" },
      { "--driver namespaces --sandbox-inodes-max 2000",
        "%-%-sandbox%-inodes%-max needs %-%-sandbox%-disk%-max" },
      { "--driver namespaces --sandbox-disk-reserve off",
        "%-%-sandbox%-disk%-reserve needs %-%-sandbox%-disk%-max" },
      { "--driver namespaces --sandbox-disk-max 64M --sandbox-disk-reserve maybe",
        "%-%-sandbox%-disk%-reserve wants on or off" },
    }
    for _, c in ipairs(cases) do
      local out, ok = start(c[1])
      assert.is_false(ok, c[1])
      assert.matches(c[2], out)
    end
  end)
end)
