-- locks.lua: one lease operation (claim | renew | release) as one atomic step.
--
-- The protocol (acmi_core/store/scripts.py LOCKS declares the same names):
--: KEYS[1] lease: the lease HASH acmi:_lock:<tenant>:<resource>
--    {fence, owner, token (sha256 of the owner token), expires (ms), cid,
--     d:<claimant> for each claimant that deferred on this lease}
--    fence survives release and expiry, so it is never reused
--: KEYS[2] thread: the coordination thread's timeline ZSET
--: KEYS[3] index: the thread namespace SET
--: KEYS[4] leases: the tenant's lease index: a lexicographic ZSET (scores 0) with one
--    member <owner>|<resource>|<expires>|<fence>|<cid> per lease that has an owner, so a
--    bootstrap lists what an agent holds with one ZRANGEBYLEX; an expired lease keeps
--    its member until it is claimed again (readers compare expires with now)
--: KEYS[5..] mentions*: the mentions index (keys.mentions) of each agent the op's event
--    may mention, as far as the client knows them (store/lua/mentions.lua)
--: ARGV[1] op: claim | renew | release
--: ARGV[2] now: now_ms (the client's clock: tests control time)
--: ARGV[#] resource: the resource name (for the lease index), last for every op
--: claim ARGV[3] owner
--: claim ARGV[4] token_hash
--: claim ARGV[5] expires
--: claim ARGV[6] cid
--: claim ARGV[7] index_member
--: claim ARGV[8..] claim_template*
--: claim ARGV[..] defer_template*
--: claim reply OK fence
--: claim reply HELD owner expires fence
--: claim reply HEDGED owner expires cid: nothing written: another agent's raw coord-claim
--    for the resource (the reference's Lock-Protocol: no lease, an event) is on the thread
--    within the hedge window and not released since; owner its source, expires its ts +
--    the window, cid its correlationId
--: claim,release reply REKEY ids*: nothing written: the event mentions an agent whose
--    mentions index is not among KEYS (the holder read here); ids: every agent it
--    mentions, whose keys the client sends the run again with
--: renew ARGV[3] token_hash
--: renew ARGV[4] expires
--: renew reply OK owner fence cid
--: release ARGV[3] token_hash
--: release ARGV[4] index_member
--: release ARGV[5..] release_template*
--: release reply OK owner fence cid
--: renew,release reply NONE: nobody holds it
--: renew,release reply TOKEN owner expires: not the holder's token
--: renew,release reply EXPIRED owner expires: the lease ran out
-- A template is a count n then n items: text, slot name, text, ... (JSON built by the
-- client; slots are filled with values this script read or made, never decoded JSON).
--
-- Every coordination event written is indexed under the agents it mentions
-- (store/lua/mentions.lua, put before this text), each index a declared key. Every
-- reply is recorded under this request's record, KEYS[#] replay (store/lua/replay.lua,
-- put before this text too): a claim's retry must not meet its own lease as Conflict.
-- Phase 1 reads and checks (key types, stored numbers); phase 2 only writes.
-- Errors (nothing written): ACMI_WRONGTYPE <key> ..., ACMI_CORRUPT <key> ...

local function check_type(key, want)
  local t = redis.call('TYPE', key)
  if type(t) == 'table' then t = t.ok end
  if t ~= 'none' and t ~= want then
    return redis.error_reply('ACMI_WRONGTYPE ' .. key .. ' holds a ' .. t .. ', not a ' .. want)
  end
  return nil
end

local function render(i, values)
  local n = tonumber(ARGV[i])
  local out = {}
  for j = 1, n do
    local item = ARGV[i + j]
    if j % 2 == 1 then out[#out + 1] = item else out[#out + 1] = values[item] end
  end
  return table.concat(out), i + n + 1
end

local lease, thread, index, leases = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
declare_mentions(5)  -- store/lua/mentions.lua

-- the REKEY reply, when `event` mentions an agent whose index is not declared; else nil
local function rekey(event)
  local missing = undeclared_mentions({event})
  if #missing == 0 then return nil end
  local reply = {'REKEY'}
  -- every agent it mentions, not only the missing: the client declares exactly these
  for _, id in ipairs(mentioned(event)) do reply[#reply + 1] = id end
  return reply  -- not recorded: nothing ran, the retry with the keys is this request
end
for _, kt in ipairs({{lease, 'hash'}, {thread, 'zset'}, {index, 'set'}, {leases, 'zset'}}) do
  local err = check_type(kt[1], kt[2])
  if err then return err end
end

local op, now = ARGV[1], tonumber(ARGV[2])
local stored = redis.call('HMGET', lease, 'fence', 'owner', 'token', 'expires', 'cid')
local fence, owner, token, expires, cid = stored[1], stored[2], stored[3], stored[4], stored[5]
if fence and not tonumber(fence) then
  return redis.error_reply('ACMI_CORRUPT ' .. lease .. ' fence is not a number')
end
local held_until = nil
if owner then
  held_until = tonumber(expires)
  if not held_until or not token or not cid then
    return redis.error_reply('ACMI_CORRUPT ' .. lease .. ' is not a lease')
  end
end
local held = held_until ~= nil and held_until > now
local resource = ARGV[#ARGV]  -- every op's last argument

-- mirror acmi_core.coordination.locks HEDGE_MS, HEDGE_EVENTS, HEDGE_BYTES
local HEDGE_MS, HEDGE_EVENTS, HEDGE_BYTES = 300000, 200, 262144

-- The newest coord-claim another writer posted for this resource within the hedge window
-- and did not coord-release since (its source, ts, correlationId), or nil. Reads at most
-- HEDGE_EVENTS events and HEDGE_BYTES of them, newest first; decodes only the members
-- naming the resource and a coord- kind. Our own claims carry payload.fence: their leases
-- decide, not their events.
local function hedged(claimant)
  local low = string.format('(%d', now - HEDGE_MS)  -- within the window: younger than it
  local released, bytes, members = {}, 0, {}
  for i = 1, HEDGE_EVENTS do
    if i % 20 == 1 then  -- in steps of 20: what is taken from the ZSET stays near the cap
      if bytes > HEDGE_BYTES then break end
      members = redis.call('ZRANGE', thread, ARGV[2], low, 'BYSCORE', 'REV', 'LIMIT', i - 1, 20)
    end
    local m = members[(i - 1) % 20 + 1]
    if not m then break end
    bytes = bytes + #m
    if string.find(m, 'coord-', 1, true) and string.find(m, resource, 1, true) then
      local ok, ev = pcall(cjson.decode, m)
      if ok and type(ev) == 'table' and type(ev.source) == 'string' then
        local p = type(ev.payload) == 'table' and ev.payload or {}
        local names = p.resource == resource or p.task == resource or ev.correlationId == resource
        if names and p.fence == nil then
          if ev.kind == 'coord-release' then
            released[ev.source] = true
          elseif ev.kind == 'coord-claim' and not released[ev.source]
              and ev.source ~= claimant and type(ev.ts) == 'number' then
            return ev.source, ev.ts, type(ev.correlationId) == 'string' and ev.correlationId or ''
          end
        end
      end
    end
  end
  return nil
end

local function entry(who, ends, fenced, corr)
  return table.concat({who, resource, ends, fenced, corr}, "|")
end

if op == 'claim' then
  local new_owner, token_hash, new_expires, new_cid, member = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
  if held then
    -- one coord-defer per claimant per lease: a claimant polling a held lease must not
    -- flood the thread (the d:<claimant> marks go with the lease at the next claim)
    if redis.call('HEXISTS', lease, 'd:' .. new_owner) == 0 then
      local _, next_i = render(8, {})
      local event = render(next_i, {holder = owner, held_until = expires, holder_cid = cid,
        holder_fence = fence})
      local again = rekey(event)
      if again then return again end
      redis.call('HSET', lease, 'd:' .. new_owner, 1)
      redis.call('ZADD', thread, 'NX', ARGV[2], event)
      index_mentions(ARGV[2], event)
      redis.call('SADD', index, member)
    end
    return recorded({'HELD', owner, expires, fence})
  end
  local by, at, by_cid = hedged(new_owner)
  if by then
    return recorded({'HEDGED', by, string.format('%d', at + HEDGE_MS), by_cid})
  end
  -- a fresh hash: the fence carried over, the previous lease's deferral marks dropped
  -- (O(claimants that deferred on it))
  local new_fence = string.format('%d', (tonumber(fence) or 0) + 1)
  local event = render(8, {fence = new_fence})
  local again = rekey(event)
  if again then return again end
  redis.call('DEL', lease)
  redis.call('HSET', lease, 'fence', new_fence, 'owner', new_owner, 'token', token_hash,
    'expires', new_expires, 'cid', new_cid)
  if owner then redis.call('ZREM', leases, entry(owner, expires, fence, cid)) end
  redis.call('ZADD', leases, 0, entry(new_owner, new_expires, new_fence, new_cid))
  redis.call('ZADD', thread, 'NX', ARGV[2], event)
  index_mentions(ARGV[2], event)
  redis.call('SADD', index, member)
  return recorded({'OK', new_fence})
end

if not owner then return recorded({'NONE'}) end
if ARGV[3] ~= token then return recorded({'TOKEN', owner, expires}) end
if not held then return recorded({'EXPIRED', owner, expires}) end

if op == 'renew' then
  redis.call('HSET', lease, 'expires', ARGV[4])
  redis.call('ZREM', leases, entry(owner, expires, fence, cid))
  redis.call('ZADD', leases, 0, entry(owner, ARGV[4], fence, cid))
  return recorded({'OK', owner, fence, cid})
end

if op == 'release' then
  local event = render(5, {owner = owner, cid = cid, fence = fence})
  local again = rekey(event)
  if again then return again end
  redis.call('HDEL', lease, 'owner', 'token', 'expires', 'cid')
  redis.call('ZREM', leases, entry(owner, expires, fence, cid))
  redis.call('ZADD', thread, 'NX', ARGV[2], event)
  index_mentions(ARGV[2], event)
  redis.call('SADD', index, ARGV[4])
  return recorded({'OK', owner, fence, cid})
end

return redis.error_reply('ACMI_BADOP op ' .. tostring(op))
