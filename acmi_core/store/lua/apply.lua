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
-- phase 2. JSON values are spliced as raw text, never decoded: Redis's cjson is
-- lossy ([] becomes {}, big integers become floats, lone surrogates fail). The scanner
-- below checks the whole grammar of what it splices into and decodes only key names.
--
-- A script blocks all of Redis while it runs, so an OBJ edit is bounded: its names and
-- values, the stored object and the edited one are each at most MAX_OBJECT_BYTES, and
-- every step is O(n) (the caller also caps the fields of one edit).
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

local find, byte, sub, gsub = string.find, string.byte, string.sub, string.gsub
local floor = math.floor
local unpack = unpack or table.unpack

-- mirrors acmi_core.base.model.MAX_OBJECT_BYTES (tests/unit/test_json_limits.py checks)
local MAX_OBJECT_BYTES = 65536

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

-- the KEYS index an op names as its source (ZHEAD, ZHAS, HDUE), checked: in 1..#KEYS and
-- holding `want` or nothing; nil and the error otherwise
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

-- ---- a JSON scanner: checks the grammar, finds spans, decodes only key names ---------
-- Iterative (an explicit stack, no recursion: no depth overflows it) and O(n): every
-- step is one string.find or string.byte from where the last one stopped.

local QUOTE, BACKSLASH, SLASH, COLON, COMMA = 34, 92, 47, 58, 44
local LBRACE, RBRACE, LBRACKET, RBRACKET = 123, 125, 91, 93
local MINUS, DOT, ZERO, NINE, LOWER_E, UPPER_E, LOWER_U = 45, 46, 48, 57, 101, 69, 117
local IS_SPACE = { [32] = true, [9] = true, [10] = true, [13] = true }
local NOT_SPACE = '[^ \t\r\n]'
local STRING_STOP = '["\\%z\1-\31]'  -- a quote, a backslash or a raw control byte
-- escape letter -> the byte it stands for (\uXXXX apart)
local ESCAPES = {
  [QUOTE] = '"', [BACKSLASH] = '\\', [SLASH] = '/', [98] = '\b', [102] = '\f',
  [110] = '\n', [114] = '\r', [116] = '\t',
}
local WORDS = { [116] = 'true', [102] = 'false', [110] = 'null' }  -- by first byte
local CLOSER = { [LBRACE] = RBRACE, [LBRACKET] = RBRACKET }

local function skip_ws(s, i)           -- the first non-space at or after i, or nil
  local c = byte(s, i)
  if c and not IS_SPACE[c] then return i end  -- compact JSON: no search
  return (find(s, NOT_SPACE, i))
end

-- s[i] is '"': the index after the closing quote and whether the string has escapes;
-- nil when it is not a JSON string (unclosed, a raw control byte, a bad escape)
local function scan_string(s, i)
  local j, escaped = i + 1, false
  while true do
    local q = find(s, STRING_STOP, j)
    if not q then return nil end
    local c, d = byte(s, q, q + 1)
    if c == QUOTE then return q + 1, escaped end
    if c ~= BACKSLASH then return nil end
    c = d
    if c == LOWER_U then
      if not find(s, '^%x%x%x%x', q + 2) then return nil end
      j = q + 6
    elseif ESCAPES[c] then
      j = q + 2
    else
      return nil
    end
    escaped = true
  end
end

-- s[i] is c, '-' or a digit: the index after the number and the byte there; nil when it
-- breaks JSON's grammar (a leading zero, a bare '.', an 'e' without digits). Any number
-- of digits is fine: a 100-digit integer is kept as written.
local function scan_number(s, i, c)
  if c == MINUS then
    i = i + 1
    c = byte(s, i)
    if not c or c < ZERO or c > NINE then return nil end
  end
  local e = i + 1
  local d = byte(s, e)
  if d and d >= ZERO and d <= NINE then  -- more digits (a short number skips the find)
    if c == ZERO then return nil end
    local _, last = find(s, '^%d+', e)
    e = last + 1
    d = byte(s, e)
  end
  if d == DOT then
    local _, last = find(s, '^%d+', e + 1)
    if not last then return nil end
    e = last + 1
    d = byte(s, e)
  end
  if d == LOWER_E or d == UPPER_E then
    local _, last = find(s, '^[+-]?%d+', e + 1)
    if not last then return nil end
    e = last + 1
    d = byte(s, e)
  end
  return e, d
end

-- s[i] starts an object member: the index of its value, or nil
local function member_value(s, i)
  if byte(s, i) ~= QUOTE then return nil end
  local e = scan_string(s, i)
  e = e and skip_ws(s, e)
  if not e or byte(s, e) ~= COLON then return nil end
  return skip_ws(s, e + 1)
end

local closers = {}                     -- scan_value's stack, reused between calls

-- the index just after the JSON value starting at s[i], or nil when none starts there.
-- The hot loop of every edit: c always holds the byte being looked at, and whitespace
-- (rare in stored JSON) costs a search only where there is some.
local function scan_value(s, i)
  local depth, c, e = 0, byte(s, i), nil
  while true do
    e = nil                            -- c = s[i] starts a value; e: the index after it
    if c == QUOTE then
      e = scan_string(s, i)
      c = e and byte(s, e)
    elseif c == MINUS or (c and c >= ZERO and c <= NINE) then
      e, c = scan_number(s, i, c)
    elseif CLOSER[c] then
      local close = CLOSER[c]
      i = i + 1
      c = byte(s, i)
      if IS_SPACE[c] then
        i = find(s, NOT_SPACE, i)
        c = i and byte(s, i)
      end
      if c == close then               -- {} or []
        e = i + 1
        c = byte(s, e)
      else                             -- descend: its first value is next
        depth = depth + 1
        closers[depth] = close
        if close == RBRACE then
          i = i and member_value(s, i)
          if not i then return nil end
          c = byte(s, i)
        end
        e = false
      end
    else
      local word = WORDS[c]
      if word and sub(s, i, i + #word - 1) == word then
        e = i + #word
        c = byte(s, e)
      end
    end
    if e == nil then return nil end
    while e do                         -- a value ended before e: close containers or go on
      if depth == 0 then return e end
      if IS_SPACE[c] then
        e = find(s, NOT_SPACE, e)
        c = e and byte(s, e)
      end
      if c == COMMA then
        i = e + 1
        c = byte(s, i)
        if IS_SPACE[c] then
          i = find(s, NOT_SPACE, i)
          c = i and byte(s, i)
        end
        if closers[depth] == RBRACE then
          i = i and member_value(s, i)
          if not i then return nil end
          c = byte(s, i)
        end
        e = false
      elseif c == closers[depth] then
        depth, e = depth - 1, e + 1
        c = byte(s, e)
      else
        return nil
      end
    end
  end
end

-- a code point's UTF-8 bytes (a surrogate's too: its 3-byte form)
local function utf8_char(cp)
  if cp < 0x80 then return string.char(cp) end
  if cp < 0x800 then return string.char(0xC0 + floor(cp / 0x40), 0x80 + cp % 0x40) end
  if cp < 0x10000 then
    return string.char(0xE0 + floor(cp / 0x1000), 0x80 + floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
  end
  return string.char(0xF0 + floor(cp / 0x40000), 0x80 + floor(cp / 0x1000) % 0x40,
    0x80 + floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
end

local decoded = {}                     -- 'XXXX' -> its UTF-8, for \uXXXX outside surrogates
local UNESCAPED = {                    -- escape letter -> the byte it stands for
  ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t',
}

-- one escape, as gsub finds it: its letter and up to 4 hex digits after it (\uXXXX's
-- digits, or plain characters after a one-letter escape, given back as they are)
local function unescape_one(letter, after)
  if letter ~= 'u' then return UNESCAPED[letter] .. after end
  local char = decoded[after]
  if not char then
    char = utf8_char(tonumber(after, 16))
    decoded[after] = char
  end
  return char
end

-- the bytes a string body (escapes checked by scan_string) stands for. A lone surrogate
-- (JavaScript writes them) becomes its 3-byte form, which no UTF-8 name equals.
local function unescape(body)
  if not find(body, '\\u[dD][89a-fA-F]') then  -- no surrogates: one pass in C
    return (gsub(body, '\\(.)(%x?%x?%x?%x?)', unescape_one))
  end
  local out, n, j = {}, 0, 1
  while true do
    local b = find(body, '\\', j, true)
    if not b then break end
    n = n + 1
    out[n] = sub(body, j, b - 1)
    local c = byte(body, b + 1)
    n = n + 1
    if c == LOWER_U then
      local cp = tonumber(sub(body, b + 2, b + 5), 16)
      j = b + 6
      if cp >= 0xD800 and cp < 0xDC00 and sub(body, j, j + 1) == '\\u' then  -- a pair?
        local low = tonumber(sub(body, j + 2, j + 5), 16)
        if low >= 0xDC00 and low < 0xE000 then
          cp = 0x10000 + (cp - 0xD800) * 0x400 + (low - 0xDC00)
          j = j + 6
        end
      end
      out[n] = utf8_char(cp)
    else
      out[n] = ESCAPES[c]
      j = b + 2
    end
  end
  n = n + 1
  out[n] = sub(body, j)
  return table.concat(out, '', 1, n)
end

-- ---- a JSON object as its members -------------------------------------------------
-- Member i is either as written in the stored text s (at[i]: where its name starts,
-- value_end[i]: just after its value) or added by the edit (lit[i]: its name literal).
-- new[i] is its new value text, false once it is removed, nil while it is as written.
-- Only the names the edit touches are indexed: first[name] is the first member called
-- name, later[name] lists the others (JSON written by others may repeat a name, and a
-- parser keeps the last one).

local function index_member(obj, name, i)
  if obj.first[name] == nil then
    obj.first[name] = i
  else
    local later = obj.later[name]
    if not later then
      later = {}
      obj.later[name] = later
    end
    later[#later + 1] = i
  end
end

local function add_member(obj, name, literal, raw)
  local n = obj.n + 1
  obj.n, obj.lit[n], obj.new[n] = n, literal, raw
  index_member(obj, name, n)
end

local function drop_later(obj, name)
  local later = obj.later[name]
  if later then
    for _, i in ipairs(later) do obj.new[i] = false end
    obj.later[name] = nil
  end
end

-- mode -> how it edits a field
local EDIT = {
  set = function(obj, name, literal, raw)
    local i = obj.first[name]
    if i then
      obj.new[i] = raw       -- in place, keeping the stored name literal
      drop_later(obj, name)  -- a duplicate later in the text would win on parse
    else
      add_member(obj, name, literal, raw)
    end
  end,
  setnx = function(obj, name, literal, raw)
    if not obj.first[name] then add_member(obj, name, literal, raw) end
  end,
  del = function(obj, name)
    local i = obj.first[name]
    if i then
      obj.new[i] = false
      obj.first[name] = nil
      drop_later(obj, name)
    end
  end,
}

-- the members of s, indexing those named in wanted; nil when s is not a JSON object
-- (JSON null counts as {})
local function parse_object(s, wanted)
  local at, value_end = {}, {}
  local obj = {
    s = s, n = 0, at = at, value_end = value_end, lit = {}, new = {}, first = {}, later = {},
  }
  local i = skip_ws(s, 1)
  if not i then return nil end
  if byte(s, i) ~= LBRACE then
    if sub(s, i, i + 3) == 'null' and not skip_ws(s, i + 4) then return obj end
    return nil
  end
  i = skip_ws(s, i + 1)
  if not i then return nil end
  if byte(s, i) == RBRACE then
    if skip_ws(s, i + 1) then return nil end
    return obj
  end
  local n = 0
  while true do
    if byte(s, i) ~= QUOTE then return nil end
    local name_end, escaped = scan_string(s, i)
    local v = name_end and skip_ws(s, name_end)
    if not v or byte(s, v) ~= COLON then return nil end
    v = skip_ws(s, v + 1)
    local e = v and scan_value(s, v)
    if not e then return nil end
    n = n + 1
    at[n], value_end[n] = i, e
    local name = sub(s, i + 1, name_end - 2)
    if escaped then name = unescape(name) end
    if wanted[name] then index_member(obj, name, n) end
    obj.n = n
    local c = byte(s, e)
    if IS_SPACE[c] then
      e = find(s, NOT_SPACE, e)
      c = e and byte(s, e)
    end
    if c == RBRACE then
      if skip_ws(s, e + 1) then return nil end
      return obj
    end
    if c ~= COMMA then return nil end
    i = skip_ws(s, e + 1)
    if not i then return nil end
  end
end

-- member i's name literal
local function literal_of(obj, i)
  local at = obj.at[i]
  if not at then return obj.lit[i] end
  return sub(obj.s, at, scan_string(obj.s, at) - 1)
end

-- the edited object's text: runs of members kept as written are copied as one piece
local function object_text(obj)
  local s, at, value_end = obj.s, obj.at, obj.value_end
  local parts, run = {}, nil           -- run: the first member of the current such run
  for i = 1, obj.n do
    local new = obj.new[i]
    if new == nil then
      run = run or i
    else
      if run then
        parts[#parts + 1] = sub(s, at[run], value_end[i - 1] - 1)
        run = nil
      end
      if new then parts[#parts + 1] = literal_of(obj, i) .. ':' .. new end
    end
  end
  if run then parts[#parts + 1] = sub(s, at[run], value_end[obj.n] - 1) end
  return '{' .. table.concat(parts, ',') .. '}'
end

-- ---- phase 1: check and plan ------------------------------------------------------

local function too_large(ki, what, size)
  return redis.error_reply('ACMI_TOOLARGE ' .. KEYS[ki] .. ': ' .. what .. ' ' .. size ..
    ' bytes, over the cap of ' .. MAX_OBJECT_BYTES .. ' bytes for an object edited in place' ..
    ' (max_object_bytes); nothing was written')
end

-- a field's one argument: its mode's letter, its name as a JSON string (the literal), ':'
-- and its value as JSON text; one argument a field keeps an edit of MAX_EDIT_FIELDS
-- fields (with a batch's other ops) under a request's 3,999 arguments
local MODES = { s = 'set', n = 'setnx', d = 'del' }

-- OBJ's arguments from ARGV[pos]: the object's new text and where the next op starts;
-- or nil and an error. Every argument is checked before the stored object is read.
local function edit_object(where, ki, pos)
  local n = count_of(ARGV[pos])
  if not n then return nil, bad(where, 'field count is not a count', ARGV[pos]) end
  if n > 0 and ARGV[pos + n] == nil then return nil, bad(where, 'arguments missing') end
  local wanted, fields, size = {}, {}, 0
  for f = 1, n do
    local arg = ARGV[pos + f]
    size = size + #arg - 2             -- the literal and the value: bounds the work below
    if size > MAX_OBJECT_BYTES then
      return nil, too_large(ki, 'the edit carries at least', size)
    end
    local mode = MODES[sub(arg, 1, 1)]
    if not mode then return nil, bad(where, 'field ' .. f .. ' mode is unknown', sub(arg, 1, 1)) end
    local e, escaped
    if byte(arg, 2) == QUOTE then e, escaped = scan_string(arg, 2) end
    if not e or byte(arg, e) ~= COLON then
      return nil, bad(where, 'field ' .. f .. ' does not start with its name as a JSON string', arg)
    end
    local raw = sub(arg, e + 1)
    if scan_value(raw, 1) ~= #raw + 1 then
      return nil, bad(where, 'field ' .. f .. ' value is not one JSON value', raw)
    end
    local name = sub(arg, 3, e - 2)
    if escaped then name = unescape(name) end
    wanted[name] = true
    fields[f] = { mode, name, sub(arg, 2, e - 1), raw }
  end
  local stored = value_of(ki) or '{}'
  if #stored > MAX_OBJECT_BYTES then
    return nil, too_large(ki, 'the stored object holds', #stored)
  end
  local obj = parse_object(stored, wanted)
  if not obj then
    return nil, redis.error_reply('ACMI_CORRUPT ' .. KEYS[ki] .. ' does not hold a JSON object')
  end
  for f = 1, n do
    local field = fields[f]
    EDIT[field[1]](obj, field[2], field[3], field[4])
  end
  local doc = object_text(obj)
  if #doc > MAX_OBJECT_BYTES then
    return nil, too_large(ki, 'the edited object would hold', #doc)
  end
  return doc, pos + 1 + n
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
  local earlier = named[ki]
  named[ki] = true
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
