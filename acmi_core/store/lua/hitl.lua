-- hitl.lua: one HITL operation (create | resolve | adopt) as one atomic step.
--
-- Queues (ZSETs; the bootstrap reads them with ZRANGE 0..N, most urgent first):
--   open:   score = deadline ms,   member = the hitl-required event JSON
--   closed: score = resolution ms, member = that event with payload.resolution {by, ts, text}
--
-- The protocol (acmi_core/store/scripts.py HITL declares the same names):
--: KEYS[1] items: the tenant's HITL record HASH: correlationId -> record JSON, always
--    {"state":"open"|"closed","addressee":null|"<cat>:<id>","score":<ms>,"at":<n>,
--     "by":null|"<cat>:<id>","item":<the member, verbatim>}
--    (header values are grammar-checked ids and integers, so a pattern reads them;
--    "at" is the byte offset in the open member where ,"resolution":{...} goes: the
--    end of its payload object, computed by the client that built the member)
--: ARGV[1] op: create | resolve | adopt
--: ARGV[2] cid: the correlationId
--: create KEYS[2] queue: the addressee's open queue
--: create KEYS[3] tenants: the index of tenants with open items in such a queue (keys.tenants_with)
--: create ARGV[3] deadline
--: create ARGV[4] record_header: the record up to its item
--: create ARGV[5] member
--: create ARGV[6] tenant: marked in KEYS[3] at its earliest deadline; "": not marked
--: create reply OK
--: create reply EXISTS record
-- resolve and adopt: the queues the caller named are only used to adopt an item another
-- tool wrote (no record)
--: resolve,adopt KEYS[2] thread: the coordination thread's timeline
--: resolve,adopt KEYS[3] index: the thread namespace SET
--: resolve,adopt KEYS[4] named_open: the open queue of the addressee the caller named
--: resolve,adopt KEYS[5] named_closed: its closed queue
--: resolve,adopt KEYS[6] record_open: the open queue of the addressee the client expects
--    the item's record to name (ARGV[#]); a record naming another answers REKEY
--: resolve,adopt KEYS[7] record_closed: that addressee's closed queue
--: resolve,adopt KEYS[8..] mentions*: the mentions index (keys.mentions) of each agent the
--    resolved event may mention, as far as the client knows (store/lua/mentions.lua)
--: resolve,adopt ARGV[#] record_addressee: the addressee of KEYS[6], KEYS[7] as JSON
--    (null: the shared queue)
--: resolve,adopt ARGV[3] now
--: resolve,adopt ARGV[5] by: the resolver's entity id as JSON
--: resolve,adopt ARGV[6] thread_member
--: resolve ARGV[4] resolution: payload.resolution's JSON
--: resolve ARGV[7] window: how many of named_open to return when there is no record
--: resolve ARGV[8..] resolved_template*
--: adopt ARGV[4] closed_member: the foreign item, closed (built by the client)
--: adopt ARGV[7] foreign_member: the foreign item as it is in named_open
--: adopt ARGV[8] addressee: as JSON
--: adopt ARGV[9..] resolved_template*
--: resolve,adopt reply OK addressee score: the addressee's JSON, the item's deadline
--: resolve,adopt reply RESOLVED by at: already closed, by whom (JSON) and when
--: resolve reply NONE members*: no record: the first `window` members of named_open
--: resolve,adopt reply REKEY addressee ids*: nothing written: the record names another
--    addressee (JSON) than ARGV[#] (ids: none), or the event mentions an agent whose
--    index is not among KEYS (ids: every agent it mentions): the client sends the run
--    again with their keys (a record keeps its addressee, so one more run does)
--: adopt reply GONE: resolved, or created through ACMI, meanwhile
-- Every key is declared (tests/integration/test_declared_keys.py): the queues of the
-- item's record are the ones the client names as KEYS[6], KEYS[7] with their addressee,
-- checked against the record (a record naming another answers REKEY, nothing written).
-- A template is a count n then n items: text, slot name, text, ... (JSON built by the
-- client; the one slot, addressee, is filled with the record's raw JSON value).
--
-- Cost: O(size of the item + log N); a resolve of an unknown cid returns the first
-- `window` (<= 100) members of KEYS[4] so the client can look for a foreign item there.
-- Every reply is recorded under this request's record, KEYS[#] replay (store/lua/replay.lua,
-- put before this text): a resolve's retry must not find its own item resolved.
-- Phase 1 reads and checks (key types, the record); phase 2 only writes.
-- Errors (nothing written): ACMI_WRONGTYPE <key> ..., ACMI_CORRUPT <key> ...

local function check_type(key, want)
  local t = redis.call('TYPE', key)
  if type(t) == 'table' then t = t.ok end
  if t ~= 'none' and t ~= want then
    return redis.error_reply('ACMI_WRONGTYPE ' .. key .. ' holds a ' .. t .. ', not a ' .. want)
  end
  return nil
end

local function render(i, values)
  local n = tonumber(ARGV[i])
  local out = {}
  for j = 1, n do
    local item = ARGV[i + j]
    if j % 2 == 1 then out[#out + 1] = item else out[#out + 1] = values[item] end
  end
  return table.concat(out)
end

local HEADER = '^{"state":"(%a+)","addressee":(.-),"score":(%d+),"at":(%d+),"by":(.-),"item":(.*)}$'
local items, op, cid = KEYS[1], ARGV[1], ARGV[2]

local err = check_type(items, 'hash')
if err then return err end

if op == 'create' then
  for _, key in ipairs({KEYS[2], KEYS[3]}) do
    err = check_type(key, 'zset')
    if err then return err end
  end
  local existing = redis.call('HGET', items, cid)
  if existing then return recorded({'EXISTS', existing}) end
  local member = ARGV[5]
  redis.call('ZADD', KEYS[2], 'NX', ARGV[3], member)
  redis.call('HSET', items, cid, ARGV[4] .. member .. '}')
  -- the standup brief finds the tenant by it (the queue's earliest, as its ZHEAD re-syncs)
  if ARGV[6] ~= '' then redis.call('ZADD', KEYS[3], 'LT', ARGV[3], ARGV[6]) end
  return recorded({'OK'})
end

local thread, index, named_open, named_closed = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local record_open, record_closed, record_addressee = KEYS[6], KEYS[7], ARGV[#ARGV]
for _, kt in ipairs({{thread, 'zset'}, {index, 'set'}, {named_open, 'zset'},
    {named_closed, 'zset'}, {record_open, 'zset'}, {record_closed, 'zset'}}) do
  err = check_type(kt[1], kt[2])
  if err then return err end
end
declare_mentions(8)  -- store/lua/mentions.lua
local now, by, thread_member = ARGV[3], ARGV[5], ARGV[6]

-- the REKEY reply (not recorded: nothing ran), when the event would mention an agent
-- whose mentions index is not declared; else nil
local function rekey(addressee_json, event)
  local missing = event and undeclared_mentions({event}) or {}
  if event and #missing == 0 then return nil end
  local reply = {'REKEY', addressee_json}
  -- every agent it mentions, not only the missing: the client declares exactly these
  if event then
    for _, id in ipairs(mentioned(event)) do reply[#reply + 1] = id end
  end
  return reply
end

local function close(open_key, closed_key, old, new, addressee_json, record_at, event)
  redis.call('ZREM', open_key, old)
  redis.call('ZADD', closed_key, now, new)
  redis.call('HSET', items, cid, '{"state":"closed","addressee":' .. addressee_json ..
    ',"score":' .. now .. ',"at":' .. record_at .. ',"by":' .. by .. ',"item":' .. new .. '}')
  redis.call('ZADD', thread, 'NX', now, event)
  index_mentions(now, event)  -- store/lua/mentions.lua
  redis.call('SADD', index, thread_member)
end

local record = redis.call('HGET', items, cid)
if record then
  local state, addressee, score, at, who, item = string.match(record, HEADER)
  if not state or (addressee ~= 'null' and not string.match(addressee, '^"[^"\\]+"$')) then
    return redis.error_reply('ACMI_CORRUPT ' .. items .. ' ' .. cid .. ' is not a HITL record')
  end
  if state == 'closed' then return recorded({'RESOLVED', who, score}) end
  -- an item ACMI created while the client was adopting a foreign one: resolve that instead
  if op == 'adopt' then return recorded({'GONE'}) end
  local at_n = tonumber(at)
  if state ~= 'open' or at_n < 1 or at_n > #item then
    return redis.error_reply('ACMI_CORRUPT ' .. items .. ' ' .. cid .. ' is not a HITL record')
  end
  if addressee ~= record_addressee then return rekey(addressee, nil) end
  local event = render(8, {addressee = addressee})
  local again = rekey(addressee, event)
  if again then return again end
  -- payload.resolution goes at the end of the payload object (byte offset `at`)
  local closed = string.sub(item, 1, at_n) .. ',"resolution":' .. ARGV[4] ..
    string.sub(item, at_n + 1)
  close(record_open, record_closed, item, closed, addressee, at, event)
  return recorded({'OK', addressee, score})
end

if op == 'resolve' then
  local window = tonumber(ARGV[7])
  local found = redis.call('ZRANGE', named_open, 0, window - 1)
  local reply = {'NONE'}
  for _, m in ipairs(found) do reply[#reply + 1] = m end
  return recorded(reply)
end

if op == 'adopt' then
  local foreign, addressee = ARGV[7], ARGV[8]
  local score = redis.call('ZSCORE', named_open, foreign)
  if not score then return recorded({'GONE'}) end
  local event = render(9, {addressee = addressee})
  local again = rekey(addressee, event)
  if again then return again end
  close(named_open, named_closed, foreign, ARGV[4], addressee, '0', event)
  return recorded({'OK', addressee, score})
end

return redis.error_reply('ACMI_BADOP op ' .. tostring(op))
