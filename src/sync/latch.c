/*
 * The count-down latch (Redisson RCountDownLatch data): the count is a string at name (absent =
 * 0), count-downs publish "0" on redisson_countdownlatch__channel__{name} when the count
 * reaches zero, and awaiters wait on that channel (the subscriber wakes all of them on "0").
 * A count-down carries a request key (semaphore.h), so that it is resent after a lost reply and
 * counts once.
 */
#include <stdlib.h>
#include <string.h>

#include "cancel.h"
#include "client_fork.h"
#include "error.h"
#include "pool.h"
#include "pubsub.h"
#include "replica.h"
#include "latch.h"
#include "scripts.h"
#include "notified_wait.h"

RLOCK_EXPORT rlock_latch *rlock_latch_open(rlock_client *client, const char *name)
{
    if (client == NULL) {
        rlk_err(RLOCK_EINVAL, "client must not be NULL");
        return NULL;
    }
    if (rlk_client_enter(client) != RLOCK_OK || rlk_check_name(name, "latch") != RLOCK_OK ||
        rlk_check_cluster_name(client, name, "latch") != RLOCK_OK) {
        return NULL;
    }
    size_t len = strlen(name);
    rlock_latch *l = calloc(1, sizeof(*l) + len + 1);
    if (l == NULL) {
        rlk_err(RLOCK_ENOMEM, "cannot allocate a latch handle");
        return NULL;
    }
    memcpy(l->name, name, len + 1);
    l->name_len = len;
    rlk_buf_init(&l->channel);
    if (rlk_buf_appends(&l->channel, "redisson_countdownlatch__channel__{") != RLOCK_OK ||
        rlk_buf_append(&l->channel, name, len) != RLOCK_OK ||
        rlk_buf_appends(&l->channel, "}") != RLOCK_OK) {
        rlk_buf_free(&l->channel);
        free(l);
        rlk_err(RLOCK_ENOMEM, "cannot allocate a latch handle");
        return NULL;
    }
    l->client = client;
    rlk_client_ref(client);
    return l;
}

RLOCK_EXPORT void rlock_latch_free(rlock_latch *l)
{
    if (l == NULL) {
        return;
    }
    rlk_buf_free(&l->channel);
    rlk_client_unref(l->client);
    free(l);
}

static int latch_check(rlock_latch *l)
{
    if (l == NULL) {
        return rlk_err(RLOCK_EINVAL, "latch must not be NULL");
    }
    int r = rlk_client_enter(l->client);
    return r ? r : rlk_client_blocking(l->client, "a latch call");
}

void rlk_latch_keys(const rlock_latch *l, rlk_args *keys)
{
    rlk_args_init(keys);
    rlk_args_add(keys, l->name, l->name_len);
    rlk_args_add(keys, l->channel.p, l->channel.len);
}

/* Runs script on [name, channel] with the given arguments; integer reply in *v. */
static int latch_call(rlock_latch *l, int script, int flags, const rlk_args *args, long long *v)
{
    rlk_args keys;
    rlk_latch_keys(l, &keys);
    redisReply *rep = NULL;
    int r = rlk_script(l->client, script, flags, &keys, args, &rep);
    if (r == RLOCK_OK && rep->type != REDIS_REPLY_INTEGER) {
        r = rlk_err(RLOCK_EPROTO, "latch '%s': expected an integer reply", l->name);
    }
    if (r == RLOCK_OK) {
        *v = rep->integer;
    }
    freeReplyObject(rep);
    return r;
}

RLOCK_EXPORT int rlock_latch_try_set_count(rlock_latch *l, int64_t count)
{
    int r = latch_check(l);
    if (r == RLOCK_OK && (count < 1 || count > INT32_MAX)) {
        r = rlk_err(RLOCK_EINVAL, "count must be in 1 .. %d, got %lld", INT32_MAX,
                    (long long)count);
    }
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_args args;
    rlk_args_init(&args);
    rlk_args_addi(&args, count);
    long long v = 0;
    r = latch_call(l, RLK_SCRIPT_LATCH_TRY_SET, RLK_IDEMPOTENT, &args, &v);
    return r ? r : (int)v;
}

void rlk_latch_keyed_args(const rlock_latch *l, const rlk_sem_req *q, rlk_args *keys,
                          rlk_args *args)
{
    rlk_args_init(keys);
    rlk_args_add(keys, l->name, l->name_len);
    rlk_args_add(keys, l->channel.p, l->channel.len);
    rlk_args_add(keys, q->key.p, q->key.len);
    rlk_args_init(args);
    rlk_args_addi(args, rlk_sem_req_ttl(l->client));
}

/* Runs script (latch_count_down.lua, latch_delete.lua) with the request q, resent after a lost
 * reply (rlk_sem_run): its integer reply in *v. */
static int latch_keyed(rlock_latch *l, int script, rlk_sem_req *q, long long *v, const char *what)
{
    rlk_args keys, args;
    rlk_latch_keyed_args(l, q, &keys, &args);
    redisReply *rep = NULL;
    int r = rlk_sem_run(l->client, q, script, &keys, &args, &rep, what, l->name);
    if (r == RLOCK_OK && rep->type != REDIS_REPLY_INTEGER) {
        r = rlk_err(RLOCK_EPROTO, "latch '%s': expected an integer reply", l->name);
    }
    if (r == RLOCK_OK) {
        *v = rep->integer;
    }
    freeReplyObject(rep);
    return r;
}

RLOCK_EXPORT int rlock_latch_count_down(rlock_latch *l)
{
    int r = latch_check(l);
    rlk_sem_req q;
    r = r ? r : rlk_sem_req_init(&q, l->name, l->name_len, 1);
    if (r != RLOCK_OK) {
        return r;
    }
    long long v = 0;
    rlk_sync_clear();
    r = latch_keyed(l, RLK_SCRIPT_LATCH_COUNT_DOWN, &q, &v, "latch count-down");
    rlk_sem_req_free(&q);
    int acked = 0, n = 0;
    if (r == RLOCK_OK && rlk_sync_short(&acked, &n)) {
        rlk_obs_replica_sync_failed(l->client, RLOCK_MK_LATCH, l->name, NULL, RLOCK_EREPLICA);
        /* Not undone: a count-down that reached 0 has released the waiters already, and counting
         * up again would hold later awaiters for a count-down nobody owes. The caller learns that
         * a failover may forget it (and that a retry would count down twice). */
        return rlk_sync_error(acked, n, "latch count-down", l->name);
    }
    return r;
}

RLOCK_EXPORT int rlock_latch_delete(rlock_latch *l)
{
    int r = latch_check(l);
    rlk_sem_req q;
    r = r ? r : rlk_sem_req_init(&q, l->name, l->name_len, 1);
    if (r != RLOCK_OK) {
        return r;
    }
    long long v = 0;
    r = latch_keyed(l, RLK_SCRIPT_LATCH_DELETE, &q, &v, "latch delete");
    rlk_sem_req_free(&q);
    return r ? r : (int)v;
}

void rlk_latch_count_args(const rlock_latch *l, rlk_args *argv)
{
    rlk_args_init(argv);
    rlk_args_adds(argv, "GET");
    rlk_args_add(argv, l->name, l->name_len);
}

int64_t rlk_latch_count_reply(const rlock_latch *l, const redisReply *rep)
{
    int64_t v = -1;
    if (rep->type == REDIS_REPLY_NIL) {
        v = 0;
    } else if (rep->type == REDIS_REPLY_STRING) {
        char *end = NULL;
        long long n = strtoll(rep->str, &end, 10);
        v = end != rep->str && *end == '\0' ? (n < 0 ? 0 : n) : -1;
    }
    if (v < 0) {
        return rlk_err(RLOCK_EPROTO, "latch '%s': the count is not an integer", l->name);
    }
    return v;
}

RLOCK_EXPORT int64_t rlock_latch_count(rlock_latch *l)
{
    int r = latch_check(l);
    if (r != RLOCK_OK) {
        return r;
    }
    rlk_args argv;
    rlk_latch_count_args(l, &argv);
    redisReply *rep = NULL;
    r = rlk_cmd(l->client, RLK_IDEMPOTENT, &argv, &rep);
    if (r != RLOCK_OK) {
        return r;
    }
    int64_t v = rlk_latch_count_reply(l, rep);
    freeReplyObject(rep);
    return v;
}

static int latch_open_now(void *arg, int64_t *hint_ms)
{
    (void)hint_ms;
    int64_t n = rlock_latch_count(arg);
    return n < 0 ? (int)n : n == 0;
}

/* rlock_latch_await_ex() on a latch that is not NULL. */
static int latch_await(rlock_latch *l, int64_t wait_ms, rlock_cancel *cancel)
{
    /* A fired token ends the call before the client is entered (which may dial after a fork()). */
    int r = rlk_cancel_check(cancel, "latch", l->name);
    r = r ? r : latch_check(l);
    if (r == RLOCK_OK && wait_ms < 0) {
        r = rlk_err(RLOCK_EINVAL, "wait_ms must be >= 0, got %lld", (long long)wait_ms);
    }
    if (r != RLOCK_OK) {
        return r;
    }
    int64_t wait = wait_ms > RLOCK_MAX_DURATION_MS ? -1 : wait_ms;
    r = rlk_wait_notified_cancel(l->client, l->channel.p, l->channel.len, RLK_MSG_ZERO_ALL, wait,
                                 cancel, latch_open_now, l);
    if (r == RLOCK_ECANCELED) {
        return rlk_cancel_check(cancel, "latch", l->name); /* the error names the latch */
    }
    if (r == 0) {
        return rlk_err(RLOCK_ETIMEDOUT, "latch '%s' still counting after %lld ms", l->name,
                       (long long)wait_ms);
    }
    return r == 1 ? RLOCK_OK : r;
}

RLOCK_EXPORT int rlock_latch_await_ex(rlock_latch *l, int64_t wait_ms, rlock_cancel *cancel)
{
    if (l == NULL) {
        return rlk_err(RLOCK_EINVAL, "latch must not be NULL");
    }
    if (wait_ms < 0) {
        return latch_await(l, wait_ms, cancel); /* bad input: no acquire, not observed */
    }
    /* An await counts as an acquire, but holds nothing: hold count 0. */
    rlk_obs_wait w;
    rlk_obs_acquire_begin(l->client, &w, RLOCK_MK_LATCH, l->name, NULL);
    int r = latch_await(l, wait_ms, cancel);
    return rlk_obs_acquire_end(l->client, &w, l->name, NULL, r, 0, 0);
}

RLOCK_EXPORT int rlock_latch_await(rlock_latch *l, int64_t wait_ms)
{
    return rlock_latch_await_ex(l, wait_ms, NULL);
}
