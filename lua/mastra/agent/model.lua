-- The model of an Agent: which API it speaks, where, with which key
-- (upstream's "provider/model" strings and environment variables), and
-- the errors of its HTTP answers (which are retried, and how long to wait).
local core = require "mastra.core"
local errors = require "mastra.errors"
local options = require "mastra.options"

local model = {}

-- Default base URLs, as the AI SDK providers that upstream uses have them.
-- Every provider but anthropic speaks OpenAI Chat Completions.
local BASE_URLS = {
  anthropic = "https://api.anthropic.com/v1",
  openai = "https://api.openai.com/v1",
  groq = "https://api.groq.com/openai/v1",
  mistral = "https://api.mistral.ai/v1",
  openrouter = "https://openrouter.ai/api/v1",
  deepseek = "https://api.deepseek.com/v1",
  xai = "https://api.x.ai/v1",
  togetherai = "https://api.together.xyz/v1",
  fireworks = "https://api.fireworks.ai/inference/v1",
  cerebras = "https://api.cerebras.ai/v1",
  perplexity = "https://api.perplexity.ai",
  lmstudio = "http://127.0.0.1:1234/v1",
  ollama = "http://127.0.0.1:11434/v1",
}
model.BASE_URLS = BASE_URLS

-- Local servers need no key.
local KEYLESS = { lmstudio = true, ollama = true }

local function nonblank(v)
  if type(v) == "string" and v:match("%S") then return v end
  return nil
end

--- The environment variable of a provider's setting: OPENAI_API_KEY,
-- MY_PROXY_BASE_URL (upper case, '-' as '_').
function model.envName(provider, what)
  return (provider:upper():gsub("[^%w]", "_")) .. "_" .. what
end

local function is_table(v) return type(v) == "table", "a table" end

local TABLE_OPTS = {
  id = options.string,
  url = options.string,
  apiKey = options.string,
  headers = function(v)
    if type(v) ~= "table" then return false, "a table of header = value strings" end
    for k, x in pairs(v) do
      if type(k) ~= "string" or type(x) ~= "string" then
        return false, "a table of header = value strings"
      end
    end
    return true
  end,
  api = options.one_of("anthropic", "openai"),
  maxOutputTokens = options.positive_integer,
  providerOptions = is_table,
}

--- Check `spec` ("provider/model" or a table) at Agent.new: its shape only;
-- keys and URLs are read from the environment when a request is made.
function model.check(where, spec)
  if type(spec) == "string" then
    if not spec:match("^[%w%._%-]+/.+$") then
      error(("%s: option 'model' must be \"provider/model\" (for example"
        .. " \"anthropic/claude-sonnet-4-6\", \"openai/gpt-4o\", \"ollama/llama3.2\") or a"
        .. " table {id, url, apiKey, headers, api} (got %s)")
        :format(where, options.describe(spec)), 3)
    end
    return spec
  elseif type(spec) == "table" then
    options.check(where .. ": model", spec, TABLE_OPTS, 4)
    if spec.id == nil then
      error(where .. ": model.id is required (\"provider/model\", or a model name with"
        .. " url)", 3)
    end
    return spec
  end
  error(("%s: option 'model' must be a string \"provider/model\" or a table (got %s)")
    :format(where, options.describe(spec)), 3)
end

--- The model as a request needs it: {provider, modelId, api, url (the
-- endpoint), headers, id}. Raises ModelConfigError (naming the variable)
-- when the key or the URL is missing: before any request.
function model.resolve(spec, getenv)
  getenv = getenv or os.getenv
  local t = type(spec) == "table" and spec or { id = spec }
  local provider, name = t.id:match("^([%w%._%-]+)/(.+)$")
  if not provider then provider, name = "custom", t.id end
  provider = provider:lower()
  local api = t.api or (provider == "anthropic" and "anthropic" or "openai")
  local url_var, key_var = model.envName(provider, "BASE_URL"), model.envName(provider, "API_KEY")
  local base = nonblank(t.url) or nonblank(getenv(url_var))
  local explicit_url = base ~= nil
  base = base or BASE_URLS[provider]
  if base == nil then
    errors.ModelConfigError:raise({
      message = ("model %q: no URL for provider %q: set %s (for example"
        .. " http://127.0.0.1:8080/v1) or give the model as a table {id = %q, url = ...}")
        :format(t.id, provider, url_var, t.id),
      variable = url_var, provider = provider,
    }, 2)
  end
  local key = nonblank(t.apiKey) or nonblank(getenv(key_var))
  if key == nil and not KEYLESS[provider] and not explicit_url then
    errors.ModelConfigError:raise({
      message = ("model %q: no API key: set %s (or give apiKey in the model table; a"
        .. " local server: set %s or the table's url)"):format(t.id, key_var, url_var),
      variable = key_var, provider = provider,
    }, 2)
  end
  base = base:gsub("/+$", "")
  local headers = { ["content-type"] = "application/json", accept = "text/event-stream" }
  local endpoint
  if api == "anthropic" then
    endpoint = base .. "/messages"
    if key then headers["x-api-key"] = key end
    headers["anthropic-version"] = "2023-06-01"
  else
    endpoint = base .. "/chat/completions"
    if key then headers.authorization = "Bearer " .. key end
  end
  for k, v in pairs(t.headers or {}) do headers[k:lower()] = v end
  return {
    id = t.id, provider = provider, modelId = name, api = api, url = endpoint,
    headers = headers, maxOutputTokens = t.maxOutputTokens, providerOptions = t.providerOptions,
  }
end

-- {====== errors of a call ======

local RETRY_STATUS = { [408] = true, [409] = true, [429] = true, [529] = true }

local SPEND_LIMIT = { insufficient_quota = true, billing_hard_limit_reached = true,
  billing_error = true, billing_not_active = true }

local function context_text(s)
  s = (s or ""):lower()
  return s:find("context length", 1, true) or s:find("context_length", 1, true)
    or s:find("context window", 1, true) or s:find("prompt is too long", 1, true)
    or s:find("too many tokens", 1, true) or s:find("maximum context", 1, true)
end

--- The error object of an API error: status (nil for a stream's error
-- event), the decoded body's error {type, code, message}, headers.
function model.apiError(m, status, headers, body, in_stream)
  headers = headers or {}
  local j = type(body) == "table" and body or core.jsonDecode(body or "")
  local e = type(j) == "table" and (type(j.error) == "table" and j.error or j) or {}
  local etype = type(e.type) == "string" and e.type or nil
  local code = type(e.code) == "string" and e.code or nil
  local msg = type(e.message) == "string" and e.message
    or (type(j) == "table" and type(j.error) == "string" and j.error)
    or (type(body) == "string" and body ~= "" and body:sub(1, 500)) or nil
  local request_id = headers["request-id"] or headers["x-request-id"]
    or (type(j) == "table" and j.request_id) or nil
  local fields = {
    status = status, type = code or etype, requestId = request_id, headers = headers,
    body = type(body) == "string" and body or nil, url = m.url, provider = m.provider,
    model = m.id,
  }
  local where = in_stream and "the stream of" or ("HTTP " .. tostring(status) .. " from")
  fields.message = ("model %s: %s %s%s%s"):format(m.id, where, m.url,
    fields.type and (": " .. fields.type) or "", msg and (": " .. msg) or "")
  local class = errors.ModelAPIError
  local should = headers["x-should-retry"]
  if code == "context_length_exceeded" or etype == "context_length_exceeded"
      or ((status == 400 or status == 413 or in_stream) and context_text(msg)) then
    class = errors.ModelContextError
    fields.retryable = false
  elseif status == 429 or etype == "rate_limit_error" then
    class = errors.ModelRateLimitError
    fields.spendLimit = SPEND_LIMIT[code or ""] or SPEND_LIMIT[etype or ""]
      or (msg and (msg:lower():find("quota", 1, true) or msg:lower():find("spend limit", 1, true)
        or msg:lower():find("credit balance", 1, true))) and true or nil
    fields.retryable = not fields.spendLimit
  elseif in_stream then
    fields.retryable = etype == "overloaded_error" or etype == "api_error"
      or etype == "server_error"
  else
    fields.retryable = RETRY_STATUS[status] or (status >= 500 and status <= 599) or false
  end
  -- the server's word wins (the OpenAI and Anthropic SDKs obey it), but a
  -- context or spend limit stays what it is: the same request fails again
  if class ~= errors.ModelContextError and not fields.spendLimit then
    if should == "true" then fields.retryable = true
    elseif should == "false" then fields.retryable = false end
  end
  fields.retryAfterMs = model.retryAfter(headers)
  return class:new(fields)
end

--- The wait a server asked for, in ms: retry-after-ms, else retry-after
-- (seconds, or an HTTP date), or nil.
function model.retryAfter(headers)
  local ms = tonumber(headers["retry-after-ms"] or "")
  if ms and ms >= 0 then return ms end
  local v = headers["retry-after"]
  local s = tonumber(v or "")
  if s and s >= 0 then return s * 1000 end
  if type(v) == "string" then
    local d, mon, y, h, mi, sec = v:match("^%a+, (%d+) (%a+) (%d+) (%d+):(%d+):(%d+) GMT$")
    local months = { Jan = 1, Feb = 2, Mar = 3, Apr = 4, May = 5, Jun = 6, Jul = 7, Aug = 8,
      Sep = 9, Oct = 10, Nov = 11, Dec = 12 }
    if d and months[mon] then
      local t = os.time{ year = tonumber(y), month = months[mon], day = tonumber(d),
        hour = tonumber(h), min = tonumber(mi), sec = tonumber(sec), isdst = false }
      -- os.time reads the fields as local time: correct by the zone offset
      local utc = os.time(os.date("!*t", t))
      local epoch = t + (t - utc)
      return math.max(0, (epoch * 1000) - core.time())
    end
  end
  return nil
end

--- How long to wait before retry number `attempt` (1, 2, ...): what the
-- server asked, capped at `cap`; else 0.5 s doubling (at most 8 s), less
-- up to a quarter at random.
function model.backoff(attempt, err, cap, random)
  random = random or math.random
  local asked = type(err) == "table" and err.retryAfterMs or nil
  if asked then return math.min(asked, cap) end
  local base = math.min(500 * 2 ^ (attempt - 1), 8000)
  return math.floor(base * (1 - 0.25 * random()))
end

-- }======

return model
