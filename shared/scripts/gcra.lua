-- gcra: one request against a per-client GCRA limit (generic cell rate algorithm).
-- One key per client holds its theoretical arrival time (TAT); the key expires once the
-- client is fully replenished, so idle clients cost no memory.
--
-- key limit: key          rg:iplimit:<client>     (string: TAT in ms)
-- arg interval_ms: ms between requests at the sustained rate (60000 / per-minute)
-- arg burst: requests that may arrive at once (>= 1)
--
-- Returns {allowed, retry_after_ms}:
--   {1, 0}  - allowed; the TAT moved one interval forward
--   {0, ms} - limited; nothing written, ms until a request would be allowed
-- The clock is the server's (TIME), so admission replicas with skewed clocks share one limit.
-- @request
local tolerance = interval_ms * (burst - 1)
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tat = tonumber(redis.call("GET", limit) or "0")
if tat < now then tat = now end
local early = tat - now - tolerance
if early > 0 then return {0, math.ceil(early)} end
local new_tat = tat + interval_ms
redis.call("SET", limit, new_tat, "PX", math.ceil(new_tat - now))
return {1, 0}
