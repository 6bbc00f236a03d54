--[[
  Raises the resource's mark to a token; never lowers it.

  Input:
    KEYS[1] mark key
    ARGV[1] token, a canonical decimal string

  Output:
    the mark after the call, a decimal string
]]
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local mark = redis.call('GET', KEYS[1])
if (not mark) or less(mark, ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return mark
