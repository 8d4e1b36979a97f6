/*
 * The due times of a loop client's waiting operations (loop_due.h): a binary min-heap on
 * rlk_loop_due.at and one loop timer armed for its top. A firing round runs the dues that were
 * due when it began, each once, so a due set again at 0 from its own fire waits for the next
 * turn of the loop. Static helpers are named due_*.
 */
#include <stdlib.h>

#include "error.h"
#include "loop_due.h"

static void due_swap(rlk_loop_client *lc, uint32_t i, uint32_t j)
{
    rlk_loop_due *t = lc->dues[i];
    lc->dues[i] = lc->dues[j];
    lc->dues[j] = t;
    lc->dues[i]->pos = i + 1;
    lc->dues[j]->pos = j + 1;
}

static void due_up(rlk_loop_client *lc, uint32_t i)
{
    while (i > 0 && lc->dues[(i - 1) / 2]->at > lc->dues[i]->at) {
        due_swap(lc, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

static void due_down(rlk_loop_client *lc, uint32_t i)
{
    for (;;) {
        uint32_t m = i, l = 2 * i + 1, r = 2 * i + 2;
        if (l < lc->ndue && lc->dues[l]->at < lc->dues[m]->at) {
            m = l;
        }
        if (r < lc->ndue && lc->dues[r]->at < lc->dues[m]->at) {
            m = r;
        }
        if (m == i) {
            return;
        }
        due_swap(lc, i, m);
        i = m;
    }
}

/* Takes d (set) out of the heap. */
static void due_remove(rlk_loop_client *lc, rlk_loop_due *d)
{
    uint32_t i = d->pos - 1, last = --lc->ndue;
    d->pos = 0;
    if (i == last) {
        return;
    }
    lc->dues[i] = lc->dues[last];
    lc->dues[i]->pos = i + 1;
    due_up(lc, i);
    due_down(lc, i);
}

/* Arms the loop timer for the top of the heap, or stops it when the heap is empty. */
static void due_arm(rlk_loop_client *lc)
{
    int64_t at = lc->ndue > 0 ? lc->dues[0]->at : INT64_MAX;
    if (at == lc->due_armed || lc->due_timer == NULL) {
        return;
    }
    lc->due_armed = at;
    if (at == INT64_MAX) {
        lc->loop.timer_stop(lc->due_timer);
        return;
    }
    int64_t left = at - rlk_now_ms();
    (void)lc->loop.timer_start(lc->due_timer, left > 0 ? left : 0);
}

static void due_on_timer(void *arg)
{
    rlk_loop_client *lc = arg;
    rlk_loop_cb_enter(lc);
    lc->due_armed = INT64_MAX; /* the timer fired: nothing is armed */
    int64_t now = rlk_now_ms();
    uint32_t round = lc->due_seq;
    while (!lc->freed && lc->ndue > 0) {
        rlk_loop_due *d = lc->dues[0];
        if (d->at > now || (int32_t)(d->seq - round) > 0) {
            break;
        }
        due_remove(lc, d);
        d->fire(d);
    }
    if (rlk_loop_cb_leave(lc)) {
        return;
    }
    due_arm(lc);
}

int rlk_loop_due_add(rlk_loop_client *lc)
{
    if (lc->due_timer == NULL) {
        lc->due_timer = lc->loop.timer_new(lc->loop.loop_data, due_on_timer, lc);
        if (lc->due_timer == NULL) {
            return rlk_err(RLOCK_ENOMEM, "the loop gave no timer");
        }
        lc->due_armed = INT64_MAX;
    }
    if (lc->due_room == lc->due_cap) {
        uint32_t cap = lc->due_cap < 16 ? 16 : lc->due_cap * 2;
        rlk_loop_due **p = realloc(lc->dues, sizeof(rlk_loop_due *) * cap);
        if (p == NULL) {
            return rlk_err(RLOCK_ENOMEM, "out of memory for a loop timer");
        }
        lc->dues = p;
        lc->due_cap = cap;
    }
    lc->due_room++;
    return RLOCK_OK;
}

void rlk_loop_due_del(rlk_loop_client *lc, rlk_loop_due *d)
{
    rlk_loop_due_clear(lc, d);
    lc->due_room--;
}

void rlk_loop_due_set(rlk_loop_client *lc, rlk_loop_due *d, int64_t delay_ms)
{
    d->at = rlk_add_sat(rlk_now_ms(), delay_ms > 0 ? delay_ms : 0);
    d->seq = ++lc->due_seq;
    if (d->pos == 0) {
        lc->dues[lc->ndue] = d;
        d->pos = ++lc->ndue;
    }
    due_up(lc, d->pos - 1);
    due_down(lc, d->pos - 1);
    due_arm(lc);
}

void rlk_loop_due_clear(rlk_loop_client *lc, rlk_loop_due *d)
{
    if (d->pos != 0) {
        due_remove(lc, d);
        due_arm(lc);
    }
}

void rlk_loop_due_free_all(rlk_loop_client *lc)
{
    if (lc->due_timer != NULL) {
        lc->loop.timer_free(lc->due_timer);
        lc->due_timer = NULL;
    }
    free(lc->dues);
    lc->dues = NULL;
    lc->ndue = lc->due_cap = lc->due_room = 0;
}
