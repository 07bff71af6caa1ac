-- work.lua: the prologue of every work item write. acmi_core/coordination/work.py runs it as ONE
-- script, this text followed by lua/apply.lua unchanged: this part reads what the
-- client cannot know (does the item exist, who owns it, is it open), picks one of the
-- WritePlans the client built for each answer, and hands it to apply.lua's body, which
-- checks and writes it all-or-nothing. One round trip, atomic.
--
-- The protocol (acmi_core/store/scripts.py WORK declares the same names; its reply is
-- apply.lua's):
--: KEYS[1] profile: the profile of work:<id>
--: KEYS[2] signals: its signals
--: KEYS[3] owners: the owners HASH (work id -> owner entity id)
--: KEYS[4] owner_open: the open index of the owner the client expects the item to have
--    (ARGV[3]; any key when it expects none): a plan touches it only when that is the
--    owner read from KEYS[3], else the run fails ACMI_WORK_OWNER <owner>, nothing written
--: KEYS[5] replay: this request's record (keys.request), every plan's first key and
--    its first op RECORD: a retry of a request that ran answers with its first run's
--    results (plan 1 is chosen without a check, and its RECORD op answers)
--: KEYS[6..] plan_keys*: the other keys of the plans (KEYS[5..] is every plan's keys:
--    each plan's are a prefix of that list, so one list serves them all)
--: ARGV[1] op: create | event | signal | assign | delete
--: ARGV[2] work_id: the work id (field of the owners HASH, member of the open indexes)
--: ARGV[3] owner: the owner whose open index KEYS[4] is ('' = none expected)
--: ARGV[4] mode: signal: bump | open | close; assign: the new owner; others: ''
--: ARGV[5] plan_count: the number of plans n
--: ARGV[6..] plans*: n times: the plan's ARGV count c, then its c arguments (apply.lua's
--    ARGV)
--
-- The open index of the item's CURRENT owner (read from KEYS[3]) is KEYS[4], the one
-- the client expects; the plans that touch it reference it as the key after KEYS[5..],
-- and this prologue appends it. A different current owner fails the run with
-- ACMI_WORK_OWNER <owner> before anything is written: the client sends it again with
-- that owner's index (acmi_core/coordination/work.py). No key is built here.
--
-- Plan choice (the client builds the plans in this order):
--   create  exists -> error ACMI_WORK_EXISTS; else plan 1
--   event   missing -> ACMI_WORK_MISSING; in the owner's open index -> plan 2 (bumps
--           its score), else plan 1
--   signal  missing -> ACMI_WORK_MISSING; no owner -> plan 1; mode open/close -> plan 2
--           (ZSET / ZREM on the owner's index); mode bump -> plan 2 if in that index
--   assign  missing -> ACMI_WORK_MISSING; closed -> plan 1 (ZREM from the new owner's
--           index), open -> plan 3 (ZSET into it); plus 1 (plans 2 and 4: ZREM from the
--           previous owner's index) when a different owner had it. Open: signals.status
--           is not a closed status (read with cjson: only read, never re-encoded), so an
--           assign also repairs an index a status written around acmi.work left stale
--   delete  no owner -> plan 1; else plan 2 (plan 1 + ZREM from the owner's index)
-- Work done here: O(1) commands plus copying this request's arguments, and for assign
-- one decode of the signals object (at most MAX_OBJECT_BYTES, else taken as open).

local WORK_KEYS, WORK_ARGV = KEYS, ARGV
local work_op, work_id, work_expected, work_mode =
  WORK_ARGV[1], WORK_ARGV[2], WORK_ARGV[3], WORK_ARGV[4]
-- mirrors acmi_core.coordination.work.CLOSED_STATUSES
local WORK_CLOSED = {
  done = true, closed = true, cancelled = true, canceled = true, archived = true,
  resolved = true,
}

local function work_type_ok(key, want)
  local t = redis.call('TYPE', key)
  if type(t) == 'table' then t = t.ok end
  return t == 'none' or t == want, t
end

local function work_wrongtype(key, t, want)
  return redis.error_reply('ACMI_WRONGTYPE ' .. key .. ' holds a ' .. t .. ', expected a ' ..
    want .. '; nothing was written')
end

local work_ok, work_t = work_type_ok(WORK_KEYS[3], 'hash')
if not work_ok then return work_wrongtype(WORK_KEYS[3], work_t, 'hash') end

-- a retry of a request that ran: not a create of an item that exists now
local work_replay = redis.call('EXISTS', WORK_KEYS[5]) > 0
local work_exists = work_replay or redis.call('EXISTS', WORK_KEYS[1], WORK_KEYS[2]) > 0
if work_op == 'create' then
  if work_exists and not work_replay then
    return redis.error_reply('ACMI_WORK_EXISTS ' .. work_id)
  end
elseif work_op ~= 'delete' and not work_exists then
  return redis.error_reply('ACMI_WORK_MISSING ' .. work_id)
end

local work_owner = redis.call('HGET', WORK_KEYS[3], work_id)
if work_owner and (#work_owner == 0 or #work_owner > 256) then work_owner = false end
local work_extra = nil                 -- the owner's index, when the chosen plan touches it
local work_plan = 1

-- the current owner's open index: KEYS[4] when that is the owner the client expected
local function work_owner_index()
  if work_owner ~= work_expected then return nil end
  return WORK_KEYS[4]
end
if work_owner and not work_replay and work_owner ~= work_expected and
    (work_op ~= 'assign' or work_owner ~= work_mode) and work_op ~= 'create' then
  return redis.error_reply('ACMI_WORK_OWNER ' .. work_owner)
end

local function work_is_open_in(index)
  local ok, t = work_type_ok(index, 'zset')
  if not ok then return nil, work_wrongtype(index, t, 'zset') end
  return redis.call('ZSCORE', index, work_id) ~= false
end

if work_op == 'event' or work_op == 'signal' then
  if work_owner then
    local index = work_owner_index()
    if work_op == 'signal' and work_mode ~= 'bump' then
      work_plan, work_extra = 2, index
    else
      local open, err = work_is_open_in(index)
      if err then return err end
      if open then work_plan, work_extra = 2, index end
    end
  end
elseif work_op == 'assign' then
  local open = true
  local ok, t = work_type_ok(WORK_KEYS[2], 'string')
  if not ok then return work_wrongtype(WORK_KEYS[2], t, 'string') end
  local text = redis.call('GET', WORK_KEYS[2])
  if text and #text <= 65536 then
    local decoded, doc = pcall(cjson.decode, text)
    if decoded and type(doc) == 'table' and type(doc.status) == 'string' then
      open = not WORK_CLOSED[string.lower(doc.status)]
    end
  end
  work_plan = open and 3 or 1
  if work_owner and work_owner ~= work_mode then
    work_plan, work_extra = work_plan + 1, work_owner_index()
  end
elseif work_op == 'delete' then
  if work_owner then work_plan, work_extra = 2, work_owner_index() end
elseif work_op ~= 'create' then
  return redis.error_reply('ACMI_BADOP work op ' .. tostring(work_op))
end

if work_replay then work_plan, work_extra = 1, nil end  -- its RECORD op answers

-- the chosen plan's arguments, and its keys, become apply.lua's ARGV and KEYS
local plans = tonumber(WORK_ARGV[5])
if not plans or work_plan > plans then
  return redis.error_reply('ACMI_BADOP work plan ' .. work_plan .. ' of ' .. tostring(plans))
end
local work_pos = 6
for _ = 1, work_plan - 1 do work_pos = work_pos + 1 + tonumber(WORK_ARGV[work_pos]) end
local work_plan_argv = {}
for i = 1, tonumber(WORK_ARGV[work_pos]) do work_plan_argv[i] = WORK_ARGV[work_pos + i] end
local work_plan_keys = {}
for i = 5, #WORK_KEYS do work_plan_keys[#work_plan_keys + 1] = WORK_KEYS[i] end
if work_extra then work_plan_keys[#work_plan_keys + 1] = work_extra end

-- apply.lua follows: it reads KEYS and ARGV, which from here on are the chosen plan's
local KEYS, ARGV = work_plan_keys, work_plan_argv
