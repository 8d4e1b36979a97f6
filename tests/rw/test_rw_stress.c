/*
 * Read-write lock invariants under stress (real redis-server): 3 processes, each with 4 reader
 * threads and 1 writer thread, for 20 s (RLOCK_RW_STRESS_MS overrides). An independent checker
 * lives in Redis and is updated inside the critical sections over separate connections:
 *  - readers INCR chk:readers on entry (the value is the number of readers inside, whose maximum
 *    is recorded) and check that the writer flag chk:writer is absent; DECR on exit;
 *  - writers SET chk:writer NX (failure = another writer inside) and check chk:readers == 0, then
 *    do a non-atomic GET/sleep/SET increment of chk:counter (lost updates = broken exclusion);
 *  - one write in four downgrades: takes the read side inside the write lock, releases the write
 *    side and checks as a reader; one read in seven re-enters (which must pass waiting writers).
 * Afterwards: no violation, no unexpected error, chk:counter == number of writes, and readers did
 * overlap (maximum concurrent readers > 1).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <hiredis.h>

#include "rw_util.h"

#define PROCS            3
#define READERS_PER_PROC 4
#define LOCK_NAME        "rw:stress"

typedef struct stress_ctx {
    rlock *r, *w;
    int port;
    int64_t end;
} stress_ctx;

typedef struct stress_stats {
    long reads, writes, errors, violations, max_readers, timeouts;
} stress_stats;

static long long cmd_int(redisContext *ctx, stress_stats *st, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;
    long long v = -1;

    va_start(ap, fmt);
    r = redisvCommand(ctx, fmt, ap);
    va_end(ap);
    if (r == NULL) {
        st->errors++;
        return -1;
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        v = r->integer;
    } else if (r->type == REDIS_REPLY_STRING) {
        v = atoll(r->str);
    } else if (r->type == REDIS_REPLY_NIL) {
        v = 0;
    } else if (r->type == REDIS_REPLY_STATUS) {
        v = 1;
    }
    freeReplyObject(r);
    return v;
}

/* The reader's critical section as seen by the checker. */
static void reader_inside(redisContext *ctx, stress_stats *st, int hold_us)
{
    long long n = cmd_int(ctx, st, "INCR chk:readers");

    if (n > st->max_readers) {
        st->max_readers = n;
    }
    if (cmd_int(ctx, st, "EXISTS chk:writer") != 0) {
        st->violations++;
    }
    usleep((useconds_t)hold_us);
    cmd_int(ctx, st, "DECR chk:readers");
}

static void *reader_main(void *p)
{
    stress_ctx *sc = p;
    stress_stats *st = calloc(1, sizeof(*st));
    redisContext *ctx = redisConnect("127.0.0.1", sc->port);
    unsigned seed = (unsigned)(uintptr_t)st;

    for (long i = 0; ctx != NULL && !ctx->err && rh_now_ms() < sc->end; i++) {
        int rc = rlock_try_lock(sc->r, 2000, (i % 2) ? -1 : 5000);

        if (rc == RLOCK_ETIMEDOUT) {
            st->timeouts++;
            continue;
        }
        if (rc != RLOCK_OK) {
            st->errors++;
            continue;
        }
        if (i % 7 == 0) {
            st->errors += rlock_try_lock(sc->r, 0, -1) != RLOCK_OK;
            st->errors += rlock_unlock(sc->r) != RLOCK_OK;
        }
        reader_inside(ctx, st, (int)(rand_r(&seed) % 2000));
        st->errors += rlock_unlock(sc->r) != RLOCK_OK;
        st->reads++;
    }
    if (ctx != NULL) {
        redisFree(ctx);
    }
    return st;
}

static void writer_inside(redisContext *ctx, stress_stats *st)
{
    long long v;

    if (cmd_int(ctx, st, "SET chk:writer 1 NX") != 1) {
        st->violations++;
    }
    if (cmd_int(ctx, st, "GET chk:readers") != 0) {
        st->violations++;
    }
    v = cmd_int(ctx, st, "GET chk:counter");
    usleep(500);
    cmd_int(ctx, st, "SET chk:counter %lld", v + 1);
    st->writes++;
}

static void *writer_main(void *p)
{
    stress_ctx *sc = p;
    stress_stats *st = calloc(1, sizeof(*st));
    redisContext *ctx = redisConnect("127.0.0.1", sc->port);

    for (long i = 0; ctx != NULL && !ctx->err && rh_now_ms() < sc->end; i++) {
        int rc = rlock_try_lock(sc->w, 5000, -1);

        if (rc == RLOCK_ETIMEDOUT) {
            st->timeouts++;
            continue;
        }
        if (rc != RLOCK_OK) {
            st->errors++;
            continue;
        }
        writer_inside(ctx, st);
        if (i % 4 == 0) {
            /* Downgrade: read inside the write lock, then let the write side go. */
            st->errors += rlock_lock(sc->r, -1) != RLOCK_OK;
            cmd_int(ctx, st, "DEL chk:writer");
            cmd_int(ctx, st, "INCR chk:readers");
            st->errors += rlock_unlock(sc->w) != RLOCK_OK;
            if (cmd_int(ctx, st, "EXISTS chk:writer") != 0) {
                st->violations++;
            }
            usleep(1000);
            cmd_int(ctx, st, "DECR chk:readers");
            st->errors += rlock_unlock(sc->r) != RLOCK_OK;
        } else {
            cmd_int(ctx, st, "DEL chk:writer");
            st->errors += rlock_unlock(sc->w) != RLOCK_OK;
        }
        usleep(10000);
    }
    if (ctx != NULL) {
        redisFree(ctx);
    }
    return st;
}

/* Child process: "--child URL PORT DURATION_MS". Reports its totals into Redis. */
static int child_main(const char *url, int port, int64_t duration_ms)
{
    rlock_client *c = rw_client_url(url, 3000, 0, 0);
    stress_ctx sc;
    pthread_t th[READERS_PER_PROC + 1];
    stress_stats total = {0};
    redisContext *ctx;

    if (c == NULL) {
        return 2;
    }
    sc.r = rlock_open(c, RLOCK_READ, LOCK_NAME);
    sc.w = rlock_open(c, RLOCK_WRITE, LOCK_NAME);
    sc.port = port;
    sc.end = rh_now_ms() + duration_ms;
    if (sc.r == NULL || sc.w == NULL) {
        return 3;
    }
    for (int i = 0; i < READERS_PER_PROC; i++) {
        pthread_create(&th[i], NULL, reader_main, &sc);
    }
    pthread_create(&th[READERS_PER_PROC], NULL, writer_main, &sc);
    for (int i = 0; i <= READERS_PER_PROC; i++) {
        stress_stats *st = NULL;

        pthread_join(th[i], (void **)&st);
        total.reads += st->reads;
        total.writes += st->writes;
        total.errors += st->errors;
        total.violations += st->violations;
        total.timeouts += st->timeouts;
        if (st->max_readers > total.max_readers) {
            total.max_readers = st->max_readers;
        }
        free(st);
    }
    rlock_free(sc.r);
    rlock_free(sc.w);
    rlock_client_free(c);
    ctx = redisConnect("127.0.0.1", port);
    if (ctx == NULL || ctx->err) {
        return 4;
    }
    freeReplyObject(redisCommand(ctx, "INCRBY chk:reads %ld", total.reads));
    freeReplyObject(redisCommand(ctx, "INCRBY chk:writes %ld", total.writes));
    freeReplyObject(redisCommand(ctx, "INCRBY chk:errors %ld", total.errors));
    freeReplyObject(redisCommand(ctx, "INCRBY chk:violations %ld", total.violations));
    freeReplyObject(redisCommand(ctx, "INCRBY chk:timeouts %ld", total.timeouts));
    freeReplyObject(redisCommand(ctx, "EVAL %s 1 chk:maxreaders %ld",
                                 "if tonumber(ARGV[1]) > tonumber(redis.call('get', KEYS[1]) "
                                 "or '0') then redis.call('set', KEYS[1], ARGV[1]) end",
                                 total.max_readers));
    redisFree(ctx);
    return 0;
}

static void test_rw_invariants(void **state)
{
    rh_server *srv = rh_start(NULL);
    const char *env = getenv("RLOCK_RW_STRESS_MS");
    int64_t duration = env != NULL ? atoll(env) : 20000;
    char port[16], dur[24];
    pid_t kids[PROCS];
    long long reads, writes, counter, maxr;

    (void)state;
    assert_non_null(srv);
    snprintf(port, sizeof(port), "%d", rh_port(srv));
    snprintf(dur, sizeof(dur), "%lld", (long long)duration);
    for (int i = 0; i < PROCS; i++) {
        const char *argv[] = {"self", "--child", rh_url(srv), port, dur, NULL};

        kids[i] = rh_spawn_self(argv);
        assert_true(kids[i] > 0);
    }
    for (int i = 0; i < PROCS; i++) {
        assert_int_equal(rh_wait_child(kids[i], duration + 30000), 0);
    }
    reads = rw_redis_int(srv, "GET", "chk:reads");
    writes = rw_redis_int(srv, "GET", "chk:writes");
    counter = rw_redis_int(srv, "GET", "chk:counter");
    maxr = rw_redis_int(srv, "GET", "chk:maxreaders");
    print_message("%lld reads, %lld writes, counter %lld, max concurrent readers %lld, "
                  "timeouts %lld, errors %lld, violations %lld\n",
                  reads, writes, counter, maxr, rw_redis_int(srv, "GET", "chk:timeouts"),
                  rw_redis_int(srv, "GET", "chk:errors"),
                  rw_redis_int(srv, "GET", "chk:violations"));
    assert_int_equal(rw_redis_int(srv, "GET", "chk:violations"), 0);
    assert_int_equal(rw_redis_int(srv, "GET", "chk:errors"), 0);
    assert_true(writes > 0);
    assert_true(reads > writes);
    assert_int_equal(counter, writes);
    assert_true(maxr > 1);
    assert_int_equal(rw_exists(srv, LOCK_NAME), 0);
    assert_int_equal(rw_exists(srv, "rlock_rwlock_writers:{" LOCK_NAME "}"), 0);
    rh_free(srv);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rw_invariants),
    };

    if (argc == 5 && strcmp(argv[1], "--child") == 0) {
        return child_main(argv[2], atoi(argv[3]), atoll(argv[4]));
    }
    rh_skip_if_unavailable();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
