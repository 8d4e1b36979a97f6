/*
 * The notification-driven wait of semaphores and latches (notified_wait.h). The subscriber's entry
 * permits make it free of lost wake-ups: a message that arrives while this waiter is between a
 * failed attempt and its sleep leaves a permit, and the sleep returns at once. The first sleep
 * after joining returns when the SUBSCRIBE is confirmed, so a change published before the
 * subscription existed is seen by the attempt that follows.
 */
#include "notified_wait.h"

#include "cancel.h"
#include "pubsub.h"

static rlk_wait_hook_fn hook;
static void *hook_arg;

void rlk_wait_set_test_hook(rlk_wait_hook_fn fn, void *arg)
{
    hook = fn;
    hook_arg = arg;
}

/* How long the next sleep may last: the time left, shortened by the attempt's hint. */
static int64_t sleep_bound(int64_t deadline, int64_t hint_ms)
{
    int64_t left = -1; /* no limit */
    if (deadline != INT64_MAX) {
        left = deadline - rlk_now_ms();
        left = left < 0 ? 0 : left;
    }
    if (hint_ms >= 0 && (left < 0 || hint_ms + 1 < left)) {
        return hint_ms + 1; /* one ms past the expiry, so the next attempt sees it expired */
    }
    return left;
}

int rlk_wait_notified(rlock_client *c, const char *channel, size_t len, int mode, int64_t wait_ms,
                      rlk_attempt_fn attempt, void *arg)
{
    return rlk_wait_notified_cancel(c, channel, len, mode, wait_ms, NULL, attempt, arg);
}

int rlk_wait_notified_cancel(rlock_client *c, const char *channel, size_t len, int mode,
                             int64_t wait_ms, const rlock_cancel *cancel, rlk_attempt_fn attempt,
                             void *arg)
{
    int64_t deadline = wait_ms < 0 ? INT64_MAX : rlk_add_sat(rlk_now_ms(), wait_ms);
    int64_t hint = -1;
    int r = rlk_cancel_check(cancel, "waiting on", channel);
    r = r ? r : attempt(arg, &hint);
    if (r != 0 || wait_ms == 0) {
        return r;
    }
    rlk_sub *sub = NULL;
    r = rlk_sub_join_mode(c->pubsub, channel, len, mode, &sub);
    for (int round = 0; r == 0; round++) {
        if (deadline != INT64_MAX && rlk_now_ms() >= deadline) {
            break;
        }
        if (round > 0 && hook != NULL) {
            hook(hook_arg, round);
        }
        /* A refused or unconfirmed SUBSCRIBE ends the wait: without a channel, re-attempting
         * at once would spin until the deadline. */
        int w = rlk_sub_wait_cancel(c->pubsub, sub, sleep_bound(deadline, hint), NULL, cancel);
        if (w == RLK_WAIT_CANCELED) {
            r = rlk_cancel_check(cancel, "waiting on", channel);
            break;
        }
        if (w < 0) {
            r = w;
            break;
        }
        if (w == RLK_WAIT_INTERRUPTED) {
            break; /* rlock_client_interrupt(): give up as on a timeout */
        }
        r = rlk_client_check(c);
        hint = -1;
        r = r ? r : attempt(arg, &hint);
    }
    rlk_sub_leave(c->pubsub, sub);
    return r;
}
