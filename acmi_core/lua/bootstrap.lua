-- bootstrap.lua: an agent's wake bundle in one step, optionally logging its spawn first.
--
-- KEYS  1 profile  2 signals  3 timeline  4 spawns  5 active_context  6 rollup:latest
--       7 the agent's open HITL queue  8 the shared open HITL queue
--       9 the tenant's lease index  10 the agent's open-work index
--       11 the agent's workflows  12 the tenant's lessons feed
--       13 the coordination thread's timeline  14 the agent namespace index (SET)
-- ARGV  1 now_ms  2 agent entity id (agent:<id>)  3 agent local id  4 tenant key prefix
--       5 events  6 spawns  7 hitl  8 locks  9 work  10 lessons  11 lessons scanned
--       12 workflows  13 coordination events  14 coordination scanned
--       15 spawn member JSON ('' = no spawn)  16 spawn score (ts)
--
-- Open work items are the one place this script builds key names: the ids come from the
-- agent's open-work index (KEYS[10]) and the keys are <prefix>work:<id>:profile|signals,
-- so every key of a deployment must live on one shard (Upstash, standalone Redis; not
-- Redis Cluster). Ids that are not entity ids are skipped, never turned into keys.
--
-- Cost: every read is bounded by an ARGV count the client caps (acmi_core/bootstrap.py),
-- so the script is O(those counts x member size), whatever the agent's history.
-- Reads are tolerant: a key holding another type gives an empty section and its name
-- with Redis's WRONGTYPE error in the reply's problems, never an error. The spawn is the one write; it is checked first
-- and a wrong-typed spawns key fails the call before anything is written.
--
-- Reply: { profile, signals, timeline, spawns, active[field, value...], rollup, hitl,
--          shared, leases[], work[id, score, profile, signals...], lessons, coordination,
--          problems[], spawned (0|1) }
-- A list of JSON members (timeline, spawns, hitl, shared, lessons, coordination) comes
-- back as ONE string, the members joined by SEP: the client parses a whole section at
-- once instead of a reply element per member. SEP holds byte 0xFF, which no UTF-8 text
-- contains; a member that is not UTF-8 (skipped anyway) cannot split another.

local now = tonumber(ARGV[1])
local agent, local_id, prefix = ARGV[2], ARGV[3], ARGV[4]
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
  spawned = redis.call('ZADD', KEYS[4], 'NX', ARGV[16], ARGV[15])
  redis.call('SADD', KEYS[14], local_id)
end

-- 2. the agent's own slots
local profile = read(false, 'GET', KEYS[1])
local signals = read(false, 'GET', KEYS[2])
local timeline = {}
if n[5] > 0 then timeline = read({}, 'ZRANGE', KEYS[3], -n[5], -1) end
local spawns = read({}, 'ZRANGE', KEYS[4], 0, n[6] - 1, 'REV')
local active = read({}, 'HGETALL', KEYS[5])
local rollup = read(false, 'GET', KEYS[6])

-- 3. HITL: most urgent (earliest deadline) first
local hitl = read({}, 'ZRANGE', KEYS[7], 0, n[7] - 1)
local shared = read({}, 'ZRANGE', KEYS[8], 0, n[7] - 1)

-- 4. leases with this owner (expired ones are dropped by the client, which knows now)
local leases = read({}, 'ZRANGEBYLEX', KEYS[9], '[' .. agent .. '|', '(' .. agent .. '}',
  'LIMIT', 0, n[8])

-- 5. open work items, most recently updated first, with their profile and signals
local work = {}
local open = read({}, 'ZRANGE', KEYS[10], 0, n[9] - 1, 'REV', 'WITHSCORES')
for i = 1, #open, 2 do
  local id = open[i]
  if #id <= 256 and string.find(id, '^[A-Za-z0-9_.-]+$') then
    local base = prefix .. 'work:' .. id .. ':'
    work[#work + 1] = id
    work[#work + 1] = open[i + 1]
    work[#work + 1] = read(false, 'GET', base .. 'profile')
    work[#work + 1] = read(false, 'GET', base .. 'signals')
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
    for _, member in ipairs(read({}, 'ZRANGE', KEYS[12], 0, n[11] - 1, 'REV')) do
      -- the feed holds improvement events acmi_core.workflows wrote (compact JSON): the
      -- first "workflow":"..." member is the payload's (in a string value the quotes
      -- would be escaped), so a pattern reads it without decoding the event
      local wf = string.match(member, '"workflow":"([^"\\]*)"')
      if wf and mine[(string.gsub(wf, '^workflow:', ''))] then
        lessons[#lessons + 1] = member
        if #lessons >= n[10] then break end
      end
    end
  end
end

-- 7. the newest coordination events that mention the agent: its entity id, or @<id>,
--    not followed by another id character (agent:claude is not agent:claude-engineer)
local function mentions(text, needle)
  local from = 1
  while true do
    local s, e = string.find(text, needle, from, true)
    if not s then return false end
    local before, after = string.sub(text, s - 1, s - 1), string.sub(text, e + 1, e + 1)
    if not string.find(after, '^[A-Za-z0-9_.-]') and not string.find(before, '^[A-Za-z0-9_.@:-]') then
      return true
    end
    from = e + 1
  end
end
local coordination = {}
if n[13] > 0 then
  local recent = read({}, 'ZRANGE', KEYS[13], -n[14], -1)
  for i = #recent, 1, -1 do
    local m = recent[i]
    if mentions(m, agent) or mentions(m, '@' .. local_id) then
      coordination[#coordination + 1] = m
      if #coordination >= n[13] then break end
    end
  end
end

return { profile, signals, joined(timeline), joined(spawns), active, rollup, joined(hitl),
  joined(shared), leases, work, joined(lessons), joined(coordination), problems, spawned }
