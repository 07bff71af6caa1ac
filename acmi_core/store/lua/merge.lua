-- merge.lua: several timelines merged newest first (acmi_core.entities TimelineAPI.cat),
-- one page of the merge, stopping at a byte cap.
--
-- The merge's order is total: score descending, then the timeline's place in KEYS (equal
-- ts: the order given), then the timeline's own order (equal scores: member bytes
-- descending, ZRANGE REV). A position in it is therefore one member: its score, its
-- timeline and how many members of that score and timeline come up to it (its run).
-- Resuming there, timelines before it in KEYS start below the score, it resumes after
-- its run, and those after it start at the score: no member is lost or repeated, ties
-- across timelines included. Every read is by rank (ZCOUNT, O(log N), then ZRANGE by
-- index), as in page.lua.
--
-- The run is checked against the member itself: the cursor carries its length and first
-- and last bytes, and the members of that score from the run's own place on are compared
-- (one at a time, at most LOOK of them) so a member added meanwhile at that very score and timeline,
-- before the cursor's, does not make the next page repeat one.
--
-- The byte cap is applied while reading: the merge stops before the member that would
-- take the page past max_bytes (the first member is returned whatever its size, so every
-- page moves on). Large events are read one at a time, each only once ZCOUNT shows it
-- comes next (see `lazy` below): a page of 20 timelines of 256 KB events reads about
-- what it answers. Small ones are read ahead in steps of 1, 2, ... 64 members, a step
-- never more than the members of the average size so far that fit in what is left of
-- the cap, shared among the timelines still open. Never every timeline's `count`
-- events. Read-only.
--
-- The protocol (acmi_core/store/scripts.py MERGE declares the same names):
--: KEYS[1..] timelines*: the timelines (ZSETs), in the merge's order for equal scores
--: ARGV[1] high: the start bound, inclusive ('+inf' = none)
--: ARGV[2] low: the far bound, inclusive ('-inf' = none)
--: ARGV[3] count: the members a page may hold
--: ARGV[4] max_bytes: the members' bytes a page may hold
--: ARGV[5] at: the cursor's timeline, its index in KEYS (0: a first page)
--: ARGV[6] at_score: the cursor member's score
--: ARGV[7] at_run: the members of that score in that timeline up to it, itself included
--: ARGV[8] at_size: its length in bytes
--: ARGV[9] at_head: its first bytes
--: ARGV[10] at_tail: its last bytes
--: reply[1] more: 1 when the page stopped at max_bytes with members left
--: reply[2] resumed: the members of at_score the cursor's timeline resumed after (0: none)
--: reply[3..] window*: member, score, timeline (its index in KEYS), ... newest first

local LOOK = 16
local high, low = ARGV[1], ARGV[2]
local low_n = tonumber(low)
local count, max_bytes, at = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local n = #KEYS

-- each timeline: the rank of its next unread member, what is read and not yet merged
local rank, buf, pos, done, step = {}, {}, {}, {}, {}
local resumed = 0
for j = 1, n do
  local first
  if at == 0 then
    first = redis.call('ZCOUNT', KEYS[j], '(' .. high, '+inf')
  elseif j < at then
    first = redis.call('ZCOUNT', KEYS[j], ARGV[6], '+inf')
  else
    first = redis.call('ZCOUNT', KEYS[j], '(' .. ARGV[6], '+inf')
  end
  if j == at then
    local run, size, head, tail = tonumber(ARGV[7]), tonumber(ARGV[8]), ARGV[9], ARGV[10]
    local from = first + run - 1
    first = first + run -- the member is where the run says (or gone): resume after it
    -- one member at a time: the first is the cursor's unless members were added before it
    for i = 0, LOOK - 1 do
      local one = redis.call('ZRANGE', KEYS[j], from + i, from + i, 'REV', 'WITHSCORES')
      if #one == 0 or tonumber(one[2]) ~= tonumber(ARGV[6]) then break end
      local m = one[1]
      if #m == size and m:sub(1, #head) == head and m:sub(#m - #tail + 1) == tail then
        first = from + i + 1
        break
      end
    end
    resumed = first - from + run - 1
  end
  rank[j], buf[j], pos[j], done[j], step[j] = first, {}, 1, false, 1
end

local taken, total, counted = 0, 0, 0
local read_bytes, read_count = 0, 0
-- Until the members read show the events are small, a timeline's next member is read
-- only once it is known to come next: ZCOUNT of the members at or past the candidate's
-- score tells, without reading them, whether a timeline has one ahead of it (O(log N)).
-- Events of 256 KB then cost what is answered, not one unanswered member per timeline.
-- Once n members of the average size read take at most a quarter of the cap, every
-- timeline's next members are read ahead in steps (fewer calls for many small events).
local lazy = true

-- the next member of timeline j is at buf[j][pos[j]] (member, score, its text) afterwards,
-- unless the timeline has none left in the range
local function fill(j, open)
  if pos[j] <= #buf[j] then return true end
  if done[j] then return false end
  local want = 1
  if not lazy then
    want = step[j]
    if counted > 0 then
      local fit = math.floor((max_bytes - total) / (total / counted) / open) + 1
      want = math.max(1, math.min(want, fit))
    end
    step[j] = math.min(step[j] * 2, 64)
  end
  local chunk = redis.call('ZRANGE', KEYS[j], rank[j], rank[j] + want - 1, 'REV', 'WITHSCORES')
  rank[j] = rank[j] + want
  if #chunk < 2 * want then done[j] = true end
  local b = {}
  for i = 1, #chunk, 2 do
    local s = tonumber(chunk[i + 1])
    if low_n ~= nil and s < low_n then
      done[j] = true
      break
    end
    -- the score's own text is returned: a Lua number would reach Redis as an integer
    b[#b + 1] = chunk[i]
    b[#b + 1] = s
    b[#b + 1] = chunk[i + 1]
    read_bytes, read_count = read_bytes + #chunk[i], read_count + 1
  end
  if lazy and read_count > 0 and read_bytes / read_count * n * 4 <= max_bytes then
    lazy = false
  end
  buf[j], pos[j] = b, 1
  return #b > 0
end

-- a member of timeline j with score s comes before the best one so far
local function ahead(s, j, best)
  if best == nil then return true end
  local t = buf[best][pos[best] + 1]
  return s > t or (s == t and j < best)
end

local out = {0, resumed}
while taken < count do
  local best = nil
  if lazy then
    for j = 1, n do
      if pos[j] <= #buf[j] and ahead(buf[j][pos[j] + 1], j, best) then best = j end
    end
    if best == nil then
      for j = 1, n do
        if fill(j, 1) then
          best = j
          break
        end
      end
    end
    if best == nil then return out end
    -- each timeline not read ahead: is its next member before the best one? (a later
    -- best only comes before the earlier one, so an earlier "no" stands)
    for j = 1, n do
      if lazy and j ~= best and pos[j] > #buf[j] and not done[j] then
        local text = buf[best][pos[best] + 2]
        local from = text
        if j > best then from = '(' .. text end
        if redis.call('ZCOUNT', KEYS[j], from, '+inf') > rank[j] and fill(j, 1) then
          if ahead(buf[j][pos[j] + 1], j, best) then best = j end
        end
      end
    end
  end
  if not lazy then
    local open = 0
    for j = 1, n do
      if pos[j] <= #buf[j] or not done[j] then open = open + 1 end
    end
    best = nil
    for j = 1, n do
      if fill(j, math.max(open, 1)) and ahead(buf[j][pos[j] + 1], j, best) then best = j end
    end
    if best == nil then return out end
  end
  local member = buf[best][pos[best]]
  if taken > 0 and total + #member > max_bytes then
    out[1] = 1
    return out
  end
  total = total + #member
  counted = counted + 1
  taken = taken + 1
  out[#out + 1] = member
  out[#out + 1] = buf[best][pos[best] + 2]
  out[#out + 1] = best
  pos[best] = pos[best] + 3
end
return out
