-- inc/fair_purge.lua: spliced by cmake/rlock_embed_lua.cmake into the fair scripts that say
-- "--@include inc/fair_purge.lua" (Redis scripts cannot call each other); the embedded bytes and
-- SHA1 are those of the expanded script.
-- fair_purge(queue, zset, now, head): drops the dead heads of a fair lock's waiter queue, those
-- whose deadline in the zset has passed on the server's clock (now, in ms) or who have none, from
-- the list and the zset; head is the queue's current first entry (LINDEX 0, or nil). Returns the
-- first live waiter, or nil if none is left. Each dead waiter is dropped once.
local function fair_purge(queue, zset, now, head)
    while head do
        local s = redis.call('zscore', zset, head)
        if s and tonumber(s) > now then
            return head
        end
        redis.call('zrem', zset, head)
        redis.call('lpop', queue)
        head = redis.call('lindex', queue, 0)
    end
    return nil
end
