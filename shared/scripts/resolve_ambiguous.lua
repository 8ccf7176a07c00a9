-- resolve_ambiguous: settle an ambiguous operation once the provider has been asked
-- (lookup by idempotency key). Never mints anything: a replay reuses the operation id.
--
-- key operation: hash
-- key ledger: attempt ledger
-- key send: send stream
-- key ambiguous: index
-- key review: index
-- key live: index
-- key messages: message map
-- key observe: zset
-- key settled: stream of operations awaiting the archive (written with retention_ms 0)
-- arg now: ms
-- arg decision: "accepted" | "replay" | "review"
-- arg message_id
-- arg observe_until: observation window end (ms)
-- arg reason
-- arg retention_ms: how long a finished operation is kept (0: until archived, @settle)
-- arg operation_id
-- arg pin: on "replay", the provider that decided it ("" = none): the replay is sent
--         only through it (begin_attempt answers "elsewhere" to any other)
-- arg pin_for: "replay" (the lookup proved it unsent: pinned for the replay's attempt
--         only) | "proof" (a same-key replay: pinned for as long as the operation lives)
-- Returns {"ok", state} or {"stale", state} when the operation is no longer ambiguous.
-- @names
-- @ledger
-- @delivery
-- @settle
-- @request
local f = redis.call("HMGET", operation, "state", "delivery")
local state = f[1]
if state ~= "ambiguous" then
  redis.call("ZREM", ambiguous, operation_id)
  return {"stale", state or ""}
end
redis.call("ZREM", ambiguous, operation_id)
local last = redis.call("LINDEX", ledger, -1)
if last then
  local row = ledger_decode(last)
  row[LEDGER.reconciled] = decision; row[LEDGER.reconciled_at] = now
  redis.call("LSET", ledger, -1, ledger_encode(row))
end
if decision == "accepted" then
  -- When it was accepted is the ledger row's reconciled_at.
  redis.call("HSET", operation, "state", "accepted", "reason", reason,
    "provider_message_id", message_id)
  redis.call("HSET", messages, message_id, operation_id)
  -- An event recorded while the attempt was in flight may already have ended the wait.
  if (RANK[f[2] or "unknown"] or 0) < DEFINITIVE then
    redis.call("ZADD", observe, observe_until, operation_id)
  end
  redis.call("ZREM", live, operation_id)
  settle(operation, ledger, settled, operation_id, retention_ms, now)
elseif decision == "replay" then
  redis.call("HINCRBY", operation, "replays", 1)
  redis.call("HSET", operation, "state", "queued", "reason", reason, "next_attempt_at", now)
  if pin ~= "" then redis.call("HSET", operation, "pinned", pin, "pinned_for", pin_for) end
  redis.call("XADD", send, "*", unpack(handoff(operation, operation_id, true)))
else
  redis.call("HSET", operation, "state", "review", "reason", reason)
  redis.call("ZADD", review, now, operation_id)
end
return {"ok", decision}
