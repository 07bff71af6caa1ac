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
--        set | setnx (only when absent: auto-fill never clobbers) | del;
--        literal is name as a JSON string, value is JSON text
--
-- Phase 1 reads and checks everything (arguments, key types, stored JSON) and computes
-- new values; phase 2 only writes. Redis does not roll back, so nothing may fail in
-- phase 2. JSON values are spliced as raw text, never decoded: Redis's cjson is
-- lossy ([] becomes {}, big integers become floats). Only escaped key names go
-- through cjson, and strings survive it exactly.
--
-- Returns one entry per op: ZADD -> 1 added / 0 duplicate, OBJ -> the new JSON
-- text, others -> 0. Errors (nothing was written), each starting with a marker:
--   ACMI_WRONGTYPE <key> ...    a key holds another Redis type than its op needs
--   ACMI_CORRUPT <key> ...      an OBJ key holds text that is not a JSON object
--   ACMI_BADOP op <i> <op>: ... the plan is malformed (unknown op, key index out of
--   ACMI_BADOP plan: ...        range, missing or bad argument, miscounted ops): a
--                               bug in the code that built it (writes.py maps each)

local find, byte, sub, gsub = string.find, string.byte, string.sub, string.gsub
local unpack = unpack or table.unpack

-- op -> the Redis type its key must hold when it exists; whether it creates the key
-- with that type (SREM and HDEL never create one); its fixed argument count
local OPS = {
  SET  = { type = 'string', argc = 1 },
  DEL  = { argc = 0 },
  ZADD = { type = 'zset', creates = true, argc = 2 },
  SADD = { type = 'set', creates = true, argc = 1 },
  SREM = { type = 'set', argc = 1 },
  HSET = { type = 'hash', creates = true, argc = 2 },
  HDEL = { type = 'hash', argc = 1 },
  ONCE = { type = 'string', argc = 2 },
  OBJ  = { type = 'string' },  -- 1 + 4 * n arguments
}

-- ---- the batch so far ---------------------------------------------------------------

local ktype = {}   -- key index -> effective type as the batch goes
local kval = {}    -- key index -> string value (false = absent) for SET/OBJ/ONCE keys

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

-- ---- argument checks ----------------------------------------------------------------

local function count_of(s)         -- a non-negative decimal integer, or nil
  if s and #s <= 15 and find(s, '^%d+$') then return tonumber(s) end
  return nil
end

local function score_of(s)         -- a decimal number or +-inf, as ZADD takes it; or nil
  if not s then return nil end
  if find(string.lower(s), '^[+-]?inf$') then return s end
  local x = tonumber(s)
  if not x or not find(s, '^[+-]?[%d.][%d.eE+-]*$') then return nil end  -- no hex, no nan
  if x == math.huge or x == -math.huge then return nil end  -- Redis refuses 1e999
  if x == 0 and find((string.match(s, '^[^eE]*')), '[1-9]') then return nil end  -- and 1e-999
  return s
end

local function ttl_of(s)           -- PX milliseconds: a positive integer Redis takes; or nil
  if s and #s <= 15 and find(s, '^[1-9]%d*$') then return s end
  return nil
end

-- the error for a malformed plan: where ('op 3 ZADD'), what is wrong, the argument
local function bad(where, what, value)
  local message = 'ACMI_BADOP ' .. where .. ': ' .. what
  if value ~= nil then  -- shown short, on one line
    message = message .. " '" .. (gsub(sub(value, 1, 40), '%c', '?')) .. "'"
  end
  return redis.error_reply(message .. '; nothing was written')
end

-- ---- a JSON scanner: finds spans, decodes nothing -----------------------------------

local QUOTE, BACKSLASH, COLON, COMMA = 34, 92, 58, 44
local LBRACE, RBRACE, LBRACKET = 123, 125, 91
local NOT_SPACE = '[^ \t\r\n]'
local QUOTE_OR_BACKSLASH = '["\\]'
local BRACKET_OR_QUOTE = '[%[%]{}"]'
local ATOM_END = '[,}%] \t\r\n]'   -- what ends a number, true, false or null

local function skip_ws(s, i)
  return (find(s, NOT_SPACE, i))
end

local function scan_string(s, i)       -- s[i] is '"'; returns index after the closing quote
  local j = i + 1
  while true do
    local q = find(s, QUOTE_OR_BACKSLASH, j)
    if not q then return nil end
    if byte(s, q) ~= BACKSLASH then return q + 1 end
    j = q + 2                          -- skip the escaped byte
  end
end

local function scan_value(s, i)        -- returns index after the value
  local c = byte(s, i)
  if c == QUOTE then return scan_string(s, i) end
  if c == LBRACE or c == LBRACKET then
    local depth, j = 0, i
    while true do
      local p = find(s, BRACKET_OR_QUOTE, j)
      if not p then return nil end
      local b = byte(s, p)
      if b == QUOTE then
        j = scan_string(s, p)
        if not j then return nil end
      else
        if b == LBRACE or b == LBRACKET then depth = depth + 1 else depth = depth - 1 end
        j = p + 1
        if depth == 0 then return j end
      end
    end
  end
  local e = find(s, ATOM_END, i)
  if not e or e == i then return nil end
  return e
end

local function key_name(literal)       -- the name a JSON string literal stands for, or nil
  local body = sub(literal, 2, -2)
  if not find(body, '\\', 1, true) then return body end
  local ok, name = pcall(cjson.decode, literal)
  if ok and type(name) == 'string' then return name end
  return nil
end

-- ---- a JSON object as its members -------------------------------------------------
-- lit[i] and raw[i] are member i's name literal and value text, raw[i] == false once it
-- is removed; first[name] is the first member called name and later[name] lists the
-- others (JSON written by others may repeat a name, and a parser keeps the last one).

local function new_object()
  return { n = 0, lit = {}, raw = {}, first = {}, later = {} }
end

local function add_member(obj, literal, name, raw)
  local n = obj.n + 1
  obj.n, obj.lit[n], obj.raw[n] = n, literal, raw
  if obj.first[name] == nil then
    obj.first[name] = n
  else
    local later = obj.later[name]
    if not later then
      later = {}
      obj.later[name] = later
    end
    later[#later + 1] = n
  end
end

local function drop_later(obj, name)
  local later = obj.later[name]
  if later then
    for _, i in ipairs(later) do obj.raw[i] = false end
    obj.later[name] = nil
  end
end

-- mode -> how it edits a field
local EDIT = {
  set = function(obj, name, literal, raw)
    local i = obj.first[name]
    if i then
      obj.raw[i] = raw       -- in place, keeping the stored name literal
      drop_later(obj, name)  -- a duplicate later in the text would win on parse
    else
      add_member(obj, literal, name, raw)
    end
  end,
  setnx = function(obj, name, literal, raw)
    if not obj.first[name] then add_member(obj, literal, name, raw) end
  end,
  del = function(obj, name)
    local i = obj.first[name]
    if i then
      obj.raw[i] = false
      obj.first[name] = nil
      drop_later(obj, name)
    end
  end,
}

-- the members of s, or nil when s is not a JSON object (JSON null counts as {})
local function parse_object(s)
  local obj = new_object()
  local i = skip_ws(s, 1)
  if not i then return nil end
  if sub(s, i, i + 3) == 'null' and not skip_ws(s, i + 4) then return obj end
  if byte(s, i) ~= LBRACE then return nil end
  i = skip_ws(s, i + 1)
  if not i then return nil end
  if byte(s, i) == RBRACE then
    if skip_ws(s, i + 1) then return nil end
    return obj
  end
  while true do
    if byte(s, i) ~= QUOTE then return nil end
    local ke = scan_string(s, i)
    if not ke then return nil end
    local literal = sub(s, i, ke - 1)
    local name = key_name(literal)
    if not name then return nil end
    i = skip_ws(s, ke)
    if not i or byte(s, i) ~= COLON then return nil end
    i = skip_ws(s, i + 1)
    if not i then return nil end
    local ve = scan_value(s, i)
    if not ve then return nil end
    add_member(obj, literal, name, sub(s, i, ve - 1))
    i = skip_ws(s, ve)
    if not i then return nil end
    local c = byte(s, i)
    if c == RBRACE then
      if skip_ws(s, i + 1) then return nil end
      return obj
    end
    if c ~= COMMA then return nil end
    i = skip_ws(s, i + 1)
    if not i then return nil end
  end
end

local function object_text(obj)
  local parts = {}
  for i = 1, obj.n do
    local raw = obj.raw[i]
    if raw then parts[#parts + 1] = obj.lit[i] .. ':' .. raw end
  end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- ---- phase 1: check and plan ------------------------------------------------------

-- OBJ's arguments from ARGV[pos]: the object's new text and where the next op starts;
-- or nil and an error
local function edit_object(where, ki, pos)
  local n = count_of(ARGV[pos])
  if not n then return nil, bad(where, 'field count is not a count', ARGV[pos]) end
  if ARGV[pos + 4 * n] == nil then return nil, bad(where, 'arguments missing') end
  local obj = parse_object(value_of(ki) or '{}')
  if not obj then
    return nil, redis.error_reply('ACMI_CORRUPT ' .. KEYS[ki] .. ' does not hold a JSON object')
  end
  for f = 1, n do
    local at = pos + 4 * f - 3
    local mode, name, literal, raw = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
    local edit = EDIT[mode]
    if not edit then return nil, bad(where, 'field ' .. f .. ' mode is unknown', mode) end
    edit(obj, name, literal, raw)
  end
  return object_text(obj), pos + 1 + 4 * n
end

-- Reads op number `op`, which starts at ARGV[pos], and checks it against the batch so
-- far. Returns the write to do (a Redis command), the op's result (nil: the write's
-- reply, known in phase 2) and where the next op starts; or nil and the script's
-- answer: an error reply, or the replay of an idempotency record.
local function plan_op(op, pos)
  local code = ARGV[pos]
  local spec = OPS[code]
  if not spec then return nil, bad('op ' .. op, 'unknown op code', code) end
  local where = 'op ' .. op .. ' ' .. code
  local ki = count_of(ARGV[pos + 1])
  if not ki or ki < 1 or ki > #KEYS then
    return nil, bad(where, 'key index is not in 1..' .. #KEYS, ARGV[pos + 1])
  end
  local key, t = KEYS[ki], type_of(ki)
  if spec.type and t ~= 'none' and t ~= spec.type then
    return nil, redis.error_reply('ACMI_WRONGTYPE ' .. key .. ' holds a ' .. t ..
      ', expected a ' .. spec.type .. '; nothing was written')
  end
  pos = pos + 2

  if code == 'OBJ' then
    local doc, nextpos = edit_object(where, ki, pos)
    if not doc then return nil, nextpos end
    kval[ki], ktype[ki] = doc, 'string'
    return { 'SET', key, doc }, doc, nextpos
  end

  local argc = spec.argc
  if argc > 0 and ARGV[pos + argc - 1] == nil then return nil, bad(where, 'arguments missing') end
  local a, b = ARGV[pos], ARGV[pos + 1]
  local w, result = nil, 0
  if code == 'ONCE' then
    if not ttl_of(a) then return nil, bad(where, 'ttl_ms is not a positive integer', a) end
    local stored = value_of(ki)
    if stored then return nil, { 'ACMI_REPLAY', stored } end
    w = { 'SET', key, b, 'PX', a }
  elseif code == 'ZADD' then
    if not score_of(a) then return nil, bad(where, 'score is not a number', a) end
    w, result = { 'ZADD', key, 'NX', a, b }, nil
  elseif argc == 2 then
    w = { code, key, a, b }   -- HSET
  elseif argc == 1 then
    w = { code, key, a }      -- SET SADD SREM HDEL
  else
    w = { code, key }         -- DEL
  end

  if code == 'SET' then
    kval[ki], ktype[ki] = a, 'string'
  elseif code == 'ONCE' then
    kval[ki], ktype[ki] = b, 'string'
  elseif code == 'DEL' then
    kval[ki], ktype[ki] = false, 'none'
  elseif spec.creates and t == 'none' then
    ktype[ki] = spec.type
  end
  return w, result, pos + argc
end

-- ---- phase 2: write ---------------------------------------------------------------

local function write(w)
  return redis.call(unpack(w))
end

-- ---- run --------------------------------------------------------------------------

local nops = count_of(ARGV[1])
if not nops then return bad('plan', 'op count is not a count', ARGV[1]) end
local pos = 2
local writes, results = {}, {}
for op = 1, nops do
  local w, result, nextpos = plan_op(op, pos)
  if not w then return result end
  writes[op], results[op], pos = w, result, nextpos
end
if ARGV[pos] ~= nil then
  return bad('plan', (#ARGV - pos + 1) .. ' arguments after its last op', ARGV[pos])
end

for op, w in ipairs(writes) do
  local reply = write(w)
  if results[op] == nil then results[op] = reply end
end

return results
