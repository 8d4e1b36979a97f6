/*
 * Redisson compatibility of the fair lock: an rlock client and a Redisson client contending on
 * one fair lock must exclude each other and hand the lock to each other's waiters.
 *
 * The "Redisson peer" is a raw hiredis client speaking RFairLock's protocol as
 * redisson-protocol.md §2.2 describes it (scripts written here from that description): the
 * purge of dead heads on the client's clock, the grant that ZINCRBYs every remaining waiter by
 * -wait, the enqueue whose deadline is the predecessor's deadline + wait, the unlock that
 * publishes "0" on redisson_lock__channel:{name}:<first waiter>, and acquireFailed.
 * The tests check: rlock's release wakes a queued Redisson waiter on its own channel, Redisson's
 * release wakes a queued rlock waiter, both clients respect each other's queue, and a mixed
 * crowd keeps mutual exclusion (order is not asserted there: see lock_fair.c for where mixed
 * queues lose strict order).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include <cmocka.h>

#include "fair_common.h"
#include "tc_thread.h"

#define WAIT_MS 300000 /* Redisson's fairLockWaitTimeout default */

static const char *const peer_acquire =
    "while true do local h = redis.call('lindex', KEYS[2], 0); if h == false then break end; "
    "local s = redis.call('zscore', KEYS[3], h); "
    "if s ~= false and tonumber(s) <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], h); "
    "redis.call('lpop', KEYS[2]); else break end; end; "
    "if (redis.call('exists', KEYS[1]) == 0) and ((redis.call('exists', KEYS[2]) == 0) or "
    "(redis.call('lindex', KEYS[2], 0) == ARGV[2])) then redis.call('lpop', KEYS[2]); "
    "redis.call('zrem', KEYS[3], ARGV[2]); local ks = redis.call('zrange', KEYS[3], 0, -1); "
    "for i = 1, #ks do redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), ks[i]) end; "
    "redis.call('hset', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; "
    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; "
    "if redis.call('zscore', KEYS[3], ARGV[2]) ~= false then "
    "return math.max(0, redis.call('pttl', KEYS[1])); end; "
    "local last = redis.call('lindex', KEYS[2], -1); local ttl; "
    "if last ~= false and last ~= ARGV[2] and redis.call('zscore', KEYS[3], last) ~= false then "
    "ttl = tonumber(redis.call('zscore', KEYS[3], last)) - tonumber(ARGV[4]); "
    "else ttl = redis.call('pttl', KEYS[1]); end; "
    "local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]); "
    "if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then "
    "redis.call('rpush', KEYS[2], ARGV[2]); end; return ttl;";

static const char *const peer_release =
    "while true do local h = redis.call('lindex', KEYS[2], 0); if h == false then break end; "
    "local s = redis.call('zscore', KEYS[3], h); "
    "if s ~= false and tonumber(s) <= tonumber(ARGV[4]) then redis.call('zrem', KEYS[3], h); "
    "redis.call('lpop', KEYS[2]); else break end; end; "
    "if redis.call('exists', KEYS[1]) == 0 then local h = redis.call('lindex', KEYS[2], 0); "
    "if h ~= false then redis.call('publish', KEYS[4] .. ':' .. h, ARGV[1]); end; return 1; end; "
    "if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil; end; "
    "local c = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if c > 0 then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; end; "
    "redis.call('del', KEYS[1]); local h = redis.call('lindex', KEYS[2], 0); "
    "if h ~= false then redis.call('publish', KEYS[4] .. ':' .. h, ARGV[1]); end; return 1;";

static const char *const peer_acquire_failed =
    "local q = redis.call('lrange', KEYS[1], 0, -1); local pos = -1; "
    "for i = 1, #q do if q[i] == ARGV[1] then pos = i; break; end; end; "
    "if pos >= 0 then for i = pos + 1, #q do "
    "redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), q[i]) end; end; "
    "redis.call('zrem', KEYS[2], ARGV[1]); redis.call('lrem', KEYS[1], 0, ARGV[1]);";

static rh_server *g_srv;

static int64_t wall_ms(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* A Redisson peer thread's state: one command connection and one subscriber connection. */
typedef struct peer {
    const char *name;
    char owner[64];
    redisContext *cmd;
    redisContext *sub;
} peer;

static int peer_open(peer *p, const char *name, int id)
{
    p->name = name;
    snprintf(p->owner, sizeof(p->owner), "6f1c2b1e-0000-4000-8000-00000000beef:%d", id);
    p->cmd = redisConnect("127.0.0.1", rh_port(g_srv));
    p->sub = redisConnect("127.0.0.1", rh_port(g_srv));
    if (p->cmd == NULL || p->cmd->err || p->sub == NULL || p->sub->err) {
        return -1;
    }
    redisReply *r =
        redisCommand(p->sub, "SUBSCRIBE redisson_lock__channel:{%s}:%s", name, p->owner);
    if (r == NULL) {
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

static void peer_close(peer *p)
{
    redisFree(p->cmd);
    redisFree(p->sub);
}

/* A peer script's reply, freed: -3 for nil, the integer, or -100 for anything else. */
static long long peer_reply(redisReply *r)
{
    long long v = -100;
    if (r != NULL) {
        v = r->type == REDIS_REPLY_NIL ? -3 : r->type == REDIS_REPLY_INTEGER ? r->integer : -100;
        freeReplyObject(r);
    }
    return v;
}

/* Redisson's tryAcquire: -3 when acquired (nil), else the ttl it answered (it may enqueue). */
static long long peer_try(peer *p, long long lease)
{
    redisReply *r = redisCommand(p->cmd,
                                 "EVAL %s 3 %s redisson_lock_queue:{%s} redisson_lock_timeout:{%s}"
                                 " %lld %s %d %lld",
                                 peer_acquire, p->name, p->name, p->name, lease, p->owner, WAIT_MS,
                                 (long long)wall_ms());
    return peer_reply(r);
}

static long long peer_unlock(peer *p)
{
    redisReply *r = redisCommand(p->cmd,
                                 "EVAL %s 4 %s redisson_lock_queue:{%s} redisson_lock_timeout:{%s}"
                                 " redisson_lock__channel:{%s} 0 30000 %s %lld",
                                 peer_release, p->name, p->name, p->name, p->name, p->owner,
                                 (long long)wall_ms());
    return peer_reply(r);
}

static void peer_give_up(peer *p)
{
    redisReply *r = redisCommand(p->cmd,
                                 "EVAL %s 2 redisson_lock_queue:{%s} "
                                 "redisson_lock_timeout:{%s} %s %d",
                                 peer_acquire_failed, p->name, p->name, p->owner, WAIT_MS);
    if (r != NULL) {
        freeReplyObject(r);
    }
}

/* Waits up to ms for a message on the peer's own channel: 1 received, 0 timed out. */
static int peer_wait(peer *p, int64_t ms)
{
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    redisSetTimeout(p->sub, tv);
    redisReply *r = NULL;
    if (redisGetReply(p->sub, (void **)&r) != REDIS_OK) {
        /* A timeout leaves the context unusable: reconnect and subscribe again. */
        redisFree(p->sub);
        p->sub = redisConnect("127.0.0.1", rh_port(g_srv));
        redisReply *s =
            redisCommand(p->sub, "SUBSCRIBE redisson_lock__channel:{%s}:%s", p->name, p->owner);
        if (s != NULL) {
            freeReplyObject(s);
        }
        return 0;
    }
    freeReplyObject(r);
    return 1;
}

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    g_srv = rh_start(NULL);
    return g_srv ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    rh_free(g_srv);
    return 0;
}

static int lock_watchdog(void *lock)
{
    return rlock_lock(lock, -1);
}

/* rlock holds; a Redisson waiter queues (Redisson's enqueue); rlock's release publishes on that
 * waiter's own channel, and its next attempt acquires. Then the other way round. */
static void test_handoff_both_ways(void **state)
{
    (void)state;
    const char *name = "fair:compat";
    rlock_client *c = fc_client(g_srv, 0);
    assert_non_null(c);
    rlock *l = rlock_open(c, RLOCK_FAIR, name);
    peer p;
    assert_int_equal(peer_open(&p, name, 1), 0);

    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    long long ttl = peer_try(&p, 30000);
    assert_true(ttl > 0);
    assert_int_equal(fc_in_queue(g_srv, name, p.owner), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(peer_wait(&p, 2000), 1);
    assert_int_equal(peer_try(&p, 30000), -3);
    assert_int_equal(fc_llen(g_srv, name), 0);
    assert_int_equal(rlock_try_lock(l, 0, -1), RLOCK_ETIMEDOUT);

    /* Redisson holds with a 30 s lease; an rlock waiter is woken by Redisson's release on its own
     * channel, long before the lease would run out. */
    tc_bg w;
    tc_bg_start(&w, lock_watchdog, l);
    assert_int_equal(fc_wait_llen(g_srv, name, 1, 5000), 0);
    int64_t released = rh_now_ms();
    assert_int_equal(peer_unlock(&p), 1);
    assert_int_equal(tc_bg_join(&w), RLOCK_OK);
    print_message("rlock waiter got the lock %lld ms after Redisson's release\n",
                  (long long)(w.done_at - released));
    assert_true(w.done_at - released < 1000);
    /* The rlock holder's hash field is what Redisson checks: Redisson cannot take it... */
    assert_true(peer_try(&p, 30000) > 0);
    /* ...and gives up as Redisson does (acquireFailed), leaving the queue empty. */
    peer_give_up(&p);
    FC_ASSERT_NO_WAITERS(g_srv, name);
    assert_int_equal(rlock_force_unlock(l), 1);
    peer_close(&p);
    rlock_free(l);
    rlock_client_free(c);
}

/* ---- mixed crowd -------------------------------------------------------------------------- */

#define FLAG       "fair:compat:flag"
#define COUNTER    "fair:compat:counter"
#define PER_THREAD 30

static atomic_int g_violations;

/* The independent checker: SET NX flag (fails if anyone else is inside), GET/SET counter. */
static int critical_section(redisContext *ctx)
{
    const char *setnx[] = {"SET", FLAG, "1", "NX"};
    redisReply *r = redisCommandArgv(ctx, 4, setnx, NULL);
    if (r == NULL) {
        return -1;
    }
    if (r->type != REDIS_REPLY_STATUS) {
        atomic_fetch_add(&g_violations, 1);
    }
    freeReplyObject(r);
    const char *get[] = {"GET", COUNTER};
    long long v = tc_int(ctx, 2, get);
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", v + 1);
    const char *set[] = {"SET", COUNTER, buf};
    r = redisCommandArgv(ctx, 3, set, NULL);
    if (r == NULL) {
        return -1;
    }
    freeReplyObject(r);
    const char *del[] = {"DEL", FLAG};
    return tc_int(ctx, 2, del) < 0 ? -1 : 0;
}

typedef struct crowd {
    rlock *l; /* NULL: a Redisson peer */
    int id;
    int errors;
} crowd;

static void *rlock_member(void *arg)
{
    crowd *m = arg;
    redisContext *ctx = redisConnect("127.0.0.1", rh_port(g_srv));
    for (int i = 0; i < PER_THREAD; i++) {
        if (rlock_lock(m->l, 10000) != RLOCK_OK) {
            m->errors++;
            continue;
        }
        m->errors += critical_section(ctx) != 0;
        m->errors += rlock_unlock(m->l) != RLOCK_OK;
    }
    redisFree(ctx);
    return NULL;
}

/* Redisson's lock(): try; when busy wait on its own channel up to the ttl (at most 100 ms here,
 * since Redisson's deadline arithmetic may answer a long turn estimate), then try again. */
static void *peer_member(void *arg)
{
    crowd *m = arg;
    peer p;
    if (peer_open(&p, "fair:compat:crowd", m->id) != 0) {
        m->errors++;
        return NULL;
    }
    for (int i = 0; i < PER_THREAD; i++) {
        long long ttl;
        int64_t give_up = rh_now_ms() + 30000;
        while ((ttl = peer_try(&p, 10000)) != -3 && rh_now_ms() < give_up) {
            peer_wait(&p, ttl > 0 && ttl < 100 ? ttl : 100);
        }
        if (ttl != -3) {
            m->errors++;
            continue;
        }
        m->errors += critical_section(p.cmd) != 0;
        m->errors += peer_unlock(&p) != 1;
    }
    peer_close(&p);
    return NULL;
}

static void test_mixed_crowd_mutual_exclusion(void **state)
{
    (void)state;
    enum { RL = 3, PEERS = 2 };
    rlock_client *c = fc_client(g_srv, 0);
    assert_non_null(c);
    rlock *l = rlock_open(c, RLOCK_FAIR, "fair:compat:crowd");
    crowd m[RL + PEERS];
    pthread_t t[RL + PEERS];
    atomic_store(&g_violations, 0);
    for (int i = 0; i < RL + PEERS; i++) {
        m[i] = (crowd){i < RL ? l : NULL, i + 10, 0};
        assert_int_equal(pthread_create(&t[i], NULL, i < RL ? rlock_member : peer_member, &m[i]),
                         0);
    }
    int errors = 0;
    for (int i = 0; i < RL + PEERS; i++) {
        pthread_join(t[i], NULL);
        errors += m[i].errors;
    }
    const char *get[] = {"GET", COUNTER, NULL};
    long long counter = rh_cmd_int(g_srv, get);
    print_message("3 rlock threads + 2 Redisson peers: counter %lld of %d, violations %d, "
                  "errors %d\n",
                  counter, (RL + PEERS) * PER_THREAD, atomic_load(&g_violations), errors);
    assert_int_equal(errors, 0);
    assert_int_equal(atomic_load(&g_violations), 0);
    assert_int_equal(counter, (RL + PEERS) * PER_THREAD);
    rlock_free(l);
    rlock_client_free(c);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_handoff_both_ways),
        cmocka_unit_test(test_mixed_crowd_mutual_exclusion))
