-- finalise_attempt: record an attempt's outcome, move the operation, schedule or finish it,
-- and XACK its stream entry, atomically; only while the attempt id (fencing token) matches.
--
-- KEYS[1] operation: hash
-- KEYS[2] ledger: attempt ledger
-- KEYS[3] send: send stream (the entry is acked in SEND_GROUP; a requeue adds a job)
-- KEYS[4] due: zset
-- KEYS[5] ambiguous: index
-- KEYS[6] live: index
-- KEYS[7] messages: message map
-- KEYS[8] observe: zset
-- ARGV[1] attempt_id: the fencing token
-- ARGV[2] now: ms
-- ARGV[3] entry_id: the stream entry ("" = none)
-- ARGV[4] outcome: the attempt's class (shared/model.py Outcome)
-- ARGV[5] http_status
-- ARGV[6] next_state
-- ARGV[7] retry_at: ms, for deferred; else 0
-- ARGV[8] reason
-- ARGV[9] retry_after_source: "" = n/a
-- ARGV[10] message_id: the provider's message id
-- ARGV[11] observe_until: observation window end (ms)
-- ARGV[12] refund: "1" = the attempt does not count
-- ARGV[13] retention_ms: how long a finished operation is kept
-- ARGV[14] decision: for the ledger
-- ARGV[15] operation_id
-- ARGV[16] template: the template revision the attempt sent ("" = none)
--
-- A next state the table (shared/model.py TRANSITIONS) does not allow after an attempt is an
-- error, raised before anything is written.
-- Returns {"ok"} or {"fenced"} (the lease was lost; someone else owns the operation now,
-- nothing written and the entry is not acked).
-- @names
-- @ledger
-- @states
-- @delivery
local f = redis.call("HMGET", KEYS[1], "state", "attempt_id", "delivery")
if f[1] ~= "attempting" or f[2] ~= ARGV[1] then return {"fenced"} end
local id, now, state = ARGV[15], tonumber(ARGV[2]), ARGV[6]
if not TRANSITIONS.attempting[state] then
  return redis.error_reply("illegal transition attempting -> " .. state)
end

local last = redis.call("LINDEX", KEYS[2], -1)
if last then
  local row = ledger_decode(last)
  if row[LEDGER.attempt_id] == ARGV[1] then
    row[LEDGER.outcome] = ARGV[4]; row[LEDGER.ended_at] = now
    row[LEDGER.http_status] = tonumber(ARGV[5]); row[LEDGER.decision] = ARGV[14]
    row[LEDGER.retry_at] = tonumber(ARGV[7]); row[LEDGER.reason] = ARGV[8]
    row[LEDGER.retry_after_source] = ARGV[9]; row[LEDGER.template] = ARGV[16]
    redis.call("LSET", KEYS[2], -1, ledger_encode(row))
  end
end

-- A field back at its default is deleted, not written (shared/model.py reads it so).
redis.call("HSET", KEYS[1], "state", state, "last_status", ARGV[5], "last_outcome", ARGV[4])
redis.call("HDEL", KEYS[1], "lease_until", "attempt_id")
if ARGV[8] ~= "" then redis.call("HSET", KEYS[1], "reason", ARGV[8])
else redis.call("HDEL", KEYS[1], "reason") end
if tonumber(ARGV[7]) > 0 then redis.call("HSET", KEYS[1], "next_attempt_at", ARGV[7])
else redis.call("HDEL", KEYS[1], "next_attempt_at") end
if ARGV[9] ~= "" then redis.call("HSET", KEYS[1], "retry_after_source", ARGV[9]) end
if ARGV[12] == "1" then redis.call("HINCRBY", KEYS[1], "attempts", -1) end
-- A throttle is refunded (it could not have sent) but counted: on-call sees every one.
if ARGV[4] == "throttled" then redis.call("HINCRBY", KEYS[1], "throttles", 1) end

if state == "deferred" then
  redis.call("ZADD", KEYS[4], tonumber(ARGV[7]), id)
elseif state == "queued" then
  redis.call("XADD", KEYS[3], "*", JOB_FIELD, id)
elseif state == "ambiguous" then
  redis.call("HSET", KEYS[1], "ambiguous_at", now)
  redis.call("ZADD", KEYS[5], now, id)
elseif state == "accepted" then
  -- When it was accepted is the attempt's ended_at in the ledger.
  redis.call("HSET", KEYS[1], "provider_message_id", ARGV[10])
  redis.call("HSET", KEYS[7], ARGV[10], id)
  -- A pushed event can beat this write (a webhook may arrive while the call is in flight);
  -- one that already ended the wait must not open the observation window again.
  if (RANK[f[3] or "unknown"] or 0) < DEFINITIVE then
    redis.call("ZADD", KEYS[8], tonumber(ARGV[11]), id)
  end
end
if TERMINAL[state] then
  redis.call("ZREM", KEYS[6], id)
  redis.call("PEXPIRE", KEYS[1], ARGV[13])
  redis.call("PEXPIRE", KEYS[2], ARGV[13])
end
if ARGV[3] ~= "" then
  redis.call("XACK", KEYS[3], SEND_GROUP, ARGV[3])
  redis.call("XDEL", KEYS[3], ARGV[3])
end
return {"ok"}
