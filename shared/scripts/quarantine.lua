-- quarantine: an operator quarantines a live operation (it stops being sent, keeps its id
-- and token); releases a quarantined / under-review operation back to the send queue; or
-- closes one held for review: it ends as CLOSED_AS (failed) and nothing is sent for it.
--
-- key operation: hash
-- key ledger: attempt ledger (kept as long as the closed operation)
-- key send: send stream
-- key due: zset
-- key ambiguous: index
-- key review: index
-- key live: index
-- key finished: index (recently failed or exhausted)
-- arg action: "quarantine" | "release" | "close"
-- arg now: ms
-- arg reason: reason / actor note
-- arg retention_ms: how long a closed operation is kept
-- arg operation_id
-- Returns {"ok", previous_state} or {"refused", state} when the state does not allow it
-- ("attempting" cannot be quarantined: wait for the attempt to finish).
-- @names
-- @states
-- @recent
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
if action == "close" then
  if not CLOSABLE[state] then return {"refused", state} end
  if tonumber(retention_ms) < 1 then return redis.error_reply("close needs retention_ms") end
  redis.call("ZREM", review, operation_id)
  redis.call("ZREM", due, operation_id)
  redis.call("ZREM", live, operation_id)
  redis.call("HSET", operation, "state", CLOSED_AS, "reason", reason)
  redis.call("HDEL", operation, "next_attempt_at")
  redis.call("PEXPIRE", operation, retention_ms)
  redis.call("PEXPIRE", ledger, retention_ms)
  if RECENTLY_FAILED[CLOSED_AS] then note_recent(finished, now, operation_id) end
  return {"ok", state}
end
if action ~= "release" then return redis.error_reply("unknown action " .. action) end
if not RELEASABLE[state] then return {"refused", state} end
redis.call("ZREM", review, operation_id)
redis.call("HSET", operation, "state", "queued", "reason", reason, "next_attempt_at", now)
redis.call("XADD", send, "*", unpack(handoff(operation, operation_id, true)))
return {"ok", state}
