-- close_observation: end the observation window of accepted operations that saw no
-- definitive delivery event in time. Delivery stays what it is ("unknown", or "deferred"):
-- never a fabricated success or failure, and never a reason to send again.
-- The caller read candidate ids with ZRANGE BYSCORE; each is re-checked here, so a racing
-- event (which removes the id) or a second poller never closes one twice.
--
-- key observe: zset
-- key operations...: operation hashes (same order as operation_ids)
-- arg now: ms
-- arg operation_ids...
-- Returns the number of windows closed.
-- @request
local closed = 0
for i, id in ipairs(operation_ids) do
  local op_key = operations[i]
  local score = redis.call("ZSCORE", observe, id)
  if score and tonumber(score) <= now then
    redis.call("ZREM", observe, id)
    if redis.call("EXISTS", op_key) == 1 then
      redis.call("HSETNX", op_key, "observation_closed_at", now)
      closed = closed + 1
    end
  end
end
return closed
