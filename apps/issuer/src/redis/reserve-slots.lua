-- Reserves concurrent-connection slots of one tenant, atomically: a batch of leases, decided
-- in order, exactly as if each had been reserved by a call of its own.
--
-- KEYS[1]      the tenant's slot ZSET (member = credential jti, score = expiry in ms)
-- ARGV[1]      the cap (the plan's max concurrent connections)
-- ARGV[2k]     jti of lease k (the lease id)
-- ARGV[2k+1]   lifetime of lease k in ms (its credential's ttl)
--
-- Time comes from the Redis server (TIME), never from a client, so replicas with skewed
-- clocks still agree on what has expired. Expired leases are pruned here: a slot frees
-- itself when its credential expires, with no job involved.
--
-- Returns { granted_1 (1|0), in_use_1, granted_2, in_use_2, … }: per lease, whether it holds
-- a slot and how many slots the tenant held right after it was decided.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local key = KEYS[1]
local cap = tonumber(ARGV[1])

redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local used = redis.call('ZCARD', key)
local out = {}
local latest = nil
for i = 2, #ARGV, 2 do
  local jti = ARGV[i]
  if used < cap then
    -- One call per lease below the cap: NX adds it, or leaves alone the same lease asked
    -- again (a retry), which already holds its slot and is never counted twice.
    local expiry = now + tonumber(ARGV[i + 1])
    if redis.call('ZADD', key, 'NX', expiry, jti) == 1 then
      used = used + 1
      if latest == nil or expiry > latest then latest = expiry end
    end
    out[#out + 1] = 1
  elseif redis.call('ZSCORE', key, jti) then
    -- At the cap, a retry of a lease already held is still granted.
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
  out[#out + 1] = used
end
if latest ~= nil then
  -- The key lives exactly as long as its longest lease.
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', key, tonumber(last[2]))
end
return out
