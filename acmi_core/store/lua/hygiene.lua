-- hygiene.lua: the two writes of the hygiene job's cold archive (acmi_core/jobs/hygiene.py)
-- that decide on what they read. One round trip each, atomic.
--
-- ARGV[1] = 'trim': after the archive sink verified the quarter's object (count and
--   sha256 read back), write the quarter's archive document and remove exactly the
--   archived members from the live timeline, but only if every one of them is still
--   there at the score the job read: a member that moved or went (a delete, another
--   run) means the job's view is stale, and nothing is removed (the next run redoes it;
--   the object already holds the members, so nothing is lost or written twice).
--   KEYS[1] the timeline (ZSET), KEYS[2] the entity's archive documents (HASH)
--   ARGV[2] the quarter (YYYY-QN; '' writes no document), ARGV[3] the document JSON,
--   ARGV[4] n, then n times: member, score (as Redis printed it)
--   Returns {1, removed} or {0, how many members differ}; the document is written in
--   both cases (it describes the verified object, not the live timeline).
--   Work: n ZSCOREs + one ZREM of n members; the caller sends at most TRIM_BYTES of
--   members a run of it.
--
-- ARGV[1] = 'release': KEYS[1] the job's archive lease (STRING, SET NX PX by the job),
--   ARGV[2] the execution id that took it. Deletes it only if still ours: returns 1/0.

local mode = ARGV[1]
if mode == 'release' then
  if redis.call('GET', KEYS[1]) == ARGV[2] then
    return redis.call('DEL', KEYS[1])
  end
  return 0
end
if mode ~= 'trim' then
  return redis.error_reply('ACMI_BADOP hygiene: mode ' .. tostring(mode))
end

local quarter, doc = ARGV[2], ARGV[3]
local n = tonumber(ARGV[4])
if not n or #ARGV ~= 4 + 2 * n then
  return redis.error_reply('ACMI_BADOP hygiene: member count')
end
if quarter ~= '' then
  redis.call('HSET', KEYS[2], quarter, doc)
end
local differ = 0
local members = {}
for i = 0, n - 1 do
  local member = ARGV[5 + 2 * i]
  local expected = tonumber(ARGV[6 + 2 * i])
  local score = tonumber(redis.call('ZSCORE', KEYS[1], member) or '')
  if score == nil or score ~= expected then
    differ = differ + 1
  end
  members[#members + 1] = member
end
if differ > 0 then
  return { 0, differ }
end
if n == 0 then
  return { 1, 0 }
end
local removed = 0
-- unpack() is bounded by Lua's C stack: remove in slices
for i = 1, #members, 500 do
  removed = removed + redis.call('ZREM', KEYS[1], unpack(members, i, math.min(i + 499, #members)))
end
return { 1, removed }
