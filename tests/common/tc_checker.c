#include "tc_checker.h"

#include <sys/mman.h>
#include <time.h>

/* The gap between the counter's load and its store. It stands in for the round trips the
 * Redis-side checker used to make inside a section, so that a section has some length and an
 * overlap loses an update instead of slipping between two instructions. */
#define TC_MX_GAP_NS 50000L

tc_mx *tc_mx_new(void)
{
    void *p = mmap(NULL, sizeof(tc_mx), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p; /* mmap() gives zeroed pages: every count starts at 0 */
}

void tc_mx_free(tc_mx *mx)
{
    if (mx != NULL) {
        munmap(mx, sizeof(tc_mx));
    }
}

static tc_mx_slot *slot_of(tc_mx *mx, int slot)
{
    return &mx->slot[(unsigned)slot % TC_MX_SLOTS];
}

void tc_mx_enter(tc_mx *mx, int slot)
{
    tc_mx_slot *s = slot_of(mx, slot);
    long others = atomic_fetch_add(&s->writers, 1);
    if (others != 0 || atomic_load(&s->readers) != 0) {
        atomic_fetch_add(&mx->violations, 1);
    }
    atomic_fetch_add(&s->entries, 1);
    long v = atomic_load_explicit(&s->counter, memory_order_relaxed);
    struct timespec gap = {0, TC_MX_GAP_NS};
    nanosleep(&gap, NULL);
    atomic_store_explicit(&s->counter, v + 1, memory_order_relaxed);
}

void tc_mx_leave(tc_mx *mx, int slot)
{
    atomic_fetch_sub(&slot_of(mx, slot)->writers, 1);
}

void tc_mx_read_enter(tc_mx *mx, int slot)
{
    tc_mx_slot *s = slot_of(mx, slot);
    long n = atomic_fetch_add(&s->readers, 1) + 1;
    long max = atomic_load(&s->max_readers);
    while (n > max && !atomic_compare_exchange_weak(&s->max_readers, &max, n)) {
    }
    if (atomic_load(&s->writers) != 0) {
        atomic_fetch_add(&mx->violations, 1);
    }
    atomic_fetch_add(&s->reads, 1);
}

void tc_mx_read_leave(tc_mx *mx, int slot)
{
    atomic_fetch_sub(&slot_of(mx, slot)->readers, 1);
}

long tc_mx_violations(tc_mx *mx)
{
    return atomic_load(&mx->violations);
}

long tc_mx_counter(tc_mx *mx, int slot)
{
    return atomic_load(&slot_of(mx, slot)->counter);
}

long tc_mx_entries(tc_mx *mx, int slot)
{
    return atomic_load(&slot_of(mx, slot)->entries);
}

long tc_mx_reads(tc_mx *mx, int slot)
{
    return atomic_load(&slot_of(mx, slot)->reads);
}

long tc_mx_max_readers(tc_mx *mx, int slot)
{
    return atomic_load(&slot_of(mx, slot)->max_readers);
}
