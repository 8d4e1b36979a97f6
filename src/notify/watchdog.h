/*
 * The watchdog: one thread per client and one hashed timer wheel. Each registered entry is
 * renewed every lease/3; entries that fall due together go to Redis as one pipeline of batch
 * scripts (up to RLK_WD_BATCH keys per script call).
 *
 * Every batch script has the same shape: KEYS = k1..kN, ARGV = [lease_ms, f1..fN]; it returns
 * an array of N integers, 1 = renewed, 0 = the thing renewed is gone (the entry is then dropped
 * and reported lost). A renew class names the script and says what key and field an entry sends.
 */
#ifndef RLK_WATCHDOG_H
#define RLK_WATCHDOG_H

#include "context.h"
#include "timer_wheel.h"

#define RLK_WD_BATCH 100

typedef struct rlk_wd_entry rlk_wd_entry;

typedef struct rlk_renew_class {
    int script; /* RLK_SCRIPT_* of the batch renewal script */
    /* Appends the entry's key to key and its field to field. 0 or RLOCK_ENOMEM. Called from the
     * watchdog thread without locks; must only read data that is immutable while registered. */
    int (*describe)(rlk_wd_entry *e, rlk_buf *key, rlk_buf *field);
    /* Called once from the watchdog thread (no watchdog lock held) when the entry is judged lost:
     * the script returned 0, or the lease ran out without a successful renewal. The entry is no
     * longer registered when this runs, but its memory must stay valid until rlk_wd_cancel(). */
    void (*lost)(rlk_wd_entry *e);
    /* Optional: frees an entry that rlk_wd_cancel_by() left to the watchdog (a batch in flight
     * outlasted the caller's bound). Called once from the watchdog thread with its mutex held:
     * it must only free memory. */
    void (*release)(rlk_wd_entry *e);
} rlk_renew_class;

struct rlk_wd_entry {
    rlk_timer timer; /* private */
    const rlk_renew_class *cls;
    int64_t lease_ms;   /* PEXPIRE value sent with each renewal */
    int64_t expires_at; /* private: monotonic end of the last confirmed lease */
    int state;          /* private */
    int once;           /* renewed once, then unregistered (rlk_wd_add_once) */
};

int rlk_watchdog_new(rlock_client *c, rlk_watchdog **out);
void rlk_watchdog_free(rlk_watchdog *wd); /* stops the thread; registered entries are dropped */
/* In a child of fork(): frees the inherited watchdog without joining its thread (which does not
 * exist here); its entries are not touched. */
void rlk_watchdog_abandon(rlk_watchdog *wd);
/* The watchdog mutex, held across fork() so that the child inherits a consistent wheel. */
void rlk_watchdog_fork_lock(rlk_watchdog *wd);
void rlk_watchdog_fork_unlock(rlk_watchdog *wd);

void rlk_wd_entry_init(rlk_wd_entry *e, const rlk_renew_class *cls);
/* Registers e (not registered yet): first renewal at now + lease_ms/3; lease judged from now.
 * O(1). Returns RLOCK_OK or RLOCK_ECLOSED (stopped, or wd NULL: the client was freed). */
int rlk_wd_add(rlk_watchdog *wd, rlk_wd_entry *e, int64_t lease_ms);
/* rlk_wd_add() for a hold that Redis keeps for held_ms only (a release granted it with a grant
 * TTL shorter than lease_ms): the first renewal, to lease_ms, is due after a third of held_ms,
 * as if held_ms were the lease, and the lease is judged from held_ms until it is confirmed. Not
 * at once: an immediate renewal wakes the watchdog thread while the granted caller returns, which
 * on a 2-vCPU box cost the hand-off about 60 us (tests/bench handoff); with other waiters of the
 * client beating every third of their waiter timeout, the thread is due by then anyway. */
int rlk_wd_add_soon(rlk_watchdog *wd, rlk_wd_entry *e, int64_t lease_ms, int64_t held_ms);
/* rlk_wd_add_soon() for a hold with an explicit lease (lease_ms > held_ms): the one renewal,
 * due held_ms/3 from now, sets the rest of lease_ms, and the entry then leaves the wheel by
 * itself (rlk_wd_active() turns 0; a cancel is a no-op). */
int rlk_wd_add_once(rlk_watchdog *wd, rlk_wd_entry *e, int64_t lease_ms, int64_t held_ms);
/* Unregisters e. Synchronous: when it returns no renewal of e is in flight, none will be sent,
 * and the watchdog holds no reference to e (it may be freed). No-op if not registered, and
 * with wd NULL: rlock_client_free() clears the client's watchdog pointer, and the freed
 * watchdog had forgotten every entry, so call sites need not check for a closed client.
 * Must not be called with a lock held that lost() takes. */
void rlk_wd_cancel(rlk_watchdog *wd, rlk_wd_entry *e);
/* rlk_wd_cancel() that waits for a batch in flight only until until_ms (rlk_now_ms() clock; 0 =
 * as long as it takes). Returns 1 when e is unregistered and the caller's again; 0 when the
 * batch still runs at until_ms: e is then unregistered but left to the watchdog, which calls
 * e->cls->release(e) (which must be set) once that batch is done, and its renewal may still
 * reach Redis. */
int rlk_wd_cancel_by(rlk_watchdog *wd, rlk_wd_entry *e, int64_t until_ms);
/* 1 while e is registered (not cancelled and not judged lost). Takes the watchdog mutex. */
int rlk_wd_active(rlk_watchdog *wd, const rlk_wd_entry *e);

/* Counters for tests and benchmarks. */
typedef struct rlk_wd_stats {
    uint64_t ticks;               /* wake-ups that found due entries */
    uint64_t batches;             /* script calls sent */
    uint64_t pipelines;           /* round trips (one pipeline = one round trip) */
    uint64_t renewed;             /* entries renewed */
    uint64_t lost;                /* entries judged lost */
    uint64_t failures;            /* pipelines that failed (connection errors) */
    uint64_t sweep_pipelines_max; /* the most pipelines one sweep has sent */
    size_t registered;            /* entries registered now */
} rlk_wd_stats;
void rlk_wd_get_stats(rlk_watchdog *wd, rlk_wd_stats *out);

#endif
