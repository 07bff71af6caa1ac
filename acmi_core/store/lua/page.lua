-- page.lua: a timeline page that resumes from a cursor (acmi_core.client TimelineAPI.page),
-- in O(log N + count). The cursor is (score, offset among the members of that score);
-- ZRANGE BYSCORE LIMIT offset would skip those members one by one, which in a run of
-- 1,000,000 events of one ts took 70 ms a page. Here the position becomes a rank: ZCOUNT
-- of what sorts before the score (O(log N)), then ZRANGE by index. Read-only.
--
-- The protocol (acmi_core/store/scripts.py PAGE declares the same names):
--: KEYS[1] timeline: the timeline (ZSET)
--: ARGV[1] score: the cursor's score
--: ARGV[2] offset: its offset among that score's members
--: ARGV[3] count
--: ARGV[4] bound: the range's far bound, inclusive ('' = none)
--: ARGV[5] reverse: '1' newest first, '0' oldest first
--: reply[1..] window*: member, score, member, score, ... (at most count; none past the
--    far bound)

local score, offset, count = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local bound = nil
if ARGV[4] ~= '' then bound = tonumber(ARGV[4]) end
local reverse = ARGV[5] == '1'

local window
if reverse then
  local first = redis.call('ZCOUNT', KEYS[1], '(' .. score, '+inf') + offset
  window = redis.call('ZRANGE', KEYS[1], first, first + count - 1, 'REV', 'WITHSCORES')
else
  local first = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. score) + offset
  window = redis.call('ZRANGE', KEYS[1], first, first + count - 1, 'WITHSCORES')
end
if bound == nil then return window end
local kept = {}
for i = 1, #window, 2 do
  local s = tonumber(window[i + 1])
  if (reverse and s < bound) or ((not reverse) and s > bound) then break end
  kept[#kept + 1] = window[i]
  kept[#kept + 1] = window[i + 1]
end
return kept
