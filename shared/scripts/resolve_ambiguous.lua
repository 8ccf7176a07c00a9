-- resolve_ambiguous: settle an ambiguous operation once the provider has been asked
-- (lookup by idempotency key). Never mints anything: a replay reuses the operation id.
--
-- KEYS[1] operation: hash
-- KEYS[2] ledger: attempt ledger
-- KEYS[3] send: send stream
-- KEYS[4] ambiguous: index
-- KEYS[5] review: index
-- KEYS[6] live: index
-- KEYS[7] messages: message map
-- KEYS[8] observe: zset
-- ARGV[1] now: ms
-- ARGV[2] decision: "accepted" | "replay" | "review"
-- ARGV[3] message_id
-- ARGV[4] observe_until: observation window end (ms)
-- ARGV[5] reason
-- ARGV[6] retention_ms
-- ARGV[7] operation_id
-- ARGV[8] pin: on "replay", the provider that decided it ("" = none): the replay is sent
--         only through it (begin_attempt answers "elsewhere" to any other)
-- ARGV[9] pin_for: "replay" (the lookup proved it unsent: pinned for the replay's attempt
--         only) | "proof" (a same-key replay: pinned for as long as the operation lives)
-- Returns {"ok", state} or {"stale", state} when the operation is no longer ambiguous.
-- @names
-- @ledger
-- @delivery
local now, decision, id = tonumber(ARGV[1]), ARGV[2], ARGV[7]
local f = redis.call("HMGET", KEYS[1], "state", "delivery")
local state = f[1]
if state ~= "ambiguous" then
  redis.call("ZREM", KEYS[4], id)
  return {"stale", state or ""}
end
redis.call("ZREM", KEYS[4], id)
local last = redis.call("LINDEX", KEYS[2], -1)
if last then
  local row = ledger_decode(last)
  row[LEDGER.reconciled] = decision; row[LEDGER.reconciled_at] = now
  redis.call("LSET", KEYS[2], -1, ledger_encode(row))
end
if decision == "accepted" then
  -- When it was accepted is the ledger row's reconciled_at.
  redis.call("HSET", KEYS[1], "state", "accepted", "reason", ARGV[5],
    "provider_message_id", ARGV[3])
  redis.call("HSET", KEYS[7], ARGV[3], id)
  -- An event recorded while the attempt was in flight may already have ended the wait.
  if (RANK[f[2] or "unknown"] or 0) < DEFINITIVE then
    redis.call("ZADD", KEYS[8], tonumber(ARGV[4]), id)
  end
  redis.call("ZREM", KEYS[6], id)
  redis.call("PEXPIRE", KEYS[1], ARGV[6])
  redis.call("PEXPIRE", KEYS[2], ARGV[6])
elseif decision == "replay" then
  redis.call("HINCRBY", KEYS[1], "replays", 1)
  redis.call("HSET", KEYS[1], "state", "queued", "reason", ARGV[5], "next_attempt_at", now)
  if ARGV[8] ~= "" then redis.call("HSET", KEYS[1], "pinned", ARGV[8], "pinned_for", ARGV[9]) end
  redis.call("XADD", KEYS[3], "*", JOB_FIELD, id)
else
  redis.call("HSET", KEYS[1], "state", "review", "reason", ARGV[5])
  redis.call("ZADD", KEYS[5], now, id)
end
return {"ok", decision}
