-- The report of bench/run: reads the samples file, prints the markdown
-- table and writes RESULTS.md and the SVG chart of the latencies.
--   lua bench/report.lua SAMPLES HEADER_MD OUT_MD OUT_SVG DRIVERS(comma-separated)
local samples_path, header_path, md_path, svg_path, drivers_arg = table.unpack(arg, 1, 5)
assert(drivers_arg, "usage: report.lua SAMPLES HEADER_MD OUT_MD OUT_SVG DRIVERS")

package.path = (arg[0]:match("(.*/)") or "./") .. "?.lua;" .. package.path
local data = require("samples").load(samples_path) -- key -> {unit, xs}

local MB = 1048576

local function median(key)
  local d = data[key]
  if not d or #d.xs == 0 then return nil end
  local xs = { table.unpack(d.xs) }
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

-- The limits of the bucket's requests, derived from the measured ones: a
-- GET is one request plus its bytes through a pipe (each sample of the
-- request plus the pipe's median), a PUT that plus a durable write of the
-- bytes in the platform's storage (each sample of the write plus the two
-- medians).
do
  local req, pipe = median("http.c"), median("pipe.cat_mbps")
  for _, s in ipairs{ { "4k", 4096 }, { "4m", 4 * MB } } do
    local write = data["disk.put_" .. s[1]]
    if req and pipe then
      local move = s[2] / MB / pipe * 1000
      local xs = {}
      for i, x in ipairs(data["http.c"].xs) do xs[i] = x + move end
      data["limit.get_" .. s[1]] = { unit = "ms", xs = xs }
      if write then
        xs = {}
        for i, x in ipairs(write.xs) do xs[i] = x + req + move end
        data["limit.put_" .. s[1]] = { unit = "ms", xs = xs }
      end
    end
  end
end

-- A figure: key, and how its samples are shown: "ms" (latency, lower is
-- better), or a rate (higher is better) taken as it is or derived from
-- latencies in ms ("ops/s": 1000/ms, "MB/s": bytes/ms).
local function fig(key, show, bytes)
  return { key = key, show = show or "ms", bytes = bytes }
end

local rows = {}
local limits = false -- rows of the physical limits section
local function row(label, ours, base, base_label, peer)
  rows[#rows + 1] = { label = label, ours = ours, base = base, base_label = base_label,
    peer = peer, limit = limits }
end
local function section(title) rows[#rows + 1] = { section = title } end

local SPAWN = "fork+exec+wait of sh -c true"
section("Physical limits (the baselines, measured in C and shell)")
limits = true
row("fork+exec+wait of /bin/true", fig("spawn.true"))
row("fork+exec+wait of /bin/sh -c true (what an exec of `true` runs)", fig("spawn.seq"))
row("the same, 50 in flight: latency", fig("spawn.c50"))
row("the same, 50 in flight: rate", fig("spawn.c50.rate", "rate"))
row("HTTP GET over loopback, libcurl from C, kept alive (platform 404)", fig("http.c"))
row("pipe: head -c 256M /dev/zero piped to cat", fig("pipe.cat_mbps", "rate"))
row("disk: write 4 KB to a new file, fsync, rename, fsync the directory", fig("ondisk.put_4k"))
row("disk: the same with 4 MB", fig("ondisk.put_4m"))
row("disk: the same with 4 MB, MB/s", fig("ondisk.put_4m", "MB/s", 4 * MB))
row("the platform's storage: write 4 KB, fsync, rename, fsync dir", fig("disk.put_4k"))
row("the platform's storage: the same with 4 MB", fig("disk.put_4m"))
row("a namespaces sandbox: unshare (user with a mapping, mount, pid, uts, ipc, net),"
  .. " overlay mount, fork+exec+wait of /bin/true (C, root)", fig("ns.limit"))
row("the same namespaces alone: clone, id mapping, exit", fig("ns.limit.unshare"))
limits = false
local NS_LIMIT = "unshare of the namespaces + overlay mount + exec of /bin/true (C)"
for driver in drivers_arg:gmatch("[^,]+") do
  local D = driver .. "."
  section(("PlatformSandbox, `%s` driver"):format(driver))
  if driver == "namespaces" then
    row("create → first exec", fig(D .. "create_first_exec"), fig("ns.limit"), NS_LIMIT)
  else
    row("create → first exec", fig(D .. "create_first_exec"), fig("spawn.seq"), SPAWN)
  end
  row("exec `true`, sequential", fig(D .. "exec_seq"), fig("spawn.seq"), SPAWN)
  if driver ~= "process" then
    row("exec `true`, sequential, against the process driver", fig(D .. "exec_seq"),
      fig("process.exec_seq"), "the process driver's exec `true`")
  end
  row("exec `true`, 50 concurrent: latency", fig(D .. "exec_conc"), fig("spawn.c50"),
    SPAWN .. ", 50 in flight")
  row("exec `true`, 50 concurrent: rate", fig(D .. "exec_conc_rate", "rate"),
    fig("spawn.c50.rate", "rate"), SPAWN .. ", 50 in flight")
  for _, c in ipairs{ 1, 16, 100 } do
    row(("fleet of 100 (clone, start, exec, destroy), concurrency %d: wall"):format(c),
      fig(D .. "fleet_c" .. c), fig("spawn.fleet_c" .. c .. ".wall"),
      ("100 × " .. SPAWN .. ", %d in flight"):format(c))
  end
  row("fleet of 100 through mastra.fleet (clone, start, exec, destroy), concurrency 16:"
    .. " wall", fig(D .. "fleet_api_c16"), fig("spawn.fleet_c16.wall"),
    "100 × " .. SPAWN .. ", 16 in flight")
  row("stdout through the exec WebSocket (256 MB), kept in the result",
    fig(D .. "stdout_mbps", "rate"), fig("pipe.cat_mbps", "rate"),
    "head -c 256M /dev/zero, piped to cat")
  row("the same, not kept (maxRetainedBytes = 0)", fig(D .. "stdout_noretain_mbps", "rate"),
    fig("pipe.cat_mbps", "rate"), "head -c 256M /dev/zero, piped to cat")
  row("HTTP GET, core.http from Lua (kept alive)", fig(D .. "http_404"), fig("http.c"),
    "libcurl from C, same URL")
  for _, s in ipairs{ { "4k", "4 KB", 4096 }, { "4m", "4 MB", 4 * MB } } do
    local k, name, bytes = s[1], s[2], s[3]
    for _, op in ipairs{ "put", "get" } do
      local key, limit = D .. "bucket_" .. op .. "_" .. k, "limit." .. op .. "_" .. k
      local OP = op:upper()
      local LIMIT = ("one request + %s through a pipe"):format(name)
      if op == "put" then LIMIT = LIMIT .. " + write, fsync, rename, fsync dir" end
      row(("bucket %s %s: latency"):format(OP, name), fig(key), fig(limit), LIMIT)
      row(("bucket %s %s: ops/s"):format(OP, name), fig(key, "ops/s"), fig(limit, "ops/s"), LIMIT)
      if bytes > 4096 then
        row(("bucket %s %s: MB/s"):format(OP, name), fig(key, "MB/s", bytes),
          fig(limit, "MB/s", bytes), LIMIT)
      end
    end
  end
  row("client memory per idle handle (unstarted), KiB", fig(D .. "mem_handle", "KiB"), nil,
    nil, fig("peer.local.mem_per_handle", "KiB"))
  row("client memory per 10,000 idle handles, KiB", fig(D .. "mem_10000_handles", "KiB"))
  row("client memory per started handle, idle after one exec, KiB",
    fig(D .. "mem_started_handle", "KiB"))
end
section("LocalSandbox (peer: `@mastra/core` LocalSandbox on Node)")
row("create → first exec", fig("local.create_first_exec"), fig("spawn.seq"), SPAWN,
  fig("peer.local.create_first_exec"))
row("exec `true`, sequential", fig("local.exec_seq"), fig("spawn.seq"), SPAWN,
  fig("peer.local.exec_seq"))
row("exec `true`, 50 concurrent: latency", fig("local.exec_conc"), fig("spawn.c50"),
  SPAWN .. ", 50 in flight", fig("peer.local.exec_conc"))
row("exec `true`, 50 concurrent: rate", fig("local.exec_conc_rate", "rate"),
  fig("spawn.c50.rate", "rate"), SPAWN .. ", 50 in flight",
  fig("peer.local.exec_conc_rate", "rate"))
row("stdout through the pipe (256 MB), kept in the result", fig("local.stdout_mbps", "rate"),
  fig("pipe.cat_mbps", "rate"), "head -c 256M /dev/zero, piped to cat",
  fig("peer.local.stdout_mbps", "rate"))
row("the same, not kept (maxRetainedBytes = 0)", fig("local.stdout_noretain_mbps", "rate"),
  fig("pipe.cat_mbps", "rate"), "head -c 256M /dev/zero, piped to cat",
  fig("peer.local.stdout_noretain_mbps", "rate"))
row("client memory per idle handle (unstarted), KiB", fig("local.mem_handle", "KiB"), nil, nil,
  fig("peer.local.mem_per_handle", "KiB"))

-- statistics -----------------------------------------------------------

local function values(f)
  local d = f and data[f.key]
  if not d or #d.xs == 0 then return nil end
  local xs = {}
  for i, x in ipairs(d.xs) do
    if f.show == "ops/s" then xs[i] = 1000 / x
    elseif f.show == "MB/s" then xs[i] = f.bytes / MB / (x / 1000)
    else xs[i] = x end
  end
  table.sort(xs)
  return xs
end

local function higher_is_better(f)
  return f.show == "rate" or f.show == "ops/s" or f.show == "MB/s"
end

-- nearest rank; for a rate, the "p99" is the slow tail (1st percentile)
local function pct(xs, p)
  local i = math.max(1, math.min(#xs, math.ceil(p / 100 * #xs)))
  return xs[i]
end

local function stats(f)
  local xs = values(f)
  if not xs then return nil end
  local tail = higher_is_better(f) and pct(xs, 1) or pct(xs, 99)
  return { n = #xs, p50 = pct(xs, 50), p99 = tail, xs = xs }
end

local function num(v, f)
  if v == nil then return "–" end
  local unit = ""
  if f.show == "ms" then unit = " ms"
  elseif f.show == "ops/s" then unit = " ops/s"
  elseif f.show == "MB/s" then unit = " MB/s"
  elseif f.show == "KiB" then unit = " KiB"
  elseif f.key:match("rate$") then unit = " ops/s"
  elseif f.key:match("mbps$") then unit = " MB/s" end
  local s
  if v >= 100 then s = ("%.0f"):format(v)
  elseif v >= 10 then s = ("%.1f"):format(v)
  elseif v >= 0.1 then s = ("%.2f"):format(v)
  else s = ("%.3f"):format(v) end
  return s .. unit
end

-- the cost of ours relative to the other: > 1 means slower / bigger
local function ratio(ours, os, other, ofig)
  if not (os and other) or other.p50 == 0 or os.p50 == 0 then return "–" end
  local r = higher_is_better(ours) and other.p50 / os.p50 or os.p50 / other.p50
  if higher_is_better(ofig) ~= higher_is_better(ours) then return "–" end
  return ("%.2f×"):format(r)
end

local out = {}
local function w(s) out[#out + 1] = s end
w("| figure | n | p50 | p99 | baseline | baseline p50 | cost × baseline"
  .. " | peer p50 | peer p99 | cost × peer |")
w("|---|--:|--:|--:|---|--:|--:|--:|--:|--:|")
local missing = {}
for _, r in ipairs(rows) do
  if r.section then
    w(("| **%s** | | | | | | | | | |"):format(r.section))
  else
    local s, b, p = stats(r.ours), stats(r.base), stats(r.peer)
    if not s then missing[#missing + 1] = r.label .. " (" .. r.ours.key .. ")" end
    w(("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |"):format(
      r.label, s and s.n or "–", num(s and s.p50, r.ours), num(s and s.p99, r.ours),
      r.base_label or "–", num(b and b.p50, r.base or r.ours),
      ratio(r.ours, s, b, r.base or r.ours),
      num(p and p.p50, r.peer or r.ours), num(p and p.p99, r.peer or r.ours),
      ratio(r.ours, s, p, r.peer or r.ours)))
  end
end
w("")
w("p99 of a rate (ops/s, MB/s) is its slow tail, the 1st percentile. \"cost ×\" is"
  .. " how many times slower (or bigger) than the baseline or the peer, at the median:"
  .. " 1.00× is the limit.")
if #missing > 0 then
  w("")
  w("Not measured in this run: " .. table.concat(missing, "; ") .. ".")
end
local table_md = table.concat(out, "\n")
print(table_md)

local header = ""
local hf = io.open(header_path, "r")
if hf then header = hf:read("a"); hf:close() end
local f = assert(io.open(md_path, "w"))
f:write(header, "\n", table_md, "\n\n![latency distributions](", svg_path:match("[^/]+$"),
  ")\n")
f:close()

-- the chart: one line per latency figure, p1..p99 as a bar, p50 as a dot,
-- on a log scale; ours, baseline and peer in three colours
local bars = {}
for _, r in ipairs(rows) do
  if not r.section and r.ours.show == "ms" then
    local entry = { label = r.label, series = {} }
    local blue = r.limit and "#7f7f7f" or "#1f77b4"
    for _, pair in ipairs{ { r.ours, blue, "ours" }, { r.base, "#7f7f7f", "baseline" },
        { r.peer, "#d62728", "peer" } } do
      local st = pair[1] and pair[1].show == "ms" and stats(pair[1])
      if st then
        entry.series[#entry.series + 1] = { lo = pct(st.xs, 1), p50 = st.p50, hi = st.p99,
          color = pair[2], who = pair[3] }
      end
    end
    if #entry.series > 0 then bars[#bars + 1] = entry end
  end
end
local lo, hi = math.huge, 0
for _, b in ipairs(bars) do
  for _, s in ipairs(b.series) do
    lo, hi = math.min(lo, s.lo), math.max(hi, s.hi)
  end
end
if #bars > 0 then
  lo = 10 ^ math.floor(math.log(math.max(lo, 1e-3), 10))
  hi = 10 ^ math.ceil(math.log(math.max(hi, lo * 10), 10))
  local left, width, lh = 430, 560, 12
  local height = 60
  for _, b in ipairs(bars) do height = height + #b.series * lh + 8 end
  local function x(v)
    v = math.max(v, lo)
    return left + width * (math.log(v, 10) - math.log(lo, 10))
      / (math.log(hi, 10) - math.log(lo, 10))
  end
  local svg = {}
  local function s(fmt, ...) svg[#svg + 1] = fmt:format(...) end
  local function esc(t) return (t:gsub("&", "&amp;"):gsub("<", "&lt;"):gsub("`", "")) end
  s('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
    .. 'font-family="sans-serif" font-size="11">', left + width + 20, height)
  s('<rect width="100%%" height="100%%" fill="white"/>')
  s('<text x="10" y="16" font-size="13">Latency, ms (log scale): bar p1–p99, dot p50.'
    .. ' <tspan fill="#1f77b4">mastra-lua</tspan>, <tspan fill="#7f7f7f">baseline</tspan>,'
    .. ' <tspan fill="#d62728">peer</tspan></text>')
  local y = 40
  local decade = lo
  while decade <= hi * 1.0001 do
    s('<line x1="%.1f" y1="30" x2="%.1f" y2="%d" stroke="#ddd"/>', x(decade), x(decade),
      height - 20)
    s('<text x="%.1f" y="%d" text-anchor="middle">%g</text>', x(decade), height - 6, decade)
    decade = decade * 10
  end
  for _, b in ipairs(bars) do
    s('<text x="%d" y="%d" text-anchor="end">%s</text>', left - 8, y + 9, esc(b.label))
    for _, sr in ipairs(b.series) do
      s('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="4"/>',
        x(sr.lo), y + 5, math.max(x(sr.hi), x(sr.lo) + 1), y + 5, sr.color)
      s('<circle cx="%.1f" cy="%d" r="4" fill="%s" stroke="black" stroke-width="0.5"/>',
        x(sr.p50), y + 5, sr.color)
      y = y + lh
    end
    y = y + 8
  end
  s("</svg>")
  local sf = assert(io.open(svg_path, "w"))
  sf:write(table.concat(svg, "\n"), "\n")
  sf:close()
end
