--[[
  Raises the token counter to at least a floor, never lowers it. Used when a fence holds a token at
  or above the one Redis just minted: Redis lost data (restart without persistence, lossy failover)
  and its counter must jump past every token ever used.

  Input:
    KEYS[1] token counter key
    ARGV[1] floor, a canonical decimal string

  Output:
    the counter after the call, a decimal string

  Tokens are compared as decimal strings (length, then bytes), never with tonumber: Lua numbers are
  doubles and 2^53+1 does not compare greater than 2^53.
]]
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local current = redis.call('GET', KEYS[1])
if (not current) or less(current, ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return current
