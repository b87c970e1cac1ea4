-- Reserves one concurrent-connection slot of a tenant, atomically.
--
-- KEYS[1]  the tenant's slot ZSET (member = credential jti, score = expiry in ms)
-- ARGV[1]  jti (the lease id)
-- ARGV[2]  lease lifetime in ms (the credential's ttl)
-- ARGV[3]  the cap (the plan's max concurrent connections)
--
-- Time comes from the Redis server (TIME), never from a client, so replicas with skewed
-- clocks still agree on what has expired. Expired leases are pruned here: a slot frees
-- itself when its credential expires, with no job involved.
--
-- Returns { granted (1|0), slots in use after the call }.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local key = KEYS[1]
local jti = ARGV[1]
local ttl = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])

redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if redis.call('ZSCORE', key, jti) then
  -- The same lease asked twice (a retry): already counted, never counted twice.
  return { 1, redis.call('ZCARD', key) }
end
local used = redis.call('ZCARD', key)
if used >= cap then
  return { 0, used }
end
local expiry = now + ttl
redis.call('ZADD', key, expiry, jti)
-- The key lives exactly as long as its longest lease.
local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', key, tonumber(last[2]))
return { 1, used + 1 }
