-- begin_attempt: claim a queued operation for one send attempt, before any network call.
-- Writes the attempt to the ledger as in_flight and sets a lease; the attempt id is the
-- fencing token finalise_attempt checks.
--
-- KEYS[1] operation: hash        rg:{p}:op:<id>
-- KEYS[2] ledger: attempt ledger  rg:{p}:op:<id>:attempts   (list of compact rows, append-only)
-- KEYS[3] send: send stream       rg:{p}:send
-- KEYS[4] ambiguous: index        rg:{p}:ambiguous
-- KEYS[5] live: index             rg:{p}:live
-- ARGV[1] now: ms
-- ARGV[2] attempt_id: the fencing token finalise_attempt checks
-- ARGV[3] lease_ms
-- ARGV[4] max_attempts
-- ARGV[5] consumer: the sender's consumer name, recorded in the ledger
-- ARGV[6] entry_id: the send stream entry ("" = none); acked (SEND_GROUP) when done with
-- ARGV[7] retention_ms: how long a finished operation is kept
-- ARGV[8] operation_id
-- ARGV[9] provider: the provider this attempt goes to ("" = not recorded); it becomes the
--         operation's "provider", its owner: the one that accepts it or holds it while ambiguous.
--         An operation pinned to another provider (a replay decided there: "pinned") is not
--         begun here; one pinned for its replay only is unpinned once that attempt begins.
--
-- Returns {code, detail...}:
--   {"begin", attempts, account_id, token_kid, template_revision, horizon_at,
--    token_expires_at} - go and send
--   {"busy"}            - another worker holds a live lease; leave the entry pending
--   {"skip", state}     - nothing to send (duplicate delivery, stale job); entry acked
--   {"ambiguous"}       - the previous holder's lease ran out mid-attempt; entry acked
--   {"expired"} / {"exhausted", reason} - terminal now; entry acked
--   {"missing"}         - no such operation; entry acked
--   {"elsewhere", name} - pinned to provider ``name``: nothing written, entry left pending
-- @names
-- @ledger
local now, id = tonumber(ARGV[1]), ARGV[8]

local function ack()
  if ARGV[6] ~= "" then
    redis.call("XACK", KEYS[3], SEND_GROUP, ARGV[6])
    redis.call("XDEL", KEYS[3], ARGV[6])
  end
end

local function finish(state, reason)
  redis.call("HSET", KEYS[1], "state", state, "reason", reason)
  redis.call("HDEL", KEYS[1], "next_attempt_at")
  redis.call("ZREM", KEYS[5], id)
  redis.call("PEXPIRE", KEYS[1], ARGV[7])
  redis.call("PEXPIRE", KEYS[2], ARGV[7])
  ack()
end

local f = redis.call("HMGET", KEYS[1], "state", "lease_until", "token_expires_at", "attempts",
  "horizon_at", "account_id", "token_kid", "template_revision", "token_consumed_at", "pinned",
  "pinned_for")
local state = f[1]
if not state then ack() return {"missing"} end

if state == "attempting" then
  if now < tonumber(f[2] or "0") then return {"busy"} end
  -- The holder died between writing the attempt and finalising it: outcome unknown.
  local last = redis.call("LINDEX", KEYS[2], -1)
  if last then
    local row = ledger_decode(last)
    if row[LEDGER.outcome] == "in_flight" then
      row[LEDGER.outcome] = "ambiguous"; row[LEDGER.ended_at] = now
      row[LEDGER.reason] = "lease_expired"
      redis.call("LSET", KEYS[2], -1, ledger_encode(row))
    end
  end
  redis.call("HSET", KEYS[1], "state", "ambiguous", "reason", "lease_expired",
    "last_outcome", "ambiguous", "ambiguous_at", now)
  redis.call("ZADD", KEYS[4], now, id)
  ack()
  return {"ambiguous"}
end

if state ~= "queued" or tonumber(f[9] or "0") > 0 then ack() return {"skip", state} end
if tonumber(f[3]) <= now then finish("expired", "token_expired") return {"expired"} end
local attempts = tonumber(f[4] or "0")
if attempts >= tonumber(ARGV[4]) then
  finish("exhausted", "max_attempts") return {"exhausted", "max_attempts"}
end
if now >= tonumber(f[5]) then finish("exhausted", "horizon") return {"exhausted", "horizon"} end

local pinned = f[10]
if pinned and ARGV[9] ~= "" and pinned ~= ARGV[9] then return {"elsewhere", pinned} end

attempts = attempts + 1
redis.call("HSET", KEYS[1], "state", "attempting", "attempt_id", ARGV[2],
  "lease_until", now + tonumber(ARGV[3]), "attempts", attempts)
redis.call("HDEL", KEYS[1], "next_attempt_at")
local row = {}
row[LEDGER.attempt_id] = ARGV[2]; row[LEDGER.started_at] = now
row[LEDGER.number] = attempts; row[LEDGER.consumer] = ARGV[5]
row[LEDGER.outcome] = "in_flight"
if ARGV[9] and ARGV[9] ~= "" then
  row[LEDGER.provider] = ARGV[9]
  redis.call("HSET", KEYS[1], "provider", ARGV[9])
end
if f[11] == "replay" then redis.call("HDEL", KEYS[1], "pinned", "pinned_for") end
redis.call("RPUSH", KEYS[2], ledger_encode(row))
return {"begin", attempts, f[6], f[7], f[8] or "", f[5], f[3]}
