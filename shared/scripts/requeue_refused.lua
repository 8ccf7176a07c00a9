-- requeue_refused: the refusals guard found the provider refusing every operation alike (K
-- distinct operations, one permanent reason, within its window): hand one of those failed
-- operations back to the send queue with its attempt refunded. Its failure was the
-- provider's, not the player's. Only while nothing newer exists for the account, the
-- failure is the guard's reason and the delivery horizon has not passed.
--
-- key operation: hash
-- key ledger: attempt ledger
-- key account: account hash (its "last" operation)
-- key send: send stream
-- key live: index
-- key finished: index (recently failed or exhausted: it is no longer)
-- arg now: ms
-- arg reason: the permanent reason the guard counted (the operation's "reason")
-- arg note: the reason written on the requeued operation
-- arg operation_id
-- Returns {"ok"} or {"refused", why}: "state" (not failed by a permanent refusal), "reason"
-- (another reason), "superseded" (the account has a newer operation), "horizon" (too late).
-- @names
-- @states
-- @request
local f = redis.call("HMGET", operation, "state", "last_outcome", "reason", "horizon_at",
  "account_id")
if f[1] ~= "failed" or f[2] ~= "permanent" then return {"refused", "state"} end
if not TRANSITIONS.failed.queued then return redis.error_reply("illegal failed -> queued") end
if f[3] ~= reason then return {"refused", "reason"} end
if redis.call("HGET", account, "last") ~= operation_id then return {"refused", "superseded"} end
if now >= tonumber(f[4] or "0") then return {"refused", "horizon"} end
redis.call("HSET", operation, "state", "queued", "reason", note, "next_attempt_at", now)
redis.call("HINCRBY", operation, "attempts", -1)
redis.call("PERSIST", operation)
redis.call("PERSIST", ledger)
redis.call("ZADD", live, now, operation_id)
redis.call("ZREM", finished, operation_id)
redis.call("XADD", send, "*", JOB_FIELD, operation_id)
return {"ok"}
