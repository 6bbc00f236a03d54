--[[
  Acquires the lease and mints its fencing token in one atomic step.

  Input:
    KEYS[1] lease key          (value "<token>:<nodeId>")
    KEYS[2] token counter key
    ARGV[1] node id
    ARGV[2] lease TTL in milliseconds

  Output:
    {1, token, serverSeconds, serverMicros}   acquired; token is a decimal string
    {0, holder, pttl, serverSeconds, serverMicros}  held by someone else ("<token>:<nodeId>", ms left)

  SET NX and INCR are one script: an acquirer can never hold a token minted after a later
  election's. The counter is read back with GET so the token leaves as an exact decimal string
  (INCR's reply would become a Lua double, exact only to 2^53).
]]
local now = redis.call('TIME')
local holder = redis.call('GET', KEYS[1])
if holder then
  return {0, holder, redis.call('PTTL', KEYS[1]), now[1], now[2]}
end
redis.call('INCR', KEYS[2])
local token = redis.call('GET', KEYS[2])
redis.call('SET', KEYS[1], token .. ':' .. ARGV[1], 'PX', ARGV[2])
return {1, token, now[1], now[2]}
