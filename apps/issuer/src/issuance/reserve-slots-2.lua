-- Reserves concurrent-connection slots of one tenant, atomically: a batch of leases, decided
-- in order, exactly as if each had been reserved by a call of its own.
--
-- KEYS[1]      the tenant's slot ZSET (member = credential jti, score = expiry in ms)
-- KEYS[2]      the tenant's marker: the cap up to which the ZSET is known complete
--              ('all', or N when a rebuild read the N longest-lived credentials); missing when
--              Redis may have lost the ZSET (restart, failover, flush)
-- ARGV[1]      the cap (the plan's max concurrent connections)
-- ARGV[2]      '' for no seed; else what the seed below covers ('all', or N = the cap it was
--              read with when it came back full)
-- ARGV[3]      S, the number of seed leases
-- ARGV[4..]    S seed leases (jti, expiry in epoch ms): the tenant's live, unrevoked
--              credentials as PostgreSQL holds them, longest-lived first
-- then         per lease to decide: jti (the lease id), lifetime in ms (its credential's ttl)
--
-- Unless the marker covers the cap, nothing is decided: without a seed the script answers
-- { 0 } (rebuild needed: the caller reads PostgreSQL and calls again with the seed); with one it
-- adds the seed's leases that have not expired (those held already keep their expiry), sets the
-- marker and goes on. A seed that arrives after another caller's seed set the marker is ignored.
-- N longest-lived credentials decide exactly like all of them for any cap ≤ N (those still live
-- at any later instant are a suffix by expiry of both), so a seed read with limit = cap covers
-- that cap; a larger cap later asks for a fresh seed.
--
-- Time comes from the Redis server (TIME), never from a client, so replicas with skewed
-- clocks still agree on what has expired. Expired leases are pruned here: a slot frees
-- itself when its credential expires, with no job involved.
--
-- Returns { 1, granted_1 (1|0), in_use_1, granted_2, in_use_2, … }: per lease, whether it holds
-- a slot and how many slots the tenant held right after it was decided; or { 0 }.
--
-- A fixed number of Redis calls per script run, whatever the batch size: the decisions are
-- made in Lua on what ZMSCORE said, then one ZADD adds the granted leases (Redis ≥ 6.2). A seed
-- adds one ZADD per 1000 leases (unpack's stack limit).
local key = KEYS[1]
local marker = KEYS[2]
local cap = tonumber(ARGV[1])
local coverage = ARGV[2]
local seeds = tonumber(ARGV[3])
local first = 4 + 2 * seeds
-- The marker outlives the longest lease by a day: a tenant active within a day needs no
-- rebuild, and an idle one costs one small read of PostgreSQL when it comes back.
local MARKER_GRACE_MS = 86400000
local SEED_CHUNK = 1000

-- Whether a marker (or a seed) of this value makes the set exact for decisions at `cap`.
local function covers(value)
  if value == 'all' then return true end
  local limit = tonumber(value)
  return limit ~= nil and limit >= cap
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)

local changed = false
if not covers(redis.call('GET', marker)) then
  if not covers(coverage) then return { 0 } end
  local members = {}
  for k = 0, seeds - 1 do
    local expiry = tonumber(ARGV[5 + 2 * k])
    if expiry > now then
      members[#members + 1] = expiry
      members[#members + 1] = ARGV[4 + 2 * k]
    end
    if #members >= 2 * SEED_CHUNK or (k == seeds - 1 and #members > 0) then
      redis.call('ZADD', key, 'NX', unpack(members))
      members = {}
    end
  end
  redis.call('SET', marker, coverage)
  changed = true
end

local used = redis.call('ZCARD', key)
local n = (#ARGV - first + 1) / 2
local out = { 1 }
if n >= 1 then
  local jtis = {}
  for k = 1, n do jtis[k] = ARGV[first + 2 * (k - 1)] end
  -- Which leases are held already (a retry, a confirmation), in one call: false where not.
  local held = redis.call('ZMSCORE', key, unpack(jtis))
  local added = {}
  local members = {}
  for k = 1, n do
    local jti = jtis[k]
    if held[k] or added[jti] then
      -- The same lease asked again (a retry, or twice in this batch): it holds its slot, counted once.
      out[#out + 1] = 1
    elseif used >= cap then
      out[#out + 1] = 0
    else
      added[jti] = true
      members[#members + 1] = now + tonumber(ARGV[first + 2 * (k - 1) + 1])
      members[#members + 1] = jti
      used = used + 1
      out[#out + 1] = 1
    end
    out[#out + 1] = used
  end
  if #members > 0 then
    -- Every granted new lease in one call; NX as a guard (none of them is held).
    redis.call('ZADD', key, 'NX', unpack(members))
    changed = true
  end
end

if changed then
  -- The set lives exactly as long as its longest lease, the marker a grace period longer: the
  -- leases a marker vouches for never outlive it.
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local until_ms = now
  if last[2] then
    until_ms = tonumber(last[2])
    redis.call('PEXPIREAT', key, until_ms)
  end
  redis.call('PEXPIREAT', marker, until_ms + MARKER_GRACE_MS)
end
return out
