/*
 * Single-request semaphore and latch calls on a loop client (loop_semx.h). Each call is one
 * record: which call it is (a row of SX_CALLS), its handle, request key and permit id; the reply
 * is decoded as the blocking call decodes it and handed to done on the loop. A write whose reply
 * was lost reports RLOCK_ECONN (it may have run, at most once). Static helpers are named sx_*.
 */
#include <stdlib.h>
#include <string.h>

#include "cluster_slot.h"
#include "error.h"
#include "latch.h"
#include "loop_semx.h"
#include "loop_sync.h"
#include "loop_watchdog.h"
#include "scripts.h"
#include "semaphore.h"
#include "semaphore_leased.h"

enum {
    SX_TRY_SET,
    SX_TRY_SET_TTL,
    SX_ADD,
    SX_AVAILABLE,
    SX_DRAIN,
    SX_SET,
    SX_RELEASE_IF_EXISTS,
    SX_PERMITS,
    SX_ACQUIRED,
    SX_UPDATE_LEASE,
    SX_LEASE_LEFT,
    SX_LATCH_TRY_SET,
    SX_LATCH_COUNT,
    SX_LATCH_DELETE,
};

/* What each call sends: its script (-1: GET), whether it carries a request key (keyed) and
 * waits for replicas (write), and whether done takes a value. */
static const struct {
    int script;
    int keyed, write, value;
    const char *what;
} SX_CALLS[] = {
    [SX_TRY_SET] = {RLK_SCRIPT_SEM_TRY_SET, 0, 1, 1, "rlock_semaphore_try_set_permits_async"},
    [SX_TRY_SET_TTL] = {RLK_SCRIPT_SEM_TRY_SET, 0, 1, 1,
                        "rlock_semaphore_try_set_permits_ttl_async"},
    [SX_ADD] = {RLK_SCRIPT_SEM_ADD, 0, 1, 0, "rlock_semaphore_add_permits_async"},
    [SX_AVAILABLE] = {RLK_SCRIPT_SEM_AVAILABLE, 0, 0, 1, "rlock_semaphore_available_async"},
    [SX_DRAIN] = {RLK_SCRIPT_SEM_DRAIN, 1, 1, 1, "rlock_semaphore_drain_async"},
    [SX_SET] = {RLK_SCRIPT_SEM_SET_PERMITS, 1, 1, 0, "rlock_semaphore_set_permits_async"},
    [SX_RELEASE_IF_EXISTS] = {RLK_SCRIPT_SEM_RELEASE_IF_EXISTS, 1, 1, 1,
                              "rlock_semaphore_release_if_exists_async"},
    [SX_PERMITS] = {RLK_SCRIPT_SEM_PERMITS, 0, 0, 1, "rlock_semaphore_permits_async"},
    [SX_ACQUIRED] = {RLK_SCRIPT_SEM_PERMITS, 0, 0, 1, "rlock_semaphore_acquired_async"},
    [SX_UPDATE_LEASE] = {RLK_SCRIPT_SEM_UPDATE_LEASE, 0, 1, 0,
                         "rlock_semaphore_update_lease_async"},
    [SX_LEASE_LEFT] = {RLK_SCRIPT_SEM_LEASE_LEFT, 0, 0, 1,
                       "rlock_semaphore_remaining_lease_ms_async"},
    [SX_LATCH_TRY_SET] = {RLK_SCRIPT_LATCH_TRY_SET, 0, 1, 1, "rlock_latch_try_set_count_async"},
    [SX_LATCH_COUNT] = {-1, 0, 0, 1, "rlock_latch_count_async"},
    [SX_LATCH_DELETE] = {RLK_SCRIPT_LATCH_DELETE, 1, 1, 1, "rlock_latch_delete_async"},
};

typedef struct sx {
    int call;
    rlock_semaphore *sem; /* one of sem and latch is set */
    rlock_latch *latch;
    int64_t arg, arg2;
    rlk_sem_req q;
    unsigned char id[16];
    void (*done)(void);
    void *user_data;
} sx;

static const char *sx_name(const sx *u)
{
    return u->sem != NULL ? u->sem->name : u->latch->name;
}

/* The call's own reading of an integer reply v: the value done gets, or a negative code. */
static int64_t sx_decode_int(sx *u, long long v)
{
    switch (u->call) {
    case SX_AVAILABLE:
    case SX_DRAIN:
    case SX_PERMITS:
    case SX_ACQUIRED:
        return v < 0 ? 0 : v; /* a count taken below 0 reads as 0, as the blocking calls say */
    case SX_UPDATE_LEASE:
        return v == 1 ? 0
                      : rlk_err(RLOCK_ENOTOWNER, "no such leased permit is held on semaphore '%s'",
                                u->sem->name);
    case SX_LEASE_LEFT:
        return v != -2 ? v
                       : rlk_err(RLOCK_ENOTOWNER, "no such leased permit is held on semaphore '%s'",
                                 u->sem->name);
    case SX_RELEASE_IF_EXISTS:
        rlk_sem_warn_unsynced(u->sem, RLOCK_MK_SEMAPHORE, RLOCK_OK, "release");
        if (v == 1) {
            rlk_obs_holds_add(u->sem->client, RLOCK_MK_SEMAPHORE, u->sem->name, 1 - u->arg);
            rlk_obs_release(u->sem->client, RLOCK_MK_SEMAPHORE, u->sem->name, NULL, 0, 0);
        }
        return v;
    default:
        return v;
    }
}

/* The reply decoded: the value (>= 0, or -1 for a permit without expiry) with *rc RLOCK_OK, or
 * *rc an error. */
static int64_t sx_decode(sx *u, const redisReply *rep, int err, int *rc)
{
    *rc = err;
    if (err != RLOCK_OK) {
        return 0;
    }
    if (u->call == SX_LATCH_COUNT) {
        int64_t v = rlk_latch_count_reply(u->latch, rep);
        *rc = v < 0 ? (int)v : RLOCK_OK;
        return v < 0 ? 0 : v;
    }
    if (rep->type != REDIS_REPLY_INTEGER) {
        *rc = rlk_err(rep->type == REDIS_REPLY_ERROR ? RLOCK_EREDIS : RLOCK_EPROTO, "%s '%s': %s",
                      u->sem != NULL ? "semaphore" : "latch", sx_name(u),
                      rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
        return 0;
    }
    int64_t v = sx_decode_int(u, rep->integer);
    if (v < 0 && !(u->call == SX_LEASE_LEFT && v == -1)) {
        *rc = (int)v;
        return 0;
    }
    return v;
}

static void sx_reply(void *arg, redisReply *rep, int err)
{
    sx *u = arg;
    int rc = RLOCK_OK;
    int64_t v = sx_decode(u, rep, err, &rc);
    void (*done)(void) = u->done;
    void *user_data = u->user_data;
    rlock_semaphore *sem = u->sem;
    rlock_latch *latch = u->latch;
    int value = SX_CALLS[u->call].value;
    rlk_sem_req_free(&u->q);
    free(u);
    if (latch != NULL) {
        ((rlock_latch_value_fn)done)(latch, rc, rc == RLOCK_OK ? v : 0, user_data);
    } else if (value) {
        ((rlock_semaphore_value_fn)done)(sem, rc, rc == RLOCK_OK ? v : 0, user_data);
    } else {
        ((rlock_semaphore_done_fn)done)(sem, rc, user_data);
    }
}

/* The keys and arguments of u's script, through the threaded calls' builders. */
static void sx_args(const sx *u, rlk_args *keys, rlk_args *args)
{
    int script = SX_CALLS[u->call].script;
    if (u->latch != NULL) {
        if (u->call == SX_LATCH_TRY_SET) {
            rlk_latch_keys(u->latch, keys);
            rlk_args_init(args);
            rlk_args_addi(args, u->arg);
        } else {
            rlk_latch_keyed_args(u->latch, &u->q, keys, args);
        }
    } else if (SX_CALLS[u->call].keyed) {
        rlk_sem_keyed_args(u->sem, script, &u->q, u->arg, keys, args);
    } else if (u->call == SX_PERMITS || u->call == SX_ACQUIRED) {
        rlk_sem_permits_args(u->sem, u->call == SX_PERMITS ? "total" : "leased", keys, args);
    } else if (u->call == SX_UPDATE_LEASE || u->call == SX_LEASE_LEFT) {
        rlk_sem_lease_args(u->sem, script, u->id, u->arg, keys, args);
    } else {
        rlk_sem_call_args(u->sem, script, u->call == SX_AVAILABLE ? rlk_epoch_ms() : u->arg, keys,
                          args);
        if (u->call == SX_TRY_SET_TTL) {
            rlk_args_addi(args, u->arg2);
        }
    }
}

/* Sends u: RLOCK_OK, or an error with u freed (done never runs). */
static int sx_send(rlk_loop_client *lc, sx *u)
{
    int r = RLOCK_OK;
    if (SX_CALLS[u->call].keyed && u->latch != NULL) {
        r = rlk_sem_req_init(&u->q, u->latch->name, u->latch->name_len, 1);
    } else if (SX_CALLS[u->call].keyed && u->sem != NULL) {
        r = rlk_sem_req_init(&u->q, u->sem->name, u->sem->name_len, 0);
    }
    if (r == RLOCK_OK && u->call == SX_LATCH_COUNT) {
        rlk_args argv;
        rlk_latch_count_args(u->latch, &argv);
        int slot = rlk_cluster_key_slot(argv.v[1], argv.len[1]);
        r = rlk_loop_command(lc, slot, argv.n, argv.v, argv.len, sx_reply, u);
    } else if (r == RLOCK_OK) {
        int script = SX_CALLS[u->call].script;
        rlk_args keys, args;
        sx_args(u, &keys, &args);
        char *cmd = NULL;
        size_t len = 0;
        r = rlk_script_format(script, &keys, &args, &cmd, &len);
        if (r == RLOCK_OK) {
            r = SX_CALLS[u->call].write ? rlk_loop_eval_synced(lc, script, cmd, len, sx_reply, u)
                                        : rlk_loop_eval(lc, script, cmd, len, sx_reply, u);
        }
        free(cmd);
    }
    if (r != RLOCK_OK) {
        rlk_sem_req_free(&u->q);
        free(u);
    }
    return r;
}

/* Checks the handle's client (a loop client, open) and done, then makes and sends the record
 * of call (arg, arg2 and id already checked by the caller). */
static int sx_start(int call, rlock_semaphore *sem, rlock_latch *latch, int64_t arg, int64_t arg2,
                    const unsigned char *id, void (*done)(void), void *user_data)
{
    const char *what = SX_CALLS[call].what;
    rlock_client *c = sem != NULL ? sem->client : latch != NULL ? latch->client : NULL;
    rlk_loop_client *lc = NULL;
    int r = c != NULL ? rlk_client_check(c) : rlk_err(RLOCK_EINVAL, "%s: no handle", what);
    if (r == RLOCK_OK && (lc = rlk_loop_of(c)) == NULL) {
        r = rlk_err(RLOCK_EINVAL, "%s needs a loop client (rlock_async.h)", what);
    }
    sx *u = r == RLOCK_OK ? calloc(1, sizeof(*u)) : NULL;
    if (r != RLOCK_OK || u == NULL) {
        return r ? r : rlk_err(RLOCK_ENOMEM, "%s: out of memory", what);
    }
    *u = (sx){.call = call,
              .sem = sem,
              .latch = latch,
              .arg = arg,
              .arg2 = arg2,
              .done = done,
              .user_data = user_data};
    if (id != NULL) {
        memcpy(u->id, id, sizeof(u->id));
    }
    if (call == SX_UPDATE_LEASE) { /* the new lease is not overwritten by the watchdog */
        rlk_loop_hold *h = rlk_loop_permit_get(lc, sem, u->id);
        if (h != NULL) {
            rlk_loop_hold_drop(lc, h);
        }
    }
    return sx_send(lc, u);
}

/* The NULL checks every call makes first. */
static int sx_null(const void *handle, const void *done, int call)
{
    if (handle == NULL || done == NULL) {
        return rlk_err(RLOCK_EINVAL, "%s: the handle and done must not be NULL",
                       SX_CALLS[call].what);
    }
    return RLOCK_OK;
}

/* A permit count or delta in lo .. 2^31-1 (the blocking calls' bounds). */
static int sx_range(int64_t v, int64_t lo, int call)
{
    if (v < lo || v > INT32_MAX) {
        return rlk_err(RLOCK_EINVAL, "%s: %lld is not in %lld .. %d", SX_CALLS[call].what,
                       (long long)v, (long long)lo, INT32_MAX);
    }
    return RLOCK_OK;
}

static int sx_ms(int64_t ms, int call)
{
    if (ms <= 0 || ms > RLOCK_MAX_DURATION_MS) {
        return rlk_err(RLOCK_EINVAL, "%s: the duration must be in 1 .. %lld ms, got %lld",
                       SX_CALLS[call].what, (long long)RLOCK_MAX_DURATION_MS, (long long)ms);
    }
    return RLOCK_OK;
}

#define SX_FN(f) ((void (*)(void))(f))

RLOCK_EXPORT int rlock_semaphore_try_set_permits_async(rlock_semaphore *sem, int64_t permits,
                                                       rlock_semaphore_value_fn done,
                                                       void *user_data)
{
    int r = sx_null(sem, SX_FN(done), SX_TRY_SET);
    r = r ? r : sx_range(permits, 0, SX_TRY_SET);
    return r ? r : sx_start(SX_TRY_SET, sem, NULL, permits, 0, NULL, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_semaphore_try_set_permits_ttl_async(rlock_semaphore *sem, int64_t permits,
                                                           int64_t ttl_ms,
                                                           rlock_semaphore_value_fn done,
                                                           void *user_data)
{
    int r = sx_null(sem, SX_FN(done), SX_TRY_SET_TTL);
    r = r ? r : sx_range(permits, 0, SX_TRY_SET_TTL);
    r = r ? r : sx_ms(ttl_ms, SX_TRY_SET_TTL);
    return r ? r
             : sx_start(SX_TRY_SET_TTL, sem, NULL, permits, ttl_ms, NULL, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_semaphore_add_permits_async(rlock_semaphore *sem, int64_t delta,
                                                   rlock_semaphore_done_fn done, void *user_data)
{
    int r = sx_null(sem, SX_FN(done), SX_ADD);
    if (r == RLOCK_OK && (delta == 0 || delta < -INT32_MAX || delta > INT32_MAX)) {
        r = rlk_err(RLOCK_EINVAL, "delta must be non-zero and within +-%d, got %lld", INT32_MAX,
                    (long long)delta);
    }
    return r ? r : sx_start(SX_ADD, sem, NULL, delta, 0, NULL, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_semaphore_available_async(rlock_semaphore *sem,
                                                 rlock_semaphore_value_fn done, void *user_data)
{
    int r = sx_null(sem, SX_FN(done), SX_AVAILABLE);
    return r ? r : sx_start(SX_AVAILABLE, sem, NULL, 0, 0, NULL, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_semaphore_drain_async(rlock_semaphore *sem, rlock_semaphore_value_fn done,
                                             void *user_data)
{
    int r = sx_null(sem, SX_FN(done), SX_DRAIN);
    return r ? r : sx_start(SX_DRAIN, sem, NULL, 0, 0, NULL, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_semaphore_set_permits_async(rlock_semaphore *sem, int64_t permits,
                                                   rlock_semaphore_done_fn done, void *user_data)
{
    int r = sx_null(sem, SX_FN(done), SX_SET);
    r = r ? r : sx_range(permits, 0, SX_SET);
    return r ? r : sx_start(SX_SET, sem, NULL, permits, 0, NULL, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_semaphore_release_if_exists_async(rlock_semaphore *sem, int64_t permits,
                                                         rlock_semaphore_value_fn done,
                                                         void *user_data)
{
    int r = sx_null(sem, SX_FN(done), SX_RELEASE_IF_EXISTS);
    r = r ? r : sx_range(permits, 1, SX_RELEASE_IF_EXISTS);
    return r ? r
             : sx_start(SX_RELEASE_IF_EXISTS, sem, NULL, permits, 0, NULL, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_semaphore_permits_async(rlock_semaphore *sem, rlock_semaphore_value_fn done,
                                               void *user_data)
{
    int r = sx_null(sem, SX_FN(done), SX_PERMITS);
    return r ? r : sx_start(SX_PERMITS, sem, NULL, 0, 0, NULL, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_semaphore_acquired_async(rlock_semaphore *sem, rlock_semaphore_value_fn done,
                                                void *user_data)
{
    int r = sx_null(sem, SX_FN(done), SX_ACQUIRED);
    return r ? r : sx_start(SX_ACQUIRED, sem, NULL, 0, 0, NULL, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_semaphore_update_lease_async(rlock_semaphore *sem, const char *permit_id,
                                                    int64_t lease_ms, rlock_semaphore_done_fn done,
                                                    void *user_data)
{
    unsigned char id[16];
    int r = sx_null(sem, SX_FN(done), SX_UPDATE_LEASE);
    r = r ? r : rlk_sem_unhex(permit_id, id);
    r = r ? r : sx_ms(lease_ms, SX_UPDATE_LEASE);
    return r ? r : sx_start(SX_UPDATE_LEASE, sem, NULL, lease_ms, 0, id, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_semaphore_remaining_lease_ms_async(rlock_semaphore *sem,
                                                          const char *permit_id,
                                                          rlock_semaphore_value_fn done,
                                                          void *user_data)
{
    unsigned char id[16];
    int r = sx_null(sem, SX_FN(done), SX_LEASE_LEFT);
    r = r ? r : rlk_sem_unhex(permit_id, id);
    return r ? r : sx_start(SX_LEASE_LEFT, sem, NULL, 0, 0, id, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_latch_try_set_count_async(rlock_latch *latch, int64_t count,
                                                 rlock_latch_value_fn done, void *user_data)
{
    int r = sx_null(latch, SX_FN(done), SX_LATCH_TRY_SET);
    r = r ? r : sx_range(count, 1, SX_LATCH_TRY_SET);
    return r ? r : sx_start(SX_LATCH_TRY_SET, NULL, latch, count, 0, NULL, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_latch_count_async(rlock_latch *latch, rlock_latch_value_fn done,
                                         void *user_data)
{
    int r = sx_null(latch, SX_FN(done), SX_LATCH_COUNT);
    return r ? r : sx_start(SX_LATCH_COUNT, NULL, latch, 0, 0, NULL, SX_FN(done), user_data);
}

RLOCK_EXPORT int rlock_latch_delete_async(rlock_latch *latch, rlock_latch_value_fn done,
                                          void *user_data)
{
    int r = sx_null(latch, SX_FN(done), SX_LATCH_DELETE);
    return r ? r : sx_start(SX_LATCH_DELETE, NULL, latch, 0, 0, NULL, SX_FN(done), user_data);
}

/* ---- several leased permits released one after the other ------------------------------- */

typedef struct sxn {
    rlock_semaphore *sem;
    size_t count, next;
    int64_t released;
    rlock_semaphore_value_fn done;
    void *user_data;
    char ids[RLOCK_PERMIT_IDS_MAX][RLOCK_PERMIT_ID_LEN + 1];
} sxn;

static void sxn_step(rlock_semaphore *sem, int rc, void *user_data);

/* Sends the release of the next id: RLOCK_OK, or the error of the call. */
static int sxn_send(sxn *u)
{
    return rlock_semaphore_release_leased_async(u->sem, u->ids[u->next++], sxn_step, u);
}

/* One release came back: counted when it released, ignored when the permit was no longer held
 * (or lost), the end on another error, as rlock_semaphore_release_leased_n() does. */
static void sxn_step(rlock_semaphore *sem, int rc, void *user_data)
{
    sxn *u = user_data;
    if (rc == RLOCK_OK) {
        u->released++;
    }
    if ((rc == RLOCK_OK || rc == RLOCK_ENOTOWNER || rc == RLOCK_ELOST) && u->next < u->count) {
        rc = sxn_send(u);
        if (rc == RLOCK_OK) {
            return;
        }
    }
    rlock_semaphore_value_fn done = u->done;
    void *ud = u->user_data;
    int64_t released = u->released;
    free(u);
    if (rc == RLOCK_ENOTOWNER || rc == RLOCK_ELOST) {
        rc = RLOCK_OK;
    }
    done(sem, rc, rc == RLOCK_OK ? released : 0, ud);
}

RLOCK_EXPORT int rlock_semaphore_release_leased_n_async(rlock_semaphore *sem,
                                                        const char *const *permit_ids, size_t count,
                                                        rlock_semaphore_value_fn done,
                                                        void *user_data)
{
    const char *what = "rlock_semaphore_release_leased_n_async";
    if (sem == NULL || done == NULL || permit_ids == NULL || count < 1 ||
        count > RLOCK_PERMIT_IDS_MAX) {
        return rlk_err(RLOCK_EINVAL, "%s: sem, done and 1 .. %d permit_ids are needed", what,
                       RLOCK_PERMIT_IDS_MAX);
    }
    unsigned char id[16];
    for (size_t i = 0; i < count; i++) {
        int r = rlk_sem_unhex(permit_ids[i], id); /* all checked before any is released */
        if (r != RLOCK_OK) {
            return r;
        }
    }
    sxn *u = calloc(1, sizeof(*u));
    if (u == NULL) {
        return rlk_err(RLOCK_ENOMEM, "%s: out of memory", what);
    }
    *u = (sxn){.sem = sem, .count = count, .done = done, .user_data = user_data};
    for (size_t i = 0; i < count; i++) {
        memcpy(u->ids[i], permit_ids[i], RLOCK_PERMIT_ID_LEN + 1);
    }
    int r = sxn_send(u);
    if (r != RLOCK_OK) {
        free(u);
    }
    return r;
}
