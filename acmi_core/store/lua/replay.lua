-- replay.lua: this request's record, for the scripts whose retry is not idempotent by
-- itself (locks.lua, hitl.lua, hygiene.lua: this text is put before theirs, after
-- mentions.lua; acmi_core/store/scripts.py gives their every op this key, REPLAY_KEY,
-- last). The transport resends a request whose reply it lost; that retry must not meet
-- its own write (a lease it holds, an item it closed, members it trimmed) as another's.
--: KEYS[#] replay: this request's record (keys.request): a retry of a request that ran
--    answers with the reply recorded there, and writes nothing
-- A run that finds the record answers with it at once; otherwise the script answers
-- through `recorded(reply)`, which stores the reply there in the same run for
-- REPLAY_TTL_MS (not when it encodes to over REPLAY_MAX_BYTES: a retry then runs again).
-- Both mirror acmi_core/store/scripts.py. Cost: one GET, and one SET per first run.

local REPLAY_TTL_MS, REPLAY_MAX_BYTES = 60000, 131072
local replay_key = KEYS[#KEYS]
local replayed_reply = redis.call('GET', replay_key)
if replayed_reply then return cjson.decode(replayed_reply) end

local function recorded(reply)
  local text = cjson.encode(reply)
  if #text <= REPLAY_MAX_BYTES then redis.call('SET', replay_key, text, 'PX', REPLAY_TTL_MS) end
  return reply
end
