--[[
  Compares a token with the resource's mark (the highest token seen committed). Read-only.

  Input:
    KEYS[1] mark key
    ARGV[1] token, a canonical decimal string

  Output:
    {1, mark}  accepted (token >= mark, or no mark: mark is then "")
    {0, mark}  stale: token < mark

  Tokens are compared as decimal strings (length, then bytes), never with tonumber: Lua numbers
  are doubles and 2^53+1 does not compare greater than 2^53.
]]
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
local mark = redis.call('GET', KEYS[1])
if mark and less(ARGV[1], mark) then
  return {0, mark}
end
return {1, mark or ''}
