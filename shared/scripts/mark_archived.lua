-- mark_archived: the archiver committed an operation to PostgreSQL; from now its Redis copy
-- may expire after the tail. Only if it is still the settlement that was written: one that
-- left its end state (the refusals guard requeued a failure) or settled again since keeps no
-- expiry (its new settlement is on the stream), and one whose delivery changed since it was
-- read goes back on the stream, so the archive gets the change before Redis may lose it.
--
-- key operation: hash
-- key ledger: attempt ledger
-- key settled: stream of operations awaiting the archive
-- key observe: zset (an operation still observed keeps its copy until the window's end + tail)
-- key account: the account hash; while this is its last operation it expires with it (its
--              cooldown ended long before: a new request then starts afresh)
-- arg now: ms
-- arg tail_ms: how long an archived operation stays in Redis
-- arg settled_at: the operation's settled_at as the archiver read it
-- arg delivery_event_at: its delivery_event_at as read ("" = none)
-- arg operation_id
-- Returns {"archived"}, {"moved"} (not expired: settled again or live again), {"changed"}
-- (delivery changed since it was read: queued again) or {"missing"}.
-- @names
-- @states
-- @request
local f = redis.call("HMGET", operation, "state", "settled_at", "delivery_event_at")
if not f[1] then return {"missing"} end
if not TERMINAL[f[1]] or f[2] ~= settled_at then return {"moved"} end
if (f[3] or "") ~= delivery_event_at then
  redis.call("XADD", settled, "*", unpack(handoff(operation, operation_id, false)))
  return {"changed"}
end
redis.call("HSET", operation, "archived_at", now)
local expire_at = now + tail_ms
local observed_until = tonumber(redis.call("ZSCORE", observe, operation_id) or "0")
if observed_until + tail_ms > expire_at then expire_at = observed_until + tail_ms end
redis.call("PEXPIREAT", operation, expire_at)
redis.call("PEXPIREAT", ledger, expire_at)
if redis.call("HGET", account, "last") == operation_id then
  redis.call("PEXPIREAT", account, expire_at)
end
return {"archived"}
