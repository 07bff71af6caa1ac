-- lean.lua: the plans of plain ops and object edits (a timeline append or extend and its
-- indexes, a webhook delivery's idempotency record, a signals.set, a profile merge), as
-- one atomic, all-or-nothing step, without
-- apply.lua's interpreter.
--
-- Redis runs a script's whole body on every call: apply.lua defines its op table and ~10
-- functions each run (a plan of one SADD: ~10 us of Redis time there, ~5 here).
-- This script is what these writes need and no more; the object edit is objedit.lua's
-- (put before this text), built at the first OBJ op, except for the usual edit (plain
-- values in a flat object, as JSON writes it), done below without the scanner. WritePlan.apply sends a plan here
-- only when every op is one of the ops below and each key is named by ops of one kind
-- (so one TYPE, or an OBJ key's GET, read before any write, decides every op); any other
-- plan goes to apply.lua. Same ops, results, stored bytes and errors as apply.lua
-- (tests/integration/test_lean_script.py and test_lean_objedit.py run both on the same
-- plans).
--
-- The protocol (acmi_core/store/scripts.py LEAN declares the same names):
--: KEYS[1..] plan_keys*: every key the ops name, by index
--: ARGV[1] op_count: the number of ops
--: ARGV[2..] ops*: per op: opcode, key index (into KEYS), op arguments:
--   ZADD k score member    ZADD NX (an exact duplicate event is stored once)
--   ZSET / ZMAX / ZMIN k score member    ZADD / ZADD GT / ZADD LT (indexes)
--   ZREM k member / SADD k member / SREM k member / HSET k field value / HDEL k field
--   HMARK k field value pass    HSET, and field := '1' in the HASH pass (a key index, of
--                          no other kind in the plan) when it exists: apply.lua's HMARK
--   SET  k value           overwrite a STRING
--   ONCE k ttl_ms value    idempotency record (a key no other op names, one a plan): if
--                          k exists, nothing at all is written and the script returns
--                          {'ACMI_REPLAY', stored}; otherwise k is SET to value, PX ttl_ms
--   OBJ  k n {m literal ':' value}*n    edit top-level fields of a JSON object stored as
--                          a STRING (apply.lua's OBJ, lua/objedit.lua's edit: the same
--                          checks, the same stored bytes); a key with OBJ ops has no
--                          other ops in the plan (WritePlan.apply: a SET before an OBJ of
--                          one key goes to apply.lua)
--
--: reply[1..] results*: one entry per op: ZADD -> 1 added / 0 duplicate, OBJ -> the new
--    JSON text, others -> 0
--: reply ACMI_REPLAY stored: a ONCE key existed: nothing was written, its value
-- Errors (nothing was written), as apply.lua's:
--   ACMI_WRONGTYPE <key> ...    a key holds another Redis type than its op needs
--   ACMI_CORRUPT <key> ...      an OBJ key holds text that is not a JSON object
--   ACMI_TOOLARGE <key>: ...    an OBJ edit, the object it edits or the result is over
--                               MAX_OBJECT_BYTES
--   ACMI_BADOP op <i> <op>: ... a malformed plan (a bug in the code that built it)
--
-- Bounded: O(ops) commands, each O(log N), and each OBJ edit O(its bytes), at most
-- MAX_OBJECT_BYTES each; a plan is at most MAX_REQUEST_ARGS arguments (bench/
-- script_limits.py drills the largest extend and the largest edit).

local find, sub, gsub, byte = string.find, string.sub, string.gsub, string.byte

-- op -> the Redis type its key holds and its argument count (nil for OBJ, a string whose
-- 1 + n arguments the edit reads, and for an unknown op). Tests, not tables: Redis runs
-- the whole body every call, and two tables of 11 entries cost ~1.5 us a run to build.
local function spec(code)
  if code == 'ZADD' or code == 'ZSET' or code == 'ZMAX' or code == 'ZMIN' then
    return 'zset', 2
  elseif code == 'SADD' or code == 'SREM' then return 'set', 1
  elseif code == 'ZREM' then return 'zset', 1
  elseif code == 'HSET' then return 'hash', 2
  elseif code == 'HDEL' then return 'hash', 1
  elseif code == 'HMARK' then return 'hash', 3
  elseif code == 'SET' then return 'string', 1
  elseif code == 'ONCE' then return 'string', 2
  end
  return nil, nil
end

local function bad(where, what, value)  -- apply.lua's
  local message = 'ACMI_BADOP ' .. where .. ': ' .. what
  if value ~= nil then  -- shown short, on one line
    message = message .. " '" .. (gsub(sub(value, 1, 40), '%c', '?')) .. "'"
  end
  return redis.error_reply(message .. '; nothing was written')
end

-- the object edit, built at the first OBJ op that the flat edit below leaves to it (a
-- plan without one pays nothing for it, ~3 us a run to build): edited: key index -> its
-- object as the OBJ ops so far left it (false: absent); docs: op -> an OBJ op's new text
local edit_object, edited, docs = nil, nil, nil
local function count_of(s)  -- a non-negative decimal integer, or nil (apply.lua's)
  if s and #s <= 15 and find(s, '^%d+$') then return tonumber(s) end
  return nil
end
local function editor()
  local function value_of(ki)
    if edited[ki] == nil then edited[ki] = redis.call('GET', KEYS[ki]) end
    return edited[ki]
  end
  return object_editor(bad, count_of, value_of)
end

-- the flat edit, built at the first OBJ op like the full one (a plan without one pays
-- nothing for its functions)
local function flat_editor()
-- a number as JSON writes it, the usual forms only (an integer, a plain decimal); any
-- other text is left to the full edit, which checks the whole grammar
local function plain_number(v)
  return find(v, '^-?[1-9]%d*$') or v == '0' or v == '-0' or find(v, '^-?[1-9]%d*%.%d+$')
    or find(v, '^-?0%.%d+$')
end
-- a field's value as the flat edit takes it: a string without escapes, a plain number,
-- true, false or null (null: a del's value, or a member set to null)
local function plain_value(v)
  local c = byte(v, 1)
  if c == 34 then return find(v, '^"[^"\\%z\1-\31]*"$') end
  if c == 116 then return v == 'true' end
  if c == 102 then return v == 'false' end
  if c == 110 then return v == 'null' end
  return plain_number(v)
end

-- The usual edit without the scanner: a few fields of plain values set in a flat object
-- (no escape, no space, no nested value, a name at most once) stored as JSON writes it.
-- One anchored find a member (~5x fewer calls than the scanner) checks it whole, and
-- only the members the edit names are kept; the result is the full edit's, byte for
-- byte: values replaced in place, new members appended in the edit's order, the text
-- between the members changed copied as it is. Returns the new text, or nil for
-- anything else, which the full edit (objedit.lua) then decides, errors included
-- (tests/integration/test_lean_flat_edit.py holds the two equal, byte for byte).
local function flat_edit(stored, pos)
  local n = count_of(ARGV[pos])
  if not n or n == 0 or ARGV[pos + n] == nil then return nil end
  -- the fields: names[f], modes[f]; found[name]: 0 until the scan meets it. A field's
  -- text after its mode letter is its member as the result holds it (name literal, ':',
  -- value): a name without escapes is written the same in the stored text
  local size, names, modes, found = 0, {}, {}, {}
  for f = 1, n do
    local arg = ARGV[pos + f]
    size = size + #arg - 2
    -- a string value: the name and the value checked by one find
    local _, e, letter, name = find(arg, '^([snd])"([^"\\%z\1-\31]*)":"[^"\\%z\1-\31]*"$')
    if not e then
      _, e, letter, name = find(arg, '^([snd])"([^"\\%z\1-\31]*)":')
      if not e or not plain_value(sub(arg, e + 1)) then return nil end
    end
    if size > MAX_OBJECT_BYTES then return nil end
    modes[f], names[f], found[name] = letter, name, 0
  end
  -- no backslash and no NUL (plain finds, not a class scan: 60x cheaper); another raw
  -- control byte is refused by the member patterns (a range, cheaper than %c)
  local last = #stored
  if last > MAX_OBJECT_BYTES or byte(stored, 1) ~= 123 or find(stored, '\\', 1, true)
    or find(stored, '\0', 1, true) then
    return nil
  end
  -- the members the edit names, in the order of the text: from[k] where the k-th starts,
  -- upto[k] the ',' or '}' after its value; every member checked
  local from, upto, m = {}, {}, 0
  if stored ~= '{}' then
    local j = 2
    while true do
      local _, e, name, c = find(stored, '^"([^"\1-\31]*)":"[^"\1-\31]*"([,}])', j)
      if not e then
        local v
        _, e, name, v, c = find(stored, '^"([^"\1-\31]*)":([%w.+-]+)([,}])', j)
        if not e then return nil end
        if v ~= 'true' and v ~= 'false' and v ~= 'null' and not plain_number(v) then
          return nil
        end
      end
      local k = found[name]
      if k then
        if k ~= 0 then return nil end  -- a repeated name: the full edit's rules
        m = m + 1
        from[m], upto[m], found[name] = j, e, m
      end
      if c == '}' then
        if e ~= last then return nil end
        break
      end
      j = e + 1
    end
  end
  -- the edit (objedit.lua's edit_field, for names that occur at most once): new[k] the
  -- field that sets the k-th member (false: removed); members added go after the m
  -- stored ones
  local new, count = {}, m
  for f = 1, n do
    local mode, name = modes[f], names[f]
    local k = found[name]
    if k == 0 then k = nil end
    if mode == 's' or (mode == 'n' and not k) then
      if not k then
        count = count + 1
        k, found[name] = count, count
      end
      new[k] = f
    elseif mode == 'd' and k then
      new[k], found[name] = false, 0
    end
  end
  -- the text (objedit.lua's object_text): the runs of members kept as written, copied as
  -- one piece each, and the members changed or added, joined by ','
  local parts, np, at = {}, 0, 2   -- at: where the text not yet copied starts
  for k = 1, m do
    local v = new[k]
    if v ~= nil then
      if from[k] > at then
        np = np + 1
        parts[np] = sub(stored, at, from[k] - 2)
      end
      if v then
        np = np + 1
        parts[np] = sub(ARGV[pos + v], 2)
      end
      at = upto[k] + 1
    end
  end
  if at < last then
    np = np + 1
    parts[np] = sub(stored, at, last - 1)
  end
  for k = m + 1, count do
    local v = new[k]
    if v then
      np = np + 1
      parts[np] = sub(ARGV[pos + v], 2)
    end
  end
  local doc = '{' .. table.concat(parts, ',', 1, np) .. '}'
  if #doc > MAX_OBJECT_BYTES then return nil end
  return doc
end

return flat_edit
end
local flat_edit = nil

-- a decimal number or +-inf, as ZADD takes it (apply.lua's score_of): no hex, no nan,
-- nothing Redis would refuse half-way through the writes
local function score_ok(s)
  if #s <= 15 and find(s, '^%d+$') then return true end  -- an integer ms: the usual case
  if find(string.lower(s), '^[+-]?inf$') then return true end
  local x = tonumber(s)
  if not x or not find(s, '^[+-]?[%d.][%d.eE+-]*$') then return false end
  if x == math.huge or x == -math.huge then return false end
  return not (x == 0 and find((string.match(s, '^[^eE]*')), '[1-9]'))
end

local nops = tonumber(ARGV[1])
if not nops or not find(ARGV[1], '^%d+$') then
  return bad('plan', 'op count is not a count', ARGV[1])
end

-- phase 1: check every op and every key's type; nothing is written
local checked = {}  -- key index -> true once its type is checked
local pos = 2
for op = 1, nops do
  local code = ARGV[pos]
  local want, argc = spec(code)
  if not want then
    if code ~= 'OBJ' then return bad('op ' .. op, 'unknown op code', code) end
    want = 'string'
  end
  local ki = tonumber(ARGV[pos + 1])
  if not ki or not KEYS[ki] then
    return bad('op ' .. op .. ' ' .. code, 'key index is not in 1..' .. #KEYS, ARGV[pos + 1])
  end
  if argc and ARGV[pos + 1 + argc] == nil then
    return bad('op ' .. op .. ' ' .. code, 'arguments missing')
  end
  if want == 'zset' and argc == 2 and not score_ok(ARGV[pos + 2]) then
    return bad('op ' .. op .. ' ' .. code, 'score is not a number', ARGV[pos + 2])
  end
  if checked[ki] == 'once' or (code == 'ONCE' and checked[ki]) then
    return bad('op ' .. op .. ' ' .. code, 'another op of the plan names a ONCE key', KEYS[ki])
  end
  if code == 'ONCE' and not (#ARGV[pos + 2] <= 15 and find(ARGV[pos + 2], '^[1-9]%d*$')) then
    return bad('op ' .. op .. ' ' .. code, 'ttl_ms is not a positive integer', ARGV[pos + 2])
  end
  if code == 'HMARK' then  -- its pass: a hash or nothing, checked as an op's own key is
    local si, where = tonumber(ARGV[pos + 4]), 'op ' .. op .. ' ' .. code
    if not si or not KEYS[si] then
      return bad(where, 'src key index is not in 1..' .. #KEYS, ARGV[pos + 4])
    end
    if checked[si] == 'once' then
      return bad(where, 'another op of the plan names a ONCE key', KEYS[si])
    end
    if not checked[si] then
      local st = redis.call('TYPE', KEYS[si])
      if type(st) == 'table' then st = st.ok end
      if st ~= 'none' and st ~= 'hash' then
        return redis.error_reply('ACMI_WRONGTYPE ' .. KEYS[si] .. ' holds a ' .. st ..
          ', expected a hash; nothing was written')
      end
      checked[si] = true
    end
  end
  if not checked[ki] then
    local t = 'string'
    if argc then
      t = redis.call('TYPE', KEYS[ki])
    else  -- OBJ: its GET is the check (it fails on another type), one command not two
      edited, docs = edited or {}, docs or {}
      local stored = redis.pcall('GET', KEYS[ki])
      if type(stored) == 'table' and stored.err then
        t = redis.call('TYPE', KEYS[ki])
      else
        edited[ki] = stored
      end
    end
    if type(t) == 'table' then t = t.ok end
    if t ~= 'none' and t ~= want then
      return redis.error_reply('ACMI_WRONGTYPE ' .. KEYS[ki] .. ' holds a ' .. t ..
        ', expected a ' .. want .. '; nothing was written')
    end
    checked[ki] = true
    if code == 'ONCE' then
      -- the delivery was stored before: nothing at all is written, its record answers
      if t == 'string' then return { 'ACMI_REPLAY', redis.call('GET', KEYS[ki]) } end
      checked[ki] = 'once'
    end
  end
  if argc then
    pos = pos + 2 + argc
  else  -- OBJ: its edit, computed (and checked) now: the flat edit, else the full one
    flat_edit = flat_edit or flat_editor()
    local doc, nextpos = flat_edit(edited[ki] or '{}', pos + 2), nil
    if doc then
      nextpos = pos + 3 + tonumber(ARGV[pos + 2])
    else
      edit_object = edit_object or editor()
      doc, nextpos = edit_object('op ' .. op .. ' OBJ', ki, pos + 2)
      if not doc then return nextpos end
    end
    docs[op], edited[ki], pos = doc, doc, nextpos
  end
end
if ARGV[pos] ~= nil then
  return bad('plan', (#ARGV - pos + 1) .. ' arguments after its last op', ARGV[pos])
end

-- phase 2: write (nothing here can fail: the types and arguments are checked); one
-- branch an op, the usual ones first
local results = {}
pos = 2
for op = 1, nops do
  local code, key = ARGV[pos], KEYS[tonumber(ARGV[pos + 1])]
  if code == 'ZADD' then
    results[op] = redis.call('ZADD', key, 'NX', ARGV[pos + 2], ARGV[pos + 3])
    pos = pos + 4
  elseif code == 'OBJ' then
    results[op] = docs[op]
    redis.call('SET', key, docs[op])
    pos = pos + 3 + tonumber(ARGV[pos + 2])
  else
    results[op] = 0
    if code == 'ZSET' then
      redis.call('ZADD', key, ARGV[pos + 2], ARGV[pos + 3])
    elseif code == 'ZMAX' then
      redis.call('ZADD', key, 'GT', ARGV[pos + 2], ARGV[pos + 3])
    elseif code == 'ZMIN' then
      redis.call('ZADD', key, 'LT', ARGV[pos + 2], ARGV[pos + 3])
    elseif code == 'HSET' then
      redis.call('HSET', key, ARGV[pos + 2], ARGV[pos + 3])
    elseif code == 'HMARK' then
      local pass = KEYS[tonumber(ARGV[pos + 4])]
      if redis.call('EXISTS', pass) == 1 then redis.call('HSET', pass, ARGV[pos + 2], '1') end
      redis.call('HSET', key, ARGV[pos + 2], ARGV[pos + 3])
    elseif code == 'ONCE' then
      redis.call('SET', key, ARGV[pos + 3], 'PX', ARGV[pos + 2])
    else
      redis.call(code, key, ARGV[pos + 2])  -- ZREM SADD SREM HDEL SET
    end
    local _, argc = spec(code)
    pos = pos + 2 + argc
  end
end
return results
