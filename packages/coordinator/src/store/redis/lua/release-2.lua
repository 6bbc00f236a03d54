--[[
  Gives the lease up if we hold it, and wakes the standbys.

  Input:
    KEYS[1] lease key
    KEYS[2] release channel
    ARGV[1] expected lease value "<token>:<nodeId>"

  Output:
    1  released (and published on the channel)
    0  not ours: nothing changed
]]
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', KEYS[2], ARGV[1])
  return 1
end
return 0
