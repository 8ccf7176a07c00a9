-- renew_entries: a live sender keeps the send jobs it holds but has not finished (queued
-- behind a slow pace, or waiting for a slot), so no claim takes them over as abandoned.
-- Each entry still pending under this consumer has its idle time restarted (XCLAIM to
-- itself, JUSTID: the delivery count is unchanged); an entry no longer pending here (taken
-- over, or finished) is left alone.
--
-- key send: send stream   rg:{p}:send   (consumer group SEND_GROUP)
-- arg consumer: the holding sender's consumer name
-- arg entry_ids...
-- Returns the number of entries renewed.
-- @names
-- @request
local renewed = 0
for _, id in ipairs(entry_ids) do
  local mine = redis.call("XPENDING", send, SEND_GROUP, id, id, 1, consumer)
  if #mine == 1 then
    redis.call("XCLAIM", send, SEND_GROUP, consumer, 0, id, "JUSTID")
    renewed = renewed + 1
  end
end
return renewed
