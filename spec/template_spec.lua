-- mastra.Template (docs/api.md "Template"): the recipe's chained methods,
-- upstream's limits (the errors name the operation), the wire format of
-- the definition and of templateBuildEnvs, template:build's polling of
-- POST /sandbox/templates/builds, and a PlatformSandbox of a template
-- honouring templatePending. The platform here is a fetch function.
local core = require "mastra.core"
local mastra = require "mastra"

local Template = mastra.Template
local errors = mastra.errors
local P = "https://proxy.test/v1/railway/projects/p"

-- a fake platform: answers[path] is a list of answers given in turn (the
-- last repeats); log gets {method, url, json}
local function platform(answers, log)
  local seen = {}
  return function(req)
    local path = req.url:sub(#P + 1):gsub("%?.*$", "")
    log[#log + 1] = { method = req.method, path = path,
      json = req.body and req.body ~= "" and core.jsonDecode(req.body) or nil, body = req.body }
    local list = answers[req.method .. " " .. path]
    if list == nil then return { status = 404, body = '{"error":{"message":"no","type":"x"}}' } end
    seen[path] = (seen[path] or 0) + 1
    local a = list[math.min(seen[path], #list)]
    return { status = a.status or 200, body = core.jsonEncode(a.json or {}) }
  end
end

local function opts(fetch, extra)
  local o = { accessToken = "t", proxyUrl = "https://proxy.test", projectId = "p",
    environmentId = "env1", fetch = fetch }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

describe("mastra.Template", function()
  it("chains the operations into upstream's definition", function()
    local t = Template.new()
      :runCmd("echo hi > /opt/hi")
      :runCmd({ "mkdir -p /a", "touch /a/b" })
      :setWorkdir("/workspace/app")
      :setEnvs({ MODE = "test", N = 3 })
      :setEnvs({ TOKEN = "secret" }, { ephemeral = true })
      :aptInstall({ "curl" }, { noInstallRecommends = true })
      :pipInstall("requests")
      :pipInstall(nil, { g = true })
      :npmInstall()
      :npmInstall({ "left-pad" }, { dev = true })
      :cpuCount(2):memoryMB(1024)
      :withFamily("web")
    assert.are.equal('{"schemaVersion":1,"family":"web","operations":['
      .. '{"method":"runCmd","args":["echo hi > /opt/hi"]},'
      .. '{"method":"runCmd","args":[["mkdir -p /a","touch /a/b"]]},'
      .. '{"method":"setWorkdir","args":["/workspace/app"]},'
      .. '{"method":"setEnvs","args":[{"MODE":"test","N":"3"}]},'
      .. '{"method":"aptInstall","args":[["curl"],{"noInstallRecommends":true}]},'
      .. '{"method":"pipInstall","args":[["requests"]]},'
      .. '{"method":"pipInstall","args":[null,{"g":true}]},'
      .. '{"method":"npmInstall","args":[]},'
      .. '{"method":"npmInstall","args":[["left-pad"],{"dev":true}]},'
      .. '{"method":"cpuCount","args":[2]},{"method":"memoryMB","args":[1024]}]}', t:toJSON())
    -- the ephemeral values are the build's only
    assert.are.same({ TOKEN = "secret" }, t:buildEnvs())
    assert.is_nil(t:toJSON():find("secret", 1, true))
  end)

  it("checks each operation, naming it", function()
    local t = Template.new():runCmd("true")
    assert.has_error(function() t:runCmd(42) end,
      "Template:runCmd (operation #2): command must be a string (got number 42)")
    assert.has_error(function() t:setWorkdir("rel") end,
      'Template:setWorkdir (operation #2): path must be absolute (got "rel")')
    assert.has_error(function() t:setEnvs({ ["1x"] = "v" }) end,
      'Template:setEnvs (operation #2): envs: "1x" is not a variable name (letters, digits and _)')
    assert.has_error(function() t:aptInstall({}) end,
      "Template:aptInstall (operation #2): packages is empty")
    assert.has_error(function() t:npmInstall({ "x" }, { global = true }) end)
    assert.has_error(function() t:cpuCount(0) end,
      "Template:cpuCount (operation #2): count must be an integer between 1 and 64 (got number 0)")
    assert.has_error(function() Template.new{ nope = 1 } end)
  end)

  it("keeps upstream's limits: strings, items, operations, the serialized size", function()
    local t = Template.new()
    local ok, err = pcall(t.runCmd, t, ("x"):rep(32 * 1024 + 1))
    assert.is_false(ok)
    assert.matches("operation #1%): command is 32769 bytes, more than the limit of 32768", err)
    local many = {}
    for i = 1, 513 do many[i] = "p" .. i end
    ok, err = pcall(t.aptInstall, t, many)
    assert.is_false(ok)
    assert.matches("packages has 513 items, more than the limit of 512", err)
    for _ = 1, 256 do t:runCmd("true") end
    ok, err = pcall(t.runCmd, t, "true")
    assert.is_false(ok)
    assert.matches("operation #257%): a template holds at most 256 operations", err)
    local big = Template.new()
    for _ = 1, 9 do big:runCmd(("y"):rep(30000)) end
    ok, err = pcall(big.definition, big)
    assert.is_false(ok)
    assert.matches("more than the limit of 262144", err)
    assert.has_error(function() Template.new():definition() end)
  end)

  it("builds: posts the definition and the build envs, polls while pending", function()
    local log, progress = {}, {}
    local fetch = platform({ ["POST /sandbox/templates/builds"] = {
      { json = { status = "pending", templateId = "tpl_1", retryAfterMs = 120 } },
      { json = { status = "pending", templateId = "tpl_1", retryAfterMs = 120 } },
      { json = { status = "ready", templateId = "tpl_1" } } } }, log)
    local t = Template.new():runCmd("true"):setEnvs({ K = "v" }, { ephemeral = true })
    local started = mastra.now()
    local r = t:build(opts(fetch,
      { onProgress = function(p) progress[#progress + 1] = p.status end }))
    assert.are.equal("tpl_1", r.templateId)
    assert.are.equal("ready", r.status)
    assert.is_true(mastra.now() - started >= 240) -- retryAfterMs honoured, twice
    assert.are.same({ "pending", "pending", "ready" }, progress)
    assert.are.equal(3, #log)
    assert.are.equal('{"environmentId":"env1","templateDefinition":{"schemaVersion":1,'
      .. '"operations":[{"method":"runCmd","args":["true"]}]},"templateBuildEnvs":{"K":"v"}}',
      log[1].body)
  end)

  it("raises PlatformTemplateBuildError with the platform's message when it failed", function()
    local fetch = platform({ ["POST /sandbox/templates/builds"] = {
      { json = { status = "failed", templateId = "tpl_2",
        error = "operation #1 (runCmd) exited with 3: boom" } } } }, {})
    local ok, err = pcall(Template.build, Template.new():runCmd("exit 3"), opts(fetch))
    assert.is_false(ok)
    assert.is_true(errors.PlatformTemplateBuildError:is(err))
    assert.are.equal("tpl_2", err.templateId)
    assert.are.equal("Sandbox template build failed: operation #1 (runCmd) exited with 3: boom",
      err.message)
  end)

  it("raises PlatformTemplateBuildTimeoutError past its timeout", function()
    local fetch = platform({ ["POST /sandbox/templates/builds"] = {
      { json = { status = "pending", templateId = "tpl_3", retryAfterMs = 50 } } } }, {})
    local ok, err = pcall(Template.build, Template.new():runCmd("sleep 1"),
      opts(fetch, { timeout = 200 }))
    assert.is_false(ok)
    assert.is_true(errors.PlatformTemplateBuildTimeoutError:is(err))
    assert.are.equal("Sandbox template tpl_3 was not ready within 200ms", err.message)
  end)
end)

describe("PlatformSandbox of a template", function()
  it("sends templateDefinition and templateBuildEnvs, and waits out templatePending", function()
    local log = {}
    local fetch = platform({ ["POST /sandbox"] = {
      { status = 202, json = { status = "pending",
        templatePending = { templateId = "tpl_9", retryAfterMs = 150 } } },
      { status = 201, json = { id = "sbx_t", status = "ready" } } } }, log)
    local t = Template.new():runCmd("touch /x"):setEnvs({ B = "1" }, { ephemeral = true })
    local sb = mastra.PlatformSandbox.new(opts(fetch, { template = t, id = "k1" }))
    local started = mastra.now()
    assert.are.same({ outcome = "created" }, sb:start())
    assert.is_true(mastra.now() - started >= 150)
    assert.are.equal("sbx_t", sb.sandboxId)
    assert.are.equal(2, #log)
    assert.are.equal('{"id":"k1","templateDefinition":{"schemaVersion":1,"operations":'
      .. '[{"method":"runCmd","args":["touch /x"]}]},"templateBuildEnvs":{"B":"1"},'
      .. '"environmentId":"env1","env":{}}', log[1].body)
    assert.are.equal(log[1].body, log[2].body)
    -- a clone inherits the template
    local c = sb:clone{ id = "k2" }
    assert.are.equal(t, c.template)
    sb._cfg = nil -- no destroy on the wire here
    sb.sandboxId = nil
  end)

  it("raises PlatformTemplateBuildError when the create says the build failed", function()
    local fetch = platform({ ["POST /sandbox"] = { { status = 422, json = { error = {
      message = "operation #1 (runCmd) exited with 1", type = "template_build_failed" } } } } },
      {})
    local sb = mastra.PlatformSandbox.new(opts(fetch,
      { template = Template.new():runCmd("false") }))
    local ok, err = pcall(sb.start, sb)
    assert.is_false(ok)
    assert.is_true(errors.PlatformTemplateBuildError:is(err))
    assert.matches("exited with 1", err.message)
  end)

  it("refuses a template that is not a mastra.Template", function()
    assert.has_error(function()
      mastra.PlatformSandbox.new(opts(function() end, { template = { operations = {} } }))
    end, "PlatformSandbox.new: option 'template' must be a mastra.Template (got table)")
  end)
end)
