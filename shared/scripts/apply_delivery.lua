-- apply_delivery: record one delivery event on its operation, at most once per
-- (message_id, type, occurred_at), never letting a weaker or older event overwrite a
-- stronger one. Transport acceptance (state) is never touched: only the delivery fields.
--
-- key operation: hash  rg:{p}:op:<id>
-- key observe: zset    rg:{p}:observe   (accepted op -> observation window end, ms)
-- key messages: map    rg:{p}:msgs      (provider message id -> op id)
-- key settled: stream  rg:{p}:settled   (an event on an archived operation is archived too)
-- key bounced: index    rg:{p}:bounced   (recently bounced op -> when recorded, ms)
-- arg message_id: the provider's message id
-- arg event_type: delivered|deferred|bounced|complained|rejected
-- arg occurred_at: ms
-- arg now: ms
-- arg operation_id
-- arg mode: "record" when the caller joined the event by operation id (a pushed event):
--         an operation with no provider message id yet takes this one (and the message map
--         learns it); "" for the pull feed, which found the operation through the map.
--
-- Returns {code, delivery, state, traceparent, tracestate} (state: the operation's, which
-- this never changes; traceparent, tracestate: the trace context its admission kept, "" if
-- none, for the event's span link):
--   {"applied", type, state, tp, ts}      new event; the operation's delivery is now this type
--   {"kept", current, state, tp, ts}      new event (remembered), the recorded delivery outranks it
--   {"duplicate", current, state, tp, ts} this (message_id, type, occurred_at) was seen before
--   {"missing", "", "", "", ""}           the operation is gone (retention ran out); its mapping is dropped
-- @names
-- @delivery
-- @recent
-- @request
local kind = event_type

local f = redis.call("HMGET", operation, "state", "delivery", "delivery_event_at",
  "provider_message_id", "evt:next", "archived_at", TRACE_FIELD, TRACESTATE_FIELD)
if not f[1] then
  -- Writing now would resurrect a hash without its TTL: forget the stale mapping instead.
  redis.call("HDEL", messages, message_id)
  return {"missing", "", "", "", ""}
end
local traceparent, tracestate = f[7] or "", f[8] or ""
if mode == "record" and (not f[4] or f[4] == "") then
  redis.call("HSET", operation, "provider_message_id", message_id)
  redis.call("HSET", messages, message_id, operation_id)
end
local current = f[2] or "unknown"
if RANK[current] == nil then current = "unknown" end

-- The event's identity lives on the operation itself, so it expires with it; as a 64-bit
-- digest, so a provider's long message ids never push the hash out of listpack encoding;
-- in one of REMEMBERED slots taken in turn (evt:0 .. evt:<REMEMBERED-1>, the next in
-- evt:next), so no number of distinct events grows the hash past REMEMBERED + 1 fields.
-- An event pushed out of the slots and sent again is applied again: precedence keeps what
-- it had ("kept"), so forgetting it changes nothing.
-- (occurred_at printed as the caller sent it: Lua's own "..", %.14g, would round a long one)
local identity = message_id .. ":" .. kind .. ":" .. string.format("%d", occurred_at)
local seen = string.sub(redis.sha1hex(identity), 1, 16)
local slots = {}
for i = 0, REMEMBERED - 1 do slots[#slots + 1] = "evt:" .. i end
local remembered = redis.call("HMGET", operation, unpack(slots))
for i = 1, REMEMBERED do
  if remembered[i] == seen then return {"duplicate", current, f[1], traceparent, tracestate} end
end
local slot = (tonumber(f[5] or "0") or 0) % REMEMBERED
redis.call("HSET", operation, "evt:" .. slot, seen, "evt:next", (slot + 1) % REMEMBERED)

local current_at = tonumber(f[3] or "0") or 0
-- Higher rank wins; within a rank (bounced/rejected, or the same type again) the later
-- occurrence does, so the result depends only on what happened, not on arrival order.
local wins
if RANK[kind] ~= RANK[current] then
  wins = RANK[kind] > RANK[current]
else
  wins = occurred_at > current_at
end
if RANK[kind] >= DEFINITIVE then
  -- A definitive outcome ends the wait, whether or not it replaces the recorded one.
  redis.call("ZREM", observe, operation_id)
end
if not wins then return {"kept", current, f[1], traceparent, tracestate} end
redis.call("HSET", operation, "delivery", kind, "delivery_observed_at", now,
  "delivery_event_at", occurred_at)
if kind == "bounced" then note_recent(bounced, now, operation_id) end
-- Archived already (on its tail): the archiver writes this event as one more row. One not
-- archived yet is read whole by the archiver, which checks nothing changed before it marks.
if f[6] then
  redis.call("XADD", settled, "*", unpack(handoff(operation, operation_id, false)))
end
return {"applied", kind, f[1], traceparent, tracestate}
