-- One hit of a fixed-window counter (rate-limit-fixed-window.ts, RedisRateLimiter).
--
-- KEYS[1]  the counter (a string: the hits of the window so far)
-- ARGV[1]  the window's length in ms
--
-- INCR; PEXPIRE on the window's first hit (or when the key somehow lost its TTL).
-- Answers {count, ms until the window ends}.
local count = redis.call('INCR', KEYS[1])
if count == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  return {count, tonumber(ARGV[1])}
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
