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
--
-- A fixed number of Redis calls per script run, whatever the batch size: the decisions are
-- made in Lua on what ZMSCORE said, then one ZADD adds the granted leases (Redis ≥ 6.2).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local key = KEYS[1]
local cap = tonumber(ARGV[1])

redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local used = redis.call('ZCARD', key)
local n = (#ARGV - 1) / 2
if n < 1 then return {} end
local jtis = {}
for k = 1, n do jtis[k] = ARGV[2 * k] end
-- Which leases are held already (a retry), in one call: false where not.
local held = redis.call('ZMSCORE', key, unpack(jtis))
local added = {}
local members = {}
local out = {}
local latest = nil
for k = 1, n do
  local jti = jtis[k]
  if held[k] or added[jti] then
    -- The same lease asked again (a retry, or twice in this batch): it holds its slot, counted once.
    out[#out + 1] = 1
  elseif used >= cap then
    out[#out + 1] = 0
  else
    local expiry = now + tonumber(ARGV[2 * k + 1])
    added[jti] = true
    members[#members + 1] = expiry
    members[#members + 1] = jti
    used = used + 1
    if latest == nil or expiry > latest then latest = expiry end
    out[#out + 1] = 1
  end
  out[#out + 1] = used
end
if latest ~= nil then
  -- Every granted new lease in one call; NX as a guard (none of them is held).
  redis.call('ZADD', key, 'NX', unpack(members))
  -- The key lives exactly as long as its longest lease.
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', key, tonumber(last[2]))
end
return out
