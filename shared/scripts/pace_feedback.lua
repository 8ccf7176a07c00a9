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
-- Every 429 is also counted (throttled_total, last_throttled_at) for on-call's views, and
-- every accepted send reported here (accepted_total, as pace_acquire counts it).
--
-- A 429 that states when (`stated`: a reset epoch, an HTTP date, a date in the answer's
-- text, a delay of 2 s or more) is the provider's schedule, not congestion: every slot
-- waits until exactly that instant and the next one goes then (not one slot of a cut rate
-- later), and the rate is not cut (a window's reset is a pause), except to one send per
-- whole-seconds wait (`advised_rate`).
-- A 429 when nothing was accepted since the last cut halves the rate, but the gap between
-- two probes stays under `outage_share` of the time every probe has been refused
-- (`refusing_since`), and at least one second: an outage that ends is found within that
-- share of its length (a probe every 20 s at the floor found a 90 s outage up to 20 s late).
--
-- key pacing: hash   rg:{provider:<name>}:pacing   (fields: see pace_acquire)
-- arg now: ms
-- arg slot_ms: the slot of the send
-- arg throttled: the answer was a 429
-- arg blocked_until: ms, 0 = no block
-- arg hint: sends/s, 0 = none
-- arg hint_until: ms
-- arg returned_ms: the span of slots the caller had reserved and now drops; the
--   schedule takes them back
-- arg advised_rate: sends/s a whole-seconds wait allows (0 = none)
-- arg accepted: sends this replica saw accepted since it last reported
-- arg stated: the 429 stated when sending may resume (blocked_until is that instant)
-- arg floor: sends/s
-- arg cut: factor (0..1)
-- arg horizon_ms: of a reservation
-- arg settle: share of a measured rate the cut lands on (0..1)
-- arg empty_cut: factor when nothing was accepted since the last cut (0..1)
-- arg outage_share: the longest gap between probes, as a share of the time refused
-- arg probe_gap_ms: probes never closer than this while the outage bound applies
-- arg recover_ms: a cut near the provider's rate at least this long after the last one
--   keeps what the provider took (`peak`, at most the rate it cut from), for
--   pace_acquire's way back to it
--
-- Returns {rate*1000, blocked_until (ms), cut (1|0)}.
-- @request
local f = redis.call("HMGET", pacing, "rate", "cut_at", "tat", "blocked_until", "since",
  "accepted", "refused", "refusing_since", "calm_at", "calm_accepted")
local rate = tonumber(f[1] or "0")
local cut_at, tat = tonumber(f[2] or "0"), tonumber(f[3] or "0")
local blocked = math.max(tonumber(f[4] or "0"), blocked_until)
local accepted_since = tonumber(f[6] or "0") + accepted
if accepted_since > 0 then redis.call("HDEL", pacing, "refusing_since") end
if accepted > 0 then redis.call("HINCRBY", pacing, "accepted_total", accepted) end
-- Answers, not slots given: a slot's answer may still be on its way (at 200/s under load
-- a second of them), and accepted sends are reported with the next reservation.
local refused = tonumber(f[7] or "0")
stated = stated and throttled and blocked_until > now
if throttled and not stated then refused = refused + 1 end
local did_cut = 0
if throttled or returned_ms > 0 then tat = math.max(now, tat - returned_ms) end

-- Halve, but probe at least once per outage_share of the time every probe was refused.
local function probing()
  local refusing = tonumber(f[8] or now)
  if not f[8] then redis.call("HSET", pacing, "refusing_since", now) end
  local gap = math.max(probe_gap_ms, outage_share * (now - refusing)) / 1000
  return math.min(rate, math.max(rate * empty_cut, 1 / gap))
end

-- What the provider accepted since the rate settled after the last cut (pace_acquire's
-- calm_at, when that was a second ago or more) or since the cut, whichever is more, and
-- at most the rate cut from: the rate a calm cut returns to. Not the rate cut from: with a
-- bucket 10 deep, a climb of 5 %/s is 7 % over the provider's rate when its 429 comes,
-- and returning there cost a 429 every 1.25 s at a ceiling 1.5 x the provider's rate.
local function took()
  local since = tonumber(f[5] or now)
  local per_s = accepted_since * 1000 / math.max(now - since, recover_ms)
  local calm = tonumber(f[9] or "0")
  if calm > 0 and now - calm >= 1000 then
    per_s = math.max(per_s, (accepted_since - tonumber(f[10] or "0")) * 1000 / (now - calm))
  end
  return math.min(rate, per_s)
end

local function measured()
  local new, good, peak = rate * cut, nil, 0
  local seconds = (now - tonumber(f[5] or now)) / 1000
  if recover_ms > 0 and now - cut_at >= recover_ms then peak = took() end
  if accepted_since <= 0 then
    new, peak = probing(), 0
  elseif refused >= accepted_since then
    peak = 0
    new = math.min(new, settle * accepted_since / math.max(seconds, 1))
    -- Within a second of the last cut a count says little (one send taken in 0.2 s at
    -- 12/s): no more than halve; the first cut of a fresh schedule may go all the way.
    if cut_at > 0 and seconds < 1 then new = math.max(new, rate * empty_cut) end
  end
  if advised_rate > 0 then new, peak = math.min(new, settle * advised_rate), 0 end
  new = math.max(floor, new)
  if accepted_since > 0 then good = new end
  return new, good, peak
end

if throttled then
  redis.call("HINCRBY", pacing, "throttled_total", 1)
  redis.call("HSET", pacing, "last_throttled_at", now)
  if stated and advised_rate <= 0 then
    -- a pause until the stated instant, not a cut
  elseif slot_ms >= cut_at + horizon_ms and rate > 0 then
    local good, peak
    rate, good, peak = measured()
    redis.call("HSET", pacing, "base", rate, "cut_at", now, "rate", rate, "since", now,
      "accepted", 0, "refused", 0, "peak", peak)
    redis.call("HDEL", pacing, "calm_at", "calm_accepted")
    if good then redis.call("HSET", pacing, "good", good) end
    accepted_since, refused, did_cut = 0, 0, 1
  end
  -- The next slot: at the stated instant, else one slot of the (cut) rate away.
  if rate > 0 and not stated then tat = math.max(tat, now + 1000 / rate) end
end
if did_cut == 0 then
  redis.call("HSET", pacing, "accepted", accepted_since, "refused", refused)
end
redis.call("HSET", pacing, "tat", math.max(tat, blocked), "blocked_until", blocked)
if hint > 0 then
  redis.call("HSET", pacing, "hint", hint, "hint_until", hint_until)
end
return {math.floor(rate * 1000), blocked, did_cut}
