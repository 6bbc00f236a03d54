--[[
  Keeps this member on a group's member list and returns the list. Liveness is judged by the Redis
  server's clock alone: a member is live while its last heartbeat plus the TTL is in the future.

  Input:
    KEYS[1] members key (sorted set: member id -> expiry in server milliseconds)
    ARGV[1] this member's id
    ARGV[2] TTL in milliseconds

  Output:
    the live members' ids, sorted
]]
local now = redis.call('TIME')
local nowMs = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', nowMs)
redis.call('ZADD', KEYS[1], nowMs + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
local members = redis.call('ZRANGE', KEYS[1], 0, -1)
table.sort(members)
return members
