-- unlog.lua: delete one timeline event (by its ts and correlationId, or its stored
-- member) and add the audit event that says so, on the same timeline, as one atomic step
-- (acmi_core/entities/unlog.py).
--
-- The protocol (acmi_core/store/scripts.py UNLOG declares the same names):
--: KEYS[1] timeline: the entity's timeline ZSET
--: KEYS[2] changed: the tenant's change index (keys.changed: entity -> last change ms)
--: KEYS[3] tenants: the index of tenants with changes (keys.tenants_with(CHANGED))
--: KEYS[4..] mentions*: on the coordination thread, the mentions index (keys.mentions)
--    of each agent the deleted event and the audit event may mention, as far as the
--    client knows them (store/lua/mentions.lua); none elsewhere
--: ARGV[1] now: now_ms (the client's clock), the change's and the audit event's score
--: ARGV[2] entity: the change index's member
--: ARGV[3] tenant: the tenants index's member
--: ARGV[4] thread: 1 on the coordination thread (its mentions index kept), else 0
--: ARGV[5] score: the event's ts, as stored
--: ARGV[6] id: its correlationId ('' when member is given)
--: ARGV[7] member: the stored member itself ('' when id is given)
--: ARGV[8] audit: the audit event's JSON (its ts is now)
--: reply DELETED member: removed, with copies in the mentions index it named; the
--    audit event added; the change recorded
--: reply NONE: no such event (nothing written)
--: reply CROWDED count: more than MAX_AT_TS events share that ts, or more than
--    MAX_AT_TS_BYTES of them: give the member (nothing written)
--: reply REKEY ids*: nothing written: on the coordination thread the deleted event or
--    the audit event mentions an agent whose index is not among KEYS; ids: every agent
--    they mention, whose keys the client sends the run again with
-- Every reply but REKEY is recorded under this request's record, KEYS[#] replay
-- (store/lua/replay.lua, put before this text): a retry must not meet its own deletion
-- as NONE. Work: a ZSCORE, or one ZRANGE of the events at one ts (at most MAX_AT_TS,
-- MAX_AT_TS_BYTES: 1 MiB), a plain find in each and a decode of a candidate (of each at
-- worst); then ZREM, ZADD and the mentions' ZREM/ZADD (MENTIONS_PER_EVENT each).

local MAX_AT_TS, MAX_AT_TS_BYTES = 64, 1048576
local timeline, changed, tenants = KEYS[1], KEYS[2], KEYS[3]
local now, entity, tenant, thread = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local score, id, member, audit = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
declare_mentions(4)  -- store/lua/mentions.lua

local found = nil
if member ~= '' then
  if redis.call('ZSCORE', timeline, member) then found = member end
else
  local at = redis.call('ZRANGE', timeline, score, score, 'BYSCORE', 'LIMIT', 0, MAX_AT_TS + 1)
  local bytes = 0
  for _, m in ipairs(at) do bytes = bytes + #m end
  if #at > MAX_AT_TS or bytes > MAX_AT_TS_BYTES then
    return recorded({ 'CROWDED', #at })
  end
  -- a plain find of the id first; every member decoded only when none holds it as it
  -- is (an id with characters JSON escapes)
  for pass = 1, 2 do
    for _, m in ipairs(at) do
      if pass == 2 or string.find(m, id, 1, true) then
        local ok, event = pcall(cjson.decode, m)
        if ok and type(event) == 'table' and event.correlationId == id then
          found = m
          break
        end
      end
    end
    if found then break end
  end
end
if not found then return recorded({ 'NONE' }) end

if thread then
  local missing = undeclared_mentions({ found, audit })
  if #missing > 0 then
    local reply, seen = { 'REKEY' }, {}
    for _, text in ipairs({ found, audit }) do
      for _, agent in ipairs(mentioned(text)) do
        if not seen[agent] then
          seen[agent] = true
          reply[#reply + 1] = agent
        end
      end
    end
    return reply  -- not recorded: nothing ran, the retry with the keys is this request
  end
end

redis.call('ZREM', timeline, found)
redis.call('ZADD', timeline, 'NX', now, audit)
if thread then
  for _, agent in ipairs(mentioned(found)) do redis.pcall('ZREM', mention_keys[agent], found) end
  index_mentions(now, audit)
end
redis.call('ZADD', changed, now, entity)
redis.call('ZADD', tenants, 'GT', now, tenant)
return recorded({ 'DELETED', found })
