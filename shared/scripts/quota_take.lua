-- quota_take: take one send from a provider's quota over a rolling window (SES's daily
-- quota, Max24HourSend over 24 h), or give one back; every sender replica shares it.
-- The window is cut into slices (a field per slice start); slices older than the window
-- are dropped, so the count is the sends of the last window to within one slice.
--
-- KEYS[1] quota: hash   rg:{provider:<name>}:quota   (slice start ms -> sends)
-- ARGV[1] now: ms (for a give back: when the send was taken)
-- ARGV[2] window_ms
-- ARGV[3] slice_ms
-- ARGV[4] limit: sends per window
-- ARGV[5] delta: 1 = take one, -1 = give one back (the provider did not take the send)
--
-- Returns {taken (1|0), used, reopens_at (ms)}: taken 0 means the quota is used up until
-- reopens_at, when the oldest slice leaves the window; used counts this send when taken.
local now, window, slice = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local limit, delta = tonumber(ARGV[4]), tonumber(ARGV[5])
local current = now - now % slice
if delta < 0 then
  local left = redis.call("HINCRBY", KEYS[1], current, -1)
  if left <= 0 then redis.call("HDEL", KEYS[1], current) end
  return {1, 0, 0}
end
local fields = redis.call("HGETALL", KEYS[1])
local used, oldest = 0, current
for i = 1, #fields, 2 do
  local start = tonumber(fields[i])
  if start + window <= now then
    redis.call("HDEL", KEYS[1], fields[i])
  else
    used = used + tonumber(fields[i + 1])
    oldest = math.min(oldest, start)
  end
end
if used >= limit then return {0, used, oldest + window} end
redis.call("HINCRBY", KEYS[1], current, 1)
redis.call("PEXPIRE", KEYS[1], window + slice)
return {1, used + 1, 0}
