-- core.http's streams against the local platform's bucket (real sockets):
-- a request body written in pieces (chunked, or with bodyLength), a
-- response body read in pieces and paused while nobody reads it, a
-- cancelled PUT that stores nothing, and a server killed in the middle of
-- a GET. No timing or memory figures here: bench/transfer.lua has them.
local mastra = require "mastra"
local core = require "mastra.core"
local task = require "mastra.task"
local platform = require "spec.support.platform"

local SEND_LOW = 256 * 1024

local function random_bytes(n)
  local f = assert(io.open("/dev/urandom", "rb"))
  local s = f:read(n)
  f:close()
  return s
end

local function object_url(srv, key)
  return srv.url .. "/v1/railway/projects/proj/fs/bkt/" .. key
end

local function auth(srv)
  return { authorization = "Bearer " .. srv.token }
end

-- status, headers, body of a finished request (or nil, message, name)
local function result(req)
  while true do
    local status, a, b = req:result()
    if status or a then return status, a, b end
    task.wait(req:id())
  end
end

-- write data in pieces of `size`, keeping core.http's queue under SEND_LOW
local function write_all(req, data, size)
  for i = 1, #data, size do
    assert(req:write(data:sub(i, i + size - 1)))
    while req:bufferedAmount() >= SEND_LOW and req:result() == nil do task.wait(req:id()) end
  end
end

-- the pieces of a streamed response, until it ends
local function read_all(req)
  local pieces = {}
  while true do
    local piece = req:read()
    if piece then
      pieces[#pieces + 1] = piece
    elseif req:result() ~= nil then
      return pieces
    else
      local _, msg = req:result()
      if msg then return pieces end
      task.wait(req:id())
    end
  end
end

local function put_streamed(srv, key, data)
  local req <close> = assert(core.http{ method = "PUT", url = object_url(srv, key),
    headers = auth(srv), bodyStream = true })
  write_all(req, data, 100000)
  assert(req:finish())
  local status = result(req)
  assert.are.equal(200, status)
end

local function temporary_files(srv)
  local p = assert(io.popen("ls -A " .. mastra.quote(srv.dataDir .. "/buckets/proj/bkt")
    .. " 2>/dev/null"))
  local names = p:read("a")
  p:close()
  return names:find("mpb%-tmp") ~= nil
end

describe("core.http streams on the local platform", function()
  local srv

  setup(function() srv = platform.start{} end)
  teardown(function() if srv then srv:stop() end end)

  it("sends a body in pieces (chunked) and reads one back in pieces, the bytes unchanged",
    function()
    local data = random_bytes(3 * 1048576 + 3)
    put_streamed(srv, "chunked.bin", data)
    local req <close> = assert(core.http{ url = object_url(srv, "chunked.bin"),
      headers = auth(srv), streamResponse = true })
    local pieces = read_all(req)
    local status, headers, body = result(req)
    assert.are.equal(200, status)
    assert.are.equal("", body) -- the body went through read()
    assert.are.equal(tostring(#data), headers["content-length"])
    assert.are.equal(200, (req:head()))
    assert.is_true(#pieces > 1)
    assert.is_true(table.concat(pieces) == data)
    assert.is_nil(req:read())
  end)

  it("sends Content-Length with bodyLength, and refuses more or fewer bytes", function()
    local req <close> = assert(core.http{ method = "PUT", url = object_url(srv, "ten.txt"),
      headers = auth(srv), bodyStream = true, bodyLength = 10 })
    assert.is_true(req:write("12345"))
    local _
    local ok, msg, name = req:write("123456")
    assert.is_nil(ok)
    assert.are.equal("EFBIG", name)
    assert.matches("more bytes than bodyLength", msg, 1, true)
    ok, msg, name = req:finish()
    assert.is_nil(ok)
    assert.are.equal("EINVAL", name)
    assert.matches("fewer bytes than bodyLength", msg, 1, true)
    assert.is_true(req:write("67890"))
    assert.is_true(req:finish())
    ok, _, name = req:write("x")
    assert.is_nil(ok)
    assert.are.equal("EPIPE", name)
    assert.are.equal(200, (result(req)))
    ok, msg, name = req:write("x")
    assert.is_nil(ok)
    assert.are.equal("ENOTCONN", name)
    assert.matches("the request has finished", msg, 1, true)
    local get <close> = assert(core.http{ url = object_url(srv, "ten.txt"), headers = auth(srv) })
    local status, _, body = result(get)
    assert.are.equal(200, status)
    assert.are.equal("1234567890", body)
  end)

  it("pauses a response that nobody reads", function()
    local data = random_bytes(8 * 1048576)
    put_streamed(srv, "eight.bin", data)
    local req <close> = assert(core.http{ url = object_url(srv, "eight.bin"),
      headers = auth(srv), streamResponse = true })
    mastra.sleep(500) -- the whole object would have arrived by now
    local first = req:read()
    assert.is_string(first)
    assert.is_nil(req:result()) -- still running: paused, not finished
    -- what waited is a bounded queue, not the object
    assert.is_true(#first <= 1048576, #first .. " bytes were queued")
    local rest = read_all(req)
    assert.are.equal(200, (result(req)))
    assert.is_true(first .. table.concat(rest) == data)
  end)

  it("stores nothing of a PUT that is closed or whose task is cancelled before its end",
    function()
    local chunk = random_bytes(1048576)
    local req = assert(core.http{ method = "PUT", url = object_url(srv, "closed.bin"),
      headers = auth(srv), bodyStream = true })
    write_all(req, chunk, 65536)
    while req:bufferedAmount() > 0 do task.wait(req:id()) end
    req:close()
    local t = mastra.spawn(function()
      local r <close> = assert(core.http{ method = "PUT", url = object_url(srv, "cancelled.bin"),
        headers = auth(srv), bodyStream = true })
      while true do write_all(r, chunk, 65536) end
    end)
    mastra.sleep(200)
    t:cancel()
    assert.has_error(function() t:wait() end)
    for _, key in ipairs{ "closed.bin", "cancelled.bin" } do
      local head <close> = assert(core.http{ method = "HEAD", url = object_url(srv, key),
        headers = auth(srv) })
      assert.are.equal(404, (result(head)))
    end
    -- the temporary files go when the server sees the connections end:
    -- at once as a rule, but libmicrohttpd 0.9.75 sometimes misses an end
    -- of stream that comes right behind the last bytes of a body (a JSON
    -- POST shows it too) and only notices at its 30 s inactivity timeout
    assert.is_true(platform.waitUntil(function() return not temporary_files(srv) end, 45000,
      200))
  end)

  it("validates its options", function()
    assert.has_error(function()
      core.http{ url = object_url(srv, "x"), body = "a", bodyStream = true }
    end, "http: options 'body' and 'bodyStream' exclude each other (with bodyStream, write"
      .. " the body with req:write)")
    assert.has_error(function() core.http{ url = object_url(srv, "x"), bodyLength = 3 } end,
      "http: option 'bodyLength' goes with bodyStream = true")
    assert.has_error(function() core.http{ url = object_url(srv, "x"), streamResponse = 1 } end,
      "http: option 'streamResponse' must be a boolean")
    local req <close> = assert(core.http{ url = object_url(srv, "x"), headers = auth(srv) })
    assert.has_error(function() req:write("a") end,
      "req:write: the request was not made with bodyStream = true")
    assert.has_error(function() req:read() end,
      "req:read: the request was not made with streamResponse = true")
    result(req)
  end)
end)

describe("core.http streams when the server dies", function()
  it("ends a GET that is in the middle of its body with a CURLE_* failure", function()
    local srv = platform.start{}
    finally(function() srv:close() end)
    put_streamed(srv, "big.bin", random_bytes(32 * 1048576))
    local req <close> = assert(core.http{ url = object_url(srv, "big.bin"),
      headers = auth(srv), streamResponse = true })
    local got = 0
    while got == 0 do
      local piece = req:read()
      if piece then got = got + #piece else task.wait(req:id()) end
    end
    srv:kill9()
    for _, piece in ipairs(read_all(req)) do got = got + #piece end
    assert.is_true(got < 32 * 1048576)
    local status, msg, name = result(req)
    assert.is_nil(status)
    assert.is_string(msg)
    assert.matches("^CURLE_", name)
    assert.is_nil(req:head())
  end)
end)
