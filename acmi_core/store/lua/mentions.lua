-- mentions.lua: the coordination thread's mentions index, for the scripts that write a
-- coordination event themselves (locks.lua, hitl.lua: this text is put before theirs).
-- acmi_core/base/keys.py `mentioned` is the rule, and the client keeps the index for
-- every other write (entities TimelineAPI.stage); tests/integration/test_script_bounds.py holds the
-- two equal. An event mentions agent:<id> by its entity id or @<id>, the id not part of
-- a longer one; the first MENTIONS_PER_EVENT distinct agents are indexed, and each
-- agent's index keeps its MENTIONS_KEPT newest events. Cost: one pass over the event
-- (two patterns) and two commands per agent indexed.

local MENTIONS_PER_EVENT, MENTIONS_KEPT, MENTION_ID_MAX = 16, 10, 250

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

-- The mentions index keys a run may write are declared: the run of KEYS from `first` up
-- to the one before KEYS[#] (the request's record), each keys.mentions(<id>), which ends
-- with :<id> (an id has no ':'), so the id is read off the key, never a key built from
-- an id. The client declares the agents it can find in what it sends (base/keys.py
-- `mentioned`, the same rule); an event whose text names another one (a value this
-- script read: a lease's holder, a HITL record's addressee) is not written: the script
-- answers REKEY with the ids it needs and the client sends the run again with their keys.
local mention_keys = {}
local function declare_mentions(first)
  for i = first, #KEYS - 1 do
    local id = string.match(KEYS[i], ':([^:]+)$')
    if id then mention_keys[id] = KEYS[i] end
  end
end

-- the ids `members` mention whose index key is not declared ({} when every one is)
local function undeclared_mentions(members)
  local missing, seen = {}, {}
  for _, member in ipairs(members) do
    for _, id in ipairs(mentioned(member)) do
      if not mention_keys[id] and not seen[id] then
        seen[id] = true
        missing[#missing + 1] = id
      end
    end
  end
  return missing
end

-- index one coordination event just written (score, member as ZADD took them), after
-- undeclared_mentions found none missing. pcall: this runs among the caller's writes,
-- where nothing may fail; an index key another tool overwrote with another type is left
-- alone (the bootstrap reports it)
local function index_mentions(score, member)
  for _, id in ipairs(mentioned(member)) do
    local key = mention_keys[id]
    redis.pcall('ZADD', key, 'NX', score, member)
    redis.pcall('ZREMRANGEBYRANK', key, 0, -(MENTIONS_KEPT + 1))
  end
end
