-- lease: take or renew a single-holder lease (one active poller among replicas, so the
-- provider sees one polling budget, not one per pod; one driver of a progressive switch).
--
-- key lease: key (a global key, used on its own)
-- arg holder: name
-- arg lease_ms
-- arg release: give it up
-- Returns 1 while holder holds the lease, else 0.
-- @request
local current = redis.call("GET", lease)
if release then
  if current == holder then redis.call("DEL", lease) end
  return 0
end
if current and current ~= holder then return 0 end
redis.call("SET", lease, holder, "PX", lease_ms)
return 1
