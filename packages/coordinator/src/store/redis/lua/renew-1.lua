--[[
  Extends the lease if we still hold it with the same token.

  Input:
    KEYS[1] lease key
    ARGV[1] expected lease value "<token>:<nodeId>"
    ARGV[2] lease TTL in milliseconds

  Output:
    {1, serverSeconds, serverMicros}  renewed
    {0, serverSeconds, serverMicros}  not ours any more (expired, or another node holds it)
]]
local now = redis.call('TIME')
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, now[1], now[2]}
end
return {0, now[1], now[2]}
