/*
 * The states of a loop client's waiting operation (loop_wait.h): ATTEMPT, then on a busy reply
 * SUBSCRIBE (the first time) or WAIT, and LEAVE after a queueing type's give-up. A token or
 * deadline that ends the wait while an attempt is on its way waits for that attempt's reply, so
 * what it took is reported (RLOCK_OK), never left taken unseen. Static helpers are named wait_*.
 */
#include "error.h"
#include "loop_wait.h"

/* Takes w off every list and the due times, and lets the type report rc and free the record. */
static void wait_finish(rlk_loop_wait *w, int rc)
{
    rlk_loop_op_remove(&w->base);
    rlk_loop_due_del(w->base.lc, &w->due);
    w->ops->complete(w, rc);
}

/* The give-up: a queueing type leaves its queue (and the channel) before done gets rc. */
static void wait_give_up(rlk_loop_wait *w, int rc)
{
    if (w->ops->leave == NULL) {
        wait_finish(w, rc);
        return;
    }
    rlk_loop_due_clear(w->base.lc, &w->due);
    rlk_loop_leave(&w->base);
    if (!w->ops->leave(w)) {
        wait_finish(w, rc);
        return;
    }
    w->inflight = w->leaving = 1;
    w->end_rc = rc;
}

/* An end the mechanism decides itself: the type's message, then the give-up. */
static void wait_end(rlk_loop_wait *w, int rc)
{
    w->ops->say(w, rc);
    wait_give_up(w, rc);
}

static void wait_send(rlk_loop_wait *w)
{
    w->woken = 0;
    rlk_loop_due_clear(w->base.lc, &w->due);
    int r = w->ops->attempt(w);
    w->inflight = r == RLOCK_OK;
    if (r != RLOCK_OK) {
        wait_give_up(w, r);
    }
}

/* Sleeps until a message, the reply's bound (a lease that runs out publishes nothing) or the
 * deadline; with no bound, the subscription timeout, so a lost message costs a poll, not a
 * hang. */
static void wait_sleep(rlk_loop_wait *w, int64_t sleep_ms)
{
    int64_t now = rlk_now_ms();
    int64_t ttl = sleep_ms >= 0 ? sleep_ms : w->base.lc->c->opts.subscription_timeout_ms;
    int64_t until = rlk_add_sat(now, ttl);
    until = until < w->deadline ? until : w->deadline;
    rlk_loop_due_set(w->base.lc, &w->due, until - now);
}

/* The attempt found nothing to take: give up, or attempt again after a wake-up that came while
 * it was on its way, or join the channel, or sleep (sleep_ms: the reply's bound). */
static void wait_busy(rlk_loop_wait *w, int64_t sleep_ms)
{
    if (rlk_cancel_is_fired(w->base.cancel)) {
        wait_end(w, RLOCK_ECANCELED);
        return;
    }
    if (rlk_now_ms() >= w->deadline) {
        wait_end(w, RLOCK_ETIMEDOUT);
        return;
    }
    if (w->base.chan != NULL && w->woken) {
        /* The release this attempt met busy may be the one whose message came first: its reply
         * and the message arrive on two connections, in either order. */
        wait_send(w);
        return;
    }
    if (w->base.chan != NULL) {
        wait_sleep(w, sleep_ms);
        return;
    }
    int r = w->ops->join(w);
    if (r < 0) {
        wait_give_up(w, r);
    } else if (r == 1) {
        wait_send(w); /* listening already: a release before the join is seen by this attempt */
    } else {
        wait_sleep(w, sleep_ms); /* until RLK_LOOP_SUBSCRIBED, which attempts once more */
    }
}

void rlk_loop_wait_result(rlk_loop_wait *w, int r, int64_t sleep_ms)
{
    w->inflight = 0;
    if (r == 1) {
        wait_finish(w, RLOCK_OK);
    } else if (r == 0) {
        wait_busy(w, sleep_ms);
    } else if (r == RLOCK_ECLOSED) {
        wait_finish(w, r);
    } else {
        wait_give_up(w, r);
    }
}

void rlk_loop_wait_left(rlk_loop_wait *w, int err)
{
    w->inflight = 0;
    wait_finish(w, err == RLOCK_ECLOSED ? err : w->end_rc);
}

static void wait_wake(rlk_loop_op *base, int why)
{
    rlk_loop_wait *w = RLK_CONTAINER_OF(base, rlk_loop_wait, base);
    if (why == RLK_LOOP_CLOSE) {
        w->ops->say(w, RLOCK_ECLOSED);
        wait_finish(w, RLOCK_ECLOSED);
    } else if (w->inflight) {
        w->woken |= why != RLK_LOOP_CANCEL; /* the reply decides, a cancellation included */
    } else if (why == RLK_LOOP_CANCEL) {
        wait_busy(w, -1); /* its token fired: it gives up */
    } else {
        wait_send(w);
    }
}

static int wait_told(rlk_loop_op *base, const char *msg, size_t len)
{
    rlk_loop_wait *w = RLK_CONTAINER_OF(base, rlk_loop_wait, base);
    return w->ops->told != NULL && w->ops->told(w, msg, len);
}

void rlk_loop_wait_wake(rlk_loop_wait *w)
{
    wait_wake(&w->base, RLK_LOOP_MESSAGE);
}

static int wait_closing(rlk_loop_op *base)
{
    rlk_loop_wait *w = RLK_CONTAINER_OF(base, rlk_loop_wait, base);
    if (w->leaving || w->ops->close_leave == NULL) {
        return 0;
    }
    w->leaving = w->ops->close_leave(w) != 0;
    return w->leaving;
}

static void wait_on_due(rlk_loop_due *due)
{
    rlk_loop_wait *w = RLK_CONTAINER_OF(due, rlk_loop_wait, due);
    if (!w->inflight || w->resend) {
        w->resend = 0;
        wait_send(w);
    }
}

void rlk_loop_wait_resend(rlk_loop_wait *w)
{
    w->inflight = 1;
    w->resend = 1;
    rlk_loop_due_set(w->base.lc, &w->due, 0);
}

int64_t rlk_loop_deadline(int64_t wait_ms)
{
    if (wait_ms < 0 || wait_ms > RLOCK_MAX_DURATION_MS) {
        return INT64_MAX;
    }
    return rlk_add_sat(rlk_now_ms(), wait_ms);
}

static const rlk_loop_op_type wait_type = {
    .wake = wait_wake, .closing = wait_closing, .told = wait_told};

rlk_loop_wait *rlk_loop_wait_of(rlk_loop_op *op)
{
    return op->type == &wait_type ? RLK_CONTAINER_OF(op, rlk_loop_wait, base) : NULL;
}

int rlk_loop_wait_start(rlk_loop_client *lc, rlk_loop_wait *w, const rlock_cancel *cancel)
{
    int r = rlk_loop_due_add(lc);
    if (r != RLOCK_OK) {
        return r;
    }
    w->due.fire = wait_on_due;
    r = rlk_loop_op_add(lc, &w->base, cancel, &wait_type);
    if (r == RLOCK_OK && (r = w->ops->attempt(w)) != RLOCK_OK) {
        rlk_loop_op_remove(&w->base);
    }
    if (r != RLOCK_OK) {
        rlk_loop_due_del(lc, &w->due);
        return r;
    }
    w->inflight = 1;
    return RLOCK_OK;
}
