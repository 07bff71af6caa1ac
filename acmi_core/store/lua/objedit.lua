-- objedit.lua: the JSON scanner and the OBJ edit (edit top-level fields of a JSON object
-- stored as a STRING), shared by the scripts that run OBJ ops: scripts.py prepends it to
-- apply.lua (APPLY, and WORK and SWEEP after their prologues) and to lean.lua (LEAN).
--
-- It defines one function, object_editor, and nothing else at top level: Redis runs a
-- script's whole body on every call, and a function defined inside a function that is
-- never called costs nothing, so a run without an OBJ op pays for none of the ~20
-- functions and tables below (about 4 us of Redis time). A script calls it at its first
-- OBJ op and gets edit_object. The stored text it writes is the same, byte for byte,
-- whichever script runs the edit (tests/integration/test_lean_script.py checks).
--
-- JSON values are spliced as raw text, never decoded: Redis's cjson is lossy ([] becomes
-- {}, big integers become floats, lone surrogates fail). The scanner checks the whole
-- grammar of what it splices into and decodes only key names.
--
-- A script blocks all of Redis while it runs, so an OBJ edit is bounded: its names and
-- values, the stored object and the edited one are each at most MAX_OBJECT_BYTES, and
-- every step is O(n) (the caller also caps the fields of one edit).

-- mirrors acmi_core.base.model.MAX_OBJECT_BYTES (tests/unit/test_json_limits.py checks)
local MAX_OBJECT_BYTES = 65536

-- bad(where, what, value): the script's error for a malformed plan; count_of(s): a
-- non-negative decimal integer or nil; value_of(ki): the STRING at KEYS[ki] as the plan's
-- ops so far left it (false: absent). Returns edit_object(where, ki, pos): OBJ's
-- arguments from ARGV[pos] -> the object's new text and where the next op starts, or nil
-- and an error reply.
local function object_editor(bad, count_of, value_of)
local find, byte, sub, gsub, char = string.find, string.byte, string.sub, string.gsub, string.char
local floor = math.floor
-- ---- a JSON scanner: checks the grammar, finds spans, decodes only key names ---------
-- Iterative (an explicit stack, no recursion: no depth overflows it) and O(n): every
-- step is one string.find or string.byte from where the last one stopped.

-- Bytes are written as numbers, so each is a constant of the function that tests it, not
-- an upvalue every closure captures (both cheaper in Lua 5.1): 34 '"', 92 '\\', 47 '/',
-- 58 ':', 44 ',', 123 '{', 125 '}', 91 '[', 93 ']', 45 '-', 46 '.', 48 '0', 57 '9',
-- 101 'e', 69 'E', 117 'u'
local IS_SPACE = { [32] = true, [9] = true, [10] = true, [13] = true }
local NOT_SPACE = '[^ \t\r\n]'
-- the bytes up to a quote, a backslash or a raw control byte (always matches)
local STRING_RUN = '^[^"\\%z\1-\31]*'
-- a member's name with no escape and its ':', no space between (name: the capture);
-- a string's rest with no escape, to its closing quote: what scan_string accepts
local PLAIN_NAME = '^"([^"\\%z\1-\31]*)":'
-- an edit's field: its mode letter, a name with no escape (the capture) and ':'
local PLAIN_FIELD = '^([snd])"([^"\\%z\1-\31]*)":'
local PLAIN_REST = '^[^"\\%z\1-\31]*"'
-- text with no backslash and no control byte, to its end
local CLEAN = '^[^\\%z\1-\31]*'
-- the letters of JSON's one-letter escapes (\uXXXX apart); true, false and null are
-- told by their first byte (116, 102, 110) and containers by theirs (123 '{', 91 '['):
-- tests, not tables, so a run builds none of them
local ESCAPE_LETTERS = '"\\/bfnrt'

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
    local _, last = find(s, STRING_RUN, j)  -- anchored: a tight loop, no retry a byte
    local q = last + 1
    local c, d = byte(s, q, q + 1)
    if c == 34 then return q + 1, escaped end
    if not c then return nil end
    if c ~= 92 then return nil end
    c = d
    if c == 117 then
      if not find(s, '^%x%x%x%x', q + 2) then return nil end
      j = q + 6
    elseif c and find(ESCAPE_LETTERS, char(c), 1, true) then
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
  if c == 45 then
    i = i + 1
    c = byte(s, i)
    if not c or c < 48 or c > 57 then return nil end
  end
  local e = i + 1
  local d = byte(s, e)
  if d and d >= 48 and d <= 57 then  -- more digits (a short number skips the find)
    if c == 48 then return nil end
    local _, last = find(s, '^%d+', e)
    e = last + 1
    d = byte(s, e)
  end
  if d == 46 then
    local _, last = find(s, '^%d+', e + 1)
    if not last then return nil end
    e = last + 1
    d = byte(s, e)
  end
  if d == 101 or d == 69 then
    local _, last = find(s, '^[+-]?%d+', e + 1)
    if not last then return nil end
    e = last + 1
    d = byte(s, e)
  end
  return e, d
end

-- s[i] starts an object member: the index of its value, or nil
local function member_value(s, i)
  if byte(s, i) ~= 34 then return nil end
  local e = scan_string(s, i)
  e = e and skip_ws(s, e)
  if not e or byte(s, e) ~= 58 then return nil end
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
    if c == 34 then
      e = scan_string(s, i)
      c = e and byte(s, e)
    elseif c == 45 or (c and c >= 48 and c <= 57) then
      e, c = scan_number(s, i, c)
    elseif c == 123 or c == 91 then
      local close = c + 2                -- '}' or ']'
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
        if close == 125 then
          i = i and member_value(s, i)
          if not i then return nil end
          c = byte(s, i)
        end
        e = false
      end
    else
      local word = (c == 116 and 'true') or (c == 102 and 'false') or (c == 110 and 'null')
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
      if c == 44 then
        i = e + 1
        c = byte(s, i)
        if IS_SPACE[c] then
          i = find(s, NOT_SPACE, i)
          c = i and byte(s, i)
        end
        if closers[depth] == 125 then
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

-- the decoder of escaped names, built at the first one (most names have no escape)
local function unescaper()
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
    if c == 117 then
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
      out[n] = UNESCAPED[char(c)]
      j = b + 2
    end
  end
  n = n + 1
  out[n] = sub(body, j)
  return table.concat(out, '', 1, n)
end

return unescape
end

local unescape_built = nil
local function unescape(body)
  unescape_built = unescape_built or unescaper()
  return unescape_built(body)
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

-- one field's edit: mode set | setnx | del
local function edit_field(obj, mode, name, literal, raw)
  local i = obj.first[name]
  if mode == 'set' then
    if i then
      obj.new[i] = raw       -- in place, keeping the stored name literal
      drop_later(obj, name)  -- a duplicate later in the text would win on parse
    else
      add_member(obj, name, literal, raw)
    end
  elseif mode == 'setnx' then
    if not i then add_member(obj, name, literal, raw) end
  elseif i then              -- del
    obj.new[i] = false
    obj.first[name] = nil
    drop_later(obj, name)
  end
end

-- the members of s, indexing those named in wanted; nil when s is not a JSON object
-- (JSON null counts as {})
local function parse_object(s, wanted)
  local at, value_end = {}, {}
  local obj = {
    s = s, n = 0, at = at, value_end = value_end, lit = {}, new = {}, first = {}, later = {},
  }
  local i = skip_ws(s, 1)
  if not i then return nil end
  if byte(s, i) ~= 123 then
    if sub(s, i, i + 3) == 'null' and not skip_ws(s, i + 4) then return obj end
    return nil
  end
  i = skip_ws(s, i + 1)
  if not i then return nil end
  if byte(s, i) == 125 then
    if skip_ws(s, i + 1) then return nil end
    return obj
  end
  local n = 0
  local _, clean_end = find(s, CLEAN, i)
  if clean_end == #s then
    -- no escape and no control byte (most stored text): each string ends at the next
    -- quote, found by a plain find (memchr). A space between tokens (json.dumps' ", " and
    -- ": ") or anything else this loop does not take sends the text to the full path
    -- below, from its first member, with a fresh record
    local j = i
    while true do
      if byte(s, j) ~= 34 then break end
      local q = find(s, '"', j + 1, true)
      if not q or byte(s, q + 1) ~= 58 then break end
      local name, v, e = sub(s, j + 1, q - 1), q + 2, nil
      if byte(s, v) == 34 then
        e = find(s, '"', v + 1, true)
        e = e and e + 1
      else
        e = scan_value(s, v)
      end
      if not e then break end
      n = n + 1
      at[n], value_end[n] = j, e
      if wanted[name] then index_member(obj, name, n) end
      local c = byte(s, e)
      if c ~= 44 then
        if c == 125 and e == #s then
          obj.n = n
          return obj
        end
        break
      end
      j = e + 1
    end
    n, at, value_end = 0, {}, {}
    obj = {
      s = s, n = 0, at = at, value_end = value_end, lit = {}, new = {}, first = {}, later = {},
    }
  end
  while true do
    -- a name without escapes, then ':' (the usual member: one find); else the full path
    local _, colon, name = find(s, PLAIN_NAME, i)
    local v = colon and skip_ws(s, colon + 1)
    if not v then
      if byte(s, i) ~= 34 then return nil end
      local name_end, escaped = scan_string(s, i)
      v = name_end and skip_ws(s, name_end)
      if not v or byte(s, v) ~= 58 then return nil end
      v = skip_ws(s, v + 1)
      if not v then return nil end
      name = sub(s, i + 1, name_end - 2)
      if escaped then name = unescape(name) end
    end
    local e = nil
    if byte(s, v) == 34 then        -- a string without escapes: one find
      local _, close = find(s, PLAIN_REST, v + 1)
      e = close and close + 1
    end
    e = e or scan_value(s, v)
    if not e then return nil end
    n = n + 1
    at[n], value_end[n] = i, e
    if wanted[name] then index_member(obj, name, n) end
    obj.n = n
    local c = byte(s, e)
    if IS_SPACE[c] then
      e = find(s, NOT_SPACE, e)
      c = e and byte(s, e)
    end
    if c == 125 then
      if skip_ws(s, e + 1) then return nil end
      return obj
    end
    if c ~= 44 then return nil end
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
    -- the usual field: a known mode, a name without escapes (one find); else each part
    -- checked in turn
    local _, e, letter, name = find(arg, PLAIN_FIELD)
    local mode = MODES[letter]
    if not e then
      mode = MODES[sub(arg, 1, 1)]
      if not mode then
        return nil, bad(where, 'field ' .. f .. ' mode is unknown', sub(arg, 1, 1))
      end
      local escaped
      if byte(arg, 2) == 34 then e, escaped = scan_string(arg, 2) end
      if not e or byte(arg, e) ~= 58 then
        return nil,
          bad(where, 'field ' .. f .. ' does not start with its name as a JSON string', arg)
      end
      name = sub(arg, 3, e - 2)
      if escaped then name = unescape(name) end
    end
    local raw = sub(arg, e + 1)
    if raw ~= 'null' and scan_value(raw, 1) ~= #raw + 1 then  -- null: a del's value
      return nil, bad(where, 'field ' .. f .. ' value is not one JSON value', raw)
    end
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
    edit_field(obj, field[1], field[2], field[3], field[4])
  end
  local doc = object_text(obj)
  if #doc > MAX_OBJECT_BYTES then
    return nil, too_large(ki, 'the edited object would hold', #doc)
  end
  return doc, pos + 1 + n
end

return edit_object
end
