-- requeue_refused: the refusals guard found the provider refusing every operation alike (K
-- distinct operations, one permanent reason, within its window): hand one of those failed
-- operations back to the send queue with its attempt refunded. Its failure was the
-- provider's, not the player's. Only while nothing newer exists for the account, the
-- failure is the guard's reason and the delivery horizon has not passed.
--
-- KEYS[1] operation: hash
-- KEYS[2] ledger: attempt ledger
-- KEYS[3] account: account hash (its "last" operation)
-- KEYS[4] send: send stream
-- KEYS[5] live: index
-- ARGV[1] now: ms
-- ARGV[2] reason: the permanent reason the guard counted (the operation's "reason")
-- ARGV[3] note: the reason written on the requeued operation
-- ARGV[4] operation_id
-- Returns {"ok"} or {"refused", why}: "state" (not failed by a permanent refusal), "reason"
-- (another reason), "superseded" (the account has a newer operation), "horizon" (too late).
-- @names
-- @states
local f = redis.call("HMGET", KEYS[1], "state", "last_outcome", "reason", "horizon_at",
  "account_id")
local id, now = ARGV[4], tonumber(ARGV[1])
if f[1] ~= "failed" or f[2] ~= "permanent" then return {"refused", "state"} end
if not TRANSITIONS.failed.queued then return redis.error_reply("illegal failed -> queued") end
if f[3] ~= ARGV[2] then return {"refused", "reason"} end
if redis.call("HGET", KEYS[3], "last") ~= id then return {"refused", "superseded"} end
if now >= tonumber(f[4] or "0") then return {"refused", "horizon"} end
redis.call("HSET", KEYS[1], "state", "queued", "reason", ARGV[3], "next_attempt_at", now)
redis.call("HINCRBY", KEYS[1], "attempts", -1)
redis.call("PERSIST", KEYS[1])
redis.call("PERSIST", KEYS[2])
redis.call("ZADD", KEYS[5], now, id)
redis.call("XADD", KEYS[4], "*", JOB_FIELD, id)
return {"ok"}
