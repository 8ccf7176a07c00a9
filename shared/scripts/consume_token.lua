-- consume_token: single use of a verified reset token; closes the account's live operation.
-- The caller has already compared the token in constant time (Python, shared/tokens.py).
--
-- key operation: hash   rg:{p}:op:<id>
-- key account: hash     rg:{p}:acct:<account>
-- key live: index       rg:{p}:live
-- arg now: ms
-- arg operation_id
--
-- Returns {result}:
--   "consumed"   - first use: token_consumed_at set, the account has no live operation
--   "used"       - already consumed
--   "expired"    - past token_expires_at
--   "superseded" - a newer operation for the account exists; only the newest token works
--   "missing"    - no such operation
-- A valid token proves an email carrying it arrived, so nothing more is sent for the
-- operation: one that may have sent it (attempting, ambiguous, review) becomes accepted,
-- one with no attempt known to have left (queued, deferred, quarantined) expired, both with
-- reason token_consumed (shared/model.py on_token_consumed, rendered as ON_TOKEN_CONSUMED).
-- @states
-- @request
local op = redis.call("HMGET", operation, "state", "token_expires_at", "token_consumed_at")
if not op[1] then return {"missing"} end
if op[3] and tonumber(op[3]) > 0 then return {"used"} end
if tonumber(op[2]) <= now then return {"expired"} end
local last = redis.call("HGET", account, "last")
if last and last ~= operation_id then return {"superseded"} end
redis.call("HSET", operation, "token_consumed_at", now)
local goal = ON_TOKEN_CONSUMED[op[1]]
if goal then redis.call("HSET", operation, "state", goal, "reason", "token_consumed") end
redis.call("ZREM", live, operation_id)
return {"consumed"}
