--[[
  Raises a decimal-string key to at least a floor; never lowers it. The coordinator raises its token
  counter past every fence after Redis lost data; the Redis guard raises a resource's mark after a
  commit.

  Input:
    KEYS[1] the key (a token counter, or a resource's mark)
    ARGV[1] floor, a canonical decimal string

  Output:
    the key's value after the call, a decimal string
]]
--- @include "includes/decimal-less.lua"
local current = redis.call('GET', KEYS[1])
if (not current) or less(current, ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return current
