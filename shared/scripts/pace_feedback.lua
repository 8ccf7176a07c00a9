-- pace_feedback: what one provider answer says about the rate every sender shares.
--
-- A 429 cuts the rate (not below the floor) once per congestion event: a 429 for a send
-- whose slot may have been reserved before the last cut (a slot before the cut plus one
-- horizon) says nothing new, so a burst of them costs one cut. How far it cuts is measured:
-- when at least half the answers since the last cut were refusals, the provider is far
-- below our rate and the rate it accepted (accepted / the time since the last cut, at least
-- a second) is where the rate settles, a little under it (within a second of the previous
-- cut no lower than half); when nothing was accepted, half;
-- else by the cut factor. A 429 that advises a wait of whole seconds says one send per wait
-- is what the provider allows now, and settles the rate no higher. Every 429 empties the
-- bucket (no catch-up burst into a provider whose own bucket is empty): the next slot is
-- one slot of the new rate away. A block holds every slot until the advised instant.
-- A hint (X-RateLimit-Remaining over the time to -Reset) caps the rate until that reset.
-- Every 429 is also counted (throttled_total, last_throttled_at) for on-call's views.
--
-- KEYS[1] pacing: hash   rg:{provider:<name>}:pacing   (fields: see pace_acquire)
-- ARGV[1] now: ms
-- ARGV[2] throttled: 1|0
-- ARGV[3] slot_ms: the slot of the send
-- ARGV[4] blocked_until: ms, 0 = no block
-- ARGV[5] floor: sends/s
-- ARGV[6] cut: factor (0..1)
-- ARGV[7] hint: sends/s, 0 = none
-- ARGV[8] hint_until: ms
-- ARGV[9] returned_ms: the span of slots the caller had reserved and now drops; the
--   schedule takes them back
-- ARGV[10] horizon_ms: of a reservation
-- ARGV[11] accepted: sends this replica saw accepted since it last reported
-- ARGV[12] advised_rate: sends/s a whole-seconds wait allows (0 = none)
-- ARGV[13] settle: share of a measured rate the cut lands on (0..1)
-- ARGV[14] empty_cut: factor when nothing was accepted since the last cut (0..1)
--
-- Returns {rate*1000, blocked_until (ms), cut (1|0)}.
local now, slot, advised = tonumber(ARGV[1]), tonumber(ARGV[3]), tonumber(ARGV[4])
local f = redis.call("HMGET", KEYS[1], "rate", "cut_at", "tat", "blocked_until", "since",
  "accepted", "refused")
local rate = tonumber(f[1] or "0")
local cut_at, tat = tonumber(f[2] or "0"), tonumber(f[3] or "0")
local blocked = math.max(tonumber(f[4] or "0"), advised)
local accepted = tonumber(f[6] or "0") + tonumber(ARGV[11])
-- Answers, not slots given: a slot's answer may still be on its way (at 200/s under load
-- a second of them), and accepted sends are reported with the next reservation.
local refused = tonumber(f[7] or "0")
if ARGV[2] == "1" then refused = refused + 1 end
local cut = 0
local returned = tonumber(ARGV[9])
if ARGV[2] == "1" or returned > 0 then tat = math.max(now, tat - returned) end

local function measured(floor)
  local settle = tonumber(ARGV[13])
  local new, good = rate * tonumber(ARGV[6]), nil
  if accepted <= 0 then
    new = rate * tonumber(ARGV[14])
  elseif refused >= accepted then
    local seconds = (now - tonumber(f[5] or now)) / 1000
    new = math.min(new, settle * accepted / math.max(seconds, 1))
    -- Within a second of the last cut a count says little (one send taken in 0.2 s at
    -- 12/s): no more than halve; the first cut of a fresh schedule may go all the way.
    if cut_at > 0 and seconds < 1 then new = math.max(new, rate * tonumber(ARGV[14])) end
  end
  if tonumber(ARGV[12]) > 0 then new = math.min(new, settle * tonumber(ARGV[12])) end
  new = math.max(floor, new)
  if accepted > 0 then good = new end
  return new, good
end

if ARGV[2] == "1" then
  redis.call("HINCRBY", KEYS[1], "throttled_total", 1)
  redis.call("HSET", KEYS[1], "last_throttled_at", now)
  if slot >= cut_at + tonumber(ARGV[10]) and rate > 0 then
    local good
    rate, good = measured(tonumber(ARGV[5]))
    redis.call("HSET", KEYS[1], "base", rate, "cut_at", now, "rate", rate, "since", now,
      "accepted", 0, "refused", 0)
    if good then redis.call("HSET", KEYS[1], "good", good) end
    accepted, refused, cut = 0, 0, 1
  end
  if rate > 0 then tat = math.max(tat, now + 1000 / rate) end
end
if cut == 0 then redis.call("HSET", KEYS[1], "accepted", accepted, "refused", refused) end
redis.call("HSET", KEYS[1], "tat", math.max(tat, blocked), "blocked_until", blocked)
if tonumber(ARGV[7]) > 0 then
  redis.call("HSET", KEYS[1], "hint", ARGV[7], "hint_until", ARGV[8])
end
return {math.floor(rate * 1000), blocked, cut}
