-- admit: converge a recovery request on the account's live operation, or create one.
--
-- KEYS[1] account: account hash        rg:{p}:acct:<account>   (last, cooldown_until)
-- KEYS[2] expected_operation: hash     rg:{p}:op:<expected>    (== new_operation when expected_id is "")
-- KEYS[3] new_operation: hash          rg:{p}:op:<new>
-- KEYS[4] send: send stream            rg:{p}:send
-- KEYS[5] live: live index             rg:{p}:live             (zset: live op -> created ms)
-- ARGV[1] now: ms
-- ARGV[2] expected_id: the operation id the caller expects as the account's last, or ""
-- ARGV[3] new_id: the id a new operation gets
-- ARGV[4] account_id
-- ARGV[5] entry_point: counted in the operation's ENTRY_POINT_PREFIX .. entry_point field
-- ARGV[6] cooldown_ms
-- ARGV[7] token_kid: the token key id
-- ARGV[8] token_expires_at: ms
-- ARGV[9] horizon_at: the delivery horizon, ms
-- ARGV[10] dry: "1" = dry run: read the same keys, write nothing (unknown logins take this path)
-- ARGV[11] actor: "" = none
-- ARGV[12] provider
-- ARGV[13] template_revision
-- ARGV[14] account_retention_ms: how long the account hash is kept
--
-- Returns {result, operation_id, state}:
--   "converged" - a live operation exists; its entry-point counter was bumped, no new work
--   "cooldown"  - inside the cooldown; converged on the last operation, no new work
--   "created"   - a new operation, the cooldown set and exactly one send job added
--   "retry"     - the last operation is not expected_id; call again expecting operation_id
-- @names
-- @states
local now, expected, dry = tonumber(ARGV[1]), ARGV[2], ARGV[10] == "1"

local function touch(key, id)
  if not dry then
    redis.call("HINCRBY", key, ENTRY_POINT_PREFIX .. ARGV[5], 1)
    if ARGV[11] ~= "" then redis.call("HSET", key, "last_actor", ARGV[11]) end
  end
  return redis.call("HGET", key, "state") or ""
end

-- The account's live operation is its last one while that one is live: no second field.
local last = redis.call("HGET", KEYS[1], "last")
if last then
  if last ~= expected then return {"retry", last, ""} end
  local state = redis.call("HGET", KEYS[2], "state")
  if state and LIVE[state] then return {"converged", last, touch(KEYS[2], last)} end
end

local cooldown_until = tonumber(redis.call("HGET", KEYS[1], "cooldown_until") or "0")
if cooldown_until > now then
  if not last then return {"cooldown", "", ""} end
  return {"cooldown", last, touch(KEYS[2], last)}
end

if dry then return {"created", "", "queued"} end

-- Only what cannot be derived, and nothing at its default (shared/model.py reads absent
-- fields as their defaults): the id, partition and creation time are in the key's id
-- (op-<p>-<ulid>), the cooldown is the account's, attempts/replays start at 0 and
-- delivery at "unknown".
local id = ARGV[3]
redis.call("HSET", KEYS[3], "account_id", ARGV[4], "state", "queued",
  "token_kid", ARGV[7], "token_expires_at", ARGV[8], "horizon_at", ARGV[9],
  ENTRY_POINT_PREFIX .. ARGV[5], 1, "provider", ARGV[12], "template_revision", ARGV[13])
if ARGV[11] ~= "" then redis.call("HSET", KEYS[3], "last_actor", ARGV[11]) end
redis.call("HSET", KEYS[1], "last", id, "cooldown_until", now + tonumber(ARGV[6]))
redis.call("PEXPIRE", KEYS[1], tonumber(ARGV[14]))
redis.call("ZADD", KEYS[5], now, id)
redis.call("XADD", KEYS[4], "*", JOB_FIELD, id)
return {"created", id, "queued"}
