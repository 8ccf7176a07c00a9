-- pace_acquire: reserve send slots from the provider-wide schedule every sender shares.
--
-- A GCRA schedule (generic cell rate algorithm): `tat` is the time of the next free slot,
-- slots are 1/rate apart, and up to `burst` of them may lie in the past, so a fresh key
-- (or a pause) starts with a full bucket and the provider's initial burst is used. One
-- call reserves every slot due within the horizon (up to `want`); the caller waits for
-- each slot locally, so a send costs a fraction of a round trip.
-- The rate climbs with the time since the last cut (pace_feedback): additively at first,
-- then, once the provider has stayed quiet, with a probe that speeds up; never above the
-- ceiling, nor above an X-RateLimit hint while it lasts.
--
-- KEYS[1] pacing: hash   rg:{provider:<name>}:pacing
--   base, cut_at (ms): the rate set by the last cut and when; tat (ms); rate (last given);
--   blocked_until (ms); hint, hint_until (ms): a cap from X-RateLimit-Remaining / -Reset
-- ARGV[1] now: ms
-- ARGV[2] ceiling: sends/s
-- ARGV[3] burst: slots
-- ARGV[4] want: slots
-- ARGV[5] horizon_ms
-- ARGV[6] growth: share of base per s
-- ARGV[7] quiet_ms: before probing
-- ARGV[8] probe: share of base per s^2
--
-- Returns {count, first (µs), rate*1000, blocked_until (ms), wait (ms)}:
--   count >= 1: slots at first, first + 1/rate, ... (times before now mean "now");
--   count = 0: no slot within the horizon, ask again in wait ms (then half a horizon is free).
local now, ceiling, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local want, horizon = tonumber(ARGV[4]), tonumber(ARGV[5])
local f = redis.call("HMGET", KEYS[1], "base", "cut_at", "tat", "blocked_until", "hint",
  "hint_until")
local base, cut = tonumber(f[1] or ceiling), tonumber(f[2] or "0")
local tat, blocked = tonumber(f[3] or "0"), tonumber(f[4] or "0")
local cap = ceiling
if f[5] and tonumber(f[6]) > now then cap = math.min(cap, tonumber(f[5])) end

local quiet = math.max(0, now - cut - tonumber(ARGV[7])) / 1000
local climb = tonumber(ARGV[6]) * math.max(0, now - cut) / 1000 + tonumber(ARGV[8]) * quiet ^ 2
local rate = math.min(cap, base * (1 + climb))
local spacing = 1000 / rate

local start = math.max(tat, now - (burst - 1) * spacing, blocked)
if start >= now + horizon then
  redis.call("HSET", KEYS[1], "rate", rate)
  -- Come back when half a horizon of slots is free, not one: fewer, fuller round trips.
  return {0, 0, math.floor(rate * 1000), blocked, math.max(1, math.ceil(start - horizon / 2 - now))}
end
local count = math.min(want, math.floor((now + horizon - start) / spacing) + 1)
redis.call("HSET", KEYS[1], "rate", rate, "tat", start + count * spacing)
return {count, math.floor(start * 1000), math.floor(rate * 1000), blocked, 0}
