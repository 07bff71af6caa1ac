-- sweep.lua: the prologue of the liveness sweep's STALLED marks. acmi_core/jobs/sweep.py runs
-- it as ONE script, this text followed by lua/apply.lua unchanged: this part keeps only
-- the marks of agents that are still silent (their activity score is still the heartbeat
-- the sweep read), so a heartbeat that lands between the sweep's read and its write is
-- never overwritten by STALLED. One round trip, atomic.
--
-- The protocol (acmi_core/store/scripts.py SWEEP declares the same names; its reply is
-- apply.lua's):
--: KEYS[1] activity: the activity index (ZSET agent -> last heartbeat ms)
--: KEYS[2..] plan_keys*: the plan's keys
--: ARGV[1] agent_count: n, the number of agents
--: ARGV[2..] agents*: n times: member, the heartbeat ms the sweep read, the argument
--    count c of that agent's op
--: ARGV[..] ops*: the plan's ops (apply.lua's ARGV without the leading op count):
--    exactly one op per agent, in the same order, each an OBJ edit of its signals
--
-- An agent whose score changed (it heartbeated, or was deleted) gets its op replaced by
-- `ZREM <activity> ''` (no entity id is empty: a no-op) whose reply is 0, where a mark's
-- reply is the new signals text: the caller tells them apart by position.
-- Work done here: n ZSCOREs (the caller sends at most sweep.MARK_BATCH agents a run of it),
-- and apply.lua's edits are bounded by the bytes they read: agents are kept in order while
-- their signals (STRLEN, O(1)) add up to at most SWEEP_BYTES, one object always; the
-- rest are left out of the plan, so the reply has one result per agent handled, a prefix
-- of the agents sent, and the caller sends the others again in the next run.

local SWEEP_KEYS, SWEEP_ARGV = KEYS, ARGV
local sweep_t = redis.call('TYPE', SWEEP_KEYS[1])
if type(sweep_t) == 'table' then sweep_t = sweep_t.ok end
if sweep_t ~= 'zset' and sweep_t ~= 'none' then
  return redis.error_reply('ACMI_WRONGTYPE ' .. SWEEP_KEYS[1] .. ' holds a ' .. sweep_t ..
    ', expected a zset; nothing was written')
end
local sweep_n = tonumber(SWEEP_ARGV[1])
if not sweep_n then return redis.error_reply('ACMI_BADOP plan: sweep agent count') end
local sweep_keys = {}
for i = 2, #SWEEP_KEYS do sweep_keys[#sweep_keys + 1] = SWEEP_KEYS[i] end
sweep_keys[#sweep_keys + 1] = SWEEP_KEYS[1]   -- the no-op's key
local sweep_noop_key = #sweep_keys
local sweep_argv = { tostring(sweep_n) }   -- apply.lua reads its ARGV as strings
local sweep_pos = 2 + 3 * sweep_n               -- where the first op starts
-- mirrors acmi_core.jobs.sweep.MARK_BYTES (tests/integration/test_script_bounds.py checks)
local SWEEP_BYTES = 65536
local sweep_bytes, sweep_done = 0, 0
for i = 0, sweep_n - 1 do
  local member = SWEEP_ARGV[2 + 3 * i]
  local expected = tonumber(SWEEP_ARGV[3 + 3 * i])
  local argc = tonumber(SWEEP_ARGV[4 + 3 * i])
  if not expected or not argc then return redis.error_reply('ACMI_BADOP plan: sweep header') end
  local score = tonumber(redis.call('ZSCORE', SWEEP_KEYS[1], member) or '')
  if score ~= nil and score == expected then
    -- the object this agent's edit reads (a wrong type reads as 0: apply.lua refuses it)
    local size = redis.pcall('STRLEN', SWEEP_KEYS[1 + (tonumber(SWEEP_ARGV[sweep_pos + 1]) or 0)])
    if type(size) ~= 'number' then size = 0 end
    if sweep_bytes > 0 and sweep_bytes + size > SWEEP_BYTES then break end
    sweep_bytes = sweep_bytes + size
    for j = sweep_pos, sweep_pos + argc - 1 do sweep_argv[#sweep_argv + 1] = SWEEP_ARGV[j] end
  else
    sweep_argv[#sweep_argv + 1] = 'ZREM'
    sweep_argv[#sweep_argv + 1] = tostring(sweep_noop_key)
    sweep_argv[#sweep_argv + 1] = ''
  end
  sweep_pos = sweep_pos + argc
  sweep_done = i + 1
end
sweep_argv[1] = tostring(sweep_done)

-- apply.lua follows: it reads KEYS and ARGV, which from here on are the kept plan's
local KEYS, ARGV = sweep_keys, sweep_argv
