-- close_observation: end the observation window of accepted operations that saw no
-- definitive delivery event in time. Delivery stays what it is ("unknown", or "deferred"):
-- never a fabricated success or failure, and never a reason to send again.
-- The caller read candidate ids with ZRANGE BYSCORE; each is re-checked here (take_due), so
-- a racing event (which removes the id) or a second poller never closes one twice.
--
-- key observe: zset
-- key operations...: operation hashes (same order as operation_ids)
-- arg now: ms
-- arg operation_ids...
-- Returns the number of windows closed.
-- @due
-- @request
local closed = 0
for _, i in ipairs(take_due(observe, operation_ids, now)) do
  if redis.call("EXISTS", operations[i]) == 1 then
    redis.call("HSETNX", operations[i], "observation_closed_at", now)
    closed = closed + 1
  end
end
return closed
