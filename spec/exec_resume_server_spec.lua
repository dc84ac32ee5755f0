-- The server side of exec-resume/1 (issue 27; docs/platform.md "Resumable
-- execs"): init_exec with an exec_id is recorded before its spawn, a
-- repeated start attaches and spawns nothing, another request under the
-- same id is refused, a closed socket detaches instead of killing, a
-- reattach replays from the offsets it names with each frame's offset,
-- the exit carries the totals, a detach timeout abandons the command, and
-- a server killed with -9 answers exec_lost after its restart. An
-- init_exec without exec_id keeps the old behaviour. Against a real
-- mastra-platform over real sockets, with the ws-exec test client
-- (spec/support/ws-exec.c) as the raw WebSocket client.
local platform = require "spec.support.platform"
local mastra = require "mastra"

local P = "/v1/railway/projects/proj"

-- The frames file of ws-exec (--frames): {texts = {decoded...}, binary =
-- {{tag, offset, length}...}, byType = {type = first decoded}}
local function read_frames(path)
  local out = { texts = {}, binary = {}, byType = {} }
  for line in (platform.readFile(path) or ""):gmatch("[^\n]+") do
    local kind, rest = line:match("^(%u) (.*)$")
    if kind == "T" then
      local v = platform.decode(rest)
      out.texts[#out.texts + 1] = v
      if type(v) == "table" and v.type and out.byType[v.type] == nil then out.byType[v.type] = v end
    elseif kind == "B" then
      local tag, off, len = rest:match("^(%d+) (%d+) (%d+)$")
      out.binary[#out.binary + 1] =
        { tag = tonumber(tag), offset = tonumber(off), length = tonumber(len) }
    end
  end
  return out
end

-- the frames of one stream (tag 17 stdout, 19 stderr) are contiguous from
-- `from`; returns the end
local function check_contiguous(frames, tag, from)
  local at = from
  for _, f in ipairs(frames.binary) do
    if f.tag == tag then
      assert.are.equal(at, f.offset, "a frame of tag " .. tag .. " is not where the last one ended")
      assert.is_true(f.length <= 32768 - 9, "an offset frame is over 32 KiB")
      at = f.offset + f.length
    end
  end
  return at
end

local nframes = 0

-- run ws-exec against srv over lease; opts as
-- platform.wsExecCommandLine's plus `id` (a fresh start's exec_id),
-- `attach` (a reattach's name), `resume` (an attach's default: 0 and 0,
-- the extension's offset frames; `plain` sends none, as Railway's SDK)
-- and `detach`; adds .frames
local function wsrun(srv, lease, dir, command, opts)
  opts = opts or {}
  nframes = nframes + 1
  local frames = dir .. "/frames-" .. nframes
  local init = opts.initJson or {}
  if opts.id then init.exec_id = opts.id end
  if opts.attach then init.durable_session_name = opts.attach end
  if opts.attach and opts.resume == nil and not opts.plain then
    opts.resume = { stdout = 0, stderr = 0 }
  end
  if opts.resume then init.resume = opts.resume end
  if opts.detach then init.detach_timeout_ms = opts.detach end
  opts.initJson = next(init) and init or nil
  opts.frames = frames
  local r = srv:wsExec(lease, command, opts)
  r.frames = read_frames(frames)
  return r
end

-- fn(srv, sb, lease, dir) on a server of its own started with args, with
-- a sandbox, its lease and a scratch directory; all three go afterwards,
-- whatever fn raised (raised again then)
local function with_own_server(args, fn)
  local dir = platform.tmpdir()
  local srv = platform.start{ args = args }
  local sb
  local ok, err = pcall(function()
    sb = srv:startSandbox{}
    fn(srv, sb, srv:lease(P, sb.sandboxId), dir)
  end)
  if sb then pcall(sb.destroy, sb) end
  srv:close()
  platform.rm_rf(dir)
  assert(ok, err)
end

describe("exec-resume/1 on the server", function()
  local srv, sb, lease, scratch

  local function run(command, opts)
    return wsrun(srv, lease, scratch, command, opts)
  end

  local function count(name)
    local r = srv:wsExec(lease, "cat " .. name .. " 2>/dev/null | wc -l")
    return tonumber(r.stdout:match("%d+"))
  end

  setup(function()
    scratch = platform.tmpdir()
    srv = platform.start{}
    sb = srv:startSandbox{}
    lease = srv:lease(P, sb.sandboxId)
  end)
  teardown(function()
    if sb then pcall(sb.destroy, sb) end
    if srv then srv:close() end
    if scratch then platform.rm_rf(scratch) end
  end)

  it("advertises exec-resume/1 in the lease's capabilities", function()
    local caps = {}
    for _, c in ipairs(lease.capabilities or {}) do caps[c] = true end
    assert.is_true(caps["exec-resume/1"])
    assert.is_true(caps.stdin)
  end)

  it("without exec_id: no new frame, and a close before the exit kills the command", function()
    local r = run("echo started; sleep 3; echo late > late.txt", { closeAfterMs = 500 })
    assert.are.equal("started\n", r.stdout)
    assert.are.same({}, r.frames.binary) -- tags 1/3 only
    assert.is_nil(r.frames.byType.durable_session)
    assert.is_nil(r.frames.byType.attached)
    mastra.sleep(3500)
    assert.are.equal(0, count("late.txt"))
  end)

  it("a fresh start: durable_session, attached, offset frames, exit with totals", function()
    local r = run("printf 'hello\\n'; printf 'oops\\n' >&2; printf 'world\\n'",
      { id = "fresh-1" })
    assert.are.equal(0, r.exitCode)
    assert.are.equal("hello\nworld\n", r.stdout)
    assert.are.equal("oops\n", r.stderr)
    local f = r.frames
    assert.are.equal("fresh-1", f.byType.durable_session.data.durable_session_name)
    assert.are.equal("fresh-1", f.byType.attached.data.exec_id)
    assert.are.equal(0, f.byType.attached.data.stdout.start)
    assert.are.equal(12, check_contiguous(f, 0x11, 0))
    assert.are.equal(5, check_contiguous(f, 0x13, 0))
    local exit = f.byType.exit.data
    assert.are.equal(0, exit.exit_code)
    assert.are.equal("exited", exit.reason)
    assert.are.equal(12, exit.stdout_total)
    assert.are.equal(5, exit.stderr_total)
    assert.are.equal(1000, r.summary.close)
  end)

  it("the same id and request again attaches: nothing runs twice", function()
    local cmd = "echo run >> count-again; echo out"
    local a = run(cmd, { id = "again-1" })
    local b = run(cmd, { id = "again-1" })
    assert.are.equal("out\n", a.stdout)
    assert.are.equal("out\n", b.stdout) -- replayed from the spool
    assert.are.equal("exited", b.frames.byType.attached.data.state)
    assert.are.equal(1, count("count-again"))
  end)

  it("100 concurrent starts with one id spawn once; the last attach holds the session", function()
    local cmd = "echo run >> count-100; sleep 1; seq 1 2000"
    local hs = {}
    for i = 1, 100 do
      hs[i] = srv:wsExecSpawn(lease, cmd, { initJson = { exec_id = "many-1" } })
    end
    local want = {}
    for i = 1, 2000 do want[i] = tostring(i) end
    want = table.concat(want, "\n") .. "\n"
    local finished, superseded = 0, 0
    for i = 1, 100 do
      local h = hs[i]
      h:wait()
      local r = platform.wsResult(h.stdout, h.stderr, h.exitCode)
      if r.exitCode == 0 then
        finished = finished + 1
        assert.are.equal(want, r.stdout, "client " .. i)
      else
        -- each start attached, and the next one took the session over
        assert.are.equal(4001, r.summary.close,
          "client " .. i .. ": " .. table.concat(r.summary.log, "; "))
        superseded = superseded + 1
      end
    end
    assert.is_true(finished >= 1)
    assert.are.equal(100, finished + superseded)
    -- and any of them gets the same bytes by a reattach from 0
    for _ = 1, 3 do
      local r = run(":", { attach = "many-1" })
      assert.are.equal(0, r.exitCode)
      assert.are.equal(want, r.stdout)
    end
    assert.are.equal(1, count("count-100"))
  end)

  it("the same id with another request: exec_id_conflict, close 1008, nothing runs", function()
    local a = run("echo run >> count-conflict; echo first", { id = "conflict-1" })
    assert.are.equal("first\n", a.stdout)
    local b = run("echo run >> count-conflict-2; echo second", { id = "conflict-1" })
    assert.is_nil(b.exitCode)
    assert.are.equal(1008, b.summary.close)
    assert.are.equal("exec_id_conflict", b.frames.byType.error.data.code)
    assert.are.equal("", b.stdout)
    -- a different env is another request too
    local c = run("echo run >> count-conflict; echo first",
      { id = "conflict-1", env = { X = "1" } })
    assert.are.equal("exec_id_conflict", c.frames.byType.error.data.code)
    assert.are.equal(1, count("count-conflict"))
    assert.are.equal(0, count("count-conflict-2"))
  end)

  it("bad ids and fields are refused with a message that names them", function()
    local r = run("true", { id = "../etc" })
    assert.are.equal("invalid_request", r.frames.byType.error.data.code)
    assert.matches("exec_id", r.frames.byType.error.data.message)
    r = run("true", { id = string.rep("a", 129) })
    assert.are.equal("invalid_request", r.frames.byType.error.data.code)
    r = run("true", { id = "ok-id", detach = 3600001 })
    assert.matches("field 'data.detach_timeout_ms' must be an integer from 1 to 3600000",
      r.frames.byType.error.data.message, 1, true)
    r = run("true", { id = "ok-id", initJson = { overflow = "drop" } })
    assert.matches([[field 'data.overflow' must be "block" (the default) or "truncate_head"]],
      r.frames.byType.error.data.message, 1, true)
    -- the HTTP start says the same, of its body's fields
    local bad = srv:json("POST", P .. "/sandbox/" .. sb.sandboxId .. "/execs",
      { command = "true", overflow = "drop" }, { headers = { ["Idempotency-Key"] = "ok-id" } })
    assert.are.equal(400, bad.status)
    assert.matches([[field 'overflow' must be "block"]], bad.json.error.message, 1, true)
    bad = srv:json("POST", P .. "/sandbox/" .. sb.sandboxId .. "/execs",
      { command = "true", detach_timeout_ms = 0 }, { headers = { ["Idempotency-Key"] = "ok-id" } })
    assert.are.equal(400, bad.status)
    assert.matches("field 'detach_timeout_ms' must be an integer from 1", bad.json.error.message,
      1, true)
    r = run("true", { id = "ok-id", resume = { stdout = -1 } })
    assert.matches("resume", r.frames.byType.error.data.message)
    r = run(":", { attach = "never-started" })
    assert.are.equal("exec_not_found", r.frames.byType.error.data.code)
    assert.are.equal(1008, r.summary.close)
    run("true", { id = "reattach-cwd" })
    r = run(":", { attach = "reattach-cwd", cwd = "/tmp" })
    assert.are.equal("invalid_request", r.frames.byType.error.data.code)
    assert.matches("cwd", r.frames.byType.error.data.message)
  end)

  it("a cut detaches; the reattach gets the rest at the right offsets, and the totals", function()
    local cmd = "echo run >> count-cut; seq 1 100000; seq 1 30000 >&2; sleep 1; seq 100001 150000"
    local want_out = {}
    for i = 1, 150000 do want_out[i] = tostring(i) end
    want_out = table.concat(want_out, "\n") .. "\n"
    local want_err = {}
    for i = 1, 30000 do want_err[i] = tostring(i) end
    want_err = table.concat(want_err, "\n") .. "\n"
    local a = run(cmd, { id = "cut-1", cutAfterBytes = 100000 })
    assert.is_nil(a.exitCode)
    assert.matches("cut after", table.concat(a.summary.log, "\n"))
    local held_out = check_contiguous(a.frames, 0x11, 0)
    local held_err = check_contiguous(a.frames, 0x13, 0)
    assert.are.equal(held_out, #a.stdout)
    assert.are.equal(held_err, #a.stderr)
    assert.is_true(held_out + held_err >= 100000)
    assert.is_true(held_out < #want_out)
    local b = run(":", { attach = "cut-1", resume = { stdout = held_out, stderr = held_err } })
    assert.are.equal(0, b.exitCode, table.concat(b.summary.log, "; "))
    local att = b.frames.byType.attached.data
    assert.are.equal("cut-1", att.exec_id)
    check_contiguous(b.frames, 0x11, held_out)
    check_contiguous(b.frames, 0x13, held_err)
    assert.are.equal(want_out, a.stdout .. b.stdout)
    assert.are.equal(want_err, a.stderr .. b.stderr)
    local exit = b.frames.byType.exit.data
    assert.are.equal(#want_out, exit.stdout_total)
    assert.are.equal(#want_err, exit.stderr_total)
    assert.are.equal(1, count("count-cut"))
  end)

  it("seeded cuts: repeated reattaches get each stream whole, once, in order", function()
    local want_out, want_err = {}, {}
    for i = 1, 200000 do want_out[i] = tostring(i) end
    for i = 1, 60000 do want_err[i] = tostring(i) end
    want_out = table.concat(want_out, "\n") .. "\n"
    want_err = table.concat(want_err, "\n") .. "\n"
    local cut = 0 -- seeds whose exec was cut at least once
    for seed = 1, 6 do
      math.randomseed(seed)
      local id = "seeded-" .. seed
      local cmd = "echo run >> count-" .. id .. "; seq 1 200000; seq 1 60000 >&2"
      local got_out, got_err, held = {}, {}, { 0, 0 }
      local r = run(cmd, { id = id, cutAfterBytes = math.random(1, 300000), ack = seed % 2 == 0 })
      local sessions = 1
      while r.exitCode == nil do
        assert.matches("cut after", table.concat(r.summary.log, "\n"))
        got_out[#got_out + 1], got_err[#got_err + 1] = r.stdout, r.stderr
        held[1] = check_contiguous(r.frames, 0x11, held[1])
        held[2] = check_contiguous(r.frames, 0x13, held[2])
        assert.is_true(sessions < 60, "too many sessions")
        r = run(":", { attach = id, resume = { stdout = held[1], stderr = held[2] },
          cutAfterBytes = math.random(1, 300000), ack = seed % 2 == 0 })
        sessions = sessions + 1
      end
      assert.are.equal(0, r.exitCode)
      check_contiguous(r.frames, 0x11, held[1])
      check_contiguous(r.frames, 0x13, held[2])
      got_out[#got_out + 1], got_err[#got_err + 1] = r.stdout, r.stderr
      assert.are.equal(want_out, table.concat(got_out), "stdout of seed " .. seed)
      assert.are.equal(want_err, table.concat(got_err), "stderr of seed " .. seed)
      assert.are.equal(#want_out, r.frames.byType.exit.data.stdout_total)
      assert.are.equal(#want_err, r.frames.byType.exit.data.stderr_total)
      if sessions > 1 then cut = cut + 1 end
      assert.are.equal(1, count("count-" .. id))
    end
    -- a slow server (the sanitizers' build) may end an exec before its
    -- cut point comes: not every seed needs a cut, some must have one
    assert.is_true(cut >= 1, "no seed was cut")
  end)

  it("a new attach supersedes the old socket (4001)", function()
    local h = srv:wsExecSpawn(lease, "echo run >> count-steal; sleep 3; echo end",
      { initJson = { exec_id = "steal-1" } })
    mastra.sleep(700)
    local b = run(":", { attach = "steal-1" })
    h:wait()
    local a = platform.wsResult(h.stdout, h.stderr, h.exitCode)
    assert.are.equal(4001, a.summary.close)
    assert.are.equal("superseded", a.summary.reason)
    assert.are.equal(0, b.exitCode)
    assert.are.equal("end\n", b.stdout)
    assert.are.equal(1, count("count-steal"))
  end)

  it("nobody attached past detach_timeout_ms: TERM, KILL 10 s later; reason abandoned", function()
    local a = run("echo run >> count-ab; sleep 30",
      { id = "abandon-1", detach = 300, closeAfterMs = 300 })
    assert.is_nil(a.exitCode)
    mastra.sleep(1500)
    local b = run(":", { attach = "abandon-1" })
    assert.are.equal("exited", b.frames.byType.attached.data.state)
    local exit = b.frames.byType.exit.data
    assert.are.equal("abandoned", exit.reason)
    assert.are.equal(143, exit.exit_code) -- 128 + SIGTERM
    -- a command that ignores TERM gets KILL
    run("trap '' TERM; echo run >> count-ab2; sleep 60",
      { id = "abandon-2", detach = 300, closeAfterMs = 300 })
    mastra.sleep(5000)
    local c = run(":", { attach = "abandon-2", closeAfterMs = 300 })
    assert.are.equal("running", c.frames.byType.attached.data.state)
    assert.is_true(platform.waitUntil(function()
      local d = run(":", { attach = "abandon-2", closeAfterMs = 200 })
      return d.frames.byType.attached.data.state == "exited"
    end, 20000, 500), "no KILL 10 s after the TERM")
    local d = run(":", { attach = "abandon-2" })
    assert.are.equal("abandoned", d.frames.byType.exit.data.reason)
    assert.are.equal(137, d.frames.byType.exit.data.exit_code)
    assert.are.equal(1, count("count-ab"))
    assert.are.equal(1, count("count-ab2"))
  end)

  it("Railway's two reattach modes: a full replay, or from the last read", function()
    -- "first" goes out on the first socket, which drops right after it;
    -- "second" is written when nobody is attached
    local a = run("echo first; sleep 1; echo second",
      { id = "last-read-1", cutAfterBytes = 1 })
    assert.is_nil(a.exitCode)
    assert.are.equal("first\n", a.stdout)
    mastra.sleep(1500)
    -- Railway's reattaches hold no offsets: plain tag 1 and 3 frames
    local full = run(":", { attach = "last-read-1", plain = true,
      initJson = { resume_from_last_read = false } })
    assert.are.equal(0, full.exitCode)
    assert.are.equal("first\nsecond\n", full.stdout)
    assert.are.same({}, full.frames.binary) -- no offset frame among them
    -- the full replay was sent too: its last read is the end
    local none = run(":", { attach = "last-read-1", plain = true,
      initJson = { resume_from_last_read = true } })
    assert.are.equal(0, none.exitCode)
    assert.are.equal("", none.stdout)
    assert.are.equal(#"first\nsecond\n", none.frames.byType.exit.data.stdout_total)
    local b = run("echo first; sleep 1; echo second",
      { id = "last-read-2", cutAfterBytes = 1 })
    assert.are.equal("first\n", b.stdout)
    mastra.sleep(1500)
    local rest = run(":", { attach = "last-read-2", plain = true,
      initJson = { resume_from_last_read = true } })
    assert.are.equal(0, rest.exitCode)
    assert.are.equal("second\n", rest.stdout)
    -- it names a position: offsets beside it, or a non-boolean, are refused
    local bad = run(":", { attach = "last-read-2", resume = { stdout = 0 },
      initJson = { resume_from_last_read = true } })
    assert.are.equal("invalid_request", bad.frames.byType.error.data.code)
    assert.matches("not both", bad.frames.byType.error.data.message, 1, true)
    bad = run(":", { attach = "last-read-2", plain = true,
      initJson = { resume_from_last_read = "yes" } })
    assert.are.equal("invalid_request", bad.frames.byType.error.data.code)
    assert.matches("resume_from_last_read", bad.frames.byType.error.data.message, 1, true)
  end)

  -- each ended exec is retained (--exec-retain, 15 min) with its spools;
  -- it used to keep their two files open all that time, and every
  -- command's vforked child closes every descriptor of the server
  it("an ended exec that nobody follows holds no descriptor of the server", function()
    local function fds()
      local p = assert(io.popen("ls /proc/" .. srv.pid .. "/fd | wc -l"))
      local n = tonumber(p:read("a"):match("%d+"))
      p:close()
      return n
    end
    sb:executeCommand("true") -- the lease and the kept-alive connections
    local before = fds()
    local list = {}
    for i = 1, 200 do list[i] = i end
    mastra.map(list, function(i)
      local r = sb:executeCommand("echo out " .. i .. "; echo err " .. i .. " >&2")
      assert.are.equal("out " .. i .. "\n", r.stdout)
      assert.is_truthy(r.execId)
    end, { concurrency = 20 })
    local after = fds()
    assert.is_true(after - before < 40, ("200 ended execs hold %d descriptors more"):format(
      after - before))
    -- a parked one still replays its output to a reattach, and is parked again
    local a = run("echo parked-out; echo parked-err >&2", { id = "parked-1" })
    assert.are.equal(0, a.exitCode)
    local again = run(":", { attach = "parked-1" })
    assert.are.equal(0, again.exitCode)
    assert.are.equal("parked-out\n", again.stdout)
    assert.are.equal("parked-err\n", again.stderr)
    assert.is_true(fds() - before < 40)
  end)

  it("a timeout_ms is the process's deadline, whatever the socket does", function()
    local a = run("sleep 30",
      { id = "deadline-1", initJson = { timeout_ms = 500 }, closeAfterMs = 100 })
    assert.is_nil(a.exitCode)
    mastra.sleep(1500)
    local b = run(":", { attach = "deadline-1" })
    assert.are.equal("timeout", b.frames.byType.exit.data.reason)
  end)

  it("output_ack trims: a resume below the retained start is announced as output_gap", function()
    -- the exit after a pause: ws-exec's acks go out before the server's
    -- close, which wslay answers ahead of the data frames still queued
    -- (it sends nothing after a close)
    local a = run("seq 1 20000; sleep 0.5", { id = "gap-1", ack = true })
    assert.are.equal(0, a.exitCode)
    local total = #a.stdout
    local b = run(":", { attach = "gap-1", resume = { stdout = 0, stderr = 0 } })
    local start = b.frames.byType.attached.data.stdout.start
    assert.is_true(start > 0, "nothing was trimmed")
    local gap = b.frames.byType.output_gap
    assert.is_table(gap, "no output_gap frame")
    assert.are.equal("stdout", gap.data.stream)
    assert.are.equal(0, gap.data.from)
    assert.are.equal(start, gap.data.to)
    -- the gap and what came add up to the whole stream, exactly
    check_contiguous(b.frames, 0x11, start)
    assert.are.equal(a.stdout:sub(start + 1), b.stdout)
    assert.are.equal(total, b.frames.byType.exit.data.stdout_total)
  end)

  it("stdin is acknowledged by offset; a reattach resends from an ack, once", function()
    local file = scratch .. "/stdin.bin"
    assert.are.equal(0, srv:sh("head -c 4194304 /dev/urandom > " .. file).exitCode)
    local want = srv:sh("sha256sum < " .. file).stdout:match("%x+")
    local cmd = "echo run >> count-stdin; cat > in.bin; wc -c < in.bin; sha256sum < in.bin"
    local a = run(cmd, { id = "stdin-1", stdinFile = file, cutAfterStdin = 3 * 1024 * 1024 })
    assert.is_nil(a.exitCode)
    local acked = 0
    for _, t in ipairs(a.frames.texts) do
      if t.type == "stdin_ack" then
        assert.is_true(t.data.offset >= acked, "stdin_ack went back")
        acked = t.data.offset
      end
    end
    assert.is_true(acked > 0 and acked <= 3 * 1024 * 1024)
    -- resend from the last ack seen (the exec may hold more: it skips that)
    local b = run(cmd, { id = "stdin-1", resume = { stdin = acked },
      stdinFile = file, stdinFrom = acked })
    assert.are.equal(0, b.exitCode, table.concat(b.summary.log, "; "))
    assert.is_true(b.frames.byType.attached.data.stdin.offset >= acked)
    local size, sum = b.stdout:match("^(%d+)\n(%x+)")
    assert.are.equal("4194304", size)
    assert.are.equal(want, sum)
    assert.are.equal(1, count("count-stdin"))
  end)

  it("exec_hello: exec_capabilities with the extension, stdin credits, exit with reason",
    function()
    local file = scratch .. "/hello.bin"
    assert.are.equal(0, srv:sh("head -c 100000 /dev/zero > " .. file).exitCode)
    local r = run("wc -c", { hello = true, stdinFile = file })
    assert.are.equal(0, r.exitCode)
    assert.are.equal("100000", r.stdout:match("%d+"))
    local caps = r.frames.texts[1]
    assert.are.equal("exec_capabilities", caps.type)
    assert.are.equal(2, caps.data.version)
    assert.is_true(caps.data.stdin_chunk_bytes >= 16384)
    assert.is_true(caps.data.stdin_chunks >= 1 and caps.data.stdin_chunks <= 64)
    assert.are.same({ "exec-resume/1" }, caps.data.extensions)
    local credits = 0
    for _, t in ipairs(r.frames.texts) do
      if t.type == "stdin_credit" then credits = credits + t.data.chunks end
    end
    assert.are.equal(7, credits) -- one a chunk of 16 KiB taken in
    assert.are.equal("exited", r.frames.byType.exit.data.reason)
  end)

  it("exec_hello: a client message over 32 KiB ends the session with 1009, as Railway's",
    function()
    local file = scratch .. "/big-stdin.bin"
    assert.are.equal(0, srv:sh("head -c 100000 /dev/zero > " .. file).exitCode)
    -- tag and bytes: 32768 exactly is taken
    local r = run("wc -c", { hello = true, stdinFile = file, stdinChunk = 32767 })
    assert.are.equal(0, r.exitCode)
    assert.are.equal("100000", r.stdout:match("%d+"))
    -- one byte more is refused, before the command gets any of it
    r = run("wc -c", { hello = true, stdinFile = file,
      stdinChunk = 32768 })
    assert.is_nil(r.exitCode)
    assert.are.equal(1009, r.summary.close)
    assert.are.equal("read limited at 32768 bytes", r.summary.reason)
    -- without exec_hello (the upstream client's session) 1 MiB stays the limit
    r = run("wc -c", { stdinFile = file, stdinChunk = 65536 })
    assert.are.equal(0, r.exitCode)
    assert.are.equal("100000", r.stdout:match("%d+"))
  end)

  it("the HTTP routes: start with an Idempotency-Key, state, output, signal, delete", function()
    local base = P .. "/sandbox/" .. sb.sandboxId .. "/execs"
    local cmd = { command = "echo run >> count-http; seq 1 1000" }
    assert.are.equal(400, srv:json("POST", base, cmd).status) -- no key
    local r = srv:json("POST", base, cmd, { headers = { ["Idempotency-Key"] = "http-1" } })
    assert.are.equal(201, r.status, r.body)
    assert.are.equal("http-1", r.json.exec_id)
    r = srv:json("POST", base, cmd, { headers = { ["Idempotency-Key"] = "http-1" } })
    assert.are.equal(200, r.status, r.body)
    r = srv:json("POST", base, { command = "echo other" },
      { headers = { ["Idempotency-Key"] = "http-1" } })
    assert.are.equal(422, r.status)
    assert.are.equal("exec_id_conflict", r.json.error.type)
    r = srv:json("POST", base, { command = "true", bogus = 1 },
      { headers = { ["Idempotency-Key"] = "http-2" } })
    assert.are.equal(400, r.status)
    assert.matches("bogus", r.json.error.message)
    local state
    assert.is_true(platform.waitUntil(function()
      state = srv:curl("GET", base .. "/http-1").json
      return state.state == "exited"
    end, 10000, 100))
    assert.are.equal(0, state.exit_code)
    assert.are.equal("exited", state.reason)
    local want = {}
    for i = 1, 1000 do want[i] = tostring(i) end
    want = table.concat(want, "\n") .. "\n"
    assert.are.equal(#want, state.stdout["end"])
    local o = srv:curl("GET", base .. "/http-1/output?stream=stdout&offset=0")
    assert.are.equal(200, o.status)
    assert.are.equal(want, o.body)
    assert.are.equal(tostring(#want), o.headers["x-mastra-output-end"])
    assert.are.equal("exited", o.headers["x-mastra-exec-state"])
    o = srv:curl("GET", base .. "/http-1/output?stream=stdout&offset=10&limit=5")
    assert.are.equal(want:sub(11, 15), o.body)
    o = srv:curl("GET", base .. "/http-1/output?stream=stdout&offset=" .. (#want + 1))
    assert.are.equal(416, o.status)
    -- a WebSocket reattach sees the same exec
    local w = run(":", { attach = "http-1" })
    assert.are.equal(want, w.stdout)
    assert.are.equal(204, srv:curl("DELETE", base .. "/http-1").status)
    r = srv:curl("GET", base .. "/http-1")
    assert.are.equal(404, r.status)
    assert.are.equal("exec_not_found", r.json.error.type)
    assert.are.equal(1, count("count-http"))
    -- a signal ends a running one
    r = srv:json("POST", base, { command = "sleep 30" },
      { headers = { ["Idempotency-Key"] = "http-3" } })
    assert.are.equal(201, r.status)
    o = srv:curl("GET", base .. "/http-3/output?stream=stdout&offset=0")
    assert.are.equal(204, o.status)
    r = srv:json("POST", base .. "/http-3/signal", { signal = "KILL" })
    assert.are.equal(200, r.status, r.body)
    assert.is_true(r.json.signaled)
    assert.is_true(platform.waitUntil(function()
      state = srv:curl("GET", base .. "/http-3").json
      return state.state == "exited"
    end, 10000, 100))
    assert.are.equal("signaled", state.reason)
    assert.are.equal(137, state.exit_code)
    assert.are.equal(400, srv:json("POST", base .. "/http-3/signal", { signal = "HUP" }).status)
    -- a long poll: answered when the output comes, or with 204 after wait_ms
    r = srv:json("POST", base, { command = "sleep 1; echo late; sleep 3" },
      { headers = { ["Idempotency-Key"] = "http-4" } })
    assert.are.equal(201, r.status)
    o = srv:curl("GET", base .. "/http-4/output?stream=stdout&offset=0&wait_ms=8000")
    assert.are.equal(200, o.status)
    assert.are.equal("late\n", o.body)
    assert.is_true(o.timeMs < 6000, "the long poll was not woken by the output")
    o = srv:curl("GET", base .. "/http-4/output?stream=stdout&offset=5&wait_ms=300")
    assert.are.equal(204, o.status)
    assert.are.equal("detached", o.headers["x-mastra-exec-state"]) -- nobody attached
    o = srv:curl("GET", base .. "/http-4/output?stream=stdout&offset=5&wait_ms=8000")
    assert.are.equal(200, o.status) -- woken by the exit
    assert.are.equal("", o.body)
    assert.are.equal("exited", o.headers["x-mastra-exec-state"])
  end)

  it("the fingerprint is the SHA-256 of the request's unformatted JSON", function()
    -- escapes of every kind, bytes past ASCII, a value of 100 KB, names
    -- out of order: the text cJSON would print, hashed by sha256sum
    local big = string.rep("QUJD", 25000)
    local env = { ZED = 'q"b\\s\b\f\n\r\t\1\31 \127', ["A_1"] = "\195\169t\195\169", MID = big }
    local base = P .. "/sandbox/" .. sb.sandboxId .. "/execs"
    local r = srv:json("POST", base, { command = "true # \"q\" \\", cwd = "/tmp", env = env },
      { headers = { ["Idempotency-Key"] = "fp-1" } })
    assert.are.equal(201, r.status, r.body)
    local want = '{"command":"true # \\"q\\" \\\\","cwd":"/tmp","env":{"A_1":"\195\169t\195\169",'
      .. '"MID":"' .. big .. '","ZED":"q\\"b\\\\s\\b\\f\\n\\r\\t\\u0001\\u001f \127"},'
      .. '"stdin_mode":"pipe"}'
    local path = scratch .. "/fp.json"
    local f = assert(io.open(path, "wb"))
    f:write(want)
    f:close()
    local p = assert(io.popen("sha256sum " .. mastra.quote(path)))
    local sum = p:read("a"):match("^(%x+)")
    p:close()
    assert.are.equal(sum, r.json.fingerprint)
    r = srv:json("POST", base, { command = "true" }, { headers = { ["Idempotency-Key"] = "fp-2" } })
    assert.are.equal(201, r.status, r.body)
    f = assert(io.open(path, "wb"))
    f:write('{"command":"true","cwd":null,"env":{},"stdin_mode":"pipe"}')
    f:close()
    p = assert(io.popen("sha256sum " .. mastra.quote(path)))
    sum = p:read("a"):match("^(%x+)")
    p:close()
    assert.are.equal(sum, r.json.fingerprint)
  end)
end)

describe("exec-resume/1 with its own server", function()
  it("--exec-log-max: past the bound the command blocks; an acking client gets every byte",
    function()
    with_own_server({ "--exec-log-max", "64k" }, function(srv, _, lease, dir)
      local want = {}
      for i = 1, 400000 do want[i] = tostring(i) end
      want = table.concat(want, "\n") .. "\n"
      local cmd = "seq 1 400000; echo done > block-done"
      local a = wsrun(srv, lease, dir, cmd, { id = "block-1", closeAfterMs = 300 })
      assert.is_nil(a.exitCode)
      local held = check_contiguous(a.frames, 0x11, 0)
      assert.is_true(held <= 64 * 1024, "more than the bound was spooled: " .. held)
      mastra.sleep(1500)
      local probe = srv:wsExec(lease, "test -e block-done && echo ran-on || echo blocked")
      assert.are.equal("blocked\n", probe.stdout)
      local b = wsrun(srv, lease, dir, ":",
        { attach = "block-1", resume = { stdout = held, stderr = 0 }, ack = true })
      assert.are.equal(0, b.exitCode, table.concat(b.summary.log, "; "))
      check_contiguous(b.frames, 0x11, held)
      assert.are.equal(#want, #a.stdout + #b.stdout)
      assert.are.equal(want, a.stdout .. b.stdout)
      assert.are.equal(#want, b.frames.byType.exit.data.stdout_total)
      probe = srv:wsExec(lease, "cat block-done")
      assert.are.equal("done\n", probe.stdout)
    end)
  end)
end)

describe("exec-resume/1 truncate_head", function()
  it("overflow truncate_head: the oldest bytes go, and output_gap accounts for them exactly",
    function()
    with_own_server({ "--exec-log-max", "64k" }, function(srv, sb, lease, dir)
      local base = P .. "/sandbox/" .. sb.sandboxId .. "/execs"
      local want = {}
      for i = 1, 100000 do want[i] = tostring(i) end
      want = table.concat(want, "\n") .. "\n"
      local a = wsrun(srv, lease, dir, "seq 1 100000",
        { id = "trunc-1", initJson = { overflow = "truncate_head" }, closeAfterMs = 50 })
      assert.is_true(a.summary.close == nil or a.summary.close ~= 1008,
        table.concat(a.summary.log, "; "))
      local state
      assert.is_true(platform.waitUntil(function()
        state = srv:curl("GET", base .. "/trunc-1").json
        return state.state == "exited"
      end, 30000, 100), "a truncate_head exec blocked")
      assert.are.equal(#want, state.stdout["end"])
      local start = state.stdout.start
      assert.is_true(start > 0 and #want - start <= 64 * 1024)
      local b = wsrun(srv, lease, dir, ":", { attach = "trunc-1" })
      assert.are.equal(0, b.exitCode)
      local gap = b.frames.byType.output_gap.data
      assert.are.equal(0, gap.from)
      assert.are.equal(start, gap.to)
      assert.are.equal(want:sub(start + 1), b.stdout)
      assert.are.equal(#want, gap.to - gap.from + #b.stdout) -- gap + held = total
      assert.are.equal(#want, b.frames.byType.exit.data.stdout_total)
      local bad = wsrun(srv, lease, dir, "true",
        { id = "trunc-2", initJson = { overflow = "drop" } })
      assert.are.equal("invalid_request", bad.frames.byType.error.data.code)
    end)
  end)
end)

describe("exec-resume/1 server-wide bound", function()
  it("--exec-log-total: the oldest ended exec is evicted to make room", function()
    local args = { "--exec-log-max", "64k", "--exec-log-total", "96k" }
    with_own_server(args, function(srv, sb, lease, dir)
      local base = P .. "/sandbox/" .. sb.sandboxId .. "/execs"
      local a = wsrun(srv, lease, dir, "head -c 60000 /dev/zero | tr '\\0' a", { id = "tot-a" })
      assert.are.equal(0, a.exitCode)
      assert.are.equal(60000, #a.stdout)
      assert.are.equal(200, srv:curl("GET", base .. "/tot-a").status)
      -- 60000 more pass the bound of 96k: tot-a (ended) makes room
      local b = wsrun(srv, lease, dir, "head -c 60000 /dev/zero | tr '\\0' b", { id = "tot-b" })
      assert.are.equal(0, b.exitCode, table.concat(b.summary.log, "; "))
      assert.are.equal(string.rep("b", 60000), b.stdout)
      assert.are.equal(404, srv:curl("GET", base .. "/tot-a").status)
      local c = wsrun(srv, lease, dir, ":", { attach = "tot-b" })
      assert.are.equal(string.rep("b", 60000), c.stdout)
    end)
  end)
end)

-- 30000 bytes of ch under exec id; it ends with all of them retained
local function fill30k(srv, lease, dir, id, ch)
  local r = wsrun(srv, lease, dir, ("head -c 30000 /dev/zero | tr '\\0' %s"):format(ch),
    { id = id })
  assert.are.equal(0, r.exitCode, table.concat(r.summary.log, "; "))
  assert.are.equal(string.rep(ch, 30000), r.stdout)
end

local function status(srv, base, id)
  return srv:curl("GET", base .. "/" .. id).status
end

describe("exec-resume/1 eviction order", function()
  it("--exec-log-total: oldest first; one acknowledged whole is not evicted", function()
    local args = { "--exec-log-max", "64k", "--exec-log-total", "96k" }
    with_own_server(args, function(srv, sb, lease, dir)
      local base = P .. "/sandbox/" .. sb.sandboxId .. "/execs"
      fill30k(srv, lease, dir, "ev-a", "a")
      fill30k(srv, lease, dir, "ev-b", "b")
      fill30k(srv, lease, dir, "ev-c", "c")
      -- ev-b acknowledged to its end (an attach resumes from what it
      -- holds) retains nothing: its record stays
      local b = wsrun(srv, lease, dir, ":",
        { attach = "ev-b", resume = { stdout = 30000, stderr = 0 } })
      assert.are.equal(0, b.exitCode)
      assert.are.equal("", b.stdout)
      assert.are.equal(30000, srv:curl("GET", base .. "/ev-b").json.stdout.start)
      fill30k(srv, lease, dir, "ev-d", "d") -- 90000 retained: a, c, d
      fill30k(srv, lease, dir, "ev-e", "e") -- past 96k: a goes
      assert.are.equal(404, status(srv, base, "ev-a"))
      assert.are.equal(200, status(srv, base, "ev-c"))
      fill30k(srv, lease, dir, "ev-f", "f") -- then c, the next to have ended
      assert.are.equal(404, status(srv, base, "ev-c"))
      for _, id in ipairs({ "ev-b", "ev-d", "ev-e", "ev-f" }) do
        assert.are.equal(200, status(srv, base, id), id)
      end
      local d = wsrun(srv, lease, dir, ":", { attach = "ev-d" })
      assert.are.equal(string.rep("d", 30000), d.stdout)
    end)
  end)
end)

describe("exec-resume/1 retention", function()
  it("--exec-retain: an ended exec's record and spools go; DELETE removes them at once",
    function()
    with_own_server({ "--exec-retain", "1s" }, function(srv, sb, lease, dir)
      local base = P .. "/sandbox/" .. sb.sandboxId .. "/execs"
      local files = srv.dataDir .. "/sandboxes/" .. sb.sandboxId .. "/execs"
      local function ls()
        return srv:sh("ls -A " .. files .. " 2>/dev/null | sort | tr '\\n' ' '").stdout
      end
      local a = wsrun(srv, lease, dir, "echo run >> count-ret; echo hi", { id = "ret-1" })
      assert.are.equal("hi\n", a.stdout)
      -- a stream's spool is made with its first bytes: no stderr here
      assert.are.equal("e-ret-1.json e-ret-1.stdout ", ls())
      assert.is_true(platform.waitUntil(function()
        return srv:curl("GET", base .. "/ret-1").status == 404
      end, 10000, 100), "the exec outlived --exec-retain")
      assert.are.equal("", ls())
      local b = wsrun(srv, lease, dir, ":", { attach = "ret-1" })
      assert.are.equal("exec_not_found", b.frames.byType.error.data.code)
      -- DELETE of a running one kills it and removes its files
      local h = srv:wsExecSpawn(lease, "echo run >> count-del; sleep 31.5",
        { initJson = { exec_id = "del-1" } })
      assert.is_true(platform.waitUntil(function()
        return srv:curl("GET", base .. "/del-1").status == 200
      end, 10000, 50))
      assert.are.equal(204, srv:curl("DELETE", base .. "/del-1").status)
      h:wait()
      local r = platform.wsResult(h.stdout, h.stderr, h.exitCode)
      assert.are.equal(1011, r.summary.close)
      assert.are.equal("", ls())
      assert.is_true(platform.waitUntil(function()
        return srv:sh("pgrep -fx 'sleep 31.5' || true").stdout == ""
      end, 5000, 100), "the command of a deleted exec still runs")
    end)
  end)
end)

describe("exec-resume/1 long polls and shutdown", function()
  it("a server that stops answers a parked long poll and exits 0", function()
    local srv = platform.start{}
    local ok, err = pcall(function()
      local sb = srv:startSandbox{}
      local id = sb.sandboxId
      sb:detach() -- the server's stop ends it
      local base = P .. "/sandbox/" .. id .. "/execs"
      local r = srv:json("POST", base, { command = "sleep 30" },
        { headers = { ["Idempotency-Key"] = "poll-1" } })
      assert.are.equal(201, r.status)
      local h = srv.sandbox.processes:spawn(("curl -s -o /dev/null -w '%%{http_code}'"
        .. " -H %s %s"):format(mastra.quote("Authorization: Bearer " .. srv.token),
        mastra.quote(srv.url .. base .. "/poll-1/output?stream=stdout&offset=0&wait_ms=60000")))
      mastra.sleep(500)
      assert.is_nil(h.exitCode, "the long poll did not wait")
      local t0 = mastra.now()
      assert.are.equal(0, srv:stop())
      assert.is_true(mastra.now() - t0 < 15000)
      h:wait()
      assert.is_true(mastra.now() - t0 < 15000, "the long poll outlived the server")
    end)
    srv:close()
    assert(ok, err)
  end)
end)

-- fn(srv, id, lease, data, restart) with a server on a data directory of
-- its own (started with args) and a sandbox the handle forgot; restart()
-- kills the server with -9 and returns a new one on the same data and
-- args, which destroys the sandbox at the end. Both servers and the data
-- go, whatever fn raised.
local function across_restart(fn, args)
  local data = platform.tmpdir()
  local srv = platform.start{ dataDir = data .. "/d", args = args }
  local srv2, id
  local ok, err = pcall(function()
    local sb = srv:startSandbox{}
    id = sb.sandboxId
    sb:detach()
    fn(srv, id, srv:lease(P, id), data, function()
      srv:kill9()
      srv2 = platform.start{ dataDir = data .. "/d", args = args }
      return srv2
    end)
  end)
  if srv2 then
    pcall(srv2.json, srv2, "DELETE", P .. "/sandbox/" .. id)
    srv2:close()
  end
  srv:close()
  platform.rm_rf(data)
  assert(ok, err)
end

describe("exec-resume/1 across a server's death", function()
  it("kill -9 while detached: after the restart, exec_lost, and nothing runs again", function()
    across_restart(function(srv, id, lease, data, restart)
      -- one that ended before the kill is replayed after it
      local done = srv:wsExec(lease, "echo kept; echo oops >&2; exit 3",
        { initJson = { exec_id = "kept-1" } })
      assert.are.equal(3, done.exitCode)
      -- and one that wrote nothing, whose streams have no spool file
      local quiet = srv:wsExec(lease, "exit 4", { initJson = { exec_id = "quiet-1" } })
      assert.are.equal(4, quiet.exitCode)
      local h = srv:wsExecSpawn(lease, "echo run >> count-lost; sleep 60",
        { initJson = { exec_id = "lost-1" }, closeAfterMs = 500 })
      h:wait()
      local srv2 = restart()
      local lease2 = srv2:lease(P, id)
      local frames = data .. "/frames"
      local r = srv2:wsExec(lease2, ":",
        { initJson = { durable_session_name = "lost-1" }, frames = frames })
      local f = read_frames(frames)
      assert.are.equal("exec_lost", f.byType.error.data.code)
      assert.are.equal(1008, r.summary.close)
      -- the same start again is not a new run either
      os.remove(frames)
      srv2:wsExec(lease2, "echo run >> count-lost; sleep 60",
        { initJson = { exec_id = "lost-1" }, frames = frames })
      f = read_frames(frames)
      assert.are.equal("exec_lost", f.byType.error.data.code)
      os.remove(frames)
      r = srv2:wsExec(lease2, ":",
        { initJson = { durable_session_name = "kept-1" }, frames = frames })
      f = read_frames(frames)
      assert.are.equal(3, r.exitCode)
      assert.are.equal("kept\n", r.stdout)
      assert.are.equal("oops\n", r.stderr)
      assert.are.equal("exited", f.byType.exit.data.reason)
      assert.are.equal(5, f.byType.exit.data.stdout_total)
      os.remove(frames)
      r = srv2:wsExec(lease2, ":",
        { initJson = { durable_session_name = "quiet-1" }, frames = frames })
      f = read_frames(frames)
      assert.are.equal(4, r.exitCode, table.concat(r.summary.log, "; "))
      assert.are.equal("", r.stdout .. r.stderr)
      assert.are.equal("exited", f.byType.exit.data.reason)
      local c = srv2:wsExec(lease2, "wc -l < count-lost")
      assert.are.equal("1", c.stdout:match("%d+"))
    end)
  end)

  it("a long output reuses the spool's slots; a restart replays them in order", function()
    across_restart(function(srv, id, lease, data, restart)
      -- 14 bursts of numbers (7.9 MB), slow enough for the acks of each to
      -- free the slots (1 MiB each) before the next; cut after 4 MiB
      local chunk, bursts = 80000, 14
      local cmd = ("for i in $(seq 0 %d); do seq $((i*%d+1)) $(((i+1)*%d)); sleep 0.1; done")
        :format(bursts - 1, chunk, chunk)
      local want = {}
      for i = 1, chunk * bursts do want[i] = tostring(i) end
      want = table.concat(want, "\n") .. "\n"
      local a = wsrun(srv, lease, data, cmd,
        { id = "slots-1", ack = true, cutAfterBytes = 4 * 1048576 })
      assert.is_nil(a.exitCode)
      local held = check_contiguous(a.frames, 0x11, 0)
      assert.are.equal(want:sub(1, held), a.stdout)
      local base = P .. "/sandbox/" .. id .. "/execs"
      assert.is_true(platform.waitUntil(function()
        return srv:curl("GET", base .. "/slots-1").json.state == "exited"
      end, 20000, 100), "the detached command did not end")
      -- the file holds fewer slots than the stream has segments: the
      -- segments after the acks took the slots the acks freed
      local files = srv.dataDir .. "/sandboxes/" .. id .. "/execs/e-slots-1"
      local f = assert(io.open(files .. ".stdout", "rb"))
      local size = f:seek("end")
      f:close()
      assert.is_true(size < #want, ("the spool is %d bytes for %d"):format(size, #want))
      local rec = platform.decode(platform.readFile(files .. ".json"))
      local first = rec.stdout.start // 1048576
      local moved = false
      for k, slot in ipairs(rec.stdout.slots) do
        if slot ~= first + k - 1 then moved = true end
      end
      assert.is_true(moved, "every segment is in its own slot")
      local srv2 = restart()
      local b = wsrun(srv2, srv2:lease(P, id), data, ":",
        { attach = "slots-1", resume = { stdout = held, stderr = 0 } })
      assert.are.equal(0, b.exitCode, table.concat(b.summary.log, "; "))
      check_contiguous(b.frames, 0x11, held)
      assert.are.equal(#want, #a.stdout + #b.stdout)
      assert.is_true(a.stdout .. b.stdout == want, "the replay is not the stream")
    end)
  end)

  it("--exec-log-total: the records of an earlier server go first, in the order they ended",
    function()
    across_restart(function(srv, id, lease, data, restart)
      fill30k(srv, lease, data, "old-1", "1")
      fill30k(srv, lease, data, "old-2", "2")
      local srv2 = restart()
      local lease2 = srv2:lease(P, id)
      local base = P .. "/sandbox/" .. id .. "/execs"
      -- a record is read when asked for: old-1, then one of this server,
      -- then old-2, which ended before it
      assert.are.equal(200, status(srv2, base, "old-1"))
      fill30k(srv2, lease2, data, "new-1", "n")
      assert.are.equal(200, status(srv2, base, "old-2"))
      fill30k(srv2, lease2, data, "new-2", "m") -- past 96k: old-1 goes
      assert.are.equal(404, status(srv2, base, "old-1"))
      assert.are.equal(200, status(srv2, base, "old-2"))
      fill30k(srv2, lease2, data, "new-3", "o") -- then old-2, not new-1
      assert.are.equal(404, status(srv2, base, "old-2"))
      for _, e in ipairs({ "new-1", "new-2", "new-3" }) do
        assert.are.equal(200, status(srv2, base, e), e)
      end
    end, { "--exec-log-max", "64k", "--exec-log-total", "96k" })
  end)
end)

describe("exec-resume/1 on a full disk", function()
  it("a spool that cannot be written kills the command; the attach gets"
    .. " insufficient_storage, the client a 507", function()
    if not require("spec.support.util").is_root() then
      pending("mounting a small tmpfs for the data directory needs root")
      return
    end
    local dir = platform.tmpdir()
    local data = dir .. "/data"
    assert(os.execute("mkdir -p " .. mastra.quote(data)
      .. " && mount -t tmpfs -o size=16m tmpfs " .. mastra.quote(data)))
    local srv, sb
    local ok, err = pcall(function()
      srv = platform.start{ dataDir = data, tokenFile = dir .. "/token" }
      sb = srv:startSandbox{}
      local lease = srv:lease(P, sb.sandboxId)
      -- the command fills the disk (its tree is on it), then prints: the
      -- server has nowhere to keep that output
      local fill = "head -c 64m /dev/zero > fill 2>/dev/null; seq 1 200000"
      local a = wsrun(srv, lease, dir, fill, { id = "full-1" })
      assert.is_nil(a.exitCode, "an exit frame came: " .. tostring(a.exitCode))
      assert.is_nil(a.frames.byType.exit)
      local e = a.frames.byType.error
      assert.is_not_nil(e, table.concat(a.summary.log, "; "))
      assert.are.equal("insufficient_storage", e.data.code)
      assert.matches("No space left on device", e.data.message, 1, true)
      assert.are.equal(1011, a.summary.close)
      local state = srv:curl("GET", P .. "/sandbox/" .. sb.sandboxId .. "/execs/full-1").json
      assert.are.equal("exited", state.state)
      assert.are.equal("output_lost", state.reason)
      -- the client's exec-resume says so with a type, and runs nothing twice
      assert.are.equal(0, srv:wsExec(lease, "rm -f fill").exitCode)
      local cok, cerr = pcall(sb.executeCommand, sb, "echo run >> count-full; " .. fill)
      assert.is_false(cok)
      assert.is_true(require("mastra.errors").PlatformApiError:is(cerr), tostring(cerr))
      assert.are.equal(507, cerr.status)
      assert.are.equal("insufficient_storage", cerr.code)
      assert.matches("Free space", cerr.message, 1, true)
      local r = srv:wsExec(lease, "rm -f fill; wc -l < count-full")
      assert.are.equal("1", r.stdout:match("%d+"))
    end)
    if sb then pcall(sb.destroy, sb) end
    if srv then srv:close() end
    if not os.execute("umount " .. mastra.quote(data) .. " 2>/dev/null") then
      os.execute("umount -l " .. mastra.quote(data))
    end
    platform.rm_rf(dir)
    assert(ok, err)
  end)
end)
