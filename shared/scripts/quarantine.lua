-- quarantine: an operator quarantines a live operation (it stops being sent, keeps its id
-- and token); or releases a quarantined / under-review operation back to the send queue.
--
-- key operation: hash
-- key send: send stream
-- key due: zset
-- key ambiguous: index
-- key review: index
-- arg action: "quarantine" | "release"
-- arg now: ms
-- arg reason: reason / actor note
-- arg operation_id
-- Returns {"ok", previous_state} or {"refused", state} when the state does not allow it
-- ("attempting" cannot be quarantined: wait for the attempt to finish).
-- @names
-- @states
-- @request
local state = redis.call("HGET", operation, "state")
if not state then return {"refused", "missing"} end
if action == "quarantine" then
  if not QUARANTINABLE[state] then return {"refused", state} end
  redis.call("ZREM", due, operation_id)
  redis.call("ZREM", ambiguous, operation_id)
  redis.call("ZREM", review, operation_id)
  redis.call("HSET", operation, "state", "quarantined", "reason", reason,
    "quarantined_from", state)
  redis.call("HDEL", operation, "next_attempt_at")
  return {"ok", state}
end
if not RELEASABLE[state] then return {"refused", state} end
redis.call("ZREM", review, operation_id)
redis.call("HSET", operation, "state", "queued", "reason", reason, "next_attempt_at", now)
redis.call("XADD", send, "*", JOB_FIELD, operation_id)
return {"ok", state}
