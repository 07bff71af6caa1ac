-- bootstrap.lua: an agent's wake bundle in one step, optionally logging its spawn first.
--
-- The protocol (acmi_core/store/scripts.py BOOTSTRAP declares the same names):
--: KEYS[1] profile
--: KEYS[2] signals
--: KEYS[3] timeline
--: KEYS[4] spawns
--: KEYS[5] active_context
--: KEYS[6] rollup: rollup:latest
--: KEYS[7] hitl: the agent's open HITL queue
--: KEYS[8] hitl_shared: the shared open HITL queue
--: KEYS[9] leases: the tenant's lease index
--: KEYS[10] work_open: the agent's open-work index
--: KEYS[11] workflows: the agent's workflows
--: KEYS[12] lessons: the tenant's lessons feed
--: KEYS[13] coordination: the agent's mentions on the coordination thread (ZSET score =
--    ts, member = a copy of the event; kept by the writes that add the events)
--: KEYS[14] agent_index: the agent namespace index (SET)
--: KEYS[15] handoff: the agent's memory handoff (STRING)
--: KEYS[16] archive: its memory archive (HASH quarter -> doc)
--: KEYS[17] topic: the profile of the topic:<slug> asked for (the agent's profile when
--    none)
--: KEYS[18] stamps: its daily-note stamps (ZSET score = member = the ts of a daily-note
--    line; absent for an agent that never wrote memory, and in reference or foreign data)
--: KEYS[19] memory_hot: its hot layer (STRING JSON, hot.*)
--: KEYS[20] memory_warm: its warm layer (STRING JSON, warm.*)
--: KEYS[21] memory_heartbeat: its heartbeat-state (STRING JSON, heartbeat.*)
--: KEYS[22] replay: this request's record (keys.request): what a new spawn took, so the
--    transport's retry of the same request (the spawn now exists) is given it again
--: KEYS[23] memory_soul: SOUL.md (STRING JSON {text})
--: KEYS[24] memory_user: USER.md (STRING JSON {text})
--: KEYS[25] memory_agents: AGENTS.md (STRING JSON {text})
--: KEYS[26] session_mark: the spawn's session has its start logged in the daily note
--    (keys.session_logged; the agent's profile key when there is no spawn: not read)
--: KEYS[27] memory_index: the tenant's memory index (keys.memory_index), kept by the
--    session-start line this script writes (ARGV[34])
--: KEYS[28] changed: the change index of the agent's bucket (keys.changed)
--: KEYS[29] tenants: the index of tenants with changes (keys.tenants_with(CHANGED))
--: KEYS[30] tier_tokens: the bundle tokens served this hour to the key's agent
--    (keys.tier_tokens, an INCRBY counter; the agent's profile key when ARGV[39] < 0:
--    not read)
--: KEYS[31..] work_items*: the profile and signals of each open work item the client
--    guessed (ARGV[40..], the ids it saw open last time), two keys an id in its order
--: ARGV[1] now: now_ms
--: ARGV[2] agent: agent entity id (agent:<id>)
--: ARGV[3] local_id: agent local id
--: ARGV[4] prefix: tenant key prefix (not read since the work items moved to the client:
--    kept so the positions after it stay)
--: ARGV[5] events
--: ARGV[6] spawns
--: ARGV[7] hitl
--: ARGV[8] locks
--: ARGV[9] work
--: ARGV[10] lessons
--: ARGV[11] lessons_scanned
--: ARGV[12] workflows
--: ARGV[13] coordination: coordination events
--: ARGV[14] coordination_scanned: index members read at most
--: ARGV[15] spawn_member: spawn member JSON ('' = no spawn)
--: ARGV[16] spawn_score: spawn score (ts)
--: ARGV[17] threads
--: ARGV[18] daily_from: daily window from (ms)
--: ARGV[19] daily_to: daily window to (ms)
--: ARGV[20] daily: daily members kept (0 = none)
--: ARGV[21] daily_scanned: daily stamps and members examined
--: ARGV[22] handoff: 0 none, 1 read, 2 take when the spawn is new
--: ARGV[23] topic: 0|1
--: ARGV[24] archive: archive quarters
--: ARGV[25] archive_scanned: archive quarters examined
--: ARGV[26] timeline_scanned: timeline events examined at most when daily-note events
--    are skipped
--: ARGV[27] utc_from: the daily window in UTC (used when the heartbeat-state names no
--    heartbeat.timezone)
--: ARGV[28] utc_to
--: ARGV[29] read_bytes: the members' bytes each of the timeline, daily-note, lessons
--    and coordination reads takes at most (the first member read whatever its size)
--: ARGV[30] spawn_session: the spawn's '"session_id":<json string>' ('' = no spawn)
--: ARGV[31] spawn_window: the newest spawns examined (to read_bytes) for that session: one
--    there already makes this spawn a repeat (a resume or compact of the session), not logged
--: ARGV[32] startup: which of KEYS[23..25] the scope loads, a '1' or '0' each ("110":
--    SOUL.md and USER.md)
--: ARGV[33] start_zone: the time zone the client computed the session-start line in
--    (the agent's zone it last saw, else UTC)
--: ARGV[34] start_line: that line's event JSON ('' = no spawn): written (timeline, stamp,
--    indexes, the session mark) when the spawn is new, its start not logged, and
--    heartbeat-state's zone as read here is ARGV[33]; else the client logs it
--: ARGV[35] start_ts: the line's ts (its stamp)
--: ARGV[36] start_mark: the session mark's value (the spawn's ts)
--: ARGV[37] start_ttl: the session mark's ttl (ms)
--: ARGV[38] tenant: the tenants index's member
--: ARGV[39] token_limit: a bound key's max_tokens_per_hour (-1: no allowance): when
--    KEYS[30] holds that many already, the run is refused before anything is written
--    (ACMI_TIER_TOKENS <served>)
--: ARGV[40..] guessed*: the work ids whose keys KEYS[31..] are, in order
--
-- Every key this script touches is in KEYS (tests/integration/test_declared_keys.py):
-- open work items come back as ids (read from KEYS[10]); the items the client guessed
-- (KEYS[31..]: the ones it saw open last time) are read here, and the client reads the
-- others' profile and signals in a second round trip, only when there are any.
--
-- Cost: every read is bounded by an ARGV count the client caps (acmi_core/bootstrap/budget.py
-- CAPS), so the script is O(those counts x member size), whatever the agent's history;
-- the reads of events (timeline, daily notes, lessons, coordination) are bounded by bytes
-- too, as store/lua/page.lua is: read in growing steps, each no more than the members of
-- the average size so far that still fit, stopping before the member that would take the
-- read past ARGV[29] (the first member read is taken whatever its size). A read that
-- stopped there is named in reply[24] with the items it left out, which the bundle
-- reports as a cut (20 events of 255 KB cost ~40 ms of CPU by count alone).
-- Reads are tolerant: a key holding another type gives an empty section and its name
-- with Redis's WRONGTYPE error in the reply's problems, never an error. Four writes: the
-- spawn, checked first (a wrong-typed spawns key fails the call before anything is
-- written), taking the memory handoff (GETDEL) when that spawn is new, checked too (a
-- wrong-typed handoff key is a problem and is left alone), the request's record of
-- a new spawn and what it took (KEYS[22]), in every scope, and the new session's start
-- line (ARGV[34]) when its zone is the agent's and its keys are of the types it needs.
--
-- Memory costs nothing to an agent without it: with no stamps (KEYS[18] empty) there is
-- no daily read and the timeline is exactly its newest n events, as before memory.
-- With stamps, the daily read is O(the window's note lines): the stamps in the window,
-- then the timeline at each stamp (not the day's other events); the timeline section
-- skips daily-note lines, reading slices of the newest events until n are kept.
--
--: reply[1] profile
--: reply[2] signals
--: reply[3] timeline
--: reply[4] spawns
--: reply[5] active: [field, value...]
--: reply[6] rollup
--: reply[7] hitl
--: reply[8] shared
--: reply[9] leases: []
--: reply[10] work: [id, score...] (the client adds each item's profile and signals)
--: reply[11] lessons
--: reply[12] coordination
--: reply[13] problems: []
--: reply[14] spawned: 0|1
--: reply[15] daily
--: reply[16] read: {timeline, daily, stamps}: the members this run took from the
--    timeline for each section, and the stamps
--: reply[17] handoff
--: reply[18] taken: 0|1
--: reply[19] topic
--: reply[20] archive: [quarter, doc...]
--: reply[21] hot: KEYS[19] as stored
--: reply[22] warm: KEYS[20] as stored
--: reply[23] heartbeat: KEYS[21] as stored
--: reply[24] capped: [section, items left out...]: the reads stopped at ARGV[29] (a count
--    that is not known is 1)
--: reply[25] startup: [soul, user, agents]: KEYS[23..25] as stored (nil: absent or not
--    loaded)
--: reply[26] start_logged: 1 when the spawn's session start is already in the daily note
--    (KEYS[26] exists) or this run wrote it (reply[28]), so the client writes it only
--    for a session's first bootstrap and only when this run could not
--: reply[27] work_read: [id, profile, signals...]: the open items of reply[10] among the
--    guessed ones, read here (the others the client reads)
--: reply[28] start_written: 1 when this run wrote the session-start line ARGV[34]
-- A list of JSON members (timeline, spawns, hitl, shared, lessons, coordination) comes
-- back as ONE string, the members joined by SEP: the client parses a whole section at
-- once instead of a reply element per member. SEP holds byte 0xFF, which no UTF-8 text
-- contains; a member that is not UTF-8 (skipped anyway) cannot split another.

local now = tonumber(ARGV[1])
local agent, local_id = ARGV[2], ARGV[3]
local n = {}
for i = 5, 14 do n[i] = tonumber(ARGV[i]) end
local problems = {}
local SEP = '\n\255\n'
local function joined(members) return table.concat(members, SEP) end

local function kind_of(key)
  local t = redis.call('TYPE', key)
  if type(t) == 'table' then t = t.ok end
  return t
end

-- a read that tolerates a key of the wrong type: `empty`, and the key in problems
-- (pcall, not TYPE first: one call per read)
local function read(empty, ...)
  local reply = redis.pcall(...)
  if type(reply) == 'table' and reply.err then
    -- the error's text differs between servers (fakeredis: not even a string)
    problems[#problems + 1] = select(2, ...) .. ': WRONGTYPE, another type than the read needs'
    return empty
  end
  return reply
end

-- A byte-bounded read of a ZSET, newest first: ZRANGE ranks from `start` (REV), at most
-- `limit` members examined, `want` of them kept when `accept` takes them (nil: all).
-- Returns the kept members, the members read, and true when it stopped at the byte cap.
local read_bytes = tonumber(ARGV[29])
local capped = {}
local function bounded(key, start, limit, want, accept)
  local kept, seen, total, step = {}, 0, 0, 4
  while seen < limit and #kept < want do
    local size = math.min(step, limit - seen)
    if seen > 0 then
      local fit = math.floor((read_bytes - total) / (total / seen)) + 1
      size = math.max(1, math.min(size, fit))
    end
    local slice = read({}, 'ZRANGE', key, start + seen, start + seen + size - 1, 'REV')
    for _, member in ipairs(slice) do
      if seen > 0 and total + #member > read_bytes then return kept, seen + 1, true end
      seen, total = seen + 1, total + #member
      if accept == nil or accept(member) then
        kept[#kept + 1] = member
        if #kept >= want then break end
      end
    end
    if #slice < size then break end
    step = math.min(step * 2, 128)
  end
  return kept, seen, false
end
local function cut(section, count)
  capped[#capped + 1] = section
  capped[#capped + 1] = math.max(count, 1)
end

-- 0. a bound key's hourly allowance: refused before anything is read or written
local token_limit = tonumber(ARGV[39])
if token_limit >= 0 then
  local raw = redis.pcall('GET', KEYS[30])
  local served = type(raw) == 'string' and (tonumber(raw) or 0) or 0
  if served >= token_limit then
    return redis.error_reply('ACMI_TIER_TOKENS ' .. served)
  end
end

-- 1. the spawn, the one write: checked before it happens
local spawned = 0
if ARGV[15] ~= '' then
  local t = kind_of(KEYS[4])
  if t ~= 'none' and t ~= 'zset' then
    return redis.error_reply('ACMI_WRONGTYPE ' .. KEYS[4] .. ' holds a ' .. t ..
      ', expected a zset; nothing was written')
  end
  local ti = kind_of(KEYS[14])
  if ti ~= 'none' and ti ~= 'set' then
    return redis.error_reply('ACMI_WRONGTYPE ' .. KEYS[14] .. ' holds a ' .. ti ..
      ', expected a set; nothing was written')
  end
  -- the same session among the newest spawns: a resume or compact, not a new spawn.
  -- Matched on the member's text, as our spawns and the reference's are compact JSON
  -- (the fragment is followed by ',' or '}'), so no decode per member
  local fragment = ARGV[30]
  local function same_session(member)
    local at = string.find(member, fragment, 1, true)
    while at do
      local after = string.sub(member, at + #fragment, at + #fragment)
      if after == ',' or after == '}' then return true end
      at = string.find(member, fragment, at + 1, true)
    end
    return false
  end
  local window = tonumber(ARGV[31])
  local repeat_of = {}
  if t == 'zset' and window > 0 and fragment ~= '' then
    repeat_of = bounded(KEYS[4], 0, window, 1, same_session)
  end
  if #repeat_of == 0 then
    spawned = redis.call('ZADD', KEYS[4], 'NX', ARGV[16], ARGV[15])
  end
  redis.call('SADD', KEYS[14], local_id)
end

-- 2. the agent's own slots
local profile = read(false, 'GET', KEYS[1])
local signals = read(false, 'GET', KEYS[2])
-- memory: does the agent have daily notes? (its stamps; a wrong type reads as none)
local stamped = read(0, 'ZCARD', KEYS[18])
local took = { timeline = 0, daily = 0, stamps = 0 }
-- the newest events, oldest first as ZRANGE gives them. With daily notes, other than
-- their lines (shown as today's note; older days are level 3, on demand): slices of the
-- newest, each twice the shortfall, until n are kept or ARGV[26] were examined
local timeline = {}
if n[5] > 0 then
  local limit, accept = n[5], nil
  if stamped ~= 0 then
    limit = tonumber(ARGV[26])
    accept = function(member) return not string.find(member, '"memory":"daily"', 1, true) end
  end
  local kept, seen, stopped = bounded(KEYS[3], 0, limit, n[5], accept)
  -- the member that told the cap was reached was read too
  took.timeline = seen
  if stopped then cut('timeline', math.min(n[5], read(0, 'ZCARD', KEYS[3])) - #kept) end
  for i = #kept, 1, -1 do timeline[#timeline + 1] = kept[i] end
end
local spawns = read({}, 'ZRANGE', KEYS[4], 0, n[6] - 1, 'REV')
-- the joined threads: all of them up to the cap; past it one HSCAN step (the hash has no
-- order to read "the newest" by, and HGETALL of 10,000 threads stalled Redis for 200 ms)
local active = {}
local threads = read(0, 'HLEN', KEYS[5])
if threads == 0 then
  active = {}
elseif threads <= tonumber(ARGV[17]) then
  active = read({}, 'HGETALL', KEYS[5])
else
  active = read({'0', {}}, 'HSCAN', KEYS[5], '0', 'COUNT', ARGV[17])[2]
  problems[#problems + 1] = KEYS[5] .. ': ' .. threads .. ' threads joined, ' .. #active / 2 ..
    ' shown (a bounded read)'
end
local rollup = read(false, 'GET', KEYS[6])

-- 3. HITL: most urgent (earliest deadline) first
local hitl = read({}, 'ZRANGE', KEYS[7], 0, n[7] - 1)
local shared = read({}, 'ZRANGE', KEYS[8], 0, n[7] - 1)

-- 4. leases with this owner (expired ones are dropped by the client, which knows now)
local leases = read({}, 'ZRANGEBYLEX', KEYS[9], '[' .. agent .. '|', '(' .. agent .. '}',
  'LIMIT', 0, n[8])

-- 5. open work items, most recently updated first: their ids and scores only. Their
--    profile and signals are keys this script cannot name before it reads the index, so
--    the client reads them in a second round trip (acmi_core/bootstrap/script.py), and
--    only when there is open work. Ids that are not entity ids are skipped here.
local work, work_read = {}, {}
local guessed = {}  -- id -> the index of its profile key in KEYS (ARGV[40..] = KEYS[31..])
for i = 40, #ARGV do guessed[ARGV[i]] = 31 + 2 * (i - 40) end
local open = read({}, 'ZRANGE', KEYS[10], 0, n[9] - 1, 'REV', 'WITHSCORES')
for i = 1, #open, 2 do
  local id = open[i]
  if #id <= 256 and string.find(id, '^[A-Za-z0-9_.-]+$') then
    work[#work + 1] = id
    work[#work + 1] = open[i + 1]
    local at = guessed[id]
    if at then
      work_read[#work_read + 1] = id
      work_read[#work_read + 1] = read(false, 'GET', KEYS[at])
      work_read[#work_read + 1] = read(false, 'GET', KEYS[at + 1])
    end
  end
end

-- 6. lessons of the workflows the agent works on (the feed holds every workflow's)
local lessons = {}
if n[10] > 0 then
  local mine = {}
  for _, w in ipairs(read({}, 'ZRANGE', KEYS[11], 0, n[12] - 1, 'REV')) do
    mine[(string.gsub(w, '^workflow:', ''))] = true
  end
  if next(mine) then
    -- the feed holds improvement events acmi_core.coordination.workflows wrote (compact
    -- JSON): the first "workflow":"..." member is the payload's (in a string value the
    -- quotes would be escaped), so a pattern reads it without decoding the event
    local function of_mine(member)
      local wf = string.match(member, '"workflow":"([^"\\]*)"')
      return wf ~= nil and mine[(string.gsub(wf, '^workflow:', ''))] ~= nil
    end
    local got, _, stopped = bounded(KEYS[12], 0, n[11], n[10], of_mine)
    lessons = got
    if stopped then cut('lessons', n[10] - #lessons) end
  end
end

-- 7. the newest coordination events that mention the agent: its entity id, or @<id>, not
--    followed by another id character (agent:claude is not agent:claude-engineer). Found
--    when each event was written (the index KEYS[13], acmi_core/base/keys.py `mentions`),
--    so this reads the events it returns and nothing else, newest first
local coordination = {}
if n[13] > 0 then
  local want = math.min(n[13], n[14])
  local got, _, stopped = bounded(KEYS[13], 0, want, want)
  coordination = got
  if stopped then
    cut('coordination', math.min(want, read(0, 'ZCARD', KEYS[13])) - #coordination)
  end
end

-- 8. memory (seed 002 §7, §12). Daily notes: the memory events (payload.memory "daily")
--    of the window around now that holds today (and, asked for, yesterday) in any time
--    zone; the client picks the days in the agent's zone. The stamps say where they are:
--    the timeline is read at each stamp of the window, so the day's other events are not
--    read. A stamp whose lines went (trimmed, re-imported) reads nothing. A raw
--    '"memory":"daily"' can only be a key and its value in compact JSON (in a string the
--    quotes are escaped).
-- ---- the memory layers' own slots (KEYS[19..21]): whole, as the profile and signals
-- (each is a JSON object capped at MAX_OBJECT_BYTES by the writes)
local memory_hot = read(false, 'GET', KEYS[19])
local memory_warm = read(false, 'GET', KEYS[20])
local memory_heartbeat = read(false, 'GET', KEYS[21])
-- the startup files (seed §7: read first), each one object capped as the others
local startup = {}
for i = 1, 3 do
  startup[i] = false
  if string.sub(ARGV[32], i, i) == '1' then startup[i] = read(false, 'GET', KEYS[22 + i]) end
end
-- ---- end of the memory slots

local m = {}
for i = 18, 25 do m[i] = tonumber(ARGV[i]) end
local daily = {}
if m[20] > 0 and stamped > 0 then
  local from, to = ARGV[18], ARGV[19]
  -- no zone in the heartbeat-state: the days are UTC days, an exact window
  if not (memory_heartbeat and string.find(memory_heartbeat, '"heartbeat.timezone"', 1, true)) then
    from, to = ARGV[27], ARGV[28]
  end
  -- newest first: past the cap it is the window's oldest lines that are left out (a day
  -- of many session starts keeps its latest; an imported day's header, at its 00:00,
  -- goes first), and the lines are put back oldest first below. One stamp more than are
  -- examined: that there are more is said in problems
  local stamps = read({}, 'ZRANGE', KEYS[18], to, from, 'BYSCORE', 'REV', 'LIMIT', 0,
    m[21] + 1, 'WITHSCORES')
  took.stamps = #stamps / 2
  local left = m[21]  -- members examined at most, over all stamps
  local total, step = 0, 4  -- their bytes, and the next read's size (as bounded() does)
  for i = 2, #stamps, 2 do
    if left <= 0 or #daily >= m[20] then
      problems[#problems + 1] = KEYS[3] .. ': over ' .. m[21] ..
        ' daily-note events around now, the notes may be partial (a bounded read)'
      break
    end
    -- the members at this stamp (one, unless lines share a ts), in steps
    local offset, over = 0, false
    while left > 0 and #daily < m[20] do
      local size = math.min(step, left)
      if took.daily > 0 then
        local fit = math.floor((read_bytes - total) / (total / took.daily)) + 1
        size = math.max(1, math.min(size, fit))
      end
      local at = read({}, 'ZRANGE', KEYS[3], stamps[i], stamps[i], 'BYSCORE', 'LIMIT', offset,
        size)
      for _, member in ipairs(at) do
        if took.daily > 0 and total + #member > read_bytes then over = true break end
        took.daily, total, left = took.daily + 1, total + #member, left - 1
        if #daily < m[20] and string.find(member, '"memory":"daily"', 1, true) then
          daily[#daily + 1] = member
        end
      end
      if over or #at < size then break end
      offset = offset + size
      step = math.min(step * 2, 128)
    end
    if over then
      cut('today', 1)
      break
    end
  end
  for i = 1, math.floor(#daily / 2) do  -- oldest first, as the timeline gives them
    daily[i], daily[#daily + 1 - i] = daily[#daily + 1 - i], daily[i]
  end
end

-- the handoff: read, or taken (read and cleared at once) by the bootstrap that logs a new
-- spawn, so a peek or another session's repeat of the spawn leaves it for the next one.
-- A new spawn, in every scope, is recorded under this request's record (KEYS[22]) for
-- REPLAY_TTL_MS: 'T' .. the handoff it took, or 'S' when it took none. The transport's
-- retry of a request whose reply it lost finds its spawn logged (ZADD NX: 0) and, in
-- main, the handoff gone; the record gives it the first run's spawn (not a duplicate)
-- and handoff again, while a repeat of the spawn in a new request still finds none and
-- says duplicate. The record is kept whatever its size (a handoff is one bounded memory
-- write): a lost handoff is lost memory. Both mirror acmi_core/store/scripts.py; REPLAY_MAX_BYTES is not used here.
local REPLAY_TTL_MS, REPLAY_MAX_BYTES = 60000, 131072
local handoff, taken = false, 0
local replayed = false
if spawned == 0 and ARGV[15] ~= '' then replayed = read(false, 'GET', KEYS[22]) end
if replayed then
  spawned = 1
  if string.sub(replayed, 1, 1) == 'T' then
    handoff, taken = string.sub(replayed, 2), 1
  end
end
-- a replayed spawn has its handoff from the record (with a spawn, only main reads it: 2)
if m[22] > 0 and not replayed then
  local t = kind_of(KEYS[15])
  if t == 'string' then
    if m[22] == 2 and spawned == 1 then
      handoff = redis.call('GETDEL', KEYS[15])
      taken = 1
      redis.call('SET', KEYS[22], 'T' .. handoff, 'PX', REPLAY_TTL_MS)
    else
      handoff = redis.call('GET', KEYS[15])
    end
  elseif t ~= 'none' then
    problems[#problems + 1] = KEYS[15] .. ': WRONGTYPE, another type than the read needs'
  end
end
if spawned == 1 and not replayed and taken == 0 and ARGV[15] ~= '' then
  redis.call('SET', KEYS[22], 'S', 'PX', REPLAY_TTL_MS)
end

local start_logged = 0
if ARGV[15] ~= '' and redis.call('EXISTS', KEYS[26]) == 1 then start_logged = 1 end

-- the session start in the daily note (seed §8), once a session id: written here when the
-- client computed the line in the zone the agent's heartbeat-state names now (absent:
-- UTC; a value that does not read: not here), into keys of the types the write needs,
-- as memory.writes.log_session_start writes it (the client checks the zone once more
-- against the bundle's, and rewrites the line in the rare case they differ)
local start_written = 0
if spawned == 1 and start_logged == 0 and ARGV[34] ~= '' then
  local zone = 'UTC'
  if memory_heartbeat then
    zone = nil
    local ok, doc = pcall(cjson.decode, memory_heartbeat)
    if ok and type(doc) == 'table' then
      local z = doc['heartbeat.timezone']
      if z == nil then zone = 'UTC' elseif type(z) == 'string' then zone = z end
    end
  end
  local typed = true
  for _, i in ipairs({ 3, 18, 27, 28, 29 }) do
    local t = kind_of(KEYS[i])
    if t ~= 'none' and t ~= 'zset' then typed = false end
  end
  if zone == ARGV[33] and typed then
    redis.call('SET', KEYS[26], ARGV[36], 'PX', ARGV[37])
    redis.call('ZADD', KEYS[18], 'NX', ARGV[35], ARGV[35])
    redis.call('ZADD', KEYS[27], ARGV[1], agent)
    redis.call('SADD', KEYS[14], local_id)
    redis.call('ZADD', KEYS[28], ARGV[1], agent)
    redis.call('ZADD', KEYS[29], 'GT', ARGV[1], ARGV[38])
    redis.call('ZADD', KEYS[3], 'NX', ARGV[35], ARGV[34])
    start_written, start_logged = 1, 1
  end
end

local topic = false
if m[23] > 0 then topic = read(false, 'GET', KEYS[17]) end

-- the newest quarters of the archive (names YYYY-QN sort by time)
local archive = {}
if m[24] > 0 then
  local quarters = read(0, 'HLEN', KEYS[16])
  if quarters > m[25] then
    problems[#problems + 1] = KEYS[16] .. ': ' .. quarters .. ' quarters, over the ' .. m[25] ..
      ' a bootstrap reads: search them (memory search)'
  elseif quarters > 0 then
    local names = read({}, 'HKEYS', KEYS[16])
    table.sort(names, function(a, b) return a > b end)
    for i = 1, math.min(#names, m[24]) do
      archive[#archive + 1] = names[i]
      archive[#archive + 1] = read(false, 'HGET', KEYS[16], names[i])
    end
  end
end

return { profile, signals, joined(timeline), joined(spawns), active, rollup, joined(hitl),
  joined(shared), leases, work, joined(lessons), joined(coordination), problems, spawned,
  joined(daily), { took.timeline, took.daily, took.stamps }, handoff, taken, topic, archive,
  memory_hot, memory_warm, memory_heartbeat, capped, startup, start_logged, work_read,
  start_written }
