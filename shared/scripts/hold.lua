-- hold: an operator quarantines a live operation (it stops being sent, keeps its id and
-- token); or releases a quarantined / under-review operation back to the send queue.
--
-- KEYS[1] operation: hash
-- KEYS[2] send: send stream
-- KEYS[3] due: zset
-- KEYS[4] ambiguous: index
-- KEYS[5] review: index
-- ARGV[1] action: "quarantine" | "release"
-- ARGV[2] now: ms
-- ARGV[3] reason: reason / actor note
-- ARGV[4] operation_id
-- Returns {"ok", previous_state} or {"refused", state} when the state does not allow it
-- ("attempting" cannot be quarantined: wait for the attempt to finish).
-- @names
-- @states
local state, id = redis.call("HGET", KEYS[1], "state"), ARGV[4]
if not state then return {"refused", "missing"} end
if ARGV[1] == "quarantine" then
  if not QUARANTINABLE[state] then return {"refused", state} end
  redis.call("ZREM", KEYS[3], id)
  redis.call("ZREM", KEYS[4], id)
  redis.call("ZREM", KEYS[5], id)
  redis.call("HSET", KEYS[1], "state", "quarantined", "reason", ARGV[3],
    "quarantined_from", state)
  redis.call("HDEL", KEYS[1], "next_attempt_at")
  return {"ok", state}
end
if not RELEASABLE[state] then return {"refused", state} end
redis.call("ZREM", KEYS[5], id)
redis.call("HSET", KEYS[1], "state", "queued", "reason", ARGV[3], "next_attempt_at", ARGV[2])
redis.call("XADD", KEYS[2], "*", JOB_FIELD, id)
return {"ok", state}
