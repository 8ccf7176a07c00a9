-- begin_attempt: claim a queued operation for one send attempt, before any network call.
-- Writes the attempt to the ledger as in_flight and sets a lease; the attempt id is the
-- fencing token finalise_attempt checks.
--
-- key operation: hash        rg:{p}:op:<id>
-- key ledger: attempt ledger  rg:{p}:op:<id>:attempts   (list of compact rows, append-only)
-- key send: send stream       rg:{p}:send
-- key ambiguous: index        rg:{p}:ambiguous
-- key live: index             rg:{p}:live
-- key settled: stream of operations awaiting the archive (written with retention_ms 0)
-- key finished: index         rg:{p}:finished (recently failed or exhausted)
-- arg now: ms
-- arg attempt_id: the fencing token finalise_attempt checks
-- arg lease_ms
-- arg max_attempts
-- arg consumer: the sender's consumer name, recorded in the ledger
-- arg entry_id: the send stream entry ("" = none); acked (SEND_GROUP) when done with
-- arg retention_ms: how long a finished operation is kept (0: until archived, @settle)
-- arg operation_id
-- arg provider: the provider this attempt goes to ("" = not recorded); it becomes the
--         operation's "provider", its owner: the one that accepts it or holds it while ambiguous.
--         An operation pinned to another provider (a replay decided there: "pinned") is not
--         begun here; one pinned for its replay only is unpinned once that attempt begins.
--
-- Returns {code, detail...}:
--   {"begin", attempts, account_id, token_kid, template_revision, horizon_at,
--    token_expires_at, body_at} - go and send; body_at: the time the email is composed
--                       as of (its "expires in N minutes"), see finalise_attempt
--   {"busy"}            - another worker holds a live lease; leave the entry pending
--   {"skip", state}     - nothing to send (duplicate delivery, stale job); entry acked
--   {"ambiguous"}       - the previous holder's lease ran out mid-attempt; entry acked
--   {"expired"} / {"exhausted", reason} - terminal now; entry acked
--   {"missing"}         - no such operation; entry acked
--   {"elsewhere", name} - pinned to provider ``name``: nothing written, entry left pending
-- @names
-- @ledger
-- @settle
-- @recent
-- @request

local function ack()
  if entry_id ~= "" then
    redis.call("XACK", send, SEND_GROUP, entry_id)
    redis.call("XDEL", send, entry_id)
  end
end

local function finish(state, reason)
  redis.call("HSET", operation, "state", state, "reason", reason)
  redis.call("HDEL", operation, "next_attempt_at")
  redis.call("ZREM", live, operation_id)
  settle(operation, ledger, settled, operation_id, retention_ms, now)
  if RECENTLY_FAILED[state] then note_recent(finished, now, operation_id) end
  ack()
end

local f = redis.call("HMGET", operation, "state", "lease_until", "token_expires_at", "attempts",
  "horizon_at", "account_id", "token_kid", "template_revision", "token_consumed_at", "pinned",
  "pinned_for", "body_at")
local state = f[1]
if not state then ack() return {"missing"} end

if state == "attempting" then
  if now < tonumber(f[2] or "0") then return {"busy"} end
  -- The holder died between writing the attempt and finalising it: outcome unknown.
  local last = redis.call("LINDEX", ledger, -1)
  if last then
    local row = ledger_decode(last)
    if row[LEDGER.outcome] == "in_flight" then
      row[LEDGER.outcome] = "ambiguous"; row[LEDGER.ended_at] = now
      row[LEDGER.reason] = "lease_expired"
      redis.call("LSET", ledger, -1, ledger_encode(row))
      -- The request may be at the provider: a replay under its key must be the same email.
      redis.call("HSETNX", operation, "body_at", row[LEDGER.started_at])
    end
  end
  redis.call("HSET", operation, "state", "ambiguous", "reason", "lease_expired",
    "last_outcome", "ambiguous", "ambiguous_at", now)
  redis.call("ZADD", ambiguous, now, operation_id)
  ack()
  return {"ambiguous"}
end

if state ~= "queued" or tonumber(f[9] or "0") > 0 then ack() return {"skip", state} end
if tonumber(f[3]) <= now then finish("expired", "token_expired") return {"expired"} end
local attempts = tonumber(f[4] or "0")
if attempts >= max_attempts then
  finish("exhausted", "max_attempts") return {"exhausted", "max_attempts"}
end
if now >= tonumber(f[5]) then finish("exhausted", "horizon") return {"exhausted", "horizon"} end

local pinned = f[10]
if pinned and provider ~= "" and pinned ~= provider then return {"elsewhere", pinned} end

attempts = attempts + 1
redis.call("HSET", operation, "state", "attempting", "attempt_id", attempt_id,
  "lease_until", now + lease_ms, "attempts", attempts)
redis.call("HDEL", operation, "next_attempt_at")
local row = {}
row[LEDGER.attempt_id] = attempt_id; row[LEDGER.started_at] = now
row[LEDGER.number] = attempts; row[LEDGER.consumer] = consumer
row[LEDGER.outcome] = "in_flight"
if provider ~= "" then
  row[LEDGER.provider] = provider
  redis.call("HSET", operation, "provider", provider)
end
if f[11] == "replay" then redis.call("HDEL", operation, "pinned", "pinned_for") end
redis.call("RPUSH", ledger, ledger_encode(row))
return {"begin", attempts, f[6], f[7], f[8] or "", f[5], f[3], f[12] or now}
