-- Claims the recording of a throttled login refusal (throttled-refusals.ts).
--
-- KEYS[1]  the unrecorded refusals of the throttle key
-- KEYS[2]  this window's "recorded" marker (same hash tag as KEYS[1]: one Cluster slot)
-- ARGV[1]  ms left in the throttle window (the marker's life)
-- ARGV[2]  how long unrecorded refusals wait for the next recorded one (ms)
--
-- Answers the refusals the event to record stands for, or 0 when this window's event is
-- already recorded.
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return n
end
return 0
