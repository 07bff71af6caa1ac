-- hygiene.lua: the two writes of the hygiene job's cold archive (acmi_core/jobs/hygiene.py)
-- that decide on what they read. One round trip each, atomic. Each reply is recorded
-- under this request's record, KEYS[#] replay (store/lua/replay.lua, put before this
-- text): a trim's retry would find its members gone and answer "changed, nothing
-- trimmed" for a trim that ran.
--
-- The protocol (acmi_core/store/scripts.py HYGIENE declares the same names):
--: ARGV[1] mode: trim | release
--
-- trim: after the archive sink verified the quarter's object (count and sha256 read
--   back), write the quarter's archive document and remove exactly the archived members
--   from the live timeline, but only if every one of them is still there at the score
--   the job read: a member that moved or went (a delete, another run) means the job's
--   view is stale, and nothing is removed (the next run redoes it; the object already
--   holds the members, so nothing is lost or written twice).
--: trim KEYS[1] timeline: the timeline (ZSET)
--: trim KEYS[2] archive: the entity's archive documents (HASH)
--: trim ARGV[2] quarter: the quarter (YYYY-QN; '' writes no document)
--: trim ARGV[3] doc: the document JSON
--: trim ARGV[4] member_count: n
--: trim ARGV[5..] members*: n times: member, score (as Redis printed it)
--: trim reply[1] trimmed: 1 removed, 0 some members differ (nothing removed)
--: trim reply[2] count: how many were removed, or how many members differ
--   The document is written in both cases (it describes the verified object, not the
--   live timeline).
--   Work: n ZSCOREs + one ZREM of n members; the caller sends at most TRIM_BYTES of
--   members and TRIM_MEMBERS members a run of it (more is refused, nothing written).
--
-- release: deletes the job's archive lease only if still ours.
--: release KEYS[1] lease: the job's archive lease (STRING, SET NX PX by the job)
--: release ARGV[2] execution_id: the execution id that took it
--: release reply released: 1 deleted, 0 not ours

local mode = ARGV[1]
if mode == 'release' then
  if redis.call('GET', KEYS[1]) == ARGV[2] then
    return recorded(redis.call('DEL', KEYS[1]))
  end
  return recorded(0)
end
if mode ~= 'trim' then
  return redis.error_reply('ACMI_BADOP hygiene: mode ' .. tostring(mode))
end

local quarter, doc = ARGV[2], ARGV[3]
local n = tonumber(ARGV[4])
if not n or #ARGV ~= 4 + 2 * n then
  return redis.error_reply('ACMI_BADOP hygiene: member count')
end
-- mirrors acmi_core.jobs.quarterly.TRIM_MEMBERS: the work of one run (a ZSCORE and a
-- removal a member; 50,000 members of 10 bytes, within TRIM_BYTES, ran 0.5 s)
if n > 1900 then
  return redis.error_reply('ACMI_BADOP hygiene: over 1900 members in one trim')
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
  return recorded({ 0, differ })
end
if n == 0 then
  return recorded({ 1, 0 })
end
local removed = 0
-- unpack() is bounded by Lua's C stack: remove in slices
for i = 1, #members, 500 do
  removed = removed + redis.call('ZREM', KEYS[1], unpack(members, i, math.min(i + 499, #members)))
end
return recorded({ 1, removed })
