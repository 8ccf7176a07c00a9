-- close_observation: end the observation window of accepted operations that saw no
-- definitive delivery event in time. Delivery stays what it is ("unknown", or "deferred"):
-- never a fabricated success or failure, and never a reason to send again.
-- The caller read candidate ids with ZRANGE BYSCORE; each is re-checked here, so a racing
-- event (which removes the id) or a second poller never closes one twice.
--
-- KEYS[1] observe: zset
-- KEYS[2..] operations: operation hashes (same order as operation_ids)
-- ARGV[1] now: ms
-- ARGV[2..] operation_ids
-- Returns the number of windows closed.
local now, closed = tonumber(ARGV[1]), 0
for i = 2, #ARGV do
  local id, key = ARGV[i], KEYS[i]
  local score = redis.call("ZSCORE", KEYS[1], id)
  if score and tonumber(score) <= now then
    redis.call("ZREM", KEYS[1], id)
    if redis.call("EXISTS", key) == 1 then
      redis.call("HSETNX", key, "observation_closed_at", now)
      closed = closed + 1
    end
  end
end
return closed
