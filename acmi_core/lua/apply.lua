-- apply.lua: every ACMI write, as one atomic, all-or-nothing step.
--
-- ARGV[1] = number of ops; then, per op: opcode, key index (into KEYS), op arguments.
--   SET  k value                 overwrite a STRING
--   DEL  k                       delete a key of any type
--   ZADD k score member          ZADD NX (an exact duplicate event is stored once)
--   SADD k member / SREM k member
--   HSET k field value / HDEL k field
--   ONCE k ttl_ms value          idempotency record: if k exists, nothing at all is
--                                written and the script returns {'ACMI_REPLAY', stored};
--                                otherwise k is SET to value with a TTL, with the rest
--   OBJ  k n {mode name literal value}*n
--        edit top-level fields of a JSON object stored as a STRING; mode is
--        set | setnx (only when absent: auto-fill never clobbers) | del
--
-- Phase 1 reads and checks everything (key types, stored JSON) and computes new
-- values; phase 2 only writes. Redis does not roll back, so nothing may fail in
-- phase 2. JSON values are spliced as raw text, never decoded: Redis's cjson is
-- lossy ([] becomes {}, big integers become floats). Only escaped key names go
-- through cjson, and strings survive it exactly.
--
-- Returns one entry per op: ZADD -> 1 added / 0 duplicate, OBJ -> the new JSON
-- text, others -> 0.

local EXPECT = {
  SET = 'string', OBJ = 'string', ZADD = 'zset', SADD = 'set', SREM = 'set',
  HSET = 'hash', HDEL = 'hash', ONCE = 'string',
}
local ARGC = { SET = 1, DEL = 0, ZADD = 2, SADD = 1, SREM = 1, HSET = 2, HDEL = 1, ONCE = 2 }

local ktype = {}   -- key index -> effective type as the batch goes
local kval = {}    -- key index -> string value (false = absent) for SET/OBJ keys

local function type_of(ki)
  if ktype[ki] == nil then
    local t = redis.call('TYPE', KEYS[ki])
    if type(t) == 'table' then t = t.ok end
    ktype[ki] = t
  end
  return ktype[ki]
end

local function value_of(ki)
  if kval[ki] == nil then
    kval[ki] = redis.call('GET', KEYS[ki])
  end
  return kval[ki]
end

-- ---- a JSON scanner: finds spans, decodes nothing -----------------------------------

local function skip_ws(s, i)
  return (string.find(s, '[^ \t\r\n]', i))
end

local function scan_string(s, i)       -- s[i] is '"'; returns index after the closing quote
  local j = i + 1
  while true do
    local q = string.find(s, '["\\]', j)
    if not q then return nil end
    if string.byte(s, q) == 34 then return q + 1 end
    j = q + 2
  end
end

local function scan_value(s, i)        -- returns index after the value
  local c = string.byte(s, i)
  if c == 34 then return scan_string(s, i) end
  if c == 123 or c == 91 then
    local depth, j = 0, i
    while true do
      local p = string.find(s, '[%[%]{}"]', j)
      if not p then return nil end
      local b = string.byte(s, p)
      if b == 34 then
        j = scan_string(s, p)
        if not j then return nil end
      else
        if b == 123 or b == 91 then depth = depth + 1 else depth = depth - 1 end
        j = p + 1
        if depth == 0 then return j end
      end
    end
  end
  local e = string.find(s, '[,}%] \t\r\n]', i)
  if not e or e == i then return nil end
  return e
end

local function key_name(literal)
  local body = string.sub(literal, 2, -2)
  if not string.find(body, '\\', 1, true) then return body end
  return cjson.decode(literal)
end

-- returns a list of {literal, name, raw value}, or nil when s is not a JSON object
local function parse_object(s)
  local members = {}
  local i = skip_ws(s, 1)
  if not i then return nil end
  if string.sub(s, i, i + 3) == 'null' and not skip_ws(s, i + 4) then return members end
  if string.byte(s, i) ~= 123 then return nil end
  i = skip_ws(s, i + 1)
  if not i then return nil end
  if string.byte(s, i) == 125 then return members end
  while true do
    if string.byte(s, i) ~= 34 then return nil end
    local ke = scan_string(s, i)
    if not ke then return nil end
    local literal = string.sub(s, i, ke - 1)
    i = skip_ws(s, ke)
    if not i or string.byte(s, i) ~= 58 then return nil end
    i = skip_ws(s, i + 1)
    if not i then return nil end
    local ve = scan_value(s, i)
    if not ve then return nil end
    members[#members + 1] = { literal, key_name(literal), string.sub(s, i, ve - 1) }
    i = skip_ws(s, ve)
    if not i then return nil end
    local c = string.byte(s, i)
    if c == 125 then
      if skip_ws(s, i + 1) then return nil end
      return members
    end
    if c ~= 44 then return nil end
    i = skip_ws(s, i + 1)
    if not i then return nil end
  end
end

local function find(members, name)
  for idx = 1, #members do
    if members[idx][2] == name then return idx end
  end
  return nil
end

local function edit_object(ki, pos, n)
  local current = value_of(ki)
  local members = {}
  if current then
    members = parse_object(current)
    if not members then
      return nil, 'ACMI_CORRUPT ' .. KEYS[ki] .. ' does not hold a JSON object'
    end
  end
  for _ = 1, n do
    local mode, name, literal, value = ARGV[pos], ARGV[pos + 1], ARGV[pos + 2], ARGV[pos + 3]
    pos = pos + 4
    local idx = find(members, name)
    if mode == 'del' then
      while idx do
        table.remove(members, idx)
        idx = find(members, name)
      end
    elseif mode == 'set' or (mode == 'setnx' and not idx) then
      if idx then
        members[idx][3] = value
        -- a duplicate name later in the text would win on parse: drop it
        for later = #members, idx + 1, -1 do
          if members[later][2] == name then table.remove(members, later) end
        end
      else
        members[#members + 1] = { literal, name, value }
      end
    end
  end
  local parts = {}
  for idx = 1, #members do
    parts[idx] = members[idx][1] .. ':' .. members[idx][3]
  end
  return '{' .. table.concat(parts, ',') .. '}', pos
end

-- ---- phase 1: check and plan ------------------------------------------------------

local nops = tonumber(ARGV[1])
local pos = 2
local writes = {}
local results = {}

for op = 1, nops do
  local code, ki = ARGV[pos], tonumber(ARGV[pos + 1])
  pos = pos + 2
  local expected = EXPECT[code]
  if expected then
    local t = type_of(ki)
    if t ~= 'none' and t ~= expected then
      return redis.error_reply('ACMI_WRONGTYPE ' .. KEYS[ki] .. ' holds a ' .. t ..
        ', expected a ' .. expected .. '; nothing was written')
    end
  end
  if code == 'OBJ' then
    local n = tonumber(ARGV[pos])
    local doc, nextpos = edit_object(ki, pos + 1, n)
    if not doc then return redis.error_reply(nextpos) end
    pos = nextpos
    kval[ki], ktype[ki] = doc, 'string'
    writes[#writes + 1] = { 'SET', ki, doc }
    results[op] = doc
  elseif ARGC[code] then
    local args = { code, ki }
    for a = 1, ARGC[code] do args[#args + 1] = ARGV[pos + a - 1] end
    pos = pos + ARGC[code]
    writes[#writes + 1] = args
    if code == 'ONCE' then
      local stored = redis.call('GET', KEYS[ki])
      if stored then return { 'ACMI_REPLAY', stored } end
    end
    if code == 'SET' then
      kval[ki], ktype[ki] = args[3], 'string'
    elseif code == 'DEL' then
      kval[ki], ktype[ki] = false, 'none'
    elseif ktype[ki] == 'none' then
      ktype[ki] = expected
    end
    results[op] = 0
  else
    return redis.error_reply('ACMI_BADOP unknown op ' .. tostring(code))
  end
  writes[#writes].op = op
end

-- ---- phase 2: write ---------------------------------------------------------------

for _, w in ipairs(writes) do
  local code, key = w[1], KEYS[w[2]]
  if code == 'SET' then
    redis.call('SET', key, w[3])
  elseif code == 'DEL' then
    redis.call('DEL', key)
  elseif code == 'ZADD' then
    results[w.op] = redis.call('ZADD', key, 'NX', w[3], w[4])
  elseif code == 'ONCE' then
    redis.call('SET', key, w[4], 'PX', w[3])
  elseif code == 'HSET' then
    redis.call('HSET', key, w[3], w[4])
  else
    redis.call(code, key, w[3])
  end
end

return results
