-- rw_is_locked.lua: whether one side of a read-write lock is held (Redisson's isLocked).
-- KEYS[1]  the lock hash (the lock name)
-- ARGV[1]  "read" or "write"
-- Returns 1 or 0. The write side is locked when mode is write. The read side is locked when mode
-- is read, or when the writer also holds read holds (the hash then has more than mode and the
-- write field).
local mode = redis.call('hget', KEYS[1], 'mode')
if ARGV[1] == 'write' then
    if mode == 'write' then
        return 1
    end
    return 0
end
if mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
    return 1
end
return 0
