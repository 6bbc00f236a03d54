--[[
  Compare, raise, apply: Redis mutations fenced by the resource's mark, in one atomic script.

  Input (the number of keys varies with the commands):
    KEYS[1]      mark key
    KEYS[2..n]   the keys the commands touch
    ARGV[1]      token, a canonical decimal string
    ARGV[2]      the commands, JSON: [{"c": "HSET", "k": [1], "a": ["field", "value"]}, ...]
                 where "k" indexes KEYS[2..n] (1 is KEYS[2]) and "a" are the remaining arguments

  Output:
    {0, mark}          stale: token < mark, nothing applied
    {1, resultsJson}   applied; the mark was raised to the token (never lowered)

  The commands run in order; the mark is raised only after they all succeeded. A command that fails
  (WRONGTYPE…) aborts the script, and like MULTI/EXEC Redis keeps the commands before it.
]]
--- @include "@fenced/shared/lua/includes/decimal-less.lua"
local mark = redis.call('GET', KEYS[1])
if mark and less(ARGV[1], mark) then
  return {0, mark}
end
local commands = cjson.decode(ARGV[2])
local results = {}
for i, command in ipairs(commands) do
  local args = {command.c}
  for _, k in ipairs(command.k) do
    args[#args + 1] = KEYS[k + 1]
  end
  for _, a in ipairs(command.a) do
    args[#args + 1] = a
  end
  local reply = redis.call(unpack(args))
  if type(reply) == 'table' and reply.ok then reply = reply.ok end
  results[i] = reply
end
if (not mark) or less(mark, ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
return {1, cjson.encode(results)}
