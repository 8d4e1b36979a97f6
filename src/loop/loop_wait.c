/*
 * The states of a loop client's waiting operation (loop_wait.h), as loop_lock.c's for a lock:
 * ATTEMPT, then on a busy reply SUBSCRIBE (the first time) or WAIT. A token or deadline that ends
 * the wait while an attempt is on its way waits for that attempt's reply, so what it took is
 * reported (RLOCK_OK), never left taken unseen. Static helpers are named wait_*.
 */
#include "error.h"
#include "loop_wait.h"

static void wait_send(rlk_loop_wait *w)
{
    w->woken = 0;
    w->base.lc->loop.timer_stop(w->timer);
    int r = w->attempt(w);
    w->inflight = r == RLOCK_OK;
    if (r != RLOCK_OK) {
        w->complete(w, r);
    }
}

/* Sleeps until a message, the hint (a lease running out publishes nothing) or the deadline, and
 * never longer than the subscription timeout, so a lost message costs a poll, not a hang. */
static void wait_sleep(rlk_loop_wait *w)
{
    int64_t now = rlk_now_ms();
    int64_t ttl = w->base.lc->c->opts.subscription_timeout_ms;
    if (w->hint_ms >= 0 && w->hint_ms < ttl) {
        ttl = w->hint_ms + 1; /* just after the lease's end, when the attempt can take it */
    }
    int64_t until = rlk_add_sat(now, ttl);
    until = until < w->deadline ? until : w->deadline;
    (void)w->base.lc->loop.timer_start(w->timer, until - now);
}

/* The attempt found nothing to take: give up, or join the channel, or sleep. */
static void wait_busy(rlk_loop_wait *w)
{
    if (rlk_cancel_is_fired(w->base.cancel)) {
        w->complete(w, RLOCK_ECANCELED);
        return;
    }
    if (rlk_now_ms() >= w->deadline) {
        w->complete(w, RLOCK_ETIMEDOUT);
        return;
    }
    if (w->base.chan != NULL) {
        wait_sleep(w);
        return;
    }
    int r = rlk_loop_join(&w->base, w->channel, w->channel_len);
    if (r < 0) {
        w->complete(w, r);
    } else if (r == 1) {
        wait_send(w); /* listening already: a release before the join is seen by this attempt */
    } else {
        wait_sleep(w); /* until RLK_LOOP_SUBSCRIBED, which attempts once more */
    }
}

void rlk_loop_wait_result(rlk_loop_wait *w, int r, int64_t hint_ms)
{
    w->inflight = 0;
    w->hint_ms = hint_ms;
    if (r == 1) {
        w->complete(w, RLOCK_OK);
    } else if (r == 0 && w->woken && w->base.chan != NULL && !rlk_cancel_is_fired(w->base.cancel) &&
               rlk_now_ms() < w->deadline) {
        /* The release this attempt met busy may be the one whose message came first: its reply
         * and the message arrive on two connections, in either order. */
        wait_send(w);
    } else if (r == 0) {
        wait_busy(w);
    } else {
        w->complete(w, r);
    }
}

static void wait_wake(rlk_loop_op *base, int why)
{
    rlk_loop_wait *w = RLK_CONTAINER_OF(base, rlk_loop_wait, base);
    if (why == RLK_LOOP_CLOSE) {
        w->complete(w, RLOCK_ECLOSED);
    } else if (w->inflight) {
        w->woken |= why != RLK_LOOP_CANCEL; /* the reply decides, a cancellation included */
    } else if (why == RLK_LOOP_CANCEL) {
        wait_busy(w);
    } else {
        wait_send(w);
    }
}

static void wait_on_timer(void *arg)
{
    rlk_loop_wait *w = arg;
    if (!w->inflight || w->resend) {
        w->resend = 0;
        wait_send(w);
    }
}

void rlk_loop_wait_resend(rlk_loop_wait *w)
{
    w->inflight = 1;
    w->resend = 1;
    if (w->base.lc->loop.timer_start(w->timer, 0) != 0) {
        w->complete(w, rlk_err(RLOCK_ENOMEM, "the loop could not start a timer"));
    }
}

int rlk_loop_wait_start(rlk_loop_client *lc, rlk_loop_wait *w, const rlock_cancel *cancel,
                        int64_t wait_ms)
{
    w->deadline = wait_ms > RLOCK_MAX_DURATION_MS ? INT64_MAX : rlk_add_sat(rlk_now_ms(), wait_ms);
    w->timer = lc->loop.timer_new(lc->loop.loop_data, wait_on_timer, w);
    if (w->timer == NULL) {
        return rlk_err(RLOCK_ENOMEM, "the loop gave no timer");
    }
    int r = rlk_loop_op_add(lc, &w->base, cancel, wait_wake);
    if (r == RLOCK_OK && (r = w->attempt(w)) != RLOCK_OK) {
        rlk_loop_op_remove(&w->base);
    }
    if (r != RLOCK_OK) {
        lc->loop.timer_free(w->timer);
        w->timer = NULL;
        return r;
    }
    w->inflight = 1;
    return RLOCK_OK;
}

void rlk_loop_wait_end(rlk_loop_wait *w)
{
    rlk_loop_op_remove(&w->base);
    w->base.lc->loop.timer_free(w->timer);
    w->timer = NULL;
}
