--[[
  Appends a refused write to the resource's capped stream of refusals: what the status command shows as
  refused fires. A record for operators, written after the refusal was decided, never part of it.

  Input:
    KEYS[1] refusals stream (in the slot of the resource's mark)
    ARGV[1] resource
    ARGV[2] refused token, decimal string
    ARGV[3] the fence or mark that refused it, decimal string
    ARGV[4] where it was refused: "redis" or "postgres"
    ARGV[5] the fire id, or "" when the write carried none
    ARGV[6] how many entries to keep (exactly: refusals are rare, trimming them costs little)

  Output: the new entry's id (its first part is the server time in milliseconds)
]]
return redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[6], '*',
  'resource', ARGV[1], 'token', ARGV[2], 'highest', ARGV[3], 'via', ARGV[4], 'fire', ARGV[5])
