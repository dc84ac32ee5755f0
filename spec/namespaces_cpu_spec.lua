-- The CPU cap of a namespaces sandbox (issue 30, point 6; docs/platform.md
-- "What a `namespaces` sandbox is"): --sandbox-cpu-max N sets its cgroup's
-- CFS quota to N CPUs (the default: half the host's, at least one; 0: no
-- cap), and a spinner in a sandbox capped at 0.2 CPUs gets no more than
-- that, whatever else runs. Skipped where the server has no cpu cgroup
-- (without root and no delegation).
local platform = require "spec.support.platform"
local util = require "spec.support.util"

-- the directory of sandbox id's cgroup in the cpu hierarchy (v1) or the
-- unified one (v2), or nil
local function cgroup_dir(srv, id)
  local r = srv:sh("find /sys/fs/cgroup/cpu/mastra-platform /sys/fs/cgroup/mastra-platform"
    .. " -maxdepth 2 -type d -name " .. id .. " 2>/dev/null | head -1")
  local d = util.trim(r.stdout)
  return d ~= "" and d or nil
end

-- the cap as "QUOTA PERIOD" (v1's two files, or v2's cpu.max)
local function cap(srv, dir)
  local r = srv:sh("if [ -e " .. dir .. "/cpu.max ]; then cat " .. dir .. "/cpu.max; else"
    .. " echo $(cat " .. dir .. "/cpu.cfs_quota_us) $(cat " .. dir .. "/cpu.cfs_period_us); fi")
  return util.trim(r.stdout)
end

describe("the namespaces driver's CPU cap", function()
  local srv

  after_each(function()
    if srv then srv:close() end
    srv = nil
  end)

  local function start(args)
    srv = platform.start{ args = args }
    local sb = srv:startSandbox()
    assert.are.equal(0, sb:executeCommand("true").exitCode)
    local dir = cgroup_dir(srv, sb.sandboxId)
    return sb, dir
  end

  it("caps a sandbox at --sandbox-cpu-max CPUs, and a spinner gets no more", function()
    local sb, dir = start{ "--driver", "namespaces", "--sandbox-cpu-max", "0.2" }
    if dir == nil then
      pending("no cpu cgroup for the sandboxes here")
      return
    end
    assert.matches("^20000 100000$", cap(srv, dir))
    -- a spinner for 1.5 s of wall time wants 1.5 CPU-seconds and may have
    -- 0.3: the kernel holds it back (throttles its cgroup) for about 1.2 s,
    -- where an uncapped one is never held back
    local r = sb:executeCommand("timeout 1.5 sh -c 'while :; do :; done'; true",
      nil, { timeout = 10000 })
    assert.are.equal(0, r.exitCode, r.stderr)
    local stat = srv:sh("cat " .. dir .. "/cpu.stat").stdout
    local ns = tonumber(stat:match("throttled_time (%d+)"))           -- v1
    local us = tonumber(stat:match("throttled_usec (%d+)"))           -- v2
    local held = ns and ns / 1e9 or us and us / 1e6
    assert.is_not_nil(held, stat)
    assert.is_true(held > 0.5, ("the capped spinner was held back %.2f s only: %s")
      :format(held, stat))
    sb:destroy()
  end)

  it("takes half the host's CPUs (at least one) by default, and 0 takes the cap off",
    function()
      local sb, dir = start{ "--driver", "namespaces" }
      if dir == nil then
        pending("no cpu cgroup for the sandboxes here")
        return
      end
      local n = tonumber(util.trim(srv:sh("nproc").stdout))
      local want = n >= 4 and n // 2 or 1
      assert.are.equal(("%d 100000"):format(want * 100000), cap(srv, dir))
      sb:destroy()
      srv:close()
      sb, dir = start{ "--driver", "namespaces", "--sandbox-cpu-max", "0" }
      assert.matches("^%-1 100000$", cap(srv, dir):gsub("^max", "-1"))
      sb:destroy()
    end)

  it("refuses a cap that is not a number of CPUs, saying what it wants", function()
    local sh = srv and srv.sandbox
    local mastra = require "mastra"
    local ls = sh or mastra.LocalSandbox.new{}
    local r = ls:executeCommand(platform.binary(), { "serve", "--sandbox-cpu-max", "lots" })
    if not sh then ls:destroy() end
    assert.are.equal(2, r.exitCode)
    assert.matches("%-%-sandbox%-cpu%-max wants a number of CPUs", r.stderr)
  end)
end)
