-- promote_due: move operations whose retry time has come from the due set back to the
-- send stream. The caller read candidate ids with ZRANGE BYSCORE; each is re-checked here,
-- so two promoters racing never enqueue one operation twice. Cost is O(batch), flat in
-- the size of the due set. A retry's job carries the admission's trace context (handoff).
--
-- key due: zset
-- key send: send stream
-- key operations...: operation hashes (same order as operation_ids)
-- arg now: ms
-- arg operation_ids...
-- Returns the number of operations moved to the send stream.
-- @names
-- @request
local moved = 0
for i, id in ipairs(operation_ids) do
  local op_key = operations[i]
  local score = redis.call("ZSCORE", due, id)
  if score and tonumber(score) <= now then
    redis.call("ZREM", due, id)
    if redis.call("HGET", op_key, "state") == "deferred" then
      redis.call("HSET", op_key, "state", "queued")
      redis.call("XADD", send, "*", unpack(handoff(op_key, id, true)))
      moved = moved + 1
    end
  end
end
return moved
