-- Takes a lease of a leased limit's window (rate-limit-leases.ts, RedisLeaseStore).
--
-- KEYS[1]  the key's hash: `w` the window, `n` its count (granted tokens + reported refusals),
--          `p` the previous window's final count (late refusal reports land there)
-- ARGV[1]  the window's length in ms
-- ARGV[2]  the limit per window
-- ARGV[3]  the tokens wanted (0: only report refusals)
-- ARGV[4]  the window of the refusals reported (-1 for none)
-- ARGV[5]  the refusals reported
--
-- The window comes from Redis's clock (TIME), so every replica agrees on it whatever its own
-- clock says. Adds the refusals (if their window is the current or the previous one), grants up
-- to the tokens wanted while the window's count is below the limit, and counts what it granted.
-- Answers {granted, window, ms left in the window, count}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local windowMs = tonumber(ARGV[1])
local window = math.floor(now / windowMs)
local left = windowMs - (now % windowMs)
local v = redis.call('HMGET', KEYS[1], 'w', 'n', 'p')
local w = tonumber(v[1]) or -1
local n, p = 0, 0
if w == window then
  n = tonumber(v[2]) or 0
  p = tonumber(v[3]) or 0
elseif w == window - 1 then
  p = tonumber(v[2]) or 0
end
local rc = tonumber(ARGV[5])
if rc > 0 then
  local rw = tonumber(ARGV[4])
  if rw == window then n = n + rc elseif rw == window - 1 then p = p + rc end
end
local limit = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local granted = 0
if want > 0 and n < limit then granted = math.min(want, limit - n) end
n = n + granted
redis.call('HSET', KEYS[1], 'w', window, 'n', n, 'p', p)
redis.call('PEXPIRE', KEYS[1], 2 * windowMs)
return {granted, window, left, n}
