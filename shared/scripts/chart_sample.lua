-- chart_sample: one sample of a provider's last hour, for on-call's charts (the console).
--
-- The pacer counts every accepted send and every 429 in the provider's pacing hash since
-- the store began (accepted_total, throttled_total: pace_acquire, pace_feedback). This adds
-- what they grew by since the last sample to the current minute's slot of a ring of 60
-- (minute mod 60; a slot still holding an older minute starts again at zero), and keeps the
-- minute's largest share of the delivery horizon used by the oldest eligible operation of
-- the provider's partitions. Console replicas sampling at once count each send once: the
-- last totals seen are read and moved in this one step. After a gap longer than max_gap_ms
-- (no console sampled), or a sample older than the last one (another replica's clock), the
-- totals are only taken as the new baseline: a restart must not draw an hour's sends as one
-- minute's. A total below the last one (the store was emptied) counts from zero.
--
-- key pacing: hash    rg:{provider:<name>}:pacing    (read only: accepted_total, throttled_total)
-- key minutes: hash   rg:{provider:<name>}:minutes
--   m<slot>: the minute (ms / 60000) the slot holds; a<slot>, t<slot>: sends accepted and
--   429s in it; o<slot>: the largest horizon share seen in it, per mille (absent: no
--   eligible operation); last_a, last_t, last_at: the totals of the last sample and its time
-- arg now: ms
-- arg oldest: per mille of its horizon the oldest eligible operation has used (-1: none)
-- arg max_gap_ms: the longest gap between samples whose growth is still counted
-- arg keep_ms: the ring's expiry after its last sample
--
-- Returns 1 when the growth was counted, 0 when the totals were only taken as the baseline.
-- @request
local totals = redis.call("HMGET", pacing, "accepted_total", "throttled_total")
local accepted, throttled = tonumber(totals[1] or "0"), tonumber(totals[2] or "0")
local last = redis.call("HMGET", minutes, "last_a", "last_t", "last_at")
local minute = math.floor(now / 60000)
local slot = minute % 60
local a, t, o = "a" .. slot, "t" .. slot, "o" .. slot
if tonumber(redis.call("HGET", minutes, "m" .. slot) or "-1") ~= minute then
  redis.call("HSET", minutes, "m" .. slot, minute, a, 0, t, 0)
  redis.call("HDEL", minutes, o)
end
local last_at = tonumber(last[3] or "-1")
local counted = 0
if last_at >= 0 and now >= last_at and now - last_at <= max_gap_ms then
  local grew_a = accepted - tonumber(last[1] or "0")
  local grew_t = throttled - tonumber(last[2] or "0")
  if grew_a < 0 then grew_a = accepted end
  if grew_t < 0 then grew_t = throttled end
  redis.call("HINCRBY", minutes, a, grew_a)
  redis.call("HINCRBY", minutes, t, grew_t)
  counted = 1
end
if now >= last_at then
  redis.call("HSET", minutes, "last_a", accepted, "last_t", throttled, "last_at", now)
end
if oldest >= 0 and oldest > tonumber(redis.call("HGET", minutes, o) or "-1") then
  redis.call("HSET", minutes, o, oldest)
end
redis.call("PEXPIRE", minutes, keep_ms)
return counted
