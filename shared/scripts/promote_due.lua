-- promote_due: move operations whose retry time has come from the due set back to the
-- send stream. The caller read candidate ids with ZRANGE BYSCORE; each is re-checked here
-- (take_due), so two promoters racing never enqueue one operation twice. Cost is O(batch),
-- flat in the size of the due set. A retry's job carries the admission's trace context
-- (handoff).
--
-- key due: zset
-- key send: send stream
-- key operations...: operation hashes (same order as operation_ids)
-- arg now: ms
-- arg operation_ids...
-- Returns the number of operations moved to the send stream.
-- @names
-- @due
-- @request
local moved = 0
for _, i in ipairs(take_due(due, operation_ids, now)) do
  if redis.call("HGET", operations[i], "state") == "deferred" then
    redis.call("HSET", operations[i], "state", "queued")
    redis.call("XADD", send, "*", unpack(handoff(operations[i], operation_ids[i], true)))
    moved = moved + 1
  end
end
return moved
