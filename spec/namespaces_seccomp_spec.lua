-- The syscall filter of every namespaces sandbox process (issue 30 item 3;
-- docs/platform.md, "The syscall filter"). spec/support/sysprobe.c
-- (MASTRA_SYSPROBE, copied in through stdin) tries each denied call from
-- inside a sandbox, through each way in: a running sandbox's command with
-- root (__ns-enter), a restored sandbox's first command (__ns-exec, which
-- waits for its init), a background process, and a server without root
-- (__ns-exec always); the init itself runs filtered. Each denied call fails
-- with its errno, --sandbox-nested-namespaces and --sandbox-io-uring give
-- back what they name, and ordinary work (sh, python3 sockets, fork) works.
-- Skipped without root.
local mastra = require "mastra"
local platform = require "spec.support.platform"
local util = require "spec.support.util"

local trim = util.trim

local sh = util.sh

local function skip_reason()
  local uid = trim(sh("id -u"))
  if uid ~= "0" then
    return "the namespaces driver needs root here (uid " .. uid .. "): skipped"
  end
  return nil
end

-- what every sandbox gets by default: the call's errno ("ok": it worked)
local DENIED = {
  vsock = "EAFNOSUPPORT", ["vsock-high"] = "EAFNOSUPPORT", ["vsock-dgram"] = "EAFNOSUPPORT",
  keyctl = "EPERM", add_key = "EPERM", request_key = "EPERM",
  bpf = "EPERM", userfaultfd = "EPERM", perf_event_open = "EPERM",
  init_module = "EPERM", finit_module = "EPERM", delete_module = "EPERM",
  kexec_load = "EPERM", kexec_file_load = "EPERM",
  io_uring = "EPERM",
  ["unshare-user"] = "EPERM", ["unshare-net"] = "EPERM", ["unshare-mount"] = "EPERM",
  ["clone-user"] = "EPERM", clone3 = "ENOSYS",
  fork = "ok", inet = "ok", unix = "ok",
}

local function copy(t, over)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  for k, v in pairs(over or {}) do out[k] = v end
  return out
end

-- with root, where each sandbox has host uids of its own (docs/platform.md,
-- "Host uids"), the keyring calls are the sandbox's own business; where the
-- server says every sandbox has the same ones, they are denied
local SHARED_UIDS = "every sandbox has the same host uid"
local OWN_KEYRINGS = { keyctl = "ok", add_key = "ok", request_key = "ENOKEY" }
local function denied_by(srv, over)
  local t = copy(DENIED, over)
  if srv.stderrTail:find(SHARED_UIDS, 1, true) then return t end
  return copy(t, OWN_KEYRINGS)
end

-- "name result" lines -> {name = result}
local function parse(text)
  local out = {}
  for name, result in text:gmatch("([%w_%-]+) ([^\n]+)\n") do out[name] = result end
  return out
end

local function check(want, text, where)
  local got = parse(text)
  for name, result in pairs(want) do
    assert.are.equal(result, got[name], where .. ": " .. name .. " (all: " .. text .. ")")
  end
end

local function probe_code()
  local bin = os.getenv("MASTRA_SYSPROBE")
  assert(bin and bin ~= "", "MASTRA_SYSPROBE is not set: it must name"
    .. " build/spec-support/sysprobe (CTest sets it)")
  return assert(util.read_file(bin), bin)
end

local function run(sb, cmd, opts)
  return sb:executeCommand(cmd, nil, opts)
end

local function install(sb)
  local r = run(sb, "cat > /workspace/sysprobe && chmod 755 /workspace/sysprobe", {
    stdin = probe_code() })
  assert.are.equal(0, r.exitCode, r.stderr)
end

-- the seccomp mode and no_new_privs of a process (/proc/PID/status, in the sandbox)
local function mode_of(sb, pid)
  local r = run(sb, "grep -E '^(Seccomp|NoNewPrivs):' /proc/" .. pid .. "/status")
  assert.are.equal(0, r.exitCode, r.stderr)
  return r.stdout:gsub("%s+", " ")
end

local FILTERED = "NoNewPrivs: 1 Seccomp: 2 "

describe("the namespaces driver's syscall filter", function()
  local reason = skip_reason()
  if reason then
    pending(reason)
    return
  end

  local srv
  setup(function()
    srv = platform.start{ args = { "--driver", "namespaces" } }
  end)
  teardown(function()
    if srv then srv:close() end
  end)

  it("denies each call to a running sandbox's commands (__ns-enter) and its"
    .. " init, and leaves ordinary work alone", function()
    local sb = srv:startSandbox()
    install(sb)
    local r = run(sb, "/workspace/sysprobe")
    assert.are.equal(0, r.exitCode, r.stderr)
    check(denied_by(srv), r.stdout, "a command")
    assert.are.equal(FILTERED, mode_of(sb, "self"))
    -- the init, pid 1
    assert.are.equal(FILTERED, mode_of(sb, "1"))
    -- ordinary work: a shell pipeline, python3's sockets (a server and a
    -- client over loopback), its fork and threads
    assert.are.equal("a\n", run(sb, "echo a | cat").stdout)
    r = run(sb, "python3 -c " .. mastra.quote(table.concat({
      "import os, socket, threading",
      "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()",
      "t = threading.Thread(target=lambda: s.accept()[0].sendall(b'hi')); t.start()",
      "c = socket.create_connection(s.getsockname()); print(c.recv(2).decode()); t.join()",
      "pid = os.fork()",
      "os._exit(7) if pid == 0 else print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))",
    }, "\n")))
    assert.are.equal(0, r.exitCode, r.stderr)
    assert.are.equal("hi\n7\n", r.stdout)
    sb:destroy()
  end)

  it("denies each call to a background process", function()
    local sb = srv:startSandbox()
    install(sb)
    local out = {}
    local h = sb.processes:spawn("/workspace/sysprobe", {
      onStdout = function(s) out[#out + 1] = s end })
    local res = h:wait()
    assert.are.equal(0, res.exitCode, res.stderr)
    check(denied_by(srv), table.concat(out), "a background process")
    sb:destroy()
  end)

  it("denies each call to a restored sandbox's first command (__ns-exec)", function()
    local id = ("seccomp-%d-%d"):format(os.time(), math.random(1e9))
    local sb = srv:startSandbox{ id = id }
    install(sb)
    sb:destroy()
    sb:start()
    -- its init starts with this command, which waits for it
    local r = run(sb, "/workspace/sysprobe; grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status")
    assert.are.equal(0, r.exitCode, r.stderr)
    check(denied_by(srv), r.stdout, "a restored sandbox's first command")
    assert.matches("NoNewPrivs:%s+1", r.stdout)
    assert.matches("Seccomp:%s+2", r.stdout)
    sb:destroy{ keepCheckpoint = false }
  end)
end)

describe("the syscall filter's flags", function()
  local reason = skip_reason()
  if reason then
    pending(reason)
    return
  end

  it("--sandbox-nested-namespaces on and --sandbox-io-uring on give back what they"
    .. " name", function()
    local srv = platform.start{ args = { "--driver", "namespaces",
      "--sandbox-nested-namespaces", "on", "--sandbox-io-uring", "on" } }
    local ok, err = pcall(function()
      local sb = srv:startSandbox()
      install(sb)
      local r = run(sb, "/workspace/sysprobe")
      assert.are.equal(0, r.exitCode, r.stderr)
      check(denied_by(srv, { ["unshare-user"] = "ok", ["unshare-net"] = "ok",
        ["unshare-mount"] = "ok", ["clone-user"] = "ok", clone3 = "ok", io_uring = "ok" }),
        r.stdout, "with both flags")
      sb:destroy()
    end)
    srv:close()
    assert(ok, err)
  end)

  it("rejects a value other than on or off", function()
    local r = mastra.LocalSandbox.new{}
    r:start()
    local res = r:executeCommand(mastra.quote(platform.binary())
      .. " serve --sandbox-io-uring yes --data-dir /nonexistent-mastra-dir")
    r:destroy()
    assert.are_not.equal(0, res.exitCode)
    assert.matches("%-%-sandbox%-io%-uring wants on or off", res.stderr)
  end)
end)

describe("the syscall filter without root", function()
  local reason = skip_reason()
  local UID = 48000 + (tonumber(tostring(os.time()):sub(-3)) or 0)
  if reason == nil then
    local out, ok = sh(("setpriv --reuid=%d --regid=%d --clear-groups unshare -Urnmp --fork true")
      :format(UID, UID))
    if not ok then reason = "no unprivileged user namespaces (" .. trim(out) .. "): skipped" end
  end
  if reason then
    pending(reason)
    return
  end

  local scratch = platform.tmpdir()
  local base = scratch .. "/base"
  local srv
  setup(function()
    assert(select(2, sh(("chown %d:%d %s"):format(UID, UID, mastra.quote(scratch)))))
    local out, ok = sh(("setpriv --reuid=%d --regid=%d --clear-groups %s base build --minimal"
      .. " --base %s"):format(UID, UID, mastra.quote(platform.binary()), mastra.quote(base)))
    assert(ok, out)
    srv = platform.start{ user = UID, base = false,
      args = { "--driver", "namespaces", "--base", base } }
  end)
  teardown(function()
    if srv then srv:close() end
    platform.rm_rf(scratch)
  end)

  it("denies each call to its commands (__ns-exec) and its init", function()
    local sb = srv:startSandbox()
    install(sb)
    local r = run(sb, "/workspace/sysprobe")
    assert.are.equal(0, r.exitCode, r.stderr)
    -- one id for every sandbox without root: the keyring calls are denied
    assert.is_truthy(srv.stderrTail:find(SHARED_UIDS, 1, true), srv.stderrTail)
    check(DENIED, r.stdout, "a command without root")
    assert.are.equal(FILTERED, mode_of(sb, "self"))
    assert.are.equal(FILTERED, mode_of(sb, "1"))
    assert.are.equal("a\n", run(sb, "echo a | cat").stdout)
    sb:destroy()
  end)
end)
