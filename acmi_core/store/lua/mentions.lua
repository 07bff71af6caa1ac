-- mentions.lua: the coordination thread's mentions index, for the scripts that write a
-- coordination event themselves (locks.lua, hitl.lua: this text is put before theirs).
-- acmi_core/base/keys.py `mentioned` is the rule, and the client keeps the index for
-- every other write (entities TimelineAPI.stage); tests/integration/test_script_bounds.py holds the
-- two equal. An event mentions agent:<id> by its entity id or @<id>, the id not part of
-- a longer one; the first MENTIONS_PER_EVENT distinct agents are indexed, and each
-- agent's index keeps its MENTIONS_KEPT newest events. Cost: one pass over the event
-- (two patterns) and two commands per agent indexed.

local MENTIONS_PER_EVENT, MENTIONS_KEPT, MENTION_ID_MAX = 16, 10, 250

-- the mentions keys' base, acmi:_mentions:<tenant>:, from another bookkeeping key of the
-- same tenant (acmi:_<kind>:<tenant>, acmi_core.base.keys.internal_global)
local function mentions_base(internal_key)
  local root, tenant = string.match(internal_key, '^([^:]+):_[^:]+:([^:]+)')
  return root .. ':_mentions:' .. tenant .. ':'
end

local function mentioned(text)
  local hits = {}
  for _, pattern in ipairs({ '()agent:([A-Za-z0-9_.-]+)', '()@([A-Za-z0-9_.-]+)' }) do
    for at, id in string.gmatch(text, pattern) do
      if at == 1 or not string.find(string.sub(text, at - 1, at - 1), '^[A-Za-z0-9_.@:-]') then
        hits[#hits + 1] = { at, id }
      end
    end
  end
  table.sort(hits, function(a, b) return a[1] < b[1] end)
  local found, seen = {}, {}
  for _, hit in ipairs(hits) do
    local id = hit[2]
    if #id <= MENTION_ID_MAX and not seen[id] then
      seen[id] = true
      found[#found + 1] = id
      if #found == MENTIONS_PER_EVENT then break end
    end
  end
  return found
end

-- index one coordination event just written (score, member as ZADD took them). pcall:
-- this runs among the caller's writes, where nothing may fail; an index key another tool
-- overwrote with another type is left alone (the bootstrap reports it)
local function index_mentions(base, score, member)
  for _, id in ipairs(mentioned(member)) do
    local key = base .. id
    redis.pcall('ZADD', key, 'NX', score, member)
    redis.pcall('ZREMRANGEBYRANK', key, 0, -(MENTIONS_KEPT + 1))
  end
end
