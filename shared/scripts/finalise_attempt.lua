-- finalise_attempt: record an attempt's outcome, move the operation, schedule or finish it,
-- and XACK its stream entry, atomically; only while the attempt id (fencing token) matches.
--
-- key operation: hash
-- key ledger: attempt ledger
-- key send: send stream (the entry is acked in SEND_GROUP; a requeue adds a job)
-- key due: zset
-- key ambiguous: index
-- key live: index
-- key messages: message map
-- key observe: zset
-- key settled: stream of operations awaiting the archive (written with retention_ms 0)
-- key finished: index (recently failed or exhausted)
-- arg attempt_id: the fencing token
-- arg now: ms
-- arg entry_id: the stream entry ("" = none)
-- arg outcome: the attempt's class (shared/model.py Outcome)
-- arg http_status
-- arg next_state
-- arg retry_at: ms, for deferred; else 0
-- arg reason
-- arg retry_after_source: "" = n/a
-- arg message_id: the provider's message id
-- arg observe_until: observation window end (ms)
-- arg refund: the attempt does not count
-- arg decision: for the ledger
-- arg template_revision: the template revision the attempt sent ("" = none)
-- arg retention_ms: how long a finished operation is kept (0: until archived, @settle)
-- arg operation_id
--
-- A next state the table (shared/model.py TRANSITIONS) does not allow after an attempt is an
-- error, raised before anything is written.
-- Returns {"ok"} or {"fenced"} (the lease was lost; someone else owns the operation now,
-- nothing written and the entry is not acked).
-- @names
-- @ledger
-- @states
-- @delivery
-- @settle
-- @recent
-- @request
local f = redis.call("HMGET", operation, "state", "attempt_id", "delivery")
if f[1] ~= "attempting" or f[2] ~= attempt_id then return {"fenced"} end
if not TRANSITIONS.attempting[next_state] then
  return redis.error_reply("illegal transition attempting -> " .. next_state)
end

local last = redis.call("LINDEX", ledger, -1)
if last then
  local row = ledger_decode(last)
  if row[LEDGER.attempt_id] == attempt_id then
    row[LEDGER.outcome] = outcome; row[LEDGER.ended_at] = now
    row[LEDGER.http_status] = http_status; row[LEDGER.decision] = decision
    row[LEDGER.retry_at] = retry_at; row[LEDGER.reason] = reason
    row[LEDGER.retry_after_source] = retry_after_source
    row[LEDGER.template] = template_revision
    redis.call("LSET", ledger, -1, ledger_encode(row))
    -- An attempt that may have reached the provider (no answer, or a 5xx) is replayed under
    -- the same idempotency key, and a provider may refuse a key reused with another body:
    -- every later attempt composes the email as of this one's start (begin_attempt).
    if (outcome == "transient" or outcome == "ambiguous") and not refund then
      redis.call("HSETNX", operation, "body_at", row[LEDGER.started_at])
    end
  end
end

-- A field back at its default is deleted, not written (shared/model.py reads it so).
redis.call("HSET", operation, "state", next_state, "last_status", http_status,
  "last_outcome", outcome)
redis.call("HDEL", operation, "lease_until", "attempt_id")
if reason ~= "" then redis.call("HSET", operation, "reason", reason)
else redis.call("HDEL", operation, "reason") end
if retry_at > 0 then redis.call("HSET", operation, "next_attempt_at", retry_at)
else redis.call("HDEL", operation, "next_attempt_at") end
if retry_after_source ~= "" then
  redis.call("HSET", operation, "retry_after_source", retry_after_source)
end
if refund then redis.call("HINCRBY", operation, "attempts", -1) end
-- A throttle is refunded (it could not have sent) but counted: on-call sees every one.
if outcome == "throttled" then redis.call("HINCRBY", operation, "throttles", 1) end

if next_state == "deferred" then
  redis.call("ZADD", due, retry_at, operation_id)
elseif next_state == "queued" then
  redis.call("XADD", send, "*", unpack(handoff(operation, operation_id, true)))
elseif next_state == "ambiguous" then
  redis.call("HSET", operation, "ambiguous_at", now)
  redis.call("ZADD", ambiguous, now, operation_id)
elseif next_state == "accepted" then
  -- When it was accepted is the attempt's ended_at in the ledger.
  redis.call("HSET", operation, "provider_message_id", message_id)
  redis.call("HSET", messages, message_id, operation_id)
  -- A pushed event can beat this write (a webhook may arrive while the call is in flight);
  -- one that already ended the wait must not open the observation window again.
  if (RANK[f[3] or "unknown"] or 0) < DEFINITIVE then
    redis.call("ZADD", observe, observe_until, operation_id)
  end
end
if TERMINAL[next_state] then
  redis.call("ZREM", live, operation_id)
  settle(operation, ledger, settled, operation_id, retention_ms, now)
  if RECENTLY_FAILED[next_state] then note_recent(finished, now, operation_id) end
end
if entry_id ~= "" then
  redis.call("XACK", send, SEND_GROUP, entry_id)
  redis.call("XDEL", send, entry_id)
end
return {"ok"}
