/*
 * Mutual exclusion under connection faults (issue 26): threads on several clients lock and unlock
 * one lock while a killer thread kills their connections every 20-100 ms (CLIENT KILL TYPE normal,
 * TYPE pubsub, every connection of one client), pauses the clients (CLIENT PAUSE) and stops the
 * server (SIGSTOP, SIGCONT). Two independent checkers count overlaps: the shared-memory tc_mx and
 * SET NX on a second redis-server that no fault touches. Every lock call that returned OK must
 * hold on Redis (rlock_is_held), and its unlock must not find the hold gone (RLOCK_ELOST).
 * A kind is one row of fx_kinds: how a thread opens its handle and which side it takes, and for
 * an object that is not an rlock handle its own lock, unlock and check calls. For a search by
 * hand, the environment sets FX_SECONDS (a longer run), FX_KIND (one kind), FX_LEASE (every
 * lock with this lease in ms, -1 the watchdog) and FX_FAULT (one fault alone: normal, pubsub,
 * user, id (CLIENT KILL ID of every connection), pause (CLIENT PAUSE 300-1800 ms apart) or stop
 * (SIGSTOP of 0.3-3 s every 1-2 s)).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis/hiredis.h>

#include "rlock.h"
#include "tc_checker.h"
#include "tc_redis.h"
#include "tc_replicas.h"
#include "tc_stress.h"

#define FX_CLIENTS     4
#define FX_THREADS     2 /* per client */
#define FX_WORKERS     (FX_CLIENTS * FX_THREADS)
#define FX_MAX_SERVERS 3
#define FX_MAX_MEMBERS 3
#define FX_LEASE_MS    10000
#define FX_WAIT_MS     2000
#define FX_MIN_ROUNDS  200 /* a run goes on past its time (up to three times it) until this many */

/* What a worker locks: a lock, or a group over member handles (freed after it), or an object of
 * another kind in obj (its kind's close frees it). */
typedef struct fx_handle {
    rlock *lock;
    rlock *members[FX_MAX_MEMBERS];
    int n_members;
    int reader; /* takes the read side: a shared section */
    void *obj;
} fx_handle;

/* A kind under test: the servers it lives on, how worker w opens its handle on cs (its client's
 * connection to each of those servers), and how it takes, checks (1 held on Redis, 0 not, else
 * an error to retry or RLOCK_ENOTSUP) and gives back one hold. NULL lock, unlock, held and close
 * are the rlock_* calls on h->lock. A kind of object that is not a lock (a leased semaphore
 * permit, say) sets all four. */
typedef struct fx_kind {
    const char *name;
    int servers;
    /* 1: the server has a replica and the clients sync their grants to it (replica_sync): a
     * waiter confirms each direct grant by an attempt with WAIT behind it (armed or its own). */
    int replica_sync;
    int (*open)(rlock_client *const *cs, int w, fx_handle *h);
    int (*lock)(fx_handle *h, int64_t wait_ms, int64_t lease_ms);
    int (*unlock)(fx_handle *h);
    int (*held)(fx_handle *h);
    void (*close)(fx_handle *h);
} fx_kind;

typedef struct fx_run {
    const fx_kind *kind;
    rh_server *srv[FX_MAX_SERVERS];
    rh_server *replica; /* of srv[0], for a replica_sync kind */
    rh_server *checker;
    rlock_client *clients[FX_CLIENTS][FX_MAX_SERVERS];
    tc_mx *mx;
    int64_t mid_ms, end_ms, last_ms; /* the stop, the planned end, the latest end */
    atomic_long rounds;
    long kills, pauses, stops;
} fx_run;

typedef struct fx_worker {
    fx_run *run;
    int index;
    fx_handle h;
    redisContext *check; /* to the checker server */
    unsigned seed;
    long rounds, timeouts, conn_errors, overlaps, phantoms, lost, errors;
} fx_worker;

/* Whether the run goes on: until its planned end, and past it until FX_MIN_ROUNDS locks were
 * taken, so that a loaded machine still checks as many hand-offs. */
static int fx_going(fx_run *run)
{
    int64_t now = rh_now_ms();
    return now < run->end_ms || (now < run->last_ms && atomic_load(&run->rounds) < FX_MIN_ROUNDS);
}

static int fx_open_single(rlock_client *c, rlock_kind kind, const char *name, fx_handle *h)
{
    h->lock = rlock_open(c, kind, name);
    return h->lock != NULL ? 0 : -1;
}

static int fx_open_reentrant(rlock_client *const *cs, int w, fx_handle *h)
{
    (void)w;
    return fx_open_single(cs[0], RLOCK_REENTRANT, "fx", h);
}

static int fx_open_fair(rlock_client *const *cs, int w, fx_handle *h)
{
    (void)w;
    return fx_open_single(cs[0], RLOCK_FAIR, "fx", h);
}

static int fx_open_write(rlock_client *const *cs, int w, fx_handle *h)
{
    (void)w;
    return fx_open_single(cs[0], RLOCK_WRITE, "fx", h);
}

/* Half the workers read, half write. */
static int fx_open_rw(rlock_client *const *cs, int w, fx_handle *h)
{
    h->reader = w % 2 == 0;
    return fx_open_single(cs[0], h->reader ? RLOCK_READ : RLOCK_WRITE, "fx", h);
}

static int fx_open_multi(rlock_client *const *cs, int w, fx_handle *h)
{
    static const char *const names[] = {"fx:a", "fx:b", "fx:c"};
    (void)w;
    for (int i = 0; i < 3; i++) {
        if ((h->members[i] = rlock_open(cs[0], RLOCK_REENTRANT, names[i])) == NULL) {
            return -1;
        }
        h->n_members++;
    }
    h->lock = rlock_multi_new(h->members, 3);
    return h->lock != NULL ? 0 : -1;
}

/* Members of three types: a reentrant, a fair and a write lock. */
static int fx_open_multi_mixed(rlock_client *const *cs, int w, fx_handle *h)
{
    static const rlock_kind kinds[] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_WRITE};
    static const char *const names[] = {"fx:a", "fx:b", "fx:c"};
    (void)w;
    for (int i = 0; i < 3; i++) {
        if ((h->members[i] = rlock_open(cs[0], kinds[i], names[i])) == NULL) {
            return -1;
        }
        h->n_members++;
    }
    h->lock = rlock_multi_new(h->members, 3);
    return h->lock != NULL ? 0 : -1;
}

static int fx_open_redlock(rlock_client *const *cs, int w, fx_handle *h)
{
    (void)w;
    for (int i = 0; i < 3; i++) {
        if ((h->members[i] = rlock_open(cs[i], RLOCK_REENTRANT, "fx")) == NULL) {
            return -1;
        }
        h->n_members++;
    }
    h->lock = rlock_redlock_new(h->members, 3);
    return h->lock != NULL ? 0 : -1;
}

static void fx_close(fx_handle *h)
{
    rlock_free(h->lock);
    for (int i = 0; i < h->n_members; i++) {
        rlock_free(h->members[i]);
    }
}

/* ---- the independent checker on the second server -------------------------------------------- */

static long long fx_check_cmd(fx_worker *w, const char *cmd, const char *key)
{
    redisReply *r = redisCommand(w->check, "%s %s", cmd, key);
    long long v = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
    freeReplyObject(r);
    return v;
}

/* Enters the section on the checker server: a writer SETs fx:w NX and finds no reader, a reader
 * counts itself in fx:r and finds no writer. Returns 1 when it found someone it excludes. */
static int fx_check_enter(fx_worker *w)
{
    if (w->h.reader) {
        return fx_check_cmd(w, "INCR", "fx:r") < 1 || fx_check_cmd(w, "EXISTS", "fx:w") != 0;
    }
    redisReply *r = redisCommand(w->check, "SET fx:w %d NX", w->index);
    int taken = r == NULL || r->type != REDIS_REPLY_STATUS;
    freeReplyObject(r);
    redisReply *g = redisCommand(w->check, "GET fx:r");
    int readers = g != NULL && g->type == REDIS_REPLY_STRING && atol(g->str) > 0;
    freeReplyObject(g);
    return taken || readers;
}

static void fx_check_leave(fx_worker *w, int overlapped)
{
    if (w->h.reader) {
        (void)fx_check_cmd(w, "DECR", "fx:r");
    } else if (!overlapped) {
        (void)fx_check_cmd(w, "DEL", "fx:w");
    }
}

/* ---- one worker --------------------------------------------------------------------------------
 */

/* Whether the hold a lock call returned is on Redis: 1, 0, or -1 when no answer came within a
 * few seconds of faults. */
static int fx_held(fx_worker *w)
{
    for (int i = 0; i < 300; i++) {
        const fx_kind *k = w->run->kind;
        int r = k->held != NULL ? k->held(&w->h) : rlock_is_held(w->h.lock);
        if (r == 0 || r == 1) {
            return r;
        }
        if (r == RLOCK_ENOTSUP) {
            return -1;
        }
        rh_sleep_ms(10);
    }
    return -1;
}

/* Unlocks, retrying while the outcome is unknown (a retry settles it, rlock.h). A group whose
 * member unlock failed has given up its own count: its retry is RLOCK_ENOTOWNER, and the member
 * settles on its next lock. */
static int fx_unlock(fx_worker *w)
{
    int r = RLOCK_ECONN;
    for (int i = 0; i < 300 && (r == RLOCK_ECONN || r == RLOCK_ETIMEDOUT || r == RLOCK_EREPLICA);
         i++) {
        if (i > 0) {
            rh_sleep_ms(10);
        }
        r = w->run->kind->unlock != NULL ? w->run->kind->unlock(&w->h) : rlock_unlock(w->h.lock);
        if (r == RLOCK_ENOTOWNER && i > 0) {
            return RLOCK_OK;
        }
    }
    return r;
}

/* The section between a lock call that returned OK and its unlock. */
static void fx_section(fx_worker *w)
{
    int overlapped = fx_check_enter(w);
    if (w->h.reader) {
        tc_mx_read_enter(w->run->mx, 0);
    } else {
        tc_mx_enter(w->run->mx, 0);
    }
    w->overlaps += overlapped;
    if (fx_held(w) == 0) {
        w->phantoms++;
        fprintf(stderr, "worker %d: lock returned OK without a hold on Redis\n", w->index);
    }
    rh_sleep_ms(rand_r(&w->seed) % 2);
    if (w->h.reader) {
        tc_mx_read_leave(w->run->mx, 0);
    } else {
        tc_mx_leave(w->run->mx, 0);
    }
    fx_check_leave(w, overlapped);
    int r = fx_unlock(w);
    if (r == RLOCK_ELOST) {
        w->lost++;
        fprintf(stderr, "worker %d: unlock: %s\n", w->index, rlock_last_error());
    } else if (r != RLOCK_OK) {
        w->errors++;
        fprintf(stderr, "worker %d: unlock: %s: %s\n", w->index, rlock_strerror(r),
                rlock_last_error());
    }
}

static void *fx_work(void *arg)
{
    fx_worker *w = arg;
    for (long i = 0; fx_going(w->run); i++) {
        const fx_kind *k = w->run->kind;
        const char *fixed = getenv("FX_LEASE");
        int64_t lease = fixed != NULL ? atoll(fixed) : i % 2 == 0 ? FX_LEASE_MS : -1;
        int r = k->lock != NULL ? k->lock(&w->h, FX_WAIT_MS, lease)
                                : rlock_try_lock(w->h.lock, FX_WAIT_MS, lease);
        if (r == RLOCK_OK) {
            w->rounds++;
            atomic_fetch_add(&w->run->rounds, 1);
            fx_section(w);
        } else if (r == RLOCK_ETIMEDOUT) {
            w->timeouts++;
        } else if (r == RLOCK_ECONN || r == RLOCK_EREPLICA) {
            /* A pool in its dial back-off answers at once: pause as a caller would. */
            w->conn_errors++;
            rh_sleep_ms(10);
        } else {
            w->errors++;
            fprintf(stderr, "worker %d: lock: %s: %s\n", w->index, rlock_strerror(r),
                    rlock_last_error());
        }
    }
    return NULL;
}

/* ---- the faults --------------------------------------------------------------------------------
 */

static void fx_admin(redisContext *c, const char *fmt, const char *arg)
{
    redisReply *r = redisCommand(c, fmt, arg);
    freeReplyObject(r);
}

/* The fault FX_FAULT names alone, or NULL for the mix. */
static const char *fx_only_fault(void)
{
    const char *e = getenv("FX_FAULT");
    return e != NULL && *e != '\0' && strcmp(e, "mix") != 0 ? e : NULL;
}

/* Kills every connection but the admin's own, one CLIENT KILL ID each. */
static void fx_kill_each(redisContext *c)
{
    redisReply *list = redisCommand(c, "CLIENT LIST");
    redisReply *me = redisCommand(c, "CLIENT ID");
    if (list != NULL && list->type == REDIS_REPLY_STRING && me != NULL &&
        me->type == REDIS_REPLY_INTEGER) {
        for (const char *p = list->str; (p = strstr(p, "id=")) != NULL; p += 3) {
            long long id = atoll(p + 3);
            if (id != me->integer) {
                freeReplyObject(redisCommand(c, "CLIENT KILL ID %lld", id));
            }
        }
    }
    freeReplyObject(list);
    freeReplyObject(me);
}

/* One fault of FX_FAULT's kind alone; 0 when it names none of them. */
static int fx_one_fault(fx_run *run, redisContext *admin, int s, unsigned *seed,
                        int64_t *next_pause, const char *only)
{
    int64_t now = rh_now_ms();
    if (strcmp(only, "normal") == 0 || strcmp(only, "pubsub") == 0) {
        fx_admin(admin, "CLIENT KILL TYPE %s", only);
    } else if (strcmp(only, "user") == 0) {
        char user[16];
        snprintf(user, sizeof(user), "fx%u", rand_r(seed) % FX_CLIENTS);
        fx_admin(admin, "CLIENT KILL USER %s", user);
    } else if (strcmp(only, "id") == 0) {
        fx_kill_each(admin);
    } else if (strcmp(only, "pause") == 0 && now >= *next_pause) {
        fx_admin(admin, "CLIENT PAUSE %s WRITE", run->pauses % 2 ? "300" : "1000");
        run->pauses++;
        *next_pause = now + 300 + rand_r(seed) % 1500;
        return 1;
    } else if (strcmp(only, "stop") == 0 && now >= *next_pause) {
        rh_pause(run->srv[s]);
        rh_sleep_ms(300 + rand_r(seed) % 2700);
        rh_resume(run->srv[s]);
        run->stops++;
        *next_pause = rh_now_ms() + 1000 + rand_r(seed) % 1000;
        return 1;
    } else {
        return strcmp(only, "pause") == 0 || strcmp(only, "stop") == 0;
    }
    run->kills++;
    return 1;
}

/* One fault on one server: a kill every time, a CLIENT PAUSE every ~1.5 s, and once in the run
 * (past its middle) the whole server stopped for 300-600 ms. */
static void fx_fault(fx_run *run, redisContext **admin, unsigned *seed, int64_t *next_pause,
                     int *stopped)
{
    int s = (int)(rand_r(seed) % (unsigned)run->kind->servers);
    const char *only = fx_only_fault();
    if (only != NULL && fx_one_fault(run, admin[s], s, seed, next_pause, only)) {
        return;
    }
    int pick = (int)(rand_r(seed) % 100);
    char user[16];
    snprintf(user, sizeof(user), "fx%u", rand_r(seed) % FX_CLIENTS);
    if (pick < 40) {
        fx_admin(admin[s], "CLIENT KILL TYPE %s", "normal");
    } else if (pick < 65) {
        fx_admin(admin[s], "CLIENT KILL TYPE %s", "pubsub");
    } else {
        fx_admin(admin[s], "CLIENT KILL USER %s", user); /* every connection of one client */
    }
    run->kills++;
    int64_t now = rh_now_ms();
    if (now >= *next_pause) {
        fx_admin(admin[s], "CLIENT PAUSE 300 %s", run->pauses % 2 ? "WRITE" : "ALL");
        run->pauses++;
        *next_pause = now + 1500;
    }
    if (!*stopped && now >= run->mid_ms) {
        *stopped = 1;
        rh_pause(run->srv[s]);
        rh_sleep_ms(300 + rand_r(seed) % 300);
        rh_resume(run->srv[s]);
        run->stops++;
    }
}

static void *fx_killer(void *arg)
{
    fx_run *run = arg;
    redisContext *admin[FX_MAX_SERVERS] = {0};
    unsigned seed = 0x5eed;
    for (int s = 0; s < run->kind->servers; s++) {
        admin[s] = rh_connect(run->srv[s]);
    }
    int64_t next_pause = rh_now_ms() + 700;
    int stopped = 0;
    while (fx_going(run)) {
        rh_sleep_ms(20 + rand_r(&seed) % 81);
        fx_fault(run, admin, &seed, &next_pause, &stopped);
    }
    for (int s = 0; s < run->kind->servers; s++) {
        redisFree(admin[s]);
    }
    return NULL;
}

/* ---- a run -------------------------------------------------------------------------------------
 */

static int64_t fx_seconds(void)
{
    const char *e = getenv("FX_SECONDS");
    int64_t s = e != NULL ? atoll(e) : 0;
    return s > 0 ? s : (TC_TSAN ? 7 : 5);
}

/* Starts the servers, one ACL user per client (so one client's connections can be killed
 * together) and the clients. */
static void fx_setup(fx_run *run)
{
    rh_skip_if_unavailable();
    run->checker = rh_start(NULL);
    assert_non_null(run->checker);
    for (int s = 0; s < run->kind->servers; s++) {
        if (s == 0 && run->kind->replica_sync) {
            assert_int_equal(tc_replicated_start(&run->srv[0], &run->replica, 1), 0);
        } else {
            run->srv[s] = rh_start(NULL);
        }
        assert_non_null(run->srv[s]);
        for (int c = 0; c < FX_CLIENTS; c++) {
            char user[16];
            snprintf(user, sizeof(user), "fx%d", c);
            const char *acl[] = {"ACL", "SETUSER", user, "on", ">fxpw", "~*", "&*", "+@all", NULL};
            char *ok = rh_cmd_str(run->srv[s], acl);
            assert_string_equal(ok, "OK");
            free(ok);
            rlock_options o;
            tc_options(&o, run->srv[s]);
            o.replica_sync = run->kind->replica_sync;
            run->clients[c][s] = tc_client_as(&o, run->srv[s], user, "fxpw");
        }
    }
    run->mx = tc_mx_new();
    assert_non_null(run->mx);
}

static void fx_teardown(fx_run *run)
{
    for (int c = 0; c < FX_CLIENTS; c++) {
        for (int s = 0; s < run->kind->servers; s++) {
            rlock_client_free(run->clients[c][s]);
        }
    }
    rh_free(run->replica);
    for (int s = 0; s < run->kind->servers; s++) {
        rh_free(run->srv[s]);
    }
    rh_free(run->checker);
    tc_mx_free(run->mx);
}

/* Sums the workers' counts into total (its run and handle unused). */
static void fx_sum(const fx_worker *ws, fx_worker *total)
{
    memset(total, 0, sizeof(*total));
    for (int i = 0; i < FX_WORKERS; i++) {
        total->rounds += ws[i].rounds;
        total->timeouts += ws[i].timeouts;
        total->conn_errors += ws[i].conn_errors;
        total->overlaps += ws[i].overlaps;
        total->phantoms += ws[i].phantoms;
        total->lost += ws[i].lost;
        total->errors += ws[i].errors;
    }
}

static void fx_report(fx_run *run, const fx_worker *t, int64_t took)
{
    print_message("%s: %ld rounds in %lld ms (%ld timeouts, %ld ECONN) under %ld kills, %ld "
                  "pauses, %ld stops: overlaps %ld (server) %ld (memory, counter %ld of %ld); "
                  "OK without a hold %ld, ELOST %ld, errors %ld\n",
                  run->kind->name, t->rounds, (long long)took, t->timeouts, t->conn_errors,
                  run->kills, run->pauses, run->stops, t->overlaps, tc_mx_violations(run->mx),
                  tc_mx_counter(run->mx, 0), tc_mx_entries(run->mx, 0), t->phantoms, t->lost,
                  t->errors);
}

static void fx_run_kind(const fx_kind *kind)
{
    const char *only = getenv("FX_KIND");
    if (only != NULL && strcmp(only, kind->name) != 0) {
        skip();
    }
    fx_run run = {.kind = kind};
    atomic_init(&run.rounds, 0);
    fx_worker ws[FX_WORKERS];
    pthread_t th[FX_WORKERS], killer;
    fx_setup(&run);
    memset(ws, 0, sizeof(ws));
    for (int i = 0; i < FX_WORKERS; i++) {
        ws[i] = (fx_worker){.run = &run, .index = i, .seed = 7919U * (unsigned)(i + 1)};
        assert_int_equal(kind->open(run.clients[i % FX_CLIENTS], i, &ws[i].h), 0);
        ws[i].check = rh_connect(run.checker);
        assert_non_null(ws[i].check);
    }
    int64_t start = rh_now_ms();
    run.end_ms = start + fx_seconds() * 1000;
    run.mid_ms = start + fx_seconds() * 500;
    run.last_ms = start + fx_seconds() * 3000;
    for (int i = 0; i < FX_WORKERS; i++) {
        assert_int_equal(pthread_create(&th[i], NULL, fx_work, &ws[i]), 0);
    }
    assert_int_equal(pthread_create(&killer, NULL, fx_killer, &run), 0);
    pthread_join(killer, NULL);
    for (int i = 0; i < FX_WORKERS; i++) {
        pthread_join(th[i], NULL);
    }
    fx_worker total;
    fx_sum(ws, &total);
    fx_report(&run, &total, rh_now_ms() - start);
    for (int i = 0; i < FX_WORKERS; i++) {
        if (kind->close != NULL) {
            kind->close(&ws[i].h);
        } else {
            fx_close(&ws[i].h);
        }
        redisFree(ws[i].check);
    }
    long violations = tc_mx_violations(run.mx);
    long counter = tc_mx_counter(run.mx, 0), entries = tc_mx_entries(run.mx, 0);
    fx_teardown(&run);
    assert_int_equal(total.overlaps, 0);
    assert_int_equal(violations, 0);
    assert_int_equal(counter, entries);
    assert_int_equal(total.phantoms, 0);
    assert_int_equal(total.lost, 0);
    assert_int_equal(total.errors, 0);
    assert_true(total.rounds >= FX_MIN_ROUNDS); /* faults did not stop the hand-offs */
}

static const fx_kind fx_kinds[] = {
    {.name = "reentrant", .servers = 1, .open = fx_open_reentrant},
    {.name = "fair", .servers = 1, .open = fx_open_fair},
    {.name = "write", .servers = 1, .open = fx_open_write},
    {.name = "read/write", .servers = 1, .open = fx_open_rw},
    {.name = "multi-lock", .servers = 1, .open = fx_open_multi},
    {.name = "RedLock", .servers = 3, .open = fx_open_redlock},
    {.name = "multi-lock (mixed)", .servers = 1, .open = fx_open_multi_mixed},
    {.name = "reentrant (replica_sync)",
     .servers = 1,
     .replica_sync = 1,
     .open = fx_open_reentrant},
    {.name = "fair (replica_sync)", .servers = 1, .replica_sync = 1, .open = fx_open_fair},
};

static void test_reentrant(void **state)
{
    (void)state;
    fx_run_kind(&fx_kinds[0]);
}

static void test_fair(void **state)
{
    (void)state;
    fx_run_kind(&fx_kinds[1]);
}

static void test_write(void **state)
{
    (void)state;
    fx_run_kind(&fx_kinds[2]);
}

static void test_read_write(void **state)
{
    (void)state;
    fx_run_kind(&fx_kinds[3]);
}

static void test_multi(void **state)
{
    (void)state;
    fx_run_kind(&fx_kinds[4]);
}

static void test_redlock(void **state)
{
    (void)state;
    fx_run_kind(&fx_kinds[5]);
}

static void test_multi_mixed(void **state)
{
    (void)state;
    fx_run_kind(&fx_kinds[6]);
}

/* Direct grants confirmed by the waiter's attempt and WAIT, armed attempts carrying the WAIT. */
static void test_reentrant_replica_sync(void **state)
{
    (void)state;
    fx_run_kind(&fx_kinds[7]);
}

/* The fair lock's grants, confirmed by a replica-synced waiter as the reentrant lock's are. */
static void test_fair_replica_sync(void **state)
{
    (void)state;
    fx_run_kind(&fx_kinds[8]);
}

TC_MAIN(NULL, NULL, cmocka_unit_test(test_reentrant), cmocka_unit_test(test_fair),
        cmocka_unit_test(test_write), cmocka_unit_test(test_read_write),
        cmocka_unit_test(test_multi), cmocka_unit_test(test_redlock),
        cmocka_unit_test(test_multi_mixed), cmocka_unit_test(test_reentrant_replica_sync),
        cmocka_unit_test(test_fair_replica_sync))
