--[[
  Records dispatched fires (or jobs' baselines) of one scheduler, several jobs per call, only if the
  caller still holds the lease with the same token: a stale leader cannot even advance the
  scheduler's state. One call per batch rather than per fire: when 10,000 jobs come due at once the
  records are most of the leader's Redis traffic.

  Input:
    KEYS[1] lease key
    KEYS[2] fires hash (job -> scheduled time of the last dispatched fire, epoch ms;
            ":dispatched:<job>" -> when that fire was dispatched, by the server clock, epoch ms)
    ARGV[1] expected lease value "<token>:<nodeId>"
    ARGV[2] the failover gap the batch closed (the first dispatch of a term), milliseconds, kept in
            ":failover-gap" for the doctor command; "" when it closed none
    ARGV[3..] one triple per fire:
            job name,
            scheduled time of the fire, epoch milliseconds (decimal string),
            when it was dispatched, epoch milliseconds; "" for a baseline, which records where a
            job starts without dispatching anything

  Output:
    1   recorded (a job whose equal or later fire was already recorded keeps that one)
    0   the lease is not ours: nothing changed
    an error when the arguments are not a lease value, a gap and whole triples of a job and
    times in epoch milliseconds: nothing changed

  A batch is at most a few thousand fires (its fields go through unpack, which Lua bounds at 8000).
]]
if #ARGV < 2 or (#ARGV - 2) % 3 ~= 0 then
  return redis.error_reply('ERR record-fires: expected a lease value, a failover gap and triples of job, scheduled, dispatched')
end
local count = (#ARGV - 2) / 3
local jobs = {}
for k = 1, count do
  local scheduled, dispatched = ARGV[3 * k + 1], ARGV[3 * k + 2]
  if not tonumber(scheduled) or (dispatched ~= '' and not tonumber(dispatched)) then
    return redis.error_reply('ERR record-fires: times must be epoch milliseconds')
  end
  jobs[k] = ARGV[3 * k]
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
-- One read and one write for the whole batch, not three calls per fire. A job named twice in a
-- batch is compared with what the batch itself recorded before it, as if the calls were separate.
local fields = {}
if count > 0 then
  local previous = redis.call('HMGET', KEYS[2], unpack(jobs))
  local current, scheduledOf, dispatchedOf, order = {}, {}, {}, {}
  for k = 1, count do
    local job = jobs[k]
    if current[job] == nil then
      -- Epoch milliseconds stay far below 2^53, so tonumber is exact here.
      current[job] = tonumber(previous[k]) or false
      order[#order + 1] = job
    end
    local scheduled = tonumber(ARGV[3 * k + 1])
    if (not current[job]) or current[job] < scheduled then
      current[job] = scheduled
      scheduledOf[job] = ARGV[3 * k + 1]
      -- A baseline ("") leaves the job's last dispatch time as it was.
      if ARGV[3 * k + 2] ~= '' then
        dispatchedOf[job] = ARGV[3 * k + 2]
      end
    end
  end
  for _, job in ipairs(order) do
    if scheduledOf[job] then
      fields[#fields + 1] = job
      fields[#fields + 1] = scheduledOf[job]
      -- Job names hold no colon, so this field never shadows a job. Operators read it for lateness
      -- (fenced status), the next term for the failover gap.
      if dispatchedOf[job] then
        fields[#fields + 1] = ':dispatched:' .. job
        fields[#fields + 1] = dispatchedOf[job]
      end
    end
  end
end
if ARGV[2] ~= '' then
  fields[#fields + 1] = ':failover-gap'
  fields[#fields + 1] = ARGV[2]
end
if #fields > 0 then
  redis.call('HSET', KEYS[2], unpack(fields))
end
return 1
