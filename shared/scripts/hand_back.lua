-- hand_back: return send jobs a stopping sender read but never started, so the other
-- senders' readers get them at once instead of after a lease.
-- Each entry still pending under this consumer is acknowledged, deleted and added again
-- with the same fields (a new id, owned by nobody); an entry no longer pending here (taken
-- over, or finished) is left alone. The operation itself is untouched: it was never begun.
--
-- key send: send stream   rg:{p}:send   (consumer group SEND_GROUP)
-- arg consumer: the stopping sender's consumer name
-- arg entry_ids...
-- Returns the number of entries handed back.
-- @names
-- @request
local moved = 0
for _, id in ipairs(entry_ids) do
  local mine = redis.call("XPENDING", send, SEND_GROUP, id, id, 1, consumer)
  local entry = redis.call("XRANGE", send, id, id)
  if #mine == 1 and #entry == 1 then
    redis.call("XACK", send, SEND_GROUP, id)
    redis.call("XDEL", send, id)
    redis.call("XADD", send, "*", unpack(entry[1][2]))
    moved = moved + 1
  end
end
return moved
