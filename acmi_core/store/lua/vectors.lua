-- vectors.lua: drop stale fields of one entity's memory:vectors HASH, one bounded chunk
-- (acmi_core/memory/vectors.py), unless a vector was written since the client read the
-- entity's lines: every write that stores a vector also sets the hash's GEN_FIELD to a
-- token of its own, in the same script as its lines.
--
-- The protocol (acmi_core/store/scripts.py VECTORS declares the same names):
--: KEYS[1] vectors: the entity's memory:vectors HASH
--: ARGV[1] gen: the GEN_FIELD value the client read before it read the lines ('' none)
--: ARGV[2..] fields*: the digests to delete (at most PRUNE_CHUNK; never GEN_FIELD)
--: reply DROPPED count: HDEL ran, count fields removed
--: reply BUSY: a vector was written since (nothing deleted; the next run retries)
-- Work: one HGET and one HDEL of at most PRUNE_CHUNK fields.
local now = redis.call('HGET', KEYS[1], '~gen')
if (now or '') ~= ARGV[1] then
  return {'BUSY'}
end
if #ARGV < 2 then
  return {'DROPPED', 0}
end
return {'DROPPED', redis.call('HDEL', KEYS[1], unpack(ARGV, 2))}
