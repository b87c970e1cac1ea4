-- Renews one lease of a tenant's slot set (a live relay session's, at each revalidation): its
-- expiry becomes now + ttl, adding it when the set no longer holds it (it lapsed, or Redis lost
-- the set), whatever the cap: a session already admitted is never refused for the cap.
--
-- KEYS[1]  the tenant's slot ZSET (member = lease id, score = expiry in ms)
-- ARGV[1]  the lease's lifetime in ms
-- ARGV[2]  the lease id
--
-- Time comes from the Redis server (TIME), as in reserve-slots-2.lua. The marker is left alone:
-- a set whose marker is missing is rebuilt from the ledger by the next reservation, with NX, so
-- this lease keeps its expiry. Returns the new expiry (ms).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = now + tonumber(ARGV[1])
redis.call('ZADD', KEYS[1], expiry, ARGV[2])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], tonumber(last[2]))
return expiry
