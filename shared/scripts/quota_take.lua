-- quota_take: take one send from a provider's quota over a rolling window (SES's daily
-- quota, Max24HourSend over 24 h), or give one back; every sender replica shares it.
-- The window is cut into slices (a field per slice start); slices older than the window
-- are dropped, so the count is the sends of the last window to within one slice.
--
-- key quota: hash   rg:{provider:<name>}:quota   (slice start ms -> sends)
-- arg now: ms (for a give back: when the send was taken)
-- arg window_ms
-- arg slice_ms
-- arg limit: sends per window
-- arg delta: 1 = take one, -1 = give one back (the provider did not take the send),
--   0 = only look (the same work as a take, and nothing counted)
--
-- Returns {taken (1|0), used, reopens_at (ms)}: taken 0 means the quota is used up until
-- reopens_at, when the oldest slice leaves the window; used counts this send when taken
-- (a look answers as a take would have, without counting it).
-- @request
local current = now - now % slice_ms
if delta < 0 then
  local left = redis.call("HINCRBY", quota, current, -1)
  if left <= 0 then redis.call("HDEL", quota, current) end
  return {1, 0, 0}
end
local fields = redis.call("HGETALL", quota)
local used, oldest = 0, current
for i = 1, #fields, 2 do
  local start = tonumber(fields[i])
  if start + window_ms <= now then
    redis.call("HDEL", quota, fields[i])
  else
    used = used + tonumber(fields[i + 1])
    oldest = math.min(oldest, start)
  end
end
if used >= limit then return {0, used, oldest + window_ms} end
if delta == 0 then return {1, used + 1, 0} end
redis.call("HINCRBY", quota, current, 1)
redis.call("PEXPIRE", quota, window_ms + slice_ms)
return {1, used + 1, 0}
