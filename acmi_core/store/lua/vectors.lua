-- vectors.lua: the steps of a prune pass over one entity's memory:vectors HASH
-- (acmi_core/memory/vectors.py), each bounded: begin finds the pass under way or begins
-- one, mark adds a batch of needed digests to it, sweep deletes the unmarked fields of one
-- HSCAN step. A pass may span many runs while the entity is written: every write that
-- stores a vector marks it in the pass in the same script (apply.lua / lean.lua HMARK,
-- when the pass exists), and the pass exists before any line it reads is read, so a
-- vector stored while a pass is under way is never deleted by it. A write that does not
-- mark (an older release's) sets the vectors hash's '~gen' to a hex token: a step that
-- finds a '~gen' other than the one the pass began from and not a marking write's ('m'
-- first) deletes the pass (BUSY: the next run begins a new one).
--
-- The protocol (acmi_core/store/scripts.py VECTORS declares the same names):
--: ARGV[1] mode: begin | mark | sweep
--
-- begin: the pass under way, or a new one (an older one of another provider, or that a
-- write which does not mark overtook, deleted), begun at the timeline's first cursor with
-- the timeline's highest score as its end (an event after it was written, and marked, by
-- a write since the pass began).
--: begin KEYS[1] vectors: the entity's memory:vectors HASH
--: begin KEYS[2] pass: the entity's memory:vectors:pass HASH
--: begin KEYS[3] timeline: the entity's timeline ZSET
--: begin ARGV[2] pass: the id a new pass gets
--: begin ARGV[3] provider: the provider whose digests the pass holds
--: begin ARGV[4] at: the cursor a new pass begins at
--: begin ARGV[5] ttl: ms the pass is kept unless a step refreshes it
--: begin reply PASS pass at scan end fresh events last size: the pass's id, cursor, HSCAN
--     cursor, the timeline's last score when it began ('' empty), 1 when it was begun
--     now, the timeline's events now (ZCARD: whether its first page is its last), the
--     timeline's last member when it began, its first 1,024 bytes and its length (a page
--     that holds it at the end score is the last: events written at that score since do
--     not prolong the pass)
--   Work: 8 HMGET fields, an UNLINK, a ZRANGE of one member (at most 256 KiB), a ZCARD,
--   one HSET, one PEXPIRE.
--
-- mark: the digests the lines of one step need, added to the pass; its cursor moved.
--: mark KEYS[1] vectors: the entity's memory:vectors HASH
--: mark KEYS[2] pass: the entity's memory:vectors:pass HASH
--: mark ARGV[2] pass: the pass's id
--: mark ARGV[3] at: the cursor the pass must be at
--: mark ARGV[4] next: the cursor after this step
--: mark ARGV[5] ttl: ms the pass is kept unless a step refreshes it
--: mark ARGV[6..] digests*: at most MARK_CHUNK digests (16 hex digits each)
--: mark reply MARKED count: the digests added (new or not)
--: mark reply BUSY: a write that does not mark stored a vector since the pass began (the
--     pass is deleted)
--: mark reply MOVED: another run moved or replaced the pass (nothing written)
--   Work: 4 HGETs, one HSET of at most MARK_CHUNK fields, one PEXPIRE. A pass is
--   dropped by UNLINK: a pass of many digests is freed off the main thread.
--
-- sweep: one HSCAN step of the vectors, the fields the pass does not hold deleted.
--: sweep KEYS[1] vectors: the entity's memory:vectors HASH
--: sweep KEYS[2] pass: the entity's memory:vectors:pass HASH
--: sweep ARGV[2] pass: the pass's id
--: sweep ARGV[3] cursor: the HSCAN cursor the pass is at ('0' its first step)
--: sweep ARGV[4] count: the HSCAN COUNT (PRUNE_CHUNK)
--: sweep ARGV[5] ttl: ms the pass is kept unless a step refreshes it
--: sweep reply SWEPT scanned dropped next: fields looked at, deleted; the next cursor
--     ('0': the pass is over and deleted)
--: sweep reply BUSY: as mark's
--: sweep reply MOVED: another run moved or replaced the pass (nothing written)
--   Work: one HSCAN step (about count fields; a small hash's listpack whole, at most
--   hash-max-listpack-entries), an HEXISTS and at most one HDEL a field, HDELs of at most
--   500 fields each.

local mode = ARGV[1]
local pass = KEYS[2]
local gen = redis.call('HGET', KEYS[1], '~gen') or ''
-- no write that does not mark stored a vector since the pass began from token `from`
local function held(from)
  return gen == (from or '') or string.sub(gen, 1, 1) == 'm'
end
local function ours()
  return redis.call('HGET', pass, '~pass') == ARGV[2]
end

if mode == 'begin' then
  local meta = redis.call('HMGET', pass, '~pass', '~prov', '~gen', '~at', '~scan', '~end',
    '~last', '~size')
  if meta[1] and meta[4] and meta[2] == ARGV[3] and held(meta[3]) then
    return {'PASS', meta[1], meta[4], meta[5] or '0', meta[6] or '', '0',
      redis.call('ZCARD', KEYS[3]), meta[7] or '', meta[8] or '0'}
  end
  redis.call('UNLINK', pass)
  local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  local ends, head, size = last[2] or '', string.sub(last[1] or '', 1, 1024), #(last[1] or '')
  redis.call('HSET', pass, '~pass', ARGV[2], '~prov', ARGV[3], '~gen', gen, '~at', ARGV[4],
    '~end', ends, '~last', head, '~size', size)
  redis.call('PEXPIRE', pass, ARGV[5])
  return {'PASS', ARGV[2], ARGV[4], '0', ends, '1', redis.call('ZCARD', KEYS[3]), head, size}
end

if mode == 'mark' then
  if not ours() or redis.call('HGET', pass, '~at') ~= ARGV[3] then
    return {'MOVED'}
  elseif not held(redis.call('HGET', pass, '~gen')) then
    redis.call('UNLINK', pass)
    return {'BUSY'}
  end
  local fields = {}
  for i = 6, #ARGV do
    fields[#fields + 1] = ARGV[i]
    fields[#fields + 1] = '1'
  end
  if #fields > 0 then
    redis.call('HSET', pass, unpack(fields))
  end
  redis.call('HSET', pass, '~at', ARGV[4])
  redis.call('PEXPIRE', pass, ARGV[5])
  return {'MARKED', #ARGV - 5}
end

-- sweep
if not ours() or redis.call('HGET', pass, '~at') ~= 'done'
    or (redis.call('HGET', pass, '~scan') or '0') ~= ARGV[3] then
  return {'MOVED'}
end
if not held(redis.call('HGET', pass, '~gen')) then
  redis.call('UNLINK', pass)
  return {'BUSY'}
end
local page = redis.call('HSCAN', KEYS[1], ARGV[3], 'COUNT', ARGV[4])
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
  redis.call('PEXPIRE', pass, ARGV[5])
end
return {'SWEPT', scanned, dropped, page[1]}
