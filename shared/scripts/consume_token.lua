-- consume_token: single use of a verified reset token; closes the account's live operation.
-- The caller has already compared the token in constant time (Python, shared/tokens.py).
--
-- KEYS[1] operation hash   rg:{p}:op:<id>
-- KEYS[2] account hash     rg:{p}:acct:<account>
-- KEYS[3] live index       rg:{p}:live
-- ARGV[1] now (ms)         ARGV[2] operation id
--
-- Returns {result}:
--   "consumed"   - first use: token_consumed_at set, the account has no live operation
--   "used"       - already consumed
--   "expired"    - past token_expires_at
--   "superseded" - a newer operation for the account exists; only the newest token works
--   "missing"    - no such operation
-- A valid token proves its email arrived, so a still-live operation (an ambiguous attempt
-- that did land) becomes accepted with reason token_consumed: nothing more is sent for it.
local now = tonumber(ARGV[1])
local op = redis.call("HMGET", KEYS[1], "state", "token_expires_at", "token_consumed_at")
if not op[1] then return {"missing"} end
if op[3] and tonumber(op[3]) > 0 then return {"used"} end
if tonumber(op[2]) <= now then return {"expired"} end
local last = redis.call("HGET", KEYS[2], "last")
if last and last ~= ARGV[2] then return {"superseded"} end
redis.call("HSET", KEYS[1], "token_consumed_at", now)
if op[1] ~= "accepted" and op[1] ~= "failed" and op[1] ~= "exhausted" and op[1] ~= "expired" then
  redis.call("HSET", KEYS[1], "state", "accepted", "reason", "token_consumed")
end
redis.call("ZREM", KEYS[3], ARGV[2])
return {"consumed"}
