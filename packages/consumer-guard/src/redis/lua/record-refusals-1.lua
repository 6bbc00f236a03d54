--[[
  Appends refused writes to the resource's capped stream of refusals: what the status command shows
  as refused fires. A record for operators, written after each refusal was decided, never part of it.
  The refusals of one resource decided in the same turn of the event loop come in one call.

  Input:
    KEYS[1] refusals stream (in the slot of the resource's mark)
    ARGV[1] resource
    ARGV[2] how many entries to keep (exactly: refusals are rare, trimming them costs little)
    ARGV[3..] one quadruple per refusal, oldest first:
            refused token, decimal string;
            the fence or mark that refused it, decimal string;
            where it was refused: "redis" or "postgres";
            the fire id, or "" when the write carried none

  Output: how many entries were appended; an error, and nothing appended, when the arguments are not
  a resource, a count and whole quadruples
]]
if #ARGV < 2 or (#ARGV - 2) % 4 ~= 0 then
  return redis.error_reply('ERR record-refusals: expected a resource, a count to keep and quadruples of token, highest, via, fire')
end
for i = 3, #ARGV, 4 do
  redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[2], '*',
    'resource', ARGV[1], 'token', ARGV[i], 'highest', ARGV[i + 1], 'via', ARGV[i + 2], 'fire', ARGV[i + 3])
end
return (#ARGV - 2) / 4
