-- page.lua: a timeline page (acmi_core.client TimelineAPI.page) and the newest events of
-- an entity read (EntityAPI.get), in O(log N + count), stopping at a byte cap.
--
-- The position is (score, offset among the members of that score); ZRANGE BYSCORE LIMIT
-- offset would skip those members one by one, which in a run of 1,000,000 events of one
-- ts took 70 ms a page. Here the position becomes a rank: ZCOUNT of what sorts before the
-- score (O(log N)), then ZRANGE by index. A first page starts at the range's near bound
-- (offset 0); from +inf (newest first) or -inf nothing sorts before it: no ZCOUNT.
--
-- The byte cap is applied while reading, not after: members are read in steps of 16, 64,
-- 128 (no more than the members of the average size so far that still fit) and the
-- read stops before the member that would take the page past max_bytes
-- (the first members, `lead` of them, the cursor's own member, are not counted; the first
-- member after them is returned whatever its size, so every page moves on). A page of 400
-- events of 256 KB then reads ~4 MiB, not 100 MB; a step reads at most 128 members, as
-- before. Fewer, larger steps: a read of the newest 50 events is two ZRANGEs, not four
-- (Redis time ~68 -> ~55 us; the members returned are the same whatever the steps).
-- Read-only.
--
-- The protocol (acmi_core/store/scripts.py PAGE declares the same names):
--: KEYS[1] timeline: the timeline (ZSET)
--: ARGV[1] score: the position's score (a first page: the near bound, '-inf'/'+inf' too)
--: ARGV[2] offset: its offset among that score's members
--: ARGV[3] count
--: ARGV[4] bound: the range's far bound, inclusive ('' = none)
--: ARGV[5] reverse: '1' newest first, '0' oldest first
--: ARGV[6] max_bytes: the members' bytes a page may hold
--: ARGV[7] lead: members at the start not counted against max_bytes
--: reply[1] more: 1 when the read stopped at max_bytes with members left in the range
--: reply[2..] window*: member, score, member, score, ... (at most count; none past the
--    far bound)

local key, score, offset, count = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local bound = nil
if ARGV[4] ~= '' then bound = tonumber(ARGV[4]) end
local reverse = ARGV[5] == '1'
local max_bytes, lead = tonumber(ARGV[6]), tonumber(ARGV[7])

-- a first page starts at the range's end: nothing sorts before it there, no ZCOUNT
local rank = offset
if reverse then
  if score ~= '+inf' then rank = redis.call('ZCOUNT', key, '(' .. score, '+inf') + offset end
elseif score ~= '-inf' then
  rank = redis.call('ZCOUNT', key, '-inf', '(' .. score) + offset
end

local out, n = {0}, 1
local taken, total, counted, step = 0, 0, 0, 16
while taken < count do
  local want = math.min(step, count - taken)
  if counted > 0 then
    -- no more than the members of the average size so far that still fit, plus the one
    -- that tells the cap is reached: a large member is not read only to be left out
    local fit = math.floor((max_bytes - total) / (total / counted)) + 1
    want = math.max(1, math.min(want, fit))
  end
  local chunk
  if reverse then
    chunk = redis.call('ZRANGE', key, rank, rank + want - 1, 'REV', 'WITHSCORES')
  else
    chunk = redis.call('ZRANGE', key, rank, rank + want - 1, 'WITHSCORES')
  end
  for i = 1, #chunk, 2 do
    if bound ~= nil then
      local s = tonumber(chunk[i + 1])
      if (reverse and s < bound) or ((not reverse) and s > bound) then return out end
    end
    local member = chunk[i]
    if taken >= lead then
      local size = #member
      if taken > lead and total + size > max_bytes then
        out[1] = 1
        return out
      end
      total = total + size
      counted = counted + 1
    end
    out[n + 1] = member
    out[n + 2] = chunk[i + 1]
    n = n + 2
    taken = taken + 1
  end
  if #chunk < 2 * want then return out end
  rank = rank + want
  step = math.min(step * 4, 128)
end
return out
