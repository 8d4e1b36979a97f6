-- sem_renew_leased.lua: the watchdog's batch renewal of leased permits held with lease_ms < 0:
-- each permit's expiry becomes now + lease, if the permit is still held and has not expired.
-- "now" is Redis' clock (TIME), because the watchdog's batch format carries no client time;
-- the holder's and the reclaimer's clocks are assumed close to the server's (as Redisson
-- assumes of its clients).
-- KEYS[1..N]  leased permits zsets {name}:timeout
-- ARGV[1]     lease in ms
-- ARGV[2..N+1] permit id (16 raw bytes) for each key, in order
-- Returns an array of N integers: 1 renewed, 0 the permit is gone or expired.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local result = {}
for i = 1, #KEYS do
    local score = redis.call('zscore', KEYS[i], ARGV[i + 1])
    if score and tonumber(score) > now then
        redis.call('zadd', KEYS[i], 'XX', now + tonumber(ARGV[1]), ARGV[i + 1])
        result[i] = 1
    else
        result[i] = 0
    end
end
return result
