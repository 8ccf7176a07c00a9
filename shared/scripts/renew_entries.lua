-- renew_entries: a live sender keeps the send jobs it holds but has not finished (queued
-- behind a slow pace, or waiting for a slot), so no claim takes them over as abandoned.
-- Each entry still pending under this consumer has its idle time restarted (XCLAIM to
-- itself, JUSTID: the delivery count is unchanged); an entry no longer pending here (taken
-- over, or finished) is left alone.
--
-- KEYS[1] send: send stream   rg:{p}:send   (consumer group SEND_GROUP)
-- ARGV[1] consumer: the holding sender's consumer name
-- ARGV[2..] entry_ids
-- Returns the number of entries renewed.
-- @names
local renewed = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local mine = redis.call("XPENDING", KEYS[1], SEND_GROUP, id, id, 1, ARGV[1])
  if #mine == 1 then
    redis.call("XCLAIM", KEYS[1], SEND_GROUP, ARGV[1], 0, id, "JUSTID")
    renewed = renewed + 1
  end
end
return renewed
