-- promote_due: move operations whose retry time has come from the due set back to the
-- send stream. The caller read candidate ids with ZRANGE BYSCORE; each is re-checked here,
-- so two promoters racing never enqueue one operation twice. Cost is O(batch), flat in
-- the size of the due set.
--
-- KEYS[1] due: zset
-- KEYS[2] send: send stream
-- KEYS[3..] operations: operation hashes (same order as operation_ids)
-- ARGV[1] now: ms
-- ARGV[2..] operation_ids
-- Returns the number of operations moved to the send stream.
-- @names
local now, moved = tonumber(ARGV[1]), 0
for i = 2, #ARGV do
  local id, key = ARGV[i], KEYS[i + 1]
  local score = redis.call("ZSCORE", KEYS[1], id)
  if score and tonumber(score) <= now then
    redis.call("ZREM", KEYS[1], id)
    if redis.call("HGET", key, "state") == "deferred" then
      redis.call("HSET", key, "state", "queued")
      redis.call("XADD", KEYS[2], "*", JOB_FIELD, id)
      moved = moved + 1
    end
  end
end
return moved
