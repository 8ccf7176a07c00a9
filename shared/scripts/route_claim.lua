-- route_claim: claim a contact-form event for routing, so a redelivered event never makes
-- a second support case. The claim is written before the case; the case is marked written
-- after its XADD (a plain HSET), and the stream entry is acked last.
--
-- key seen: hash   rg:router:seen:<event_id>   (case_id, status, claimed_at; has a TTL)
-- arg case_id: to use if this is the first time
-- arg now: ms
-- arg ttl_ms: how long the seen record is kept
-- arg stale_ms: a claim older than this is abandoned and may be taken over
-- Returns {code, case_id, claimed_at}:
--   {"new", case_id, now}          first sight: route it with this case id
--   {"done", case_id, claimed_at}  its case was written already: just ack the entry
--   {"busy", case_id, claimed_at}  another router is routing it right now: leave it pending
--   {"takeover", case_id, claimed_at}  a router died mid-routing; the claim is ours now
--                                  (claimed_at is the old claim's time, for finding a case
--                                  it may have written before dying)
-- @request
local f = redis.call("HMGET", seen, "case_id", "status", "claimed_at")
if not f[1] then
  redis.call("HSET", seen, "case_id", case_id, "status", "claimed", "claimed_at", now)
  redis.call("PEXPIRE", seen, ttl_ms)
  return {"new", case_id, now}
end
local claimed_at = tonumber(f[3] or "0") or 0
if f[2] == "written" then return {"done", f[1], claimed_at} end
if now - claimed_at < stale_ms then return {"busy", f[1], claimed_at} end
redis.call("HSET", seen, "claimed_at", now)
return {"takeover", f[1], claimed_at}
