-- admit: converge a recovery request on the account's live operation, or create one.
--
-- KEYS[1] account hash          rg:{p}:acct:<account>   (last, cooldown_until)
-- KEYS[2] expected operation    rg:{p}:op:<expected>    (== KEYS[3] when ARGV[2] is "")
-- KEYS[3] new operation hash    rg:{p}:op:<new>
-- KEYS[4] send stream           rg:{p}:send
-- KEYS[5] live index            rg:{p}:live             (zset: live op -> created ms)
-- ARGV[1] now (ms)              ARGV[2] expected operation id, or ""
-- ARGV[3] new operation id      ARGV[4] account id
-- ARGV[5] entry point           ARGV[6] cooldown (ms)
-- ARGV[7] token key id          ARGV[8] token expires at (ms)
-- ARGV[9] delivery horizon (ms)
-- ARGV[10] "1" = dry run: read the same keys, write nothing (unknown logins take this path)
-- ARGV[11] actor ("" = none)    ARGV[11] provider        ARGV[12] template revision
-- ARGV[13] account key retention (ms)
--
-- Returns {result, operation_id, state}:
--   "converged" - a live operation exists; its entry-point counter was bumped, no new work
--   "cooldown"  - inside the cooldown; converged on the last operation, no new work
--   "created"   - a new operation, the cooldown set and exactly one send job added
--   "retry"     - the last operation is not ARGV[2]; call again expecting operation_id
-- @states
local now, expected, dry = tonumber(ARGV[1]), ARGV[2], ARGV[10] == "1"

local function touch(key, id)
  if not dry then
    redis.call("HINCRBY", key, "ep:" .. ARGV[5], 1)
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
  "ep:" .. ARGV[5], 1, "provider", ARGV[12], "template_revision", ARGV[13])
if ARGV[11] ~= "" then redis.call("HSET", KEYS[3], "last_actor", ARGV[11]) end
redis.call("HSET", KEYS[1], "last", id, "cooldown_until", now + tonumber(ARGV[6]))
redis.call("PEXPIRE", KEYS[1], tonumber(ARGV[14]))
redis.call("ZADD", KEYS[5], now, id)
redis.call("XADD", KEYS[4], "*", "op", id)
return {"created", id, "queued"}
