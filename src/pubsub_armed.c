/*
 * Armed attempts (see pubsub.h): the entry's list of sleeping armed waiters, the claim that
 * answers a "0" message with the oldest one's attempt, the send, and the hand-back of the record.
 */
#include <stdlib.h>
#include <string.h>

#include "pool.h"
#include "pubsub.h"
#include "pubsub_impl.h"

/* The entry's armed attempts, in the order their owners went to sleep (mutex held). */
void rlk_armed_link(rlk_sub *s, rlk_armed *a)
{
    a->anext = NULL;
    a->aprev = s->armed_tail;
    *(s->armed_tail ? &s->armed_tail->anext : &s->armed_head) = a;
    s->armed_tail = a;
    a->listed = 1;
}

void rlk_armed_unlink(rlk_sub *s, rlk_armed *a)
{
    if (a == NULL || !a->listed) {
        return;
    }
    *(a->aprev ? &a->aprev->anext : &s->armed_head) = a->anext;
    *(a->anext ? &a->anext->aprev : &s->armed_tail) = a->aprev;
    a->aprev = a->anext = NULL;
    a->listed = 0;
}

/* A waiter of s sleeps with an armed attempt and a message arrived: gives the oldest one an
 * idle connection and queues it for rlk_send_armed(), which sends it right after the waiter is
 * woken; the waiter then reads the reply there. RLOCK_ECONN (no idle connection; the pool is
 * never waited for here): the waiter gets a permit and attempts itself, as without arming. */
int rlk_claim_armed(rlk_pubsub *ps, rlk_sub *s)
{
    rlk_conn *conn = NULL;
    if (rlk_pool_try_idle(ps->c->pool, &conn) != RLOCK_OK) {
        return RLOCK_ECONN;
    }
    rlk_armed *a = s->armed_head;
    rlk_armed_unlink(s, a);
    a->conn = conn;
    a->state = RLK_ARMED_SENT;
    a->inflight = 1;
    a->next = ps->sending;
    ps->sending = a;
    ps->armed_sent++;
    return RLOCK_OK;
}

/* Sends the claimed armed attempts. Called by the thread without the mutex, after
 * rlk_wake_given(). Each owner is woken just before its attempt goes out, so it is scheduled
 * while Redis runs the attempt, and it blocks reading the reply on the connection it was given
 * (one thread writing and another reading a socket is safe; the hiredis context is only read by
 * the owner, the send bypasses it). A record stays the thread's until the hand-back below, which
 * rlk_armed_settle() waits for before its owner reuses or frees it. */
void rlk_send_armed(rlk_pubsub *ps)
{
    rlk_armed *list = ps->sending;
    ps->sending = NULL;
    if (list == NULL) {
        return;
    }
    for (rlk_armed *a = list; a != NULL; a = a->next) {
        /* Wake the owner first, then send, so that its scheduling overlaps Redis' work. A
         * failed send leaves a broken connection, on which the owner's read fails too
         * (RLOCK_ECONN, like a failed attempt of its own). */
        pthread_cond_signal(&a->cv);
        (void)rlk_conn_send(a->conn, a->cmd, a->len);
    }
    /* Hand the records back (rlk_armed_settle): their owners may now reuse or free them. */
    pthread_mutex_lock(&ps->mu);
    for (rlk_armed *a = list, *next; a != NULL; a = next) {
        next = a->next;
        a->next = NULL;
        a->inflight = 0;
        pthread_cond_signal(&a->cv);
    }
    pthread_mutex_unlock(&ps->mu);
}

void rlk_armed_settle(rlk_pubsub *ps, rlk_armed *a)
{
    pthread_mutex_lock(&ps->mu);
    while (a->inflight) {
        pthread_cond_wait(&a->cv, &ps->mu);
    }
    pthread_mutex_unlock(&ps->mu);
}

void rlk_armed_init(rlk_armed *a, const char *cmd, size_t len)
{
    memset(a, 0, sizeof(*a));
    a->cmd = cmd;
    a->len = len;
    rlk_cond_init_monotonic(&a->cv);
}

void rlk_armed_destroy(rlk_armed *a)
{
    pthread_cond_destroy(&a->cv);
}

uint64_t rlk_pubsub_armed_sent(rlk_pubsub *ps)
{
    pthread_mutex_lock(&ps->mu);
    uint64_t n = ps->armed_sent;
    pthread_mutex_unlock(&ps->mu);
    return n;
}
