/*
 * Leader election (rlock_election_*): candidates campaign for the election's fair lock, so they
 * queue in arrival order; the leader's term is that hold's fencing token, so terms strictly
 * increase across leaders. The leader's value and term live in the record "{name}:rlock_election"
 * (lua/election_*.lua), read together with the lock so that a value shows only while its leader
 * holds; every new leader publishes on rlock_election:{name}, which observers wait on.
 */
#include <stdlib.h>
#include <string.h>

#include "client_fork.h"
#include "error.h"
#include "lock.h"
#include "notified_wait.h"
#include "release_reply.h"

/* A value is a host:port or an id: 64 KiB is plenty and keeps every record small. */
#define ELECTION_VALUE_MAX 65536

struct rlock_election {
    rlock_client *client;
    rlock *lock;     /* the fair lock called name */
    rlk_buf record;  /* {name}:rlock_election, or name:rlock_election for a tagged name */
    rlk_buf channel; /* rlock_election:{name} */
    size_t name_len;
    char name[];
};

/* The record's name: in the name's slot and under a "{app:*" key pattern, like the lock's own
 * derived keys ("{name}:..."); a name with a hash tag of its own keeps it. */
static int election_record_name(rlk_buf *b, const char *name, size_t len)
{
    const char *open = memchr(name, '{', len);
    const char *close =
        open != NULL ? memchr(open + 1, '}', len - (size_t)(open + 1 - name)) : NULL;
    int tagged = close != NULL && close > open + 1;
    int r = tagged ? RLOCK_OK : rlk_buf_appends(b, "{");
    r = r ? r : rlk_buf_append(b, name, len);
    r = r ? r : rlk_buf_appends(b, tagged ? ":rlock_election" : "}:rlock_election");
    return r;
}

static void election_destroy(rlock_election *e)
{
    rlock_free(e->lock);
    rlk_buf_free(&e->record);
    rlk_buf_free(&e->channel);
    rlk_client_unref(e->client);
    free(e);
}

RLOCK_EXPORT rlock_election *rlock_election_open(rlock_client *client, const char *name)
{
    rlock *lock = rlock_open(client, RLOCK_FAIR, name); /* checks client and name */
    if (lock == NULL) {
        return NULL;
    }
    size_t len = strlen(name);
    rlock_election *e = calloc(1, sizeof(*e) + len + 1);
    if (e == NULL) {
        rlock_free(lock);
        rlk_err(RLOCK_ENOMEM, "cannot allocate an election handle");
        return NULL;
    }
    e->client = client;
    rlk_client_ref(client);
    e->lock = lock;
    memcpy(e->name, name, len + 1); /* with its NUL */
    e->name_len = len;
    rlk_buf_init(&e->record);
    rlk_buf_init(&e->channel);
    if (election_record_name(&e->record, name, len) != RLOCK_OK ||
        rlk_prefix_name(&e->channel, "rlock_election", name, len) != RLOCK_OK) {
        election_destroy(e);
        rlk_err(RLOCK_ENOMEM, "cannot allocate an election handle");
        return NULL;
    }
    return e;
}

RLOCK_EXPORT void rlock_election_free(rlock_election *e)
{
    if (e != NULL) {
        election_destroy(e);
    }
}

static int election_check(rlock_election *e)
{
    if (e == NULL) {
        return rlk_err(RLOCK_EINVAL, "election must not be NULL");
    }
    return rlk_client_enter(e->client);
}

/* Runs a publishing script (claim or resign) of the calling thread's owner field with keys
 * [first, record, channel] or [record, channel]; its result in *v. */
static int election_notify_call(rlock_election *e, int script, int with_lock, const char *value,
                                uint64_t term, long long *v)
{
    char owner[RLK_OWNER_MAX];
    size_t owner_len = rlk_owner(e->client, rlk_thread_id(), owner);
    rlk_args keys, args;
    rlk_args_init(&keys);
    if (with_lock) {
        rlk_args_add(&keys, e->name, e->name_len);
    }
    rlk_args_add(&keys, e->record.p, e->record.len);
    rlk_args_add(&keys, e->channel.p, e->channel.len);
    rlk_args_init(&args);
    rlk_args_add(&args, owner, owner_len);
    if (value != NULL) {
        rlk_args_addi(&args, (int64_t)term);
        rlk_args_add(&args, value, strlen(value));
    }
    redisReply *rep = NULL;
    int r = rlk_script(e->client, script, 0, &keys, &args, &rep);
    r = r ? r : rlk_notify_reply(e->client, rep, v, "election");
    freeReplyObject(rep);
    return r;
}

RLOCK_EXPORT int rlock_election_campaign(rlock_election *e, const char *value, int64_t wait_ms)
{
    int r = election_check(e);
    if (r == RLOCK_OK && (value == NULL || strlen(value) > ELECTION_VALUE_MAX)) {
        r = rlk_err(RLOCK_EINVAL, "value must be a string of at most %d bytes", ELECTION_VALUE_MAX);
    }
    if (r != RLOCK_OK) {
        return r;
    }
    /* A leader that campaigns again only changes its value (no second hold). */
    if (rlock_token(e->lock) == 0) {
        r = rlock_try_lock(e->lock, wait_ms, -1);
        if (r != RLOCK_OK) {
            return r;
        }
    }
    long long v = 0;
    r = election_notify_call(e, RLK_SCRIPT_ELECTION_CLAIM, 1, value, rlock_token(e->lock), &v);
    if (r == RLOCK_OK && v == 0) {
        (void)rlock_unlock(e->lock); /* Forgets the lost hold (RLOCK_ELOST). */
        r = rlk_err(RLOCK_ELOST, "election '%s': the hold ran out before it was recorded", e->name);
    }
    return r;
}

static char *election_strndup(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* lua/election_leader.lua's reply {held, term, value, since}: RLOCK_OK with *held (1 while the
 * recorded leader holds the lock) and *term, or RLOCK_EPROTO for any other shape. */
static int election_reply(const redisReply *r, int *held, uint64_t *term)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4) {
        return RLOCK_EPROTO;
    }
    for (size_t i = 0; i < 4; i++) {
        int want = i == 2 ? REDIS_REPLY_STRING : REDIS_REPLY_INTEGER;
        if (r->element[i]->type != want) {
            return RLOCK_EPROTO;
        }
    }
    if (r->element[1]->integer < 0) {
        return RLOCK_EPROTO;
    }
    *held = r->element[0]->integer == 1;
    *term = (uint64_t)r->element[1]->integer;
    return RLOCK_OK;
}

/* The start of the recorded leader's term (ms on the server's clock) in a reply that
 * election_reply() accepted. */
static int64_t election_reply_since(const redisReply *r)
{
    return (int64_t)r->element[3]->integer;
}

/* Reads the record and whether its leader holds: *held, *term, *since (ms on the server's clock,
 * 0 without a leader) and *value (malloc()ed) when value is not NULL. */
static int election_read(rlock_election *e, int *held, uint64_t *term, char **value, int64_t *since)
{
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, e->name, e->name_len);
    rlk_args_add(&keys, e->record.p, e->record.len);
    rlk_args_init(&args);
    redisReply *rep = NULL;
    int r = rlk_script(e->client, RLK_SCRIPT_ELECTION_LEADER, RLK_IDEMPOTENT, &keys, &args, &rep);
    if (r != RLOCK_OK) {
        return r;
    }
    r = election_reply(rep, held, term);
    if (r == RLOCK_OK && since != NULL) {
        *since = *held ? election_reply_since(rep) : 0;
    }
    if (r == RLOCK_OK && value != NULL) {
        *value = *held ? election_strndup(rep->element[2]->str, rep->element[2]->len) : NULL;
        r = *held && *value == NULL ? rlk_err(RLOCK_ENOMEM, "out of memory") : RLOCK_OK;
    }
    freeReplyObject(rep);
    return r == RLOCK_EPROTO ? rlk_err(r, "election '%s': unexpected reply", e->name) : r;
}

RLOCK_EXPORT int rlock_election_leader_since(rlock_election *e, char **value, uint64_t *term,
                                             int64_t *since_ms)
{
    if (value == NULL) {
        return rlk_err(RLOCK_EINVAL, "value must not be NULL");
    }
    *value = NULL;
    int r = election_check(e);
    if (r != RLOCK_OK) {
        return r;
    }
    int held = 0;
    uint64_t t = 0;
    int64_t since = 0;
    r = election_read(e, &held, &t, value, &since);
    if (term != NULL) {
        *term = r == RLOCK_OK ? t : 0;
    }
    if (since_ms != NULL) {
        *since_ms = r == RLOCK_OK ? since : 0;
    }
    return r == RLOCK_OK ? held : r;
}

RLOCK_EXPORT int rlock_election_leader(rlock_election *e, char **value, uint64_t *term)
{
    return rlock_election_leader_since(e, value, term, NULL);
}

typedef struct election_wait {
    rlock_election *e;
    uint64_t after;
} election_wait;

static int election_passed(void *arg, int64_t *hint_ms)
{
    (void)hint_ms;
    election_wait *w = arg;
    int held = 0;
    uint64_t term = 0;
    int r = election_read(w->e, &held, &term, NULL, NULL);
    return r != RLOCK_OK ? r : term > w->after;
}

RLOCK_EXPORT int rlock_election_observe(rlock_election *e, uint64_t after_term, int64_t wait_ms)
{
    int r = election_check(e);
    if (r == RLOCK_OK && wait_ms < 0) {
        r = rlk_err(RLOCK_EINVAL, "wait_ms must be >= 0, got %lld", (long long)wait_ms);
    }
    if (r != RLOCK_OK) {
        return r;
    }
    election_wait w = {.e = e, .after = after_term};
    int64_t wait = wait_ms > RLOCK_MAX_DURATION_MS ? -1 : wait_ms;
    r = rlk_wait_notified(e->client, e->channel.p, e->channel.len, RLK_MSG_ZERO_ALL, wait,
                          election_passed, &w);
    if (r == 0) {
        return rlk_err(RLOCK_ETIMEDOUT, "election '%s': no term after %llu within %lld ms", e->name,
                       (unsigned long long)after_term, (long long)wait_ms);
    }
    return r == 1 ? RLOCK_OK : r;
}

RLOCK_EXPORT int rlock_election_resign(rlock_election *e)
{
    int r = election_check(e);
    if (r != RLOCK_OK) {
        return r;
    }
    if (rlock_token(e->lock) != 0) {
        long long v = 0;
        (void)election_notify_call(e, RLK_SCRIPT_ELECTION_RESIGN, 0, NULL, 0, &v);
    }
    return rlock_unlock(e->lock);
}
