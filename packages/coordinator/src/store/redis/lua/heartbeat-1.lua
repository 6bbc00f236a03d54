--[[
  Keeps this member on a group's member list and returns the list. Liveness is judged by the Redis
  server's clock alone: a member is live while its last heartbeat plus the TTL is in the future.

  Input:
    KEYS[1] members key (sorted set: member id -> expiry in server milliseconds)
    ARGV[1] this member's id
    ARGV[2] TTL in milliseconds

  Output:
    {msUntilNextExpiry, member, member, ...}
      the live members' ids, sorted, after how long (server ms) the first other member expires
      unless it beats again first (-1: no other member). A live member beats every renew interval,
      so only a member that stopped can expire sooner than that: the caller beats again right then,
      and the dead member's leases are reassigned at its expiry, not up to a renew interval later.
]]
local now = redis.call('TIME')
local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', nowMs)
redis.call('ZADD', KEYS[1], nowMs + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
local scored = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local members = {}
local nextExpiry = -1
for i = 1, #scored, 2 do
  members[#members + 1] = scored[i]
  if scored[i] ~= ARGV[1] then
    local left = tonumber(scored[i + 1]) - nowMs
    if nextExpiry < 0 or left < nextExpiry then nextExpiry = left end
  end
end
table.sort(members)
table.insert(members, 1, nextExpiry)
return members
