--[[
  Records that a job's fire was dispatched, only if the caller still holds the lease with the same
  token: a stale leader cannot even advance the scheduler's state.

  Input:
    KEYS[1] lease key
    KEYS[2] fires hash (job -> scheduled time of the last dispatched fire, epoch ms;
            ":dispatched:<job>" -> when that fire was dispatched, by the server clock, epoch ms)
    ARGV[1] expected lease value "<token>:<nodeId>"
    ARGV[2] job name
    ARGV[3] scheduled time of the fire, epoch milliseconds (decimal string)
    ARGV[4] optional: when it was dispatched, epoch milliseconds (absent for a baseline, which
            records where a job starts without dispatching anything)
    ARGV[5] optional: the failover gap this dispatch closed (the first of a term), milliseconds;
            kept in ":failover-gap" for the doctor command

  Output:
    1   recorded (or an equal or later fire was already recorded)
    0   the lease is not ours: nothing changed
]]
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local previous = redis.call('HGET', KEYS[2], ARGV[2])
-- Epoch milliseconds stay far below 2^53, so tonumber is exact here.
if (not previous) or tonumber(previous) < tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  -- Job names hold no colon, so this field never shadows a job. Operators read it for lateness
  -- (fenced status), the next term for the failover gap.
  if ARGV[4] then
    redis.call('HSET', KEYS[2], ':dispatched:' .. ARGV[2], ARGV[4])
  end
end
if ARGV[5] then
  redis.call('HSET', KEYS[2], ':failover-gap', ARGV[5])
end
return 1
