/*
 * Unit tests for src/base/timer_wheel.c: no server, no threads. The randomized test checks the
 * wheel against a brute-force model (an array of expiries scanned linearly) with a fixed seed, so a
 * failure is reproducible.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "timer_wheel.h"

/* splitmix64: small, fast and the same on every platform, unlike rand(). */
static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t n)
{
    return n == 0 ? 0 : rng_next() % n;
}

/* Collects a due list into an array, checking the list shape the header promises. */
static size_t collect(rlk_timer *due, rlk_timer **out, size_t cap)
{
    size_t n = 0;

    for (rlk_timer *t = due; t != NULL; t = t->next) {
        assert_true(n < cap);
        assert_int_equal(t->pending, 0);
        assert_null(t->prev);
        out[n++] = t;
    }
    return n;
}

/* rlk_timer_init() on each timer of the NULL-terminated list. */
static void init_timers(rlk_timer *first, ...)
{
    va_list ap;
    va_start(ap, first);
    for (rlk_timer *t = first; t != NULL; t = va_arg(ap, rlk_timer *)) {
        rlk_timer_init(t);
    }
    va_end(ap);
}

static size_t expire_into(rlk_wheel *w, uint64_t now, rlk_timer **out, size_t cap)
{
    rlk_timer *due = (rlk_timer *)&due; /* poison: expire must overwrite it */
    size_t n = rlk_wheel_expire(w, now, &due);

    assert_int_equal(collect(due, out, cap), n);
    return n;
}

static void test_empty_wheel(void **state)
{
    rlk_wheel w;
    rlk_timer *due = NULL;

    (void)state;
    rlk_wheel_init(&w, 1000, 10);
    assert_int_equal(rlk_wheel_count(&w), 0);
    assert_true(rlk_wheel_next_expiry(&w) == UINT64_MAX);
    assert_int_equal(rlk_wheel_expire(&w, 5000, &due), 0);
    assert_null(due);
    assert_true(rlk_wheel_next_expiry(&w) == UINT64_MAX);
}

static void test_timer_init_zeroes(void **state)
{
    rlk_timer t;

    (void)state;
    memset(&t, 0xab, sizeof(t));
    rlk_timer_init(&t);
    assert_int_equal(t.pending, 0);
    assert_null(t.next);
    assert_null(t.prev);
    assert_int_equal(t.expires_ms, 0);
}

static void test_add_expire_order(void **state)
{
    rlk_wheel w;
    rlk_timer a, b, c, d;
    rlk_timer *out[8];

    (void)state;
    init_timers(&a, &b, &c, &d, NULL);
    rlk_wheel_init(&w, 1000, 10);
    rlk_wheel_add(&w, &a, 1050);
    rlk_wheel_add(&w, &b, 1021);
    rlk_wheel_add(&w, &c, 1035);
    rlk_wheel_add(&w, &d, 1024); /* same tick as b, added later */
    assert_int_equal(rlk_wheel_count(&w), 4);
    assert_int_equal(a.pending, 1);

    assert_int_equal(expire_into(&w, 1020, out, 8), 0);
    assert_int_equal(expire_into(&w, 1021, out, 8), 1);
    assert_ptr_equal(out[0], &b);
    assert_int_equal(expire_into(&w, 1024, out, 8), 1);
    assert_ptr_equal(out[0], &d);
    assert_int_equal(rlk_wheel_count(&w), 2);

    /* One call spanning several ticks returns them in tick order. */
    rlk_wheel_add(&w, &b, 1049);
    rlk_wheel_add(&w, &d, 1029);
    assert_int_equal(expire_into(&w, 1100, out, 8), 4);
    assert_ptr_equal(out[0], &d);
    assert_ptr_equal(out[1], &c);
    assert_ptr_equal(out[2], &b);
    assert_ptr_equal(out[3], &a);
    assert_int_equal(rlk_wheel_count(&w), 0);
    assert_int_equal(a.pending, 0);
}

static void test_same_tick_fifo(void **state)
{
    rlk_wheel w;
    rlk_timer t[5];
    rlk_timer *out[8];

    (void)state;
    rlk_wheel_init(&w, 0, 100);
    for (int i = 0; i < 5; i++) {
        rlk_timer_init(&t[i]);
        rlk_wheel_add(&w, &t[i], 250);
    }
    assert_int_equal(expire_into(&w, 250, out, 8), 5);
    for (int i = 0; i < 5; i++) {
        assert_ptr_equal(out[i], &t[i]);
    }
}

static void test_cancel(void **state)
{
    rlk_wheel w;
    rlk_timer a, b, c, never;

    (void)state;
    init_timers(&a, &b, &c, &never, NULL);
    rlk_wheel_init(&w, 0, 10);

    /* Cancel of a timer that was never added, and of one already cancelled, is a no-op. */
    rlk_wheel_cancel(&w, &never);
    assert_int_equal(rlk_wheel_count(&w), 0);
    assert_int_equal(never.pending, 0);

    rlk_wheel_add(&w, &a, 55);
    rlk_wheel_add(&w, &b, 55);
    rlk_wheel_add(&w, &c, 55);
    rlk_wheel_cancel(&w, &b); /* the middle of a bucket */
    assert_int_equal(b.pending, 0);
    assert_int_equal(rlk_wheel_count(&w), 2);
    rlk_wheel_cancel(&w, &b);
    assert_int_equal(rlk_wheel_count(&w), 2);
    rlk_timer *out[8];
    assert_int_equal(expire_into(&w, 1000, out, 8), 2);
    assert_ptr_equal(out[0], &a);
    assert_ptr_equal(out[1], &c);

    /* Cancel of a timer that has fired is a no-op too. */
    rlk_wheel_cancel(&w, &a);
    assert_int_equal(rlk_wheel_count(&w), 0);

    /* Cancelling the only timer empties the wheel for next_expiry as well. */
    rlk_wheel_add(&w, &a, 5000);
    assert_true(rlk_wheel_next_expiry(&w) <= 5000);
    rlk_wheel_cancel(&w, &a);
    assert_true(rlk_wheel_next_expiry(&w) == UINT64_MAX);
    assert_int_equal(expire_into(&w, 10000, out, 8), 0);
}

/* A wheel started at now (10 ms ticks), two fresh timers and room for what expires. */
typedef struct two_timers {
    rlk_wheel w;
    rlk_timer a, b;
    rlk_timer *out[4];
} two_timers;

static void two_timers_init(two_timers *t, uint64_t now)
{
    init_timers(&t->a, &t->b, NULL);
    rlk_wheel_init(&t->w, now, 10);
}

static void test_readd_moves(void **state)
{
    two_timers t;
    (void)state;
    two_timers_init(&t, 1000);

    /* Earlier. */
    rlk_wheel_add(&t.w, &t.a, 1500);
    rlk_wheel_add(&t.w, &t.a, 1100);
    assert_int_equal(rlk_wheel_count(&t.w), 1);
    assert_int_equal(t.a.expires_ms, 1100);
    assert_int_equal(expire_into(&t.w, 1100, t.out, 4), 1);
    assert_ptr_equal(t.out[0], &t.a);

    /* Later. */
    rlk_wheel_add(&t.w, &t.a, 1200);
    rlk_wheel_add(&t.w, &t.a, 2000);
    assert_int_equal(rlk_wheel_count(&t.w), 1);
    assert_int_equal(expire_into(&t.w, 1999, t.out, 4), 0);
    assert_int_equal(expire_into(&t.w, 2000, t.out, 4), 1);

    /* Within the same bucket, and a whole revolution away in the same bucket. */
    rlk_wheel_add(&t.w, &t.a, 2101);
    rlk_wheel_add(&t.w, &t.b, 2102);
    rlk_wheel_add(&t.w, &t.a, 2108);
    assert_int_equal(rlk_wheel_count(&t.w), 2);
    assert_int_equal(expire_into(&t.w, 2107, t.out, 4), 1);
    assert_ptr_equal(t.out[0], &t.b);
    rlk_wheel_add(&t.w, &t.a, 2108 + 10 * RLK_WHEEL_SLOTS);
    assert_int_equal(expire_into(&t.w, 2108, t.out, 4), 0);
    assert_int_equal(expire_into(&t.w, 2107 + 10 * RLK_WHEEL_SLOTS, t.out, 4), 0);
    assert_int_equal(expire_into(&t.w, 2108 + 10 * RLK_WHEEL_SLOTS, t.out, 4), 1);
    assert_int_equal(rlk_wheel_count(&t.w), 0);
}

static void test_far_future_rounds(void **state)
{
    rlk_wheel w;
    rlk_timer near, far, never;
    rlk_timer *out[4];
    const uint64_t far_at = 3 * RLK_WHEEL_SLOTS + 7;
    uint64_t now;

    (void)state;
    init_timers(&near, &far, &never, NULL);
    rlk_wheel_init(&w, 0, 1);
    rlk_wheel_add(&w, &near, 7); /* same bucket as far, zero rounds */
    rlk_wheel_add(&w, &far, far_at);
    rlk_wheel_add(&w, &never, UINT64_MAX);
    assert_int_equal(near.slot, far.slot);
    assert_int_equal(far.rounds, 3);

    /* Tick by tick: the bucket is visited four times, far stays until its own revolution. */
    for (now = 1; now <= far_at; now++) {
        size_t n = expire_into(&w, now, out, 4);

        if (now == 7) {
            assert_int_equal(n, 1);
            assert_ptr_equal(out[0], &near);
            assert_int_equal(far.pending, 1);
        } else if (now == far_at) {
            assert_int_equal(n, 1);
            assert_ptr_equal(out[0], &far);
        } else {
            assert_int_equal(n, 0);
        }
        assert_true(rlk_wheel_next_expiry(&w) > now);
    }
    assert_int_equal(rlk_wheel_count(&w), 1);
    /* A timer at the end of time neither overflows next_expiry nor fires early. */
    assert_true(rlk_wheel_next_expiry(&w) > now);
    assert_int_equal(expire_into(&w, UINT64_MAX - 1, out, 4), 0);
    assert_int_equal(expire_into(&w, UINT64_MAX, out, 4), 1);
    assert_ptr_equal(out[0], &never);
}

static void test_past_expiries(void **state)
{
    rlk_wheel w;
    rlk_timer t[4];
    rlk_timer *out[8];

    (void)state;
    for (int i = 0; i < 4; i++) {
        rlk_timer_init(&t[i]);
    }
    rlk_wheel_init(&w, 10000, 100);
    rlk_wheel_add(&w, &t[0], 5000);
    rlk_wheel_add(&w, &t[1], 0);
    rlk_wheel_add(&w, &t[2], 10000);
    assert_true(rlk_wheel_next_expiry(&w) == 0);
    assert_int_equal(expire_into(&w, 10000, out, 8), 3);
    assert_true(rlk_wheel_next_expiry(&w) == UINT64_MAX);

    /* After the wheel moved on: behind the wheel, and within the current tick but already past. */
    assert_int_equal(expire_into(&w, 20050, out, 8), 0);
    rlk_wheel_add(&w, &t[0], 15000);
    rlk_wheel_add(&w, &t[1], 20010);
    rlk_wheel_add(&w, &t[2], 20070); /* same tick, still ahead */
    rlk_wheel_add(&w, &t[3], 20150); /* next tick */
    assert_true(rlk_wheel_next_expiry(&w) <= 15000);
    assert_int_equal(expire_into(&w, 20050, out, 8), 2);
    assert_ptr_equal(out[0], &t[0]);
    assert_ptr_equal(out[1], &t[1]);
    assert_true(rlk_wheel_next_expiry(&w) == 20070);
    assert_int_equal(expire_into(&w, 20070, out, 8), 1);
    assert_ptr_equal(out[0], &t[2]);
    assert_true(rlk_wheel_next_expiry(&w) <= 20150);
    assert_true(rlk_wheel_next_expiry(&w) > 20070);
    assert_int_equal(expire_into(&w, 20150, out, 8), 1);
}

static void test_clock_going_back(void **state)
{
    two_timers t;
    (void)state;
    two_timers_init(&t, 1000);
    assert_int_equal(expire_into(&t.w, 2000, t.out, 4), 0);
    rlk_wheel_add(&t.w, &t.a, 1990);
    rlk_wheel_add(&t.w, &t.b, 1995);
    /* An earlier now_ms fires only what it reaches and does not move the wheel back. */
    assert_int_equal(expire_into(&t.w, 1990, t.out, 4), 1);
    assert_ptr_equal(t.out[0], &t.a);
    assert_true(rlk_wheel_next_expiry(&t.w) <= 1995);
    assert_int_equal(expire_into(&t.w, 2000, t.out, 4), 1);
    assert_ptr_equal(t.out[0], &t.b);
}

static void test_big_time_jump(void **state)
{
    enum { N = 3000 };
    rlk_wheel w;
    rlk_timer *t = calloc(N, sizeof(*t));
    rlk_timer **out = calloc(N, sizeof(rlk_timer *));
    const uint64_t hour = UINT64_C(3600000);
    const uint64_t base = 5000;
    size_t n;

    (void)state;
    assert_non_null(t);
    assert_non_null(out);
    rlk_wheel_init(&w, base, 100);
    for (size_t i = 0; i < N; i++) {
        rlk_timer_init(&t[i]);
        rlk_wheel_add(&w, &t[i], base + 1 + i * (10 * hour / N)); /* spread over ten hours */
    }
    /* Five hours at once: one revolution is walked, expires_ms decides. */
    n = expire_into(&w, base + 5 * hour, out, N);
    assert_int_equal(n, N / 2);
    for (size_t i = 0; i < n; i++) {
        assert_true(out[i]->expires_ms <= base + 5 * hour);
    }
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(t[i].pending, t[i].expires_ms > base + 5 * hour);
    }
    assert_true(rlk_wheel_next_expiry(&w) > base + 5 * hour);
    assert_true(rlk_wheel_next_expiry(&w) <= t[N / 2].expires_ms);

    /* Jumps of exactly one revolution, one tick less and one tick more. */
    n = expire_into(&w, base + 5 * hour + UINT64_C(511) * 100, out, N);
    n += expire_into(&w, base + 5 * hour + UINT64_C(1023) * 100, out + n, N - n);
    n += expire_into(&w, base + 5 * hour + UINT64_C(1536) * 100, out + n, N - n);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(t[i].pending, t[i].expires_ms > base + 5 * hour + UINT64_C(1536) * 100);
    }
    assert_int_equal(rlk_wheel_count(&w), N - N / 2 - n);

    /* A jump of years drains the rest. */
    n = expire_into(&w, base + UINT64_C(24) * 365 * hour, out, N);
    assert_int_equal(rlk_wheel_count(&w), 0);
    assert_true(n > 0);
    free(t);
    free(out);
}

static void test_next_expiry_bounds(void **state)
{
    two_timers t;
    uint64_t now = 1000;
    int wakeups = 0;

    (void)state;
    two_timers_init(&t, now);

    /* Within the current tick the answer is exact. */
    rlk_wheel_add(&t.w, &t.a, 1003);
    assert_true(rlk_wheel_next_expiry(&t.w) == 1003);
    rlk_wheel_cancel(&t.w, &t.a);

    /* Otherwise the start of the timer's tick. */
    rlk_wheel_add(&t.w, &t.a, 1237);
    assert_true(rlk_wheel_next_expiry(&t.w) == 1230);
    rlk_wheel_add(&t.w, &t.b, 1105);
    assert_true(rlk_wheel_next_expiry(&t.w) == 1100);
    rlk_wheel_cancel(&t.w, &t.b);

    /* Far away: a caller sleeping until next_expiry wakes about once per revolution and never
     * spins. */
    rlk_wheel_add(&t.w, &t.a, now + UINT64_C(20) * RLK_WHEEL_SLOTS * 10 + 3);
    while (t.a.pending) {
        uint64_t next = rlk_wheel_next_expiry(&t.w);

        assert_true(next > now);
        assert_true(next <= t.a.expires_ms);
        now = next;
        (void)expire_into(&t.w, now, t.out, 4);
        wakeups++;
        assert_true(wakeups < 50);
    }
    assert_true(now == t.a.expires_ms);
    assert_true(wakeups >= 20);
}

static void test_tick_zero_means_one(void **state)
{
    rlk_wheel w;
    rlk_timer a;
    rlk_timer *out[2];

    (void)state;
    rlk_timer_init(&a);
    rlk_wheel_init(&w, 0, 0);
    rlk_wheel_add(&w, &a, 3);
    assert_true(rlk_wheel_next_expiry(&w) == 3);
    assert_int_equal(expire_into(&w, 2, out, 2), 0);
    assert_int_equal(expire_into(&w, 3, out, 2), 1);
}

/* ---- Randomized comparison with a brute-force model. ---- */

enum { MODEL_N = 100000, MODEL_STEPS = 300, MODEL_OPS = 300 };

struct model {
    rlk_wheel wheel;
    rlk_timer *timers;
    uint64_t *expires; /* the model's own copy, independent of the timers' fields */
    unsigned char *pending;
    size_t count;
    uint64_t now;
    uint32_t tick;
};

static uint64_t random_expiry(const struct model *m)
{
    uint64_t rev = (uint64_t)m->tick * RLK_WHEEL_SLOTS;
    uint64_t r = rng_below(100);

    if (r < 10) {
        return m->now - rng_below(m->now < 5000 ? m->now : 5000); /* past or now */
    }
    if (r < 70) {
        return m->now + rng_below(rev);
    }
    if (r < 95) {
        return m->now + rng_below(5 * rev);
    }
    return m->now + rng_below(UINT64_C(1) << 36);
}

static uint64_t random_advance(const struct model *m)
{
    uint64_t r = rng_below(100);

    if (r < 3) {
        return 0;
    }
    if (r < 60) {
        return rng_below(3u * m->tick + 1u);
    }
    if (r < 90) {
        return rng_below(UINT64_C(600) * m->tick);
    }
    if (r < 98) {
        return rng_below(UINT64_C(20) * RLK_WHEEL_SLOTS * m->tick);
    }
    return rng_below(UINT64_C(1) << 34); /* months */
}

static void model_mutate(struct model *m)
{
    for (int k = 0; k < MODEL_OPS; k++) {
        size_t i = (size_t)rng_below(MODEL_N);

        if (rng_below(4) == 0) {
            rlk_wheel_cancel(&m->wheel, &m->timers[i]);
            m->count -= m->pending[i];
            m->pending[i] = 0;
        } else {
            m->expires[i] = random_expiry(m);
            rlk_wheel_add(&m->wheel, &m->timers[i], m->expires[i]);
            m->count += !m->pending[i];
            m->pending[i] = 1;
        }
    }
}

static void model_check_next_expiry(const struct model *m)
{
    uint64_t min = UINT64_MAX;
    uint64_t next = rlk_wheel_next_expiry(&m->wheel);

    for (size_t i = 0; i < MODEL_N; i++) {
        if (m->pending[i] && m->expires[i] < min) {
            min = m->expires[i];
        }
    }
    if (next > min) {
        fail_msg("next_expiry %llu is later than the earliest expiry %llu",
                 (unsigned long long)next, (unsigned long long)min);
    }
    if (min == UINT64_MAX && next != UINT64_MAX) {
        fail_msg("empty wheel but next_expiry %llu", (unsigned long long)next);
    }
}

static void model_expire(struct model *m)
{
    rlk_timer *due = NULL;
    size_t n = rlk_wheel_expire(&m->wheel, m->now, &due);
    size_t seen = 0;

    for (rlk_timer *t = due; t != NULL; t = t->next) {
        size_t i = (size_t)(t - m->timers);

        if (!m->pending[i] || t->pending || t->prev != NULL) {
            fail_msg("timer %zu returned twice, or while cancelled, or still linked", i);
        }
        if (m->expires[i] > m->now) {
            fail_msg("timer %zu fired early: expires %llu, now %llu", i,
                     (unsigned long long)m->expires[i], (unsigned long long)m->now);
        }
        m->pending[i] = 0;
        m->count--;
        seen++;
    }
    assert_int_equal(seen, n);
    for (size_t i = 0; i < MODEL_N; i++) {
        if (m->pending[i] && m->expires[i] <= m->now) {
            fail_msg("timer %zu is late: expires %llu, now %llu, tick %u", i,
                     (unsigned long long)m->expires[i], (unsigned long long)m->now, m->tick);
        }
    }
    assert_int_equal(rlk_wheel_count(&m->wheel), m->count);
    if (m->count > 0 && rlk_wheel_next_expiry(&m->wheel) <= m->now) {
        fail_msg("next_expiry %llu is not after now %llu: the caller would spin",
                 (unsigned long long)rlk_wheel_next_expiry(&m->wheel), (unsigned long long)m->now);
    }
}

static void run_model(uint32_t tick, uint64_t seed)
{
    struct model *m = calloc(1, sizeof(*m));

    assert_non_null(m);
    m->timers = calloc(MODEL_N, sizeof(*m->timers));
    m->expires = calloc(MODEL_N, sizeof(*m->expires));
    m->pending = calloc(MODEL_N, 1);
    assert_non_null(m->timers);
    assert_non_null(m->expires);
    assert_non_null(m->pending);
    rng_state = seed;
    m->tick = tick;
    m->now = 1000000;
    rlk_wheel_init(&m->wheel, m->now, tick);
    for (size_t i = 0; i < MODEL_N; i++) {
        rlk_timer_init(&m->timers[i]);
        m->expires[i] = random_expiry(m);
        rlk_wheel_add(&m->wheel, &m->timers[i], m->expires[i]);
        m->pending[i] = 1;
    }
    m->count = MODEL_N;
    assert_int_equal(rlk_wheel_count(&m->wheel), MODEL_N);
    for (int step = 0; step < MODEL_STEPS; step++) {
        model_mutate(m);
        model_check_next_expiry(m);
        m->now += random_advance(m);
        model_expire(m);
    }
    m->now = UINT64_MAX;
    model_expire(m);
    assert_int_equal(rlk_wheel_count(&m->wheel), 0);
    assert_true(rlk_wheel_next_expiry(&m->wheel) == UINT64_MAX);
    free(m->timers);
    free(m->expires);
    free(m->pending);
    free(m);
}

static void test_random_vs_model_tick7(void **state)
{
    (void)state;
    run_model(7, UINT64_C(0x5eed0001));
}

static void test_random_vs_model_tick100(void **state)
{
    (void)state;
    run_model(100, UINT64_C(0x5eed0002));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_wheel),
        cmocka_unit_test(test_timer_init_zeroes),
        cmocka_unit_test(test_add_expire_order),
        cmocka_unit_test(test_same_tick_fifo),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_readd_moves),
        cmocka_unit_test(test_far_future_rounds),
        cmocka_unit_test(test_past_expiries),
        cmocka_unit_test(test_clock_going_back),
        cmocka_unit_test(test_big_time_jump),
        cmocka_unit_test(test_next_expiry_bounds),
        cmocka_unit_test(test_tick_zero_means_one),
        cmocka_unit_test(test_random_vs_model_tick7),
        cmocka_unit_test(test_random_vs_model_tick100),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
