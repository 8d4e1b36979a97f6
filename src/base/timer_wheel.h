/*
 * Private header: a single-level hashed timer wheel (Varghese-Lauck, as Netty's
 * HashedWheelTimer) with intrusive nodes, for the watchdog thread. A bitmap of non-empty buckets
 * lets an idle client sleep instead of ticking. Not thread-safe (the watchdog's mutex guards it);
 * never allocates (timers live in the caller's records, pinned while pending); O(1) except
 * rlk_wheel_expire(); absolute ms on one monotonic clock. docs/internals/watchdog.md has more.
 */
#ifndef RLK_TIMER_WHEEL_H
#define RLK_TIMER_WHEEL_H

#include <stddef.h>
#include <stdint.h>

/* The number of buckets; a power of two so a tick maps to a bucket with a mask. */
#define RLK_WHEEL_SLOTS 512u
#define RLK_WHEEL_WORDS (RLK_WHEEL_SLOTS / 64u)

typedef struct rlk_timer {
    struct rlk_timer *next, *prev; /* intrusive bucket links; private */
    uint64_t expires_ms;           /* absolute expiry on the caller's monotonic ms clock */
    uint32_t rounds;               /* private: whole revolutions left, saturated at UINT32_MAX */
    /* 16 bits each keep the timer at 32 bytes, so a hold record that embeds one (locks/lock.h)
     * has room for its observation time within the same malloc size class. */
    uint16_t slot;    /* private: the bucket the timer is linked into (< RLK_WHEEL_SLOTS) */
    uint16_t pending; /* 1 while linked into the wheel */
} rlk_timer;

/* Defined here so callers can embed a wheel; every field is private. */
typedef struct rlk_wheel {
    rlk_timer *head[RLK_WHEEL_SLOTS]; /* bucket lists, first in first out */
    rlk_timer *tail[RLK_WHEEL_SLOTS];
    uint64_t busy[RLK_WHEEL_WORDS]; /* bit set = bucket not empty */
    uint64_t base_ms;               /* time of tick 0 */
    uint64_t last_ms;               /* the latest now_ms the wheel was advanced to */
    uint64_t cur_tick;              /* the tick last_ms falls in */
    uint64_t cur_start_ms;          /* base_ms + cur_tick * tick_ms */
    uint64_t cur_min_ms;            /* lower bound of expiries due within cur_tick (or earlier) */
    size_t count;                   /* pending timers */
    uint32_t tick_ms;
} rlk_wheel;

/* Zeroes a timer; it is not pending. Call once before first use. */
void rlk_timer_init(rlk_timer *t);

/* Initialises an empty wheel whose clock reads now_ms. tick_ms is the bucket width; 0 is taken
 * as 1. A larger tick means fewer bucket visits; precision does not depend on it (see expire). */
void rlk_wheel_init(rlk_wheel *w, uint64_t now_ms, uint32_t tick_ms);

/* Schedules t to expire at expires_ms. O(1). A pending timer is moved (its old expiry is
 * forgotten). An expiry at or before the wheel's current time is due on the next expire call. */
void rlk_wheel_add(rlk_wheel *w, rlk_timer *t, uint64_t expires_ms);

/* Unschedules t. O(1). A no-op when t is not pending. */
void rlk_wheel_cancel(rlk_wheel *w, rlk_timer *t);

/* Advances the wheel to now_ms and moves every timer whose expires_ms <= now_ms into a
 * NULL-terminated list through ->next (prev = NULL, pending = 0) returned in *due; returns the
 * count. This implementation is exact: a timer is returned by the first call whose now_ms reaches
 * its expiry (never early, never a tick late). Timers of different ticks within one revolution
 * come out in tick order; beyond that the order is unspecified. A jump in now_ms walks at most one
 * revolution. A now_ms earlier than a previous one does not move the wheel back. */
size_t rlk_wheel_expire(rlk_wheel *w, uint64_t now_ms, rlk_timer **due);

/* A time at or before the earliest pending expiry (exact for timers due in the current tick,
 * otherwise the start of the tick of the next non-empty bucket), or UINT64_MAX when the wheel is
 * empty. Right after rlk_wheel_expire(w, now, ...) it is later than now, so a caller that sleeps
 * until it never spins. O(RLK_WHEEL_SLOTS / 64). */
uint64_t rlk_wheel_next_expiry(const rlk_wheel *w);

/* The number of pending timers. */
size_t rlk_wheel_count(const rlk_wheel *w);

#endif /* RLK_TIMER_WHEEL_H */
