-- progressive_request: record a progressive provider switch (shared/progressive.py) unless
-- one is under way, so two people asking at once start one switch.
--
-- key progressive: hash rg:progressive (field plan: the switch's JSON record; field stop:
--   a person's request to stop it)
-- arg plan: the new switch's JSON record
-- arg ended: the phases that end a switch, each between commas (",done,stopped,")
-- Returns 1 when recorded (and any stop request of the last one forgotten), 0 when the
-- switch on record has not ended (nothing written).
-- @request
local current = redis.call("HGET", progressive, "plan")
if current then
  local ok, record = pcall(cjson.decode, current)
  if ok and type(record) == "table" and record.phase
      and not string.find(ended, "," .. tostring(record.phase) .. ",", 1, true) then
    return 0
  end
end
redis.call("HSET", progressive, "plan", plan)
redis.call("HDEL", progressive, "stop")
return 1
