-- pace_feedback: what one provider answer says about the rate every sender shares.
--
-- A 429 cuts the rate by a factor (not below the floor) once per congestion event: a 429
-- for a send whose slot may have been reserved before the last cut (a slot before the cut
-- plus one horizon) says nothing new, so a burst of them costs one cut. Every 429 empties the bucket (no catch-up burst into a provider
-- whose own bucket is empty). A block holds every slot until the advised instant.
-- A hint (X-RateLimit-Remaining over the time to -Reset) caps the rate until that reset.
-- Every 429 is also counted (throttled_total, last_throttled_at) for on-call's views.
--
-- KEYS[1] pacing: hash   rg:{provider:<name>}:pacing   (fields: see pace_acquire)
-- ARGV[1] now: ms
-- ARGV[2] throttled: 1|0
-- ARGV[3] slot_ms: the slot of the send
-- ARGV[4] blocked_until: ms, 0 = no block
-- ARGV[5] floor: sends/s
-- ARGV[6] cut: factor (0..1)
-- ARGV[7] hint: sends/s, 0 = none
-- ARGV[8] hint_until: ms
-- ARGV[9] returned_ms: the span of slots the caller had reserved and now drops; the
--   schedule takes them back
-- ARGV[10] horizon_ms: of a reservation
--
-- Returns {rate*1000, blocked_until (ms), cut (1|0)}.
local now, slot, advised = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
local f = redis.call("HMGET", KEYS[1], "rate", "cut_at", "tat", "blocked_until")
local rate = tonumber(f[1] or "0")
local cut_at, tat = tonumber(f[2] or "0"), tonumber(f[3] or "0")
local blocked = math.max(tonumber(f[4] or "0"), advised)
local cut = 0
local returned = tonumber(ARGV[9])
if ARGV[2] == "1" or returned > 0 then tat = math.max(now, tat - returned) end
if ARGV[2] == "1" then
  redis.call("HINCRBY", KEYS[1], "throttled_total", 1)
  redis.call("HSET", KEYS[1], "last_throttled_at", now)
  if slot >= cut_at + tonumber(ARGV[10]) and rate > 0 then
    rate = math.max(tonumber(ARGV[5]), rate * tonumber(ARGV[6]))
    redis.call("HSET", KEYS[1], "base", rate, "cut_at", now, "rate", rate)
    cut = 1
  end
end
redis.call("HSET", KEYS[1], "tat", math.max(tat, blocked), "blocked_until", blocked)
if tonumber(ARGV[7]) > 0 then
  redis.call("HSET", KEYS[1], "hint", ARGV[7], "hint_until", ARGV[8])
end
return {math.floor(rate * 1000), blocked, cut}
