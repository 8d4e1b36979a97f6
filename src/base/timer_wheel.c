/*
 * A single-level hashed timer wheel; see timer_wheel.h for the contract and
 * docs/internals/watchdog.md for the invariants kept between calls (every pending timer in the
 * bucket of its effective tick, none behind the current tick, cur_min_ms a lower bound).
 * expire() compares expiries with now_ms, so it is exact; rounds are only a record.
 */
#include "timer_wheel.h"

#include <string.h>

#define RLK_WHEEL_MASK (RLK_WHEEL_SLOTS - 1u)

_Static_assert((RLK_WHEEL_SLOTS & RLK_WHEEL_MASK) == 0, "RLK_WHEEL_SLOTS must be a power of two");
_Static_assert(RLK_WHEEL_SLOTS % 64u == 0, "the bitmap is made of 64-bit words");

/* Index of the lowest set bit of a non-zero word. */
static unsigned ctz64(uint64_t x)
{
#if defined(__GNUC__) || defined(__clang__)
    return (unsigned)__builtin_ctzll(x);
#else
    unsigned n = 0;
    while ((x & 1u) == 0) {
        x >>= 1;
        n++;
    }
    return n;
#endif
}

static uint64_t tick_of(const rlk_wheel *w, uint64_t t_ms)
{
    return t_ms <= w->base_ms ? 0 : (t_ms - w->base_ms) / w->tick_ms;
}

static uint32_t wheel_rounds(uint64_t eff_tick, uint64_t cur_tick)
{
    uint64_t r = (eff_tick - cur_tick) / RLK_WHEEL_SLOTS;
    return r > UINT32_MAX ? UINT32_MAX : (uint32_t)r;
}

/* Distance (0 .. RLK_WHEEL_SLOTS - 1) going forward from bucket `from` to the first non-empty
 * bucket, `from` itself included, or RLK_WHEEL_SLOTS when every bucket is empty. Reads at most
 * RLK_WHEEL_WORDS + 1 words: the tail of from's word, the other words, then from's word's head. */
static uint32_t next_busy(const rlk_wheel *w, uint32_t from)
{
    uint32_t word = from / 64u;
    uint32_t bit = from % 64u;
    uint64_t bits = w->busy[word] & (~UINT64_C(0) << bit);

    for (uint32_t i = 0; i <= RLK_WHEEL_WORDS; i++) {
        if (bits != 0) {
            uint32_t slot = word * 64u + ctz64(bits);
            return (slot - from) & RLK_WHEEL_MASK;
        }
        word = (word + 1u) % RLK_WHEEL_WORDS;
        bits = w->busy[word];
        if (i + 1u == RLK_WHEEL_WORDS) {
            /* Back at from's own word: only the buckets before `from` are left. */
            bits &= bit == 0 ? 0 : (UINT64_C(1) << bit) - 1u;
        }
    }
    return RLK_WHEEL_SLOTS;
}

static void link(rlk_wheel *w, rlk_timer *t, uint32_t slot)
{
    t->slot = (uint16_t)slot;
    t->next = NULL;
    t->prev = w->tail[slot];
    if (t->prev != NULL) {
        t->prev->next = t;
    } else {
        w->head[slot] = t;
        w->busy[slot / 64u] |= UINT64_C(1) << (slot % 64u);
    }
    w->tail[slot] = t;
    t->pending = 1;
    w->count++;
}

static void unlink(rlk_wheel *w, rlk_timer *t)
{
    uint32_t slot = t->slot;

    if (t->prev != NULL) {
        t->prev->next = t->next;
    } else {
        w->head[slot] = t->next;
    }
    if (t->next != NULL) {
        t->next->prev = t->prev;
    } else {
        w->tail[slot] = t->prev;
    }
    if (w->head[slot] == NULL) {
        w->busy[slot / 64u] &= ~(UINT64_C(1) << (slot % 64u));
        /* Every timer due within the current tick lives in the current bucket, so an empty
         * current bucket makes the bound exact again instead of stale after a cancel. */
        if (slot == (uint32_t)(w->cur_tick & RLK_WHEEL_MASK)) {
            w->cur_min_ms = UINT64_MAX;
        }
    }
    t->next = NULL;
    t->prev = NULL;
    t->pending = 0;
    w->count--;
}

void rlk_timer_init(rlk_timer *t)
{
    memset(t, 0, sizeof(*t));
}

void rlk_wheel_init(rlk_wheel *w, uint64_t now_ms, uint32_t tick_ms)
{
    memset(w, 0, sizeof(*w));
    w->tick_ms = tick_ms == 0 ? 1 : tick_ms;
    w->base_ms = now_ms;
    w->last_ms = now_ms;
    w->cur_tick = 0;
    w->cur_start_ms = now_ms;
    w->cur_min_ms = UINT64_MAX;
}

void rlk_wheel_add(rlk_wheel *w, rlk_timer *t, uint64_t expires_ms)
{
    uint64_t eff = tick_of(w, expires_ms);
    uint32_t slot;

    if (eff < w->cur_tick) {
        eff = w->cur_tick;
    }
    slot = (uint32_t)(eff & RLK_WHEEL_MASK);
    if (eff == w->cur_tick && expires_ms < w->cur_min_ms) {
        w->cur_min_ms = expires_ms;
    }
    t->expires_ms = expires_ms;
    t->rounds = wheel_rounds(eff, w->cur_tick);
    if (t->pending && t->slot == slot) {
        /* Same bucket (the kernel's mod_timer shortcut): the fields above are all that moves. */
        return;
    }
    if (t->pending) {
        unlink(w, t);
    }
    link(w, t, slot);
}

void rlk_wheel_cancel(rlk_wheel *w, rlk_timer *t)
{
    if (t->pending) {
        unlink(w, t);
    }
}

/* Moves the due timers of one bucket to the end of the due list and refreshes the others'
 * rounds against new_tick. Returns how many were due. */
static size_t expire_slot(rlk_wheel *w, uint32_t slot, uint64_t now_ms, uint64_t new_tick,
                          rlk_timer ***due_tail)
{
    size_t n = 0;
    rlk_timer *t = w->head[slot];

    while (t != NULL) {
        rlk_timer *next = t->next;

        if (t->expires_ms <= now_ms) {
            unlink(w, t);
            **due_tail = t;
            *due_tail = &t->next;
            n++;
        } else {
            uint64_t eff = tick_of(w, t->expires_ms);

            if (eff <= new_tick) {
                eff = new_tick;
                if (t->expires_ms < w->cur_min_ms) {
                    w->cur_min_ms = t->expires_ms;
                }
            }
            t->rounds = wheel_rounds(eff, new_tick);
        }
        t = next;
    }
    return n;
}

size_t rlk_wheel_expire(rlk_wheel *w, uint64_t now_ms, rlk_timer **due)
{
    rlk_timer *list = NULL;
    rlk_timer **tail = &list;
    uint64_t new_tick = tick_of(w, now_ms);
    uint32_t start = (uint32_t)(w->cur_tick & RLK_WHEEL_MASK);
    uint32_t nslots;
    uint32_t off = 0;
    size_t n = 0;

    if (new_tick < w->cur_tick) {
        new_tick = w->cur_tick;
    }
    /* Ticks cur_tick .. new_tick inclusive, but never more than one revolution: after a jump of
     * hours each bucket is visited once and expires_ms decides. */
    nslots = new_tick - w->cur_tick >= RLK_WHEEL_SLOTS - 1u
                 ? RLK_WHEEL_SLOTS
                 : (uint32_t)(new_tick - w->cur_tick) + 1u;
    w->cur_min_ms = UINT64_MAX;
    while (off < nslots) {
        uint32_t d = next_busy(w, (start + off) & RLK_WHEEL_MASK);

        if (d >= nslots - off) {
            break;
        }
        off += d;
        n += expire_slot(w, (start + off) & RLK_WHEEL_MASK, now_ms, new_tick, &tail);
        off++;
    }
    if (now_ms > w->last_ms) {
        w->last_ms = now_ms;
        w->cur_tick = new_tick;
        w->cur_start_ms = w->base_ms + new_tick * w->tick_ms;
    }
    *due = list;
    return n;
}

uint64_t rlk_wheel_next_expiry(const rlk_wheel *w)
{
    uint64_t d;
    uint64_t step;
    uint64_t bound;

    if (w->count == 0) {
        return UINT64_MAX;
    }
    /* Buckets at distance 1..511 hold timers no earlier than the start of their tick; the current
     * bucket (found last, at 512) holds, besides cur_min_ms's timers, only ones a revolution on. */
    d = (uint64_t)next_busy(w, (uint32_t)((w->cur_tick + 1u) & RLK_WHEEL_MASK)) + 1u;
    step = d * w->tick_ms;
    bound = step > UINT64_MAX - w->cur_start_ms ? UINT64_MAX : w->cur_start_ms + step;
    return bound < w->cur_min_ms ? bound : w->cur_min_ms;
}

size_t rlk_wheel_count(const rlk_wheel *w)
{
    return w->count;
}
