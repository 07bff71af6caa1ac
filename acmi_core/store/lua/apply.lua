-- apply.lua: every ACMI write, as one atomic, all-or-nothing step.
--
-- The protocol (acmi_core/store/scripts.py APPLY declares the same names):
--: KEYS[1..] plan_keys*: every key the ops name, by index
--: ARGV[1] op_count: the number of ops
--: ARGV[2..] ops*: per op: opcode, key index (into KEYS), op arguments:
--   SET  k value                 overwrite a STRING
--   DEL  k                       delete a key of any type
--   ZADD k score member          ZADD NX (an exact duplicate event is stored once)
--   ZSET k score member          ZADD: add, or move the member to the new score (indexes)
--   ZREM k member
--   ZMAX k score member          ZADD GT: the member's score only rises (an index of
--   ZMIN k score member          ZADD LT: ... only falls  the latest / earliest per member)
--   ZHEAD k member src           the member's score in k := the lowest score in src (a
--                                ZSET key index), or the member removed when src is
--                                empty: read and written in this run, so no write that
--                                lands meanwhile is lost (the tenant indexes of jobs)
--   ZKEEP k n                    keep the n highest-scored members (a capped feed):
--                                ZREMRANGEBYRANK k 0 -(n+1), O(log N + removed)
--   ZBUMP k score member         ZADD XX GT: only an existing member, only later (a
--                                store item's expiry, refreshed by a read: a put or
--                                delete that landed first is never undone)
--   ZHAS k member src            the member (score 0) is in k iff the HASH src (a key
--                                index) has a field, as the ops before left it: the
--                                store's namespace index, kept by each put and delete
--   SADD k member / SREM k member
--   HSET k field value / HDEL k field
--   HMARK k field value pass     HSET, and field := '1' in the HASH pass (a key index)
--                                when pass exists (never created): a vector written
--                                while a prune pass is under way is marked needed there
--                                in the same run (acmi_core/memory/vectors.py)
--   HDUE k field src member now  the store's TTL sweep: HDEL field and ZREM member from
--                                the ZSET src when member's score there is <= now, as
--                                this run finds it (a put that moved it later wins)
--   HPUT k field text            HSET of a store item, text starting
--                                {"created_at":<ms>, : when the field holds such text
--                                already, its created_at is kept (an overwrite)
--   ONCE k ttl_ms value          idempotency record: if k exists, nothing at all is
--                                written and the script returns {'ACMI_REPLAY', stored};
--                                otherwise k is SET to value with a TTL, with the rest
--   SAME k present text          check-and-set: the plan applies only if the STRING k, as
--                                the ops before left it, is absent (present '0') or holds
--                                exactly text (present '1'); else ACMI_CHANGED, nothing
--                                written (a caller that read k re-reads and retries)
--   ONLY k member score          a check: the plan applies only if the ZSET k, as stored
--                                (no earlier op of the plan may name k), is empty or
--                                holds just member at score (a retry of the write that
--                                added it); else ACMI_PENDING, nothing written
--   TAKE k                       GETDEL a STRING: its value is the op's result (false
--                                when absent); in a plan that starts with RECORD, so a
--                                retry answers the value the first run took
--   RECORD k                     this request's record (keys.request), a plan's first op:
--                                if k exists, nothing is written and the script answers
--                                with the results recorded there (a retry of a request
--                                that ran); otherwise the results are SET there, in this
--                                run, for REPLAY_TTL_MS (not when they encode to over
--                                REPLAY_MAX_BYTES)
--   OBJ  k n {m literal ':' value}*n
--        edit top-level fields of a JSON object stored as a STRING, one argument a
--        field; m is s (set) | n (setnx: only when absent, auto-fill never clobbers) |
--        d (del); literal is the name as a JSON string, value is JSON text (both checked)
--
-- Phase 1 reads and checks everything (arguments, key types, stored JSON) and computes
-- new values; phase 2 only writes. Redis does not roll back, so nothing may fail in
-- phase 2. The OBJ edit (its JSON scanner, its bounds: each of the edit, the stored
-- object and the result at most MAX_OBJECT_BYTES, O(n) steps) is lua/objedit.lua's
-- object_editor, which scripts.py puts before this text; it is built at the first OBJ
-- op, so a plan without one pays nothing for it.
--
--: reply[1..] results*: one entry per op: ZADD -> 1 added / 0 duplicate, OBJ -> the new
--    JSON text, TAKE -> the value taken, HDUE -> 1 deleted / 0 kept, others -> 0
--: reply ACMI_REPLAY stored: a ONCE key existed: nothing was written, its value
-- Errors (nothing was written), each starting with a marker:
--   ACMI_WRONGTYPE <key> ...    a key holds another Redis type than its op needs
--   ACMI_CORRUPT <key> ...      an OBJ key holds text that is not a JSON object
--   ACMI_TOOLARGE <key>: ...    an OBJ edit, the object it edits or the result is over
--                               MAX_OBJECT_BYTES
--   ACMI_CHANGED <key> ...      a SAME key no longer holds what its caller read
--   ACMI_PENDING <key> <score> <member>
--                               an ONLY key holds member (its lowest other) at score
--   ACMI_BADOP op <i> <op>: ... the plan is malformed (unknown op, key index out of
--   ACMI_BADOP plan: ...        range, missing or bad argument, miscounted ops): a
--                               bug in the code that built it (writes.py maps each)

local find, sub, gsub = string.find, string.sub, string.gsub
local unpack = unpack or table.unpack

-- mirror acmi_core/store/scripts.py (tests/unit/test_request_replay.py checks)
local REPLAY_TTL_MS, REPLAY_MAX_BYTES = 60000, 131072
local record_key = nil  -- where this run's results are recorded (RECORD), if anywhere

-- op -> the Redis type its key must hold when it exists; whether it creates the key
-- with that type (SREM and HDEL never create one); its fixed argument count
local OPS = {
  SET  = { type = 'string', argc = 1 },
  DEL  = { argc = 0 },
  ZADD = { type = 'zset', creates = true, argc = 2 },
  ZSET = { type = 'zset', creates = true, argc = 2 },
  ZREM = { type = 'zset', argc = 1 },
  ZMAX = { type = 'zset', creates = true, argc = 2 },
  ZMIN = { type = 'zset', creates = true, argc = 2 },
  ZHEAD = { type = 'zset', creates = true, argc = 2 },
  ZKEEP = { type = 'zset', argc = 1 },
  SADD = { type = 'set', creates = true, argc = 1 },
  SREM = { type = 'set', argc = 1 },
  ZBUMP = { type = 'zset', argc = 2 },
  ZHAS = { type = 'zset', creates = true, argc = 2 },
  HSET = { type = 'hash', creates = true, argc = 2 },
  HMARK = { type = 'hash', creates = true, argc = 3 },
  HPUT = { type = 'hash', creates = true, argc = 2 },
  HDUE = { type = 'hash', argc = 4 },
  HDEL = { type = 'hash', argc = 1 },
  ONCE = { type = 'string', argc = 2 },
  SAME = { type = 'string', argc = 2 },
  ONLY = { type = 'zset', argc = 2 },
  RECORD = { type = 'string', argc = 0 },
  TAKE = { type = 'string', argc = 0 },
  OBJ  = { type = 'string' },  -- 1 + n arguments
}

-- ---- the batch so far ---------------------------------------------------------------

local ktype = {}   -- key index -> effective type as the batch goes
local kval = {}    -- key index -> string value (false = absent) for SET/OBJ/ONCE keys
local named = {}   -- key index -> true once an op of the plan named it (ONLY reads stored)

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

-- the KEYS index an op names as its source (ZHEAD, ZHAS, HDUE, HMARK), checked: in
-- 1..#KEYS and holding `want` or nothing; nil and the error otherwise
local function source_key(where, s, want)
  local si = count_of(s)
  if not si or si < 1 or si > #KEYS then
    return nil, bad(where, 'src key index is not in 1..' .. #KEYS, s)
  end
  local st = type_of(si)
  if st ~= 'none' and st ~= want then
    return nil, redis.error_reply('ACMI_WRONGTYPE ' .. KEYS[si] .. ' holds a ' .. st ..
      ', expected a ' .. want .. '; nothing was written')
  end
  return si
end

local edit_object = nil  -- objedit.lua's, built at the first OBJ op

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
  local earlier = named[ki]
  named[ki] = true
  if spec.type and t ~= 'none' and t ~= spec.type then
    return nil, redis.error_reply('ACMI_WRONGTYPE ' .. key .. ' holds a ' .. t ..
      ', expected a ' .. spec.type .. '; nothing was written')
  end
  pos = pos + 2

  if code == 'OBJ' then
    edit_object = edit_object or object_editor(bad, count_of, value_of)
    local doc, nextpos = edit_object(where, ki, pos)
    if not doc then return nil, nextpos end
    kval[ki], ktype[ki] = doc, 'string'
    return { 'SET', key, doc }, doc, nextpos
  end

  local argc = spec.argc
  if argc > 0 and ARGV[pos + argc - 1] == nil then return nil, bad(where, 'arguments missing') end
  local a, b = ARGV[pos], ARGV[pos + 1]
  local w, result = nil, 0
  if code == 'RECORD' then
    local stored = value_of(ki)
    if stored then
      local decoded, results = pcall(cjson.decode, stored)
      if decoded and type(results) == 'table' then return nil, results end
      return nil, redis.error_reply('ACMI_CORRUPT ' .. key .. ' is not a recorded reply')
    end
    record_key = key
    return true, result, pos  -- nothing to write now: the results, after phase 2
  end
  if code == 'ONCE' then
    if not ttl_of(a) then return nil, bad(where, 'ttl_ms is not a positive integer', a) end
    local stored = value_of(ki)
    if stored then return nil, { 'ACMI_REPLAY', stored } end
    w = { 'SET', key, b, 'PX', a }
  elseif code == 'SAME' then
    local stored = value_of(ki)
    if (a == '0' and stored) or (a ~= '0' and stored ~= b) then
      return nil, redis.error_reply('ACMI_CHANGED ' .. key ..
        ' changed since it was read; nothing was written')
    end
    w = { 'EXISTS', key }     -- a read: SAME writes nothing
  elseif code == 'ONLY' then
    if earlier then return nil, bad(where, 'an earlier op of the plan names its key', key) end
    if not score_of(b) then return nil, bad(where, 'score is not a number', b) end
    local head = redis.call('ZRANGE', key, 0, 1, 'WITHSCORES')  -- O(log N): two members
    for i = 1, #head, 2 do
      if head[i] ~= a or tonumber(head[i + 1]) ~= tonumber(b) then
        return nil, redis.error_reply('ACMI_PENDING ' .. key .. ' ' .. head[i + 1] .. ' ' ..
          head[i])
      end
    end
    w = { 'EXISTS', key }     -- a read: ONLY writes nothing
  elseif code == 'TAKE' then
    w, result = { 'GETDEL', key }, nil
  elseif code == 'ZADD' then
    if not score_of(a) then return nil, bad(where, 'score is not a number', a) end
    w, result = { 'ZADD', key, 'NX', a, b }, nil
  elseif code == 'ZSET' then
    if not score_of(a) then return nil, bad(where, 'score is not a number', a) end
    w = { 'ZADD', key, a, b }
  elseif code == 'ZMAX' or code == 'ZMIN' then
    if not score_of(a) then return nil, bad(where, 'score is not a number', a) end
    w = { 'ZADD', key, code == 'ZMAX' and 'GT' or 'LT', a, b }
  elseif code == 'ZHEAD' then
    local si, err = source_key(where, b, 'zset')
    if not si then return nil, err end
    w = { 'ZHEAD', key, a, KEYS[si] }
  elseif code == 'ZBUMP' then
    if not score_of(a) then return nil, bad(where, 'score is not a number', a) end
    w = { 'ZADD', key, 'XX', 'GT', a, b }
  elseif code == 'ZHAS' then
    local si, err = source_key(where, b, 'hash')
    if not si then return nil, err end
    w = { 'ZHAS', key, a, KEYS[si] }
  elseif code == 'HDUE' then
    local si, err = source_key(where, b, 'zset')
    if not si then return nil, err end
    local now = ARGV[pos + 3]
    if not score_of(now) then return nil, bad(where, 'now is not a number', now) end
    w, result = { 'HDUE', key, a, KEYS[si], ARGV[pos + 2], now }, nil
  elseif code == 'HMARK' then
    local si, err = source_key(where, ARGV[pos + 2], 'hash')
    if not si then return nil, err end
    w = { 'HMARK', key, a, b, KEYS[si] }
  elseif code == 'HPUT' then
    if not find(b, '^{"created_at":%d+,') then
      return nil, bad(where, 'text does not start {"created_at":<ms>,', sub(b, 1, 32))
    end
    w = { 'HPUT', key, a, b }
  elseif code == 'ZKEEP' then
    local n = count_of(a)
    if not n or n < 1 then return nil, bad(where, 'n is not a positive count', a) end
    w = { 'ZREMRANGEBYRANK', key, 0, -(n + 1) }
  elseif argc == 2 then
    w = { code, key, a, b }   -- HSET
  elseif argc == 1 then
    w = { code, key, a }      -- SET SADD SREM HDEL ZREM
  else
    w = { code, key }         -- DEL
  end

  if code == 'SET' then
    kval[ki], ktype[ki] = a, 'string'
  elseif code == 'ONCE' then
    kval[ki], ktype[ki] = b, 'string'
  elseif code == 'DEL' or code == 'TAKE' then
    kval[ki], ktype[ki] = false, 'none'
  elseif spec.creates and t == 'none' then
    ktype[ki] = spec.type
  end
  return w, result, pos + argc
end

-- ---- phase 2: write ---------------------------------------------------------------

local function write(w)
  if w[1] == 'ZHAS' then
    if redis.call('EXISTS', w[4]) == 1 then return redis.call('ZADD', w[2], 0, w[3]) end
    return redis.call('ZREM', w[2], w[3])
  end
  if w[1] == 'HDUE' then
    local due = redis.call('ZSCORE', w[4], w[5])
    if due and tonumber(due) <= tonumber(w[6]) then
      redis.call('ZREM', w[4], w[5])
      return redis.call('HDEL', w[2], w[3])
    end
    return 0
  end
  if w[1] == 'HMARK' then
    if redis.call('EXISTS', w[5]) == 1 then redis.call('HSET', w[5], w[3], '1') end
    return redis.call('HSET', w[2], w[3], w[4])
  end
  if w[1] == 'HPUT' then
    local text = w[4]
    local old = redis.call('HGET', w[2], w[3])
    local kept = old and string.match(old, '^{"created_at":(%d+),')
    if kept then
      local _, head = find(text, '^{"created_at":%d+,')
      text = '{"created_at":' .. kept .. ',' .. sub(text, head + 1)
    end
    return redis.call('HSET', w[2], w[3], text)
  end
  if w[1] == 'ZHEAD' then
    local head = redis.call('ZRANGE', w[4], 0, 0, 'WITHSCORES')
    if head[2] then return redis.call('ZADD', w[2], head[2], w[3]) end
    return redis.call('ZREM', w[2], w[3])
  end
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
  if w ~= true then  -- true: RECORD, written below
    local reply = write(w)
    if results[op] == nil then results[op] = reply end
  end
end

if record_key then
  local text = cjson.encode(results)
  if #text <= REPLAY_MAX_BYTES then redis.call('SET', record_key, text, 'PX', REPLAY_TTL_MS) end
end
return results
