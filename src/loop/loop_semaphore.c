/*
 * Semaphore operations on a loop client (loop_semaphore.h). An acquire carries one request key
 * for all of its attempts, as the blocking acquire does, so an attempt that ran twice takes its
 * permits once. Static helpers are named sop_*.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "error.h"
#include "loop_semaphore.h"
#include "loop_sync.h"
#include "loop_watchdog.h"
#include "replica.h"
#include "scripts.h"
#include "semaphore.h"
#include "semaphore_leased.h"

typedef struct sop {
    rlk_loop_wait w;
    rlock_semaphore *sem;
    rlk_sem_req q;
    int64_t n;
    int leased;       /* one leased permit, id */
    int64_t lease_ms; /* its lease; < 0: the loop watchdog renews it */
    int lost;         /* an attempt's reply was lost: the next request settles the call */
    int multi;        /* rlock_semaphore_acquire_leased_n_async(): done gets every id */
    unsigned char id[16];
    unsigned char (*ids)[16]; /* the leased permits' ids: id, or an array of n of them */
    rlk_obs_wait obs;
    int undo_acked, undo_n; /* the replicas of permits given back: acknowledged, counted */
} sop;

/* The checks every semaphore call makes: *lc on success. */
static int sop_check(rlock_semaphore *sem, const void *done, const char *what, rlk_loop_client **lc)
{
    if (sem == NULL || done == NULL) {
        (void)rlk_err(RLOCK_EINVAL, "%s: sem and done must not be NULL", what);
        return RLOCK_EINVAL;
    }
    int r = rlk_client_check(sem->client);
    if (r == RLOCK_OK && (*lc = rlk_loop_of(sem->client)) == NULL) {
        r = rlk_err(RLOCK_EINVAL, "%s needs a loop client (rlock_async.h)", what);
    }
    return r;
}

static int sop_check_permits(int64_t n)
{
    if (n < 1 || n > INT32_MAX) {
        return rlk_err(RLOCK_EINVAL, "permits must be in 1 .. %d, got %lld", INT32_MAX,
                       (long long)n);
    }
    return RLOCK_OK;
}

static int sop_kind(const sop *op)
{
    return op->leased ? RLOCK_MK_SEMAPHORE_LEASED : RLOCK_MK_SEMAPHORE;
}

static void sop_say(rlk_loop_wait *w, int rc)
{
    sop *op = RLK_CONTAINER_OF(w, sop, w);
    rlock_semaphore *sem = op->sem;
    if (rc == RLOCK_ETIMEDOUT) {
        (void)rlk_err(rc, "%lld permit(s) of semaphore '%s' not acquired in time", (long long)op->n,
                      sem->name);
    } else if (rc == RLOCK_ECANCELED) {
        (void)rlk_err(rc, "semaphore '%s': the wait was cancelled", sem->name);
    } else if (rc == RLOCK_ECLOSED) {
        (void)rlk_err(rc, "semaphore '%s': the client was freed", sem->name);
    }
}

static void sop_free(sop *op)
{
    rlk_sem_req_free(&op->q);
    if (op->ids != NULL && op->ids != (unsigned char(*)[16])op->id) {
        free(op->ids);
    }
    free(op);
}

/* Puts the leased permits of a watchdog acquire under the loop watchdog: RLOCK_OK, or
 * RLOCK_ENOMEM with none of them recorded (their leases run out). */
static int sop_watch(rlk_loop_client *lc, sop *op)
{
    for (int64_t i = 0; i < op->n; i++) {
        int r = rlk_loop_permit_add(lc, op->sem, op->ids[i]);
        for (int64_t j = 0; r != RLOCK_OK && j < i; j++) {
            rlk_loop_hold *h = rlk_loop_permit_get(lc, op->sem, op->ids[j]);
            if (h != NULL) {
                rlk_loop_hold_drop(lc, h);
            }
        }
        if (r != RLOCK_OK) {
            return r;
        }
    }
    return RLOCK_OK;
}

static void sop_complete(rlk_loop_wait *w, int rc)
{
    sop *op = RLK_CONTAINER_OF(w, sop, w);
    rlock_semaphore *sem = op->sem;
    char hex[RLOCK_PERMIT_IDS_MAX][RLOCK_PERMIT_ID_LEN + 1];
    const char *idp[RLOCK_PERMIT_IDS_MAX];
    int leased = op->leased, multi = op->multi;
    size_t n = (size_t)op->n;
    for (size_t i = 0; leased && i < n; i++) {
        rlk_sem_hex(op->ids[i], hex[i]);
        idp[i] = hex[i];
    }
    if (rc == RLOCK_OK && leased && op->lease_ms < 0) {
        rc = sop_watch(w->base.lc, op);
    }
    if (rc == RLOCK_OK && op->n > 1) {
        rlk_obs_holds_add(sem->client, sop_kind(op), sem->name, op->n - 1);
    }
    rc = rlk_obs_acquire_end(sem->client, &op->obs, sem->name, leased && rc == 0 ? hex[0] : NULL,
                             rc, 0, 1);
    void (*done)(void) = w->done;
    void *user_data = w->user_data;
    sop_free(op);
    if (multi) {
        ((rlock_semaphore_leased_n_done_fn)done)(sem, rc, rc == RLOCK_OK ? idp : NULL,
                                                 rc == RLOCK_OK ? n : 0, user_data);
    } else if (leased) {
        ((rlock_semaphore_leased_done_fn)done)(sem, rc, rc == RLOCK_OK ? hex[0] : NULL, user_data);
    } else {
        ((rlock_semaphore_done_fn)done)(sem, rc, user_data);
    }
}

/* The settlement's reply: permits kept (2) end the acquire with RLOCK_OK; otherwise it took
 * nothing, or gave back what it took, and ends with RLOCK_ECONN. */
static void sop_settle_reply(void *arg, redisReply *rep, int err)
{
    sop *op = arg;
    rlock_semaphore *sem = op->sem;
    if (err == RLOCK_OK && rep->type == REDIS_REPLY_INTEGER && rep->integer == 2) {
        rlk_log(sem->client, RLOCK_LOG_INFO,
                "semaphore '%s': kept %lld permit(s) whose acquire reply was lost", sem->name,
                (long long)op->n);
        rlk_loop_wait_result(&op->w, 1, -1);
        return;
    }
    if (err == RLOCK_ECLOSED) {
        rlk_loop_wait_result(&op->w, err, -1);
        return;
    }
    if (err != RLOCK_OK || rep->type != REDIS_REPLY_INTEGER) {
        rlk_log(sem->client, RLOCK_LOG_WARN,
                "semaphore '%s': an acquire whose reply was lost could not be settled; %lld "
                "permit(s) may stay taken",
                sem->name, (long long)op->n);
    }
    rlk_loop_wait_result(
        &op->w, rlk_err(RLOCK_ECONN, "semaphore '%s': the acquire's reply was lost", sem->name),
        -1);
}

/* Sends sem_acquire_cancel.lua for op's call, mode keep (1) or give back (0), with no WAIT. */
static int sop_settle_send(sop *op, int keep, rlk_lconn_reply_fn fn)
{
    rlk_args keys, args;
    rlk_sem_settle_args(op->sem, &op->q, op->n, keep,
                        op->leased ? (const unsigned char(*)[16])op->ids : NULL, &keys, &args);
    char *cmd = NULL;
    size_t len = 0;
    int r = rlk_script_format(RLK_SCRIPT_SEM_ACQUIRE_CANCEL, &keys, &args, &cmd, &len);
    r = r ? r : rlk_loop_eval(op->w.base.lc, RLK_SCRIPT_SEM_ACQUIRE_CANCEL, cmd, len, fn, op);
    free(cmd);
    return r;
}

/* An attempt whose reply was lost may have run and taken the permits: settle the call on Redis
 * (sem_acquire_cancel.lua, mode keep) before the operation ends, as the blocking acquire does,
 * so no permit stays taken unseen. RLOCK_OK when the settlement is on its way; an error ends the
 * operation with a warning (the permits may stay taken). */
static int sop_settle(sop *op)
{
    int r = sop_settle_send(op, 1, sop_settle_reply);
    if (r != RLOCK_OK) {
        rlk_log(op->sem->client, RLOCK_LOG_WARN,
                "semaphore '%s': an acquire whose reply was lost could not be settled; %lld "
                "permit(s) may stay taken",
                op->sem->name, (long long)op->n);
    }
    return r;
}

/* The give-back of permits fewer replicas acknowledged came back: the acquire ends with
 * RLOCK_EREPLICA, as the blocking acquire does. */
static void sop_given_back(void *arg, redisReply *rep, int err)
{
    (void)rep;
    (void)err;
    sop *op = arg;
    rlk_loop_wait_result(
        &op->w, rlk_sync_error(op->undo_acked, op->undo_n, "semaphore", op->sem->name), -1);
}

/* semaphore.c's sem_undo_unsynced() on the loop: the permits an attempt took that fewer
 * replicas acknowledged are given back (the settlement in mode give-back, with no WAIT). 1 when
 * that was sent. */
static int sop_undo(sop *op)
{
    if (!rlk_sync_short(&op->undo_acked, &op->undo_n)) {
        return 0;
    }
    rlk_obs_replica_sync_failed(op->sem->client, sop_kind(op), op->sem->name, NULL, RLOCK_EREPLICA);
    return sop_settle_send(op, 0, sop_given_back) == RLOCK_OK;
}

static void sop_reply(void *arg, redisReply *rep, int err)
{
    sop *op = arg;
    int64_t hint = -1;
    int r = err;
    if (r == RLOCK_ECONN) {
        op->lost = 1; /* settled from the next turn of the loop, on a new connection */
        rlk_loop_wait_resend(&op->w);
        return;
    }
    if (r == RLOCK_OK && rep->type == REDIS_REPLY_ERROR) {
        r = rlk_err(RLOCK_EREDIS, "semaphore '%s': %s", op->sem->name, rep->str);
    }
    r = r ? r : rlk_sem_attempt_reply(op->sem, rep, &hint);
    if (r == 1 && sop_undo(op)) {
        return;
    }
    /* The hint (the earliest lease's end, which publishes nothing) bounds the sleep when it is
     * sooner than the subscription timeout: just after it, the attempt can take that permit. */
    int64_t ttl = op->sem->client->opts.subscription_timeout_ms;
    rlk_loop_wait_result(&op->w, r, hint >= 0 && hint < ttl ? hint + 1 : -1);
}

static int sop_attempt(rlk_loop_wait *w)
{
    sop *op = RLK_CONTAINER_OF(w, sop, w);
    if (op->lost) {
        return sop_settle(op);
    }
    int leased = op->leased;
    rlk_args keys, args;
    rlk_sem_attempt_args(op->sem, &op->q, op->n, leased ? rlk_sem_expiry(op->sem, op->lease_ms) : 0,
                         leased ? (const unsigned char(*)[16])op->ids : NULL, &keys, &args);
    char *cmd = NULL;
    size_t len = 0;
    int r = rlk_script_format(RLK_SCRIPT_SEM_ACQUIRE, &keys, &args, &cmd, &len);
    r = r ? r : rlk_loop_eval_synced(w->base.lc, RLK_SCRIPT_SEM_ACQUIRE, cmd, len, sop_reply, op);
    free(cmd);
    return r;
}

static int sop_join(rlk_loop_wait *w)
{
    sop *op = RLK_CONTAINER_OF(w, sop, w);
    return rlk_loop_join(&w->base, op->sem->channel.p, op->sem->channel.len);
}

static const rlk_loop_wait_ops sop_ops = {
    .attempt = sop_attempt,
    .join = sop_join,
    .say = sop_say,
    .complete = sop_complete,
};

/* Starts the acquire op (its fields set but w): RLOCK_OK, or an error with op freed. */
static int sop_start(rlk_loop_client *lc, sop *op, int64_t wait_ms, rlock_cancel *cancel)
{
    rlock_semaphore *sem = op->sem;
    int r = rlk_cancel_check(cancel, "semaphore", sem->name);
    r = r ? r : rlk_sem_req_init(&op->q, sem->name, sem->name_len, 0);
    if (r != RLOCK_OK) {
        sop_free(op);
        return r;
    }
    op->w.ops = &sop_ops;
    op->w.deadline = rlk_loop_deadline(wait_ms);
    r = rlk_loop_wait_start(lc, &op->w, cancel);
    if (r != RLOCK_OK) {
        sop_free(op);
        return r;
    }
    rlk_obs_acquire_begin(sem->client, &op->obs, sop_kind(op), sem->name, NULL);
    return RLOCK_OK;
}

RLOCK_EXPORT int rlock_semaphore_acquire_async(rlock_semaphore *sem, int64_t permits,
                                               int64_t wait_ms, rlock_cancel *cancel,
                                               rlock_semaphore_done_fn done, void *user_data)
{
    rlk_loop_client *lc = NULL;
    int r = sop_check(sem, (const void *)done, "rlock_semaphore_acquire_async", &lc);
    r = r ? r : sop_check_permits(permits);
    if (r == RLOCK_OK && wait_ms < 0) {
        r = rlk_err(RLOCK_EINVAL, "wait_ms must be >= 0, got %lld", (long long)wait_ms);
    }
    sop *op = r == RLOCK_OK ? calloc(1, sizeof(*op)) : NULL;
    if (r != RLOCK_OK || op == NULL) {
        return r ? r : rlk_err(RLOCK_ENOMEM, "rlock_semaphore_acquire_async: out of memory");
    }
    op->sem = sem;
    op->n = permits;
    op->w.done = (void (*)(void))done;
    op->w.user_data = user_data;
    return sop_start(lc, op, wait_ms, cancel);
}

/* A leased acquire of n permits (lease_ms as the blocking call's; multi: done is a
 * rlock_semaphore_leased_n_done_fn), started: RLOCK_OK, or an error and done never runs. */
static int sop_leased(rlock_semaphore *sem, int64_t n, int multi, int64_t wait_ms, int64_t lease_ms,
                      rlock_cancel *cancel, void (*done)(void), void *user_data, const char *what)
{
    rlk_loop_client *lc = NULL;
    int r = sop_check(sem, (const void *)done, what, &lc);
    if (r == RLOCK_OK && (wait_ms < 0 || lease_ms == 0 || lease_ms > RLOCK_MAX_DURATION_MS)) {
        r = rlk_err(RLOCK_EINVAL,
                    "wait_ms must be >= 0 and lease_ms < 0 (the watchdog's) or in 1 .. %lld, got "
                    "%lld and %lld",
                    (long long)RLOCK_MAX_DURATION_MS, (long long)wait_ms, (long long)lease_ms);
    }
    if (r == RLOCK_OK && (n < 1 || n > RLOCK_PERMIT_IDS_MAX)) {
        r = rlk_err(RLOCK_EINVAL, "permits must be in 1 .. %d, got %lld", RLOCK_PERMIT_IDS_MAX,
                    (long long)n);
    }
    sop *op = r == RLOCK_OK ? calloc(1, sizeof(*op)) : NULL;
    if (op != NULL) {
        op->ids = n == 1 ? (unsigned char(*)[16])op->id : calloc((size_t)n, 16);
    }
    if (r != RLOCK_OK || op == NULL || op->ids == NULL) {
        free(op);
        return r ? r : rlk_err(RLOCK_ENOMEM, "%s: out of memory", what);
    }
    op->sem = sem;
    op->n = n;
    op->multi = multi;
    op->leased = 1;
    op->lease_ms = lease_ms;
    for (int64_t i = 0; i < n; i++) {
        uuid_generate_random(op->ids[i]); /* 16 random bytes, as Redisson's generateIdArray */
    }
    op->w.done = done;
    op->w.user_data = user_data;
    return sop_start(lc, op, wait_ms, cancel);
}

RLOCK_EXPORT int rlock_semaphore_acquire_leased_async(rlock_semaphore *sem, int64_t wait_ms,
                                                      int64_t lease_ms, rlock_cancel *cancel,
                                                      rlock_semaphore_leased_done_fn done,
                                                      void *user_data)
{
    return sop_leased(sem, 1, 0, wait_ms, lease_ms, cancel, (void (*)(void))done, user_data,
                      "rlock_semaphore_acquire_leased_async");
}

RLOCK_EXPORT int rlock_semaphore_acquire_leased_n_async(rlock_semaphore *sem, int64_t permits,
                                                        int64_t wait_ms, int64_t lease_ms,
                                                        rlock_cancel *cancel,
                                                        rlock_semaphore_leased_n_done_fn done,
                                                        void *user_data)
{
    return sop_leased(sem, permits, 1, wait_ms, lease_ms, cancel, (void (*)(void))done, user_data,
                      "rlock_semaphore_acquire_leased_n_async");
}

/* ---- release --------------------------------------------------------------------------- */

typedef struct srel {
    rlock_semaphore *sem;
    rlk_sem_req q;
    int64_t n; /* plain permits, 0: the leased permit id */
    unsigned char id[16];
    int lost; /* the loop watchdog had found the permit gone: done gets RLOCK_ELOST */
    rlock_semaphore_done_fn done;
    void *user_data;
} srel;

static void srel_reply(void *arg, redisReply *rep, int err)
{
    srel *u = arg;
    rlock_semaphore *sem = u->sem;
    int r = err;
    if (r == RLOCK_OK && rep->type != REDIS_REPLY_INTEGER) {
        r = rlk_err(rep->type == REDIS_REPLY_ERROR ? RLOCK_EREDIS : RLOCK_EPROTO,
                    "semaphore '%s': unexpected release reply", sem->name);
    }
    if (r == RLOCK_OK && u->lost) {
        r = rlk_err(RLOCK_ELOST, "the leased permit of semaphore '%s' was lost before release",
                    sem->name);
    } else if (r == RLOCK_OK && u->n == 0 && rep->integer != 1) {
        r = rlk_err(RLOCK_ENOTOWNER, "no such leased permit is held on semaphore '%s'%s", sem->name,
                    rep->integer == 0 ? " (its lease had run out)" : "");
    }
    if (r == RLOCK_OK) {
        char hex[RLOCK_PERMIT_ID_LEN + 1];
        rlk_sem_hex(u->id, hex);
        int kind = u->n > 0 ? RLOCK_MK_SEMAPHORE : RLOCK_MK_SEMAPHORE_LEASED;
        rlk_sem_warn_unsynced(sem, kind, r, "release");
        rlk_obs_holds_add(sem->client, kind, sem->name, u->n > 0 ? 1 - u->n : 0);
        rlk_obs_release(sem->client, kind, sem->name, u->n > 0 ? NULL : hex, 0, 0);
    }
    rlock_semaphore_done_fn done = u->done;
    void *user_data = u->user_data;
    rlk_sem_req_free(&u->q);
    free(u);
    done(sem, r, user_data);
}

/* Sends the release u: RLOCK_OK, or an error with u freed. */
static int srel_send(rlk_loop_client *lc, srel *u)
{
    int r = rlk_sem_req_init(&u->q, u->sem->name, u->sem->name_len, 0);
    if (r != RLOCK_OK) {
        free(u);
        return r;
    }
    int script = u->n > 0 ? RLK_SCRIPT_SEM_RELEASE : RLK_SCRIPT_SEM_RELEASE_LEASED;
    rlk_args keys, args;
    if (u->n > 0) {
        rlk_sem_release_args(u->sem, &u->q, u->n, &keys, &args);
    } else {
        rlk_sem_release_id_args(u->sem, &u->q, u->id, &keys, &args);
    }
    char *cmd = NULL;
    size_t len = 0;
    r = rlk_script_format(script, &keys, &args, &cmd, &len);
    r = r ? r : rlk_loop_eval_synced(lc, script, cmd, len, srel_reply, u);
    free(cmd);
    if (r != RLOCK_OK) {
        rlk_sem_req_free(&u->q);
        free(u);
    }
    return r;
}

/* A release record for sem after the common checks (NULL with the error in *r). */
static srel *srel_new(rlock_semaphore *sem, rlock_semaphore_done_fn done, void *user_data,
                      const char *what, rlk_loop_client **lc, int *r)
{
    *r = sop_check(sem, (const void *)done, what, lc);
    srel *u = *r == RLOCK_OK ? calloc(1, sizeof(*u)) : NULL;
    if (*r == RLOCK_OK && u == NULL) {
        *r = rlk_err(RLOCK_ENOMEM, "%s: out of memory", what);
    }
    if (u != NULL) {
        *u = (srel){.sem = sem, .done = done, .user_data = user_data};
    }
    return u;
}

RLOCK_EXPORT int rlock_semaphore_release_async(rlock_semaphore *sem, int64_t permits,
                                               rlock_semaphore_done_fn done, void *user_data)
{
    rlk_loop_client *lc = NULL;
    int r = sop_check_permits(permits);
    if (r != RLOCK_OK && sem != NULL && done != NULL) {
        return r;
    }
    srel *u = srel_new(sem, done, user_data, "rlock_semaphore_release_async", &lc, &r);
    if (u == NULL) {
        return r;
    }
    u->n = permits;
    return srel_send(lc, u);
}

RLOCK_EXPORT int rlock_semaphore_release_leased_async(rlock_semaphore *sem, const char *permit_id,
                                                      rlock_semaphore_done_fn done, void *user_data)
{
    rlk_loop_client *lc = NULL;
    unsigned char id[16];
    int r = rlk_sem_unhex(permit_id, id);
    if (r != RLOCK_OK && sem != NULL && done != NULL) {
        return r;
    }
    srel *u = srel_new(sem, done, user_data, "rlock_semaphore_release_leased_async", &lc, &r);
    if (u == NULL) {
        return r;
    }
    memcpy(u->id, id, sizeof(id));
    /* Renewals stop before the release is sent: one after it would report a spurious loss. */
    rlk_loop_hold *h = rlk_loop_permit_get(lc, sem, id);
    if (h != NULL) {
        u->lost = h->lost != 0;
        rlk_loop_hold_drop(lc, h);
    }
    return srel_send(lc, u);
}
