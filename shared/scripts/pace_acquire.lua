-- pace_acquire: take one send from the provider-wide token bucket shared by all senders.
--
-- KEYS[1] pacing hash   rg:{provider:<name>}:pacing  (rate, tokens, ts, blocked_until)
-- ARGV[1] now (ms)      ARGV[2] ceiling (sends/s)     ARGV[3] burst (tokens)
--
-- Returns {granted (1|0), wait_ms, rate*1000 (integer), blocked_until (ms)}:
-- granted=0 means wait wait_ms before asking again (blocked by a 429, or bucket empty).
local now, ceiling, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local f = redis.call("HMGET", KEYS[1], "rate", "tokens", "ts", "blocked_until")
local rate = math.min(tonumber(f[1] or ceiling), ceiling)
local tokens = tonumber(f[2] or "0")
local ts = tonumber(f[3] or now)
local blocked = tonumber(f[4] or "0")
if now < blocked then
  return {0, blocked - now, math.floor(rate * 1000), blocked}
end
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
local granted, wait = 0, 0
if tokens >= 1 then
  tokens = tokens - 1
  granted = 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call("HSET", KEYS[1], "rate", rate, "tokens", tokens, "ts", now)
return {granted, wait, math.floor(rate * 1000), blocked}
