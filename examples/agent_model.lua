-- Which model the agent examples use, from the environment (a helper of
-- examples/agent.lua and examples/agent_fleet.lua, not an example itself).
--
--   MASTRA_AGENT_MODEL=provider/model     any model (its key and URL as usual)
--   ANTHROPIC_API_KEY (or ANTHROPIC_BASE_URL)  anthropic/claude-sonnet-4-6
--   OPENAI_API_KEY (or OPENAI_BASE_URL)        openai/gpt-4o-mini
--   OLLAMA_BASE_URL                            ollama/llama3.2
local M = {}

local function set(name)
  local v = os.getenv(name)
  return v ~= nil and v ~= ""
end

function M.pick()
  if set("MASTRA_AGENT_MODEL") then return os.getenv("MASTRA_AGENT_MODEL") end
  if set("ANTHROPIC_API_KEY") or set("ANTHROPIC_BASE_URL") then
    return "anthropic/claude-sonnet-4-6"
  end
  if set("OPENAI_API_KEY") or set("OPENAI_BASE_URL") then return "openai/gpt-4o-mini" end
  if set("OLLAMA_BASE_URL") then return "ollama/llama3.2" end
  return nil
end

--- The model, or a message and exit status 2 when none is configured.
function M.required(script)
  local m = M.pick()
  if m then return m end
  io.stderr:write(script, ": no model is configured. Set one of:\n",
    "  ANTHROPIC_API_KEY=...            (Anthropic, anthropic/claude-sonnet-4-6)\n",
    "  OPENAI_API_KEY=...               (OpenAI, openai/gpt-4o-mini)\n",
    "  OPENAI_BASE_URL=http://127.0.0.1:8080/v1   (a local OpenAI-compatible server:\n",
    "                                   llama.cpp, vLLM, LM Studio; no key needed)\n",
    "  OLLAMA_BASE_URL=http://127.0.0.1:11434/v1  (Ollama, ollama/llama3.2)\n",
    "  MASTRA_AGENT_MODEL=provider/model (any other; see docs/guide-agent.md)\n")
  os.exit(2)
end

return M
