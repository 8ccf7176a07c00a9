-- lease: take or renew a single-holder lease (one active poller among replicas, so the
-- provider sees one polling budget, not one per pod).
--
-- KEYS[1] lease: key (a global key, used on its own)
-- ARGV[1] holder: name
-- ARGV[2] lease_ms
-- ARGV[3] release: "1" to give it up
-- Returns 1 while ARGV[1] holds the lease, else 0.
local holder = redis.call("GET", KEYS[1])
if ARGV[3] == "1" then
  if holder == ARGV[1] then redis.call("DEL", KEYS[1]) end
  return 0
end
if holder and holder ~= ARGV[1] then return 0 end
redis.call("SET", KEYS[1], ARGV[1], "PX", tonumber(ARGV[2]))
return 1
