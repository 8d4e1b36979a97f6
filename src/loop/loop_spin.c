/*
 * The spin lock on a loop client (loop_spin.h): the reentrant lock's attempt, recording no
 * waiter, as the table of a lock's waiting operation (loop_lock_wait.h) that joins no channel,
 * so that loop_wait.c sleeps on the operation's timer alone: each busy reply sets the sleep to
 * the next pause of Redisson's back-off, cut at the deadline, where one last attempt is made.
 * A token or the free ends the sleep as for any waiting operation. Static helpers are named
 * lsp_*.
 */
#include <stdlib.h>

#include "error.h"
#include "lock_reentrant.h"
#include "lock_spin.h"
#include "loop_reentrant.h"
#include "loop_lock_wait.h"
#include "loop_spin.h"
#include "loop_sync.h"

typedef struct lsp_op {
    rlk_loop_lock_op l; /* first: the lock's completion frees the record through it */
    rlk_spin_backoff backoff;
} lsp_op;

static lsp_op *lsp_of(rlk_loop_lock_op *l)
{
    return RLK_CONTAINER_OF(l, lsp_op, l);
}

/* A busy reply's sleep is the back-off's next pause, not the holder's TTL: the waiter hears of
 * no release, so it polls as the threaded spin lock does. */
static int lsp_decode(rlk_loop_lock_op *l, redisReply *rep)
{
    int r = rlk_reentrant_attempt_reply(&l->a, rep);
    if (r == 0) {
        l->a.ttl_ms = rlk_spin_next(&lsp_of(l)->backoff);
    }
    return r;
}

static void lsp_on_reply(void *arg, redisReply *rep, int err)
{
    rlk_loop_lock_result(arg, rep, err, lsp_decode);
}

static int lsp_attempt(rlk_loop_wait *w)
{
    rlk_loop_lock_op *l = RLK_CONTAINER_OF(w, rlk_loop_lock_op, w);
    char *cmd = NULL;
    size_t len = 0;
    int r = rlk_reentrant_attempt_format(&l->a, &cmd, &len);
    r = r ? r
          : rlk_loop_eval_synced(w->base.lc, RLK_SCRIPT_LOCK_ACQUIRE, cmd, len, lsp_on_reply, l);
    free(cmd);
    return r;
}

/* No channel: loop_wait.c then sleeps until the reply's bound, the back-off's pause. */
static int lsp_join(rlk_loop_wait *w)
{
    (void)w;
    return 0;
}

static const rlk_loop_wait_ops lsp_ops = {
    .attempt = lsp_attempt,
    .join = lsp_join,
    .say = rlk_loop_lock_say,
    .complete = rlk_loop_lock_complete,
    .give_back = rlk_loop_reentrant_give_back,
};

int rlk_loop_spin_lock(rlk_loop_client *lc, rlock *lock, uint64_t tid, const rlock_lock_args *args,
                       rlock_done_fn done, void *user_data)
{
    lsp_op *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return rlk_err(RLOCK_ENOMEM, "rlock_lock_async: out of memory");
    }
    rlk_loop_lock_prepare(&op->l, lock, tid, args, done, user_data);
    op->l.w.ops = &lsp_ops;
    rlk_spin_backoff_init(&op->backoff, tid);
    int r = rlk_loop_lock_begin(lc, &op->l, args->cancel);
    if (r != RLOCK_OK) {
        free(op);
    }
    return r;
}
