/*
 * The independent checker of the stress tests. It shares nothing with the lock under test: its
 * state is a shared anonymous memory mapping that forked children inherit, so a lock bug cannot
 * hide behind a checker that talks to the same (or a broken) Redis. Per slot (one a lock name):
 *   - occupancy: writers (exclusive holders) and readers inside right now. An exclusive entry
 *     that finds anyone inside, or a read entry that finds a writer inside, is a violation;
 *   - a counter bumped non-atomically (load, pause, store) by every exclusive section, so two
 *     overlapping sections lose an update, next to an atomic count of the same sections: the two
 *     differ exactly when exclusion broke without the occupancy check catching it;
 *   - the number of read sections and the most readers seen inside at once.
 * The checker itself never fails: it is memory and C11 atomics, nothing to connect to.
 */
#ifndef RLOCK_TESTS_TC_CHECKER_H
#define RLOCK_TESTS_TC_CHECKER_H

#include <stdatomic.h>

#define TC_MX_SLOTS 256 /* the cluster stress checks 200 lock names at once */

typedef struct tc_mx_slot {
    atomic_long writers, readers;
    atomic_long counter; /* the non-atomic count (atomic loads and stores, no read-modify-write) */
    atomic_long entries; /* the atomic count of exclusive sections */
    atomic_long reads, max_readers;
} tc_mx_slot;

typedef struct tc_mx {
    atomic_long violations;
    tc_mx_slot slot[TC_MX_SLOTS];
} tc_mx;

/* A zeroed checker in shared memory (survives fork()), or NULL. */
tc_mx *tc_mx_new(void);
void tc_mx_free(tc_mx *mx);

/* An exclusive section on slot: checks that nobody is inside and counts it. */
void tc_mx_enter(tc_mx *mx, int slot);
void tc_mx_leave(tc_mx *mx, int slot);
/* A shared (read) section on slot: checks that no writer is inside. */
void tc_mx_read_enter(tc_mx *mx, int slot);
void tc_mx_read_leave(tc_mx *mx, int slot);

long tc_mx_violations(tc_mx *mx);
long tc_mx_counter(tc_mx *mx, int slot);
long tc_mx_entries(tc_mx *mx, int slot);
long tc_mx_reads(tc_mx *mx, int slot);
long tc_mx_max_readers(tc_mx *mx, int slot);

#endif
