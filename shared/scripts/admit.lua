-- admit: converge a recovery request on the account's live operation, or create one.
--
-- key account: account hash        rg:{p}:acct:<account>   (last, cooldown_until)
-- key expected_operation: hash     rg:{p}:op:<expected>    (== new_operation when expected_id is "")
-- key new_operation: hash          rg:{p}:op:<new>
-- key send: send stream            rg:{p}:send
-- key live: live index             rg:{p}:live             (zset: live op -> created ms)
-- arg now: ms
-- arg expected_id: the operation id the caller expects as the account's last, or ""
-- arg new_id: the id a new operation gets
-- arg account_id
-- arg entry_point: counted in the operation's ENTRY_POINT_PREFIX .. entry_point field
-- arg cooldown_ms
-- arg token_kid: the token key id
-- arg token_expires_at: ms
-- arg horizon_at: the delivery horizon, ms
-- arg dry: dry run: read the same keys, write nothing (unknown logins take this path)
-- arg actor: "" = none
-- arg provider
-- arg template_revision
-- arg account_retention_ms: how long the account hash is kept
-- arg traceparent: the admission's W3C trace context, "" = none (traces off); kept in the
--   new operation and its send job so the sender continues (a retry links to) the trace
-- arg tracestate: its vendors' entries, "" = none; kept beside it
--
-- Returns {result, operation_id, state}:
--   "converged" - a live operation exists; its entry-point counter was bumped, no new work
--   "cooldown"  - inside the cooldown; converged on the last operation, no new work
--   "created"   - a new operation, the cooldown set and exactly one send job added
--   "retry"     - the last operation is not expected_id; call again expecting operation_id
-- @names
-- @states
-- @request

local function touch(op_key)
  if not dry then
    redis.call("HINCRBY", op_key, ENTRY_POINT_PREFIX .. entry_point, 1)
    if actor ~= "" then redis.call("HSET", op_key, "last_actor", actor) end
  end
  return redis.call("HGET", op_key, "state") or ""
end

-- The account's live operation is its last one while that one is live: no second field.
local last = redis.call("HGET", account, "last")
if last then
  if last ~= expected_id then return {"retry", last, ""} end
  local state = redis.call("HGET", expected_operation, "state")
  if state and LIVE[state] then return {"converged", last, touch(expected_operation)} end
end

local cooldown_until = tonumber(redis.call("HGET", account, "cooldown_until") or "0")
if cooldown_until > now then
  if not last then return {"cooldown", "", ""} end
  return {"cooldown", last, touch(expected_operation)}
end

if dry then return {"created", "", "queued"} end

-- Only what cannot be derived, and nothing at its default (shared/model.py reads absent
-- fields as their defaults): the id, partition and creation time are in the key's id
-- (op-<p>-<ulid>), the cooldown is the account's, attempts/replays start at 0 and
-- delivery at "unknown".
redis.call("HSET", new_operation, "account_id", account_id, "state", "queued",
  "token_kid", token_kid, "token_expires_at", token_expires_at, "horizon_at", horizon_at,
  ENTRY_POINT_PREFIX .. entry_point, 1, "provider", provider,
  "template_revision", template_revision)
if actor ~= "" then redis.call("HSET", new_operation, "last_actor", actor) end
redis.call("HSET", account, "last", new_id, "cooldown_until", now + cooldown_ms)
redis.call("PEXPIRE", account, account_retention_ms)
redis.call("ZADD", live, now, new_id)
-- The job's fields as handoff() would read them back, written here without the read, and
-- the account (ACCOUNT_FIELD: the sender reads the directory beside its begin).
if traceparent == "" then
  redis.call("XADD", send, "*", JOB_FIELD, new_id, ACCOUNT_FIELD, account_id)
elseif tracestate == "" then
  redis.call("HSET", new_operation, TRACE_FIELD, traceparent)
  redis.call("XADD", send, "*", JOB_FIELD, new_id, ACCOUNT_FIELD, account_id,
    TRACE_FIELD, traceparent)
else
  redis.call("HSET", new_operation, TRACE_FIELD, traceparent, TRACESTATE_FIELD, tracestate)
  redis.call("XADD", send, "*", JOB_FIELD, new_id, ACCOUNT_FIELD, account_id,
    TRACE_FIELD, traceparent, TRACESTATE_FIELD, tracestate)
end
return {"created", new_id, "queued"}
