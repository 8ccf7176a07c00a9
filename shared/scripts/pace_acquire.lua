-- pace_acquire: reserve send slots from the provider-wide schedule every sender shares.
--
-- A GCRA schedule (generic cell rate algorithm): `tat` is the time of the next free slot,
-- slots are 1/rate apart, and up to `burst` of them may lie in the past, so a fresh key
-- (or a pause) starts with a full bucket and the provider's initial burst is used. One
-- call reserves every slot due within the horizon (up to `want`); the caller waits for
-- each slot locally, so a send costs a fraction of a round trip.
-- The rate climbs with the time since the last cut (pace_feedback): additively at first,
-- then, once the provider has stayed quiet, with a probe that speeds up; never above the
-- ceiling, nor above an X-RateLimit hint while it lasts.
--
-- Below `slot_rate` the climb above the settled rate runs per slot, not per second (a
-- provider at 1/s is probed 100 times slower than one at 100/s: the same number of sends
-- between probes, so the same few 429s per send); back up to the settled rate (`good`, the
-- rate the last measured cut landed on) it climbs at full speed once a send is accepted
-- again, as after a blackout.
-- A fresh schedule starts with one slot, not a burst, at `start_rate`, doubled for every
-- send accepted until the first 429 (a slow start: the provider's rate is unknown, and a
-- ceiling nobody tuned, 50/s into a provider that takes 1/s, was seven 429s before the
-- first answer came back).
-- After 429s that stated no wait, the first send accepted again starts the same slow start
-- (`start_rate`, doubled per send accepted since the last cut), up to the settled rate, or
-- the ceiling when none was measured: the floor holds only while every probe is refused.
-- Slots already promised at a slower rate are pulled in when the rate rises (`tat` was one
-- slot of the old rate after the last slot given): at the floor that slot was 20 s away.
--
-- key pacing: hash   rg:{provider:<name>}:pacing
--   base, cut_at (ms): the rate set by the last cut and when; tat (ms); rate (last given);
--   blocked_until (ms); hint, hint_until (ms): a cap from X-RateLimit-Remaining / -Reset;
--   good: the settled rate; since (ms), accepted, refused: sends accepted and refused
--   since the last cut (pace_feedback measures the provider's rate from them); peak: the
--   rate a cut after a calm spell returns to (0: none); calm_at (ms), calm_accepted: when
--   the rate settled after the last cut (recover_ms after it) and `accepted` then
-- arg now: ms
-- arg ceiling: sends/s
-- arg burst: slots
-- arg want: slots
-- arg horizon_ms
-- arg growth: share of base per s
-- arg quiet_ms: before probing
-- arg probe: share of base per s^2
-- arg accepted: sends this replica saw accepted since it last reported
-- arg slot_rate: sends/s below which the climb runs per slot
-- arg start_rate: sends/s of a fresh schedule, before any send was accepted (0: the
--   ceiling at once)
-- arg recover_ms: how long the way back to `peak` takes (none below slot_rate)
--
-- Returns {count, first (µs), rate*1000, blocked_until (ms), wait (ms), starting (1|0)}:
--   count >= 1: slots at first, first + 1/rate, ... (times before now mean "now");
--   count = 0: no slot within the horizon, ask again in wait ms (then half a horizon is free);
--   starting = 1: a fresh schedule's slow start is under way: ask again as soon as a send
--   is accepted.
-- @request
local f = redis.call("HMGET", pacing, "base", "cut_at", "tat", "blocked_until", "hint",
  "hint_until", "good", "accepted", "rate", "peak", "calm_at")
local base, cut = tonumber(f[1] or ceiling), tonumber(f[2] or "0")
local tat, blocked = tonumber(f[3] or now), tonumber(f[4] or "0")
if not f[3] then redis.call("HSET", pacing, "since", now) end
if accepted > 0 then
  redis.call("HINCRBY", pacing, "accepted", accepted)
  -- every send accepted since the store began, for on-call's charts (chart_sample.lua)
  redis.call("HINCRBY", pacing, "accepted_total", accepted)
  redis.call("HDEL", pacing, "refusing_since")
end
local cap = ceiling
if f[5] and tonumber(f[6]) > now then cap = math.min(cap, tonumber(f[5])) end

local quiet = quiet_ms / 1000
local function climb(seconds)
  local q = math.max(0, seconds - quiet)
  return growth * seconds + probe * q * q
end
local good, since_cut = tonumber(f[7] or "0"), math.max(0, now - cut) / 1000
local taken = tonumber(f[8] or "0") + accepted
-- Once the rate is settled after a cut (recover_ms on), what the provider accepts from then
-- on is its rate as near as we can tell: pace_feedback's next calm cut returns to it.
if cut > 0 and recover_ms > 0 and since_cut * 1000 >= recover_ms and not f[11] then
  redis.call("HSET", pacing, "calm_at", now, "calm_accepted", taken)
end
local scale = math.min(1, math.max(good, base) / slot_rate)
local rate = base * (1 + climb(since_cut * scale))
-- After a cut near the provider's rate that followed a calm spell (`peak`: what the
-- provider took, at most the rate cut from), back to it within recover_ms, fast at first and flat as it nears it (as TCP's
-- CUBIC does), then the climb and probe beyond it. Not below slot_rate: a provider at
-- 1/s with a burst of 1 refuses every send above its rate, and there the climb stays per
-- slot.
local peak = tonumber(f[10] or "0")
if peak > base and recover_ms > 0 and scale >= 1 then
  local back = recover_ms / 1000
  if since_cut < back then
    rate = math.max(rate, peak - (peak - base) * (1 - since_cut / back) ^ 3)
  else
    rate = math.max(rate, peak * (1 + climb(since_cut - back)))
  end
end
-- Back to the settled rate at full speed once a send got through since the last cut (the
-- provider is taking sends again); while none has, a probe per slot at the cut rate.
if good > rate and taken > 0 then rate = math.min(good, base * (1 + climb(since_cut))) end
local starting = false  -- a fresh schedule's slow start, clocked by answers (below)
if cut == 0 and start_rate > 0 then
  rate = start_rate * 2 ^ math.min(taken, 64)
  starting = rate < cap
elseif taken > 0 and start_rate > 0 then
  -- Accepted again after a cut: a slow start back to the settled rate (or, with none
  -- measured, the ceiling), never below where the climb already is. Clocked by the rate,
  -- not by answers (as a fresh one is, below): this one follows an outage, or a cut that
  -- came before an accepted send was reported (under load), and clocked by answers it
  -- carried the rate to the untuned ceiling within a few answers, into more 429s.
  local target = good > 0 and good or cap
  rate = math.max(rate, math.min(target, start_rate * 2 ^ math.min(taken - 1, 64)))
end
rate = math.min(cap, rate)
local spacing = 1000 / rate
local given = tonumber(f[9] or "0")
if starting and accepted > 0 then
  -- The slow start is clocked by answers, as TCP's is by acks: a send accepted frees the
  -- next slot now, not one slot of the doubled rate after the last (at 5/s that slot was
  -- 200 ms away, and the climb to 200/s took 0.3 s of a 50 s storm).
  tat = math.min(tat, now)
elseif given > 0 and rate > given and tat > now then
  tat = math.max(now, tat - 1000 / given + spacing)
end

local start = math.max(tat, now - (burst - 1) * spacing, blocked)
if start >= now + horizon_ms then
  redis.call("HSET", pacing, "rate", rate, "tat", tat)
  -- Come back when half a horizon of slots is free, not one: fewer, fuller round trips.
  return {0, 0, math.floor(rate * 1000), blocked,
    math.max(1, math.ceil(start - horizon_ms / 2 - now)), starting and 1 or 0}
end
local count = math.min(want, math.floor((now + horizon_ms - start) / spacing) + 1)
redis.call("HSET", pacing, "rate", rate, "tat", start + count * spacing)
return {count, math.floor(start * 1000), math.floor(rate * 1000), blocked, 0,
  starting and 1 or 0}
