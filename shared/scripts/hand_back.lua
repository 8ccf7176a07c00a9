-- hand_back: return send jobs a stopping sender read but never started, so the other
-- senders' readers get them at once instead of after a lease.
-- Each entry still pending under this consumer is acknowledged, deleted and added again
-- with the same fields (a new id, owned by nobody); an entry no longer pending here (taken
-- over, or finished) is left alone. The operation itself is untouched: it was never begun.
--
-- KEYS[1] send: send stream   rg:{p}:send   (consumer group SEND_GROUP)
-- ARGV[1] consumer: the stopping sender's consumer name
-- ARGV[2..] entry_ids
-- Returns the number of entries handed back.
-- @names
local moved = 0
for i = 2, #ARGV do
  local id = ARGV[i]
  local mine = redis.call("XPENDING", KEYS[1], SEND_GROUP, id, id, 1, ARGV[1])
  local entry = redis.call("XRANGE", KEYS[1], id, id)
  if #mine == 1 and #entry == 1 then
    redis.call("XACK", KEYS[1], SEND_GROUP, id)
    redis.call("XDEL", KEYS[1], id)
    redis.call("XADD", KEYS[1], "*", unpack(entry[1][2]))
    moved = moved + 1
  end
end
return moved
