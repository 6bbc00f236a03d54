-- less(a, b): true when the canonical decimal string a is a smaller number than b. Tokens are
-- compared as strings (length, then bytes), never with tonumber: Lua numbers are doubles, and 2^53+1
-- does not compare greater than 2^53.
local function less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
