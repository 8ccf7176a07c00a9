-- pace_feedback: adapt the provider-wide rate to what the provider says.
-- A 429 halves the rate (not below the floor), empties the bucket and blocks every sender
-- until the advised time; a success climbs back additively toward the ceiling. Every 429 is
-- also counted (throttled_total, last_throttled_at) for on-call's views.
--
-- KEYS[1] pacing hash   rg:{provider:<name>}:pacing
-- ARGV[1] "throttled" | "ok"    ARGV[2] now (ms)    ARGV[3] blocked until (ms, throttled)
-- ARGV[4] ceiling (sends/s)     ARGV[5] floor (sends/s)   ARGV[6] step per success (sends/s)
-- Returns the new rate * 1000 (integer).
local now, ceiling = tonumber(ARGV[2]), tonumber(ARGV[4])
local rate = math.min(tonumber(redis.call("HGET", KEYS[1], "rate") or ceiling), ceiling)
if ARGV[1] == "throttled" then
  rate = math.max(tonumber(ARGV[5]), rate / 2)
  local blocked = tonumber(redis.call("HGET", KEYS[1], "blocked_until") or "0")
  redis.call("HSET", KEYS[1], "rate", rate, "tokens", 0, "ts", now,
    "blocked_until", math.max(blocked, tonumber(ARGV[3])), "last_throttled_at", now)
  redis.call("HINCRBY", KEYS[1], "throttled_total", 1)
else
  rate = math.min(ceiling, rate + tonumber(ARGV[6]))
  redis.call("HSET", KEYS[1], "rate", rate)
end
return math.floor(rate * 1000)
