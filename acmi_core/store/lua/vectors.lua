-- vectors.lua: the two steps of a prune pass over one entity's memory:vectors HASH
-- (acmi_core/memory/vectors.py), each bounded: mark adds a batch of needed digests to the
-- pass, sweep deletes the unmarked fields of one HSCAN step. A pass may span many runs;
-- it holds while no vector was written since it began: every write that stores a vector
-- also sets the vectors hash's '~gen' to a token of its own, in the same script as its
-- lines, and the pass recorded the token it read before it read any line. A step that
-- finds another token deletes the pass (BUSY: the next run starts a new one), so a vector
-- written while a pass is under way is never deleted by it.
--
-- The protocol (acmi_core/store/scripts.py VECTORS declares the same names):
--: ARGV[1] mode: mark | sweep
--
-- mark: the digests the lines of one step need, added to the pass; its cursor moved.
--: mark KEYS[1] vectors: the entity's memory:vectors HASH
--: mark KEYS[2] pass: the entity's memory:vectors:pass HASH
--: mark ARGV[2] gen: the '~gen' the pass began from ('' none)
--: mark ARGV[3] pass: the pass's id
--: mark ARGV[4] provider: the provider whose digests the pass holds
--: mark ARGV[5] fresh: 1 begins the pass (any older one deleted), 0 goes on with it
--: mark ARGV[6] at: the cursor the pass must be at (the one it begins at, when fresh)
--: mark ARGV[7] next: the cursor after this step
--: mark ARGV[8] ttl: ms the pass is kept unless a step refreshes it
--: mark ARGV[9..] digests*: at most MARK_CHUNK digests (16 hex digits each)
--: mark reply MARKED count: the digests added (new or not)
--: mark reply BUSY: a vector was written since the pass began (the pass is deleted)
--: mark reply MOVED: another run moved or replaced the pass (nothing written)
--   Work: 4 HGETs, one HSET of at most MARK_CHUNK fields, one PEXPIRE. A pass is
--   dropped by UNLINK: a pass of many digests is freed off the main thread.
--
-- sweep: one HSCAN step of the vectors, the fields the pass does not hold deleted.
--: sweep KEYS[1] vectors: the entity's memory:vectors HASH
--: sweep KEYS[2] pass: the entity's memory:vectors:pass HASH
--: sweep ARGV[2] gen: the '~gen' the pass began from
--: sweep ARGV[3] pass: the pass's id
--: sweep ARGV[4] cursor: the HSCAN cursor the pass is at ('0' its first step)
--: sweep ARGV[5] count: the HSCAN COUNT (PRUNE_CHUNK)
--: sweep ARGV[6] ttl: ms the pass is kept unless a step refreshes it
--: sweep reply SWEPT scanned dropped next: fields looked at, deleted; the next cursor
--     ('0': the pass is over and deleted)
--: sweep reply BUSY: a vector was written since the pass began (the pass is deleted)
--: sweep reply MOVED: another run moved or replaced the pass (nothing written)
--   Work: one HSCAN step (about count fields; a small hash's listpack whole, at most
--   hash-max-listpack-entries), an HEXISTS and at most one HDEL a field, HDELs of at most
--   500 fields each.

local mode = ARGV[1]
local pass = KEYS[2]
local gen = redis.call('HGET', KEYS[1], '~gen') or ''
local function ours()
  return redis.call('HGET', pass, '~pass') == ARGV[3]
end

if mode == 'mark' then
  if ARGV[5] == '1' then
    if gen ~= ARGV[2] then
      return {'BUSY'}
    end
    redis.call('UNLINK', pass)
    redis.call('HSET', pass, '~pass', ARGV[3], '~gen', ARGV[2], '~prov', ARGV[4], '~at', ARGV[6])
  elseif not ours() or redis.call('HGET', pass, '~at') ~= ARGV[6] then
    return {'MOVED'}
  elseif gen ~= ARGV[2] then
    redis.call('UNLINK', pass)
    return {'BUSY'}
  end
  local fields = {}
  for i = 9, #ARGV do
    fields[#fields + 1] = ARGV[i]
    fields[#fields + 1] = '1'
  end
  if #fields > 0 then
    redis.call('HSET', pass, unpack(fields))
  end
  redis.call('HSET', pass, '~at', ARGV[7])
  redis.call('PEXPIRE', pass, ARGV[8])
  return {'MARKED', #ARGV - 8}
end

-- sweep
if not ours() or redis.call('HGET', pass, '~at') ~= 'done'
    or (redis.call('HGET', pass, '~scan') or '0') ~= ARGV[4] then
  return {'MOVED'}
end
if gen ~= ARGV[2] then
  redis.call('UNLINK', pass)
  return {'BUSY'}
end
local page = redis.call('HSCAN', KEYS[1], ARGV[4], 'COUNT', ARGV[5])
local items = page[2]
local scanned, stale = 0, {}
for i = 1, #items, 2 do
  local name = items[i]
  if name ~= '~gen' then
    scanned = scanned + 1
    if redis.call('HEXISTS', pass, name) == 0 then
      stale[#stale + 1] = name
    end
  end
end
local dropped = 0
for at = 1, #stale, 500 do
  dropped = dropped + redis.call('HDEL', KEYS[1], unpack(stale, at, math.min(at + 499, #stale)))
end
if page[1] == '0' then
  redis.call('UNLINK', pass)
else
  redis.call('HSET', pass, '~scan', page[1])
  redis.call('PEXPIRE', pass, ARGV[6])
end
return {'SWEPT', scanned, dropped, page[1]}
