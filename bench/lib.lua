-- Shared by the Lua scripts of bench/run: the clock (mastra.now), bounded
-- repetitions, and the samples file ("key<TAB>unit<TAB>v1 v2 ...").
local mastra = require "mastra"

local lib = {}

-- mastra.now(): monotonic milliseconds with a sub-millisecond part.
lib.now = mastra.now

local out

--- The output of shell text cmd (its stdout; stderr too with both).
function lib.sh(cmd, both)
  local p = assert(io.popen(both and (cmd .. " 2>&1") or cmd))
  local text = p:read("a")
  p:close()
  return text
end

--- The p-quantile (0 < p <= 1) of the numbers xs (nearest rank).
function lib.pct(xs, p)
  local s = {}
  for i, x in ipairs(xs) do s[i] = x end
  table.sort(s)
  return s[math.max(1, math.ceil(#s * p))]
end

--- A mastra-platform of the namespaces driver (or opts.driver) started as
-- a background process of LocalSandbox host: opts.bin, opts.base (nil: no
-- --base, as the process driver wants), opts.data (its data directory),
-- opts.log (its stderr), opts.extra (more flags, each with a leading
-- space). Returns {server, url, inspector, pid, token, data, cfg} (cfg: a client
-- config of project "bench"), or raises with its log.
function lib.serve(host, opts)
  local client = require "mastra.platform_client"
  local said = {}
  local server = host.processes:spawn("exec " .. mastra.quote(opts.bin)
    .. " serve --listen 127.0.0.1:0 --driver " .. (opts.driver or "namespaces")
    .. (opts.base and (" --base " .. mastra.quote(opts.base)) or "") .. (opts.extra or "")
    .. " --data-dir " .. mastra.quote(opts.data) .. " --default-idle-minutes 0"
    .. " 2>" .. mastra.quote(opts.log),
    { onStdout = function(s) said[#said + 1] = s end })
  local line
  for _ = 1, 400 do
    line = table.concat(said):match("^([^\n]*)\n")
    if line or server.exitCode then break end
    mastra.sleep(50)
  end
  assert(line, "mastra-platform did not start: " .. lib.sh("cat " .. mastra.quote(opts.log)))
  local s = { server = server, data = opts.data, url = line:match('"url":"([^"]+)"'),
    inspector = line:match('"inspector":"([^"]+)"'),
    pid = tonumber(line:match('"pid":(%d+)')),
    token = lib.sh("cat " .. mastra.quote(opts.data .. "/token")):gsub("%s+$", "") }
  s.cfg = client.resolve({ accessToken = s.token, proxyUrl = s.url, projectId = "bench" },
    "bench")
  return s
end

--- Open the samples file named by `path` (appended to).
function lib.open(path)
  out = assert(io.open(path, "a"))
end

--- Append one figure: its key, its unit, and its samples.
function lib.emit(key, unit, xs)
  local parts = {}
  for i, x in ipairs(xs) do parts[i] = ("%.4f"):format(x) end
  out:write(key, "\t", unit, "\t", table.concat(parts, " "), "\n")
  out:flush()
  local sum = 0
  for _, x in ipairs(xs) do sum = sum + x end
  io.stderr:write(("  %-40s n=%-5d mean %.3f %s\n"):format(key, #xs, sum / math.max(#xs, 1), unit))
end

--- Milliseconds taken by fn(...).
function lib.time(fn, ...)
  local t0 = lib.now()
  fn(...)
  return lib.now() - t0
end

--- Run fn(i) n times, or until budget_ms has passed (at least `min` runs,
-- default 3), and return the list of the times in ms.
function lib.reps(n, budget_ms, fn, min)
  min = min or 3
  local xs, start = {}, lib.now()
  for i = 1, n do
    xs[#xs + 1] = lib.time(fn, i)
    if i >= min and lib.now() - start > budget_ms then break end
  end
  return xs
end

--- r, the result of an exec, if it exited 0; else an error with its stderr.
function lib.must(r)
  if r.exitCode ~= 0 then error(("exec failed: %d %s"):format(r.exitCode, r.stderr)) end
  return r
end

--- Time `head -c bytes /dev/zero | cat > /dev/null`, the pipe's limit, and
-- emit its MB/s (key pipe.cat_mbps).
function lib.pipeBaseline(bytes)
  local ms = lib.time(os.execute, ("head -c %d /dev/zero | cat > /dev/null"):format(bytes))
  lib.emit("pipe.cat_mbps", "MB/s", { bytes / 1048576 / (ms / 1000) })
end

-- MB/s of `head -c bytes /dev/zero` run by sb:executeCommand, counted by
-- onStdout; the result keeps maxRetainedBytes of it (nil: all).
local function stdout_mbps(sb, bytes, maxRetainedBytes)
  local got = 0
  local ms = lib.time(function()
    local r = sb:executeCommand("head", { "-c", tostring(bytes), "/dev/zero" }, {
      onStdout = function(chunk) got = got + #chunk end,
      maxRetainedBytes = maxRetainedBytes,
    })
    lib.must(r)
  end)
  assert(got == bytes, ("stdout: got %d of %d bytes"):format(got, bytes))
  collectgarbage("collect") -- the result kept a copy of the output
  return bytes / 1048576 / (ms / 1000)
end

--- The exec figures of a started sandbox, keys prefix .. "exec_seq",
-- "exec_conc" and "exec_conc_rate": `true` seq_n times in a row (or for
-- 30 s), then `batches` times 50 tasks of `per` execs each.
function lib.execFigures(prefix, sb, seq_n, batches, per)
  local function exec() lib.must(sb:executeCommand("true")) end
  for _ = 1, 20 do exec() end -- warm-up (a lease and its connections, the page cache)
  lib.emit(prefix .. "exec_seq", "ms", lib.reps(seq_n, 30000, exec))
  local conc = 50
  local list, lat, rates = {}, {}, {}
  for i = 1, conc do list[i] = i end
  for r = 1, batches do
    local n0, t0 = #lat, lib.now()
    mastra.map(list, function()
      for _ = 1, per do
        local ms = lib.time(exec)
        lat[#lat + 1] = ms -- after the call: other tasks append while it waits
      end
    end, { concurrency = conc })
    rates[r] = (#lat - n0) / ((lib.now() - t0) / 1000)
  end
  lib.emit(prefix .. "exec_conc", "ms", lat)
  lib.emit(prefix .. "exec_conc_rate", "ops/s", rates)
end

--- The stdout figures of a started sandbox, keys prefix .. "stdout_mbps"
-- (kept in the result) and prefix .. "stdout_noretain_mbps" (not kept):
-- `reps` times each, with the pipe's baseline before each repetition.
function lib.stdoutFigures(prefix, sb, bytes, reps)
  local xs, ys = {}, {}
  for i = 1, reps do
    lib.pipeBaseline(bytes)
    xs[i] = stdout_mbps(sb, bytes)
    ys[i] = stdout_mbps(sb, bytes, 0)
  end
  lib.emit(prefix .. "stdout_mbps", "MB/s", xs)
  lib.emit(prefix .. "stdout_noretain_mbps", "MB/s", ys)
end

--- The Lua heap in KiB, after full collections.
function lib.kib()
  collectgarbage("collect")
  collectgarbage("collect")
  return collectgarbage("count")
end

--- Read a whole file.
function lib.slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

return lib
