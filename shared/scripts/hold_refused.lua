-- hold_refused: the refusals guard tripped (K distinct operations, recipients and accounts
-- refused alike by an answer no provider documents, within its window): hold one of the
-- operations that tripped it for a person (review), instead of handing it back to the queue
-- where it would trip the guard again after a resume. Its refusal left it waiting
-- (deferred, attempt refunded, then queued as it came due), never failed; only while it
-- still waits on that refusal. A stream entry it still has is skipped by begin_attempt.
--
-- key operation: hash
-- key due: zset
-- key review: index
-- arg now: ms
-- arg reason: the undocumented refusal the guard counted (the operation's "reason")
-- arg note: the reason written on the held operation
-- arg operation_id
-- Returns {"ok"} or {"refused", why}: "state" (no longer waiting), "reason" (another reason).
-- @names
-- @states
-- @request
local f = redis.call("HMGET", operation, "state", "reason")
if f[1] ~= "deferred" and f[1] ~= "queued" then return {"refused", "state"} end
if not TRANSITIONS[f[1]].review then
  return redis.error_reply("illegal " .. f[1] .. " -> review")
end
if f[2] ~= reason then return {"refused", "reason"} end
redis.call("ZREM", due, operation_id)
redis.call("HSET", operation, "state", "review", "reason", note)
redis.call("HDEL", operation, "next_attempt_at")
redis.call("ZADD", review, now, operation_id)
return {"ok"}
