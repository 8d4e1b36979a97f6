/*
 * A loop client's hold records and the watchdog timer (loop_watchdog.h). A sweep sends every
 * hold due within a tenth of a renewal period, up to WD_BATCH per script call, and moves their
 * next renewal on at once, so a slow reply never makes a hold renewed twice. Static helpers are
 * named wd_*.
 */
#include <stdlib.h>
#include <string.h>

#include "loop_sync.h"
#include "replica.h"
#include "error.h"
#include "loop_watchdog.h"
#include "resp_format.h"
#include "scripts.h"
#include "semaphore.h"

#define WD_BATCH 100

/* One renewal call in flight: which holds it renews, to find them again by its reply (a hold
 * released meanwhile is simply not found). */
typedef struct wd_batch {
    rlk_loop_client *lc;
    int cls; /* the renewal class of every record in it (wd_class()) */
    int n;
    struct {
        uint64_t tid;
        char *name;
        size_t len;
    } h[WD_BATCH];
} wd_batch;

/* A record's renewal class: its side (loop_watchdog.h), or WD_PERMIT for a leased permit; the
 * records of one renewal call share a class, whose script is wd_scripts[class]. */
enum { WD_PERMIT = RLK_LOOP_WRITE + 1, WD_CLASSES };
static const int wd_scripts[WD_CLASSES] = {RLK_SCRIPT_RENEW_HASH, RLK_SCRIPT_RW_RENEW_READ,
                                           RLK_SCRIPT_RW_RENEW_WRITE, RLK_SCRIPT_SEM_RENEW_LEASED};

static int wd_class(const rlk_loop_hold *h)
{
    return h->permit ? WD_PERMIT : h->side;
}

/* The side a record of class cls is kept under (rlk_loop_hold_get()). */
static int wd_side(int cls)
{
    return cls == WD_PERMIT ? RLK_LOOP_HASH : cls;
}

static void wd_arm(rlk_loop_client *lc);

static void wd_ignore(void *arg, redisReply *rep, int err)
{
    (void)arg;
    (void)rep;
    (void)err;
}

/* A release's grant gave the hold the grant TTL only (lock_release.lua), as the threaded
 * grant_extend() knows: a watchdog hold is renewed a third of it from now, and a longer
 * explicit lease is set at once by renew_hash.lua, its reply not needed (a hold it missed
 * ends with the grant TTL, as a lease that ran out). */
static void wd_granted(rlk_loop_client *lc, rlk_loop_hold *h, const rlk_acq *a)
{
    if (h->watchdog) {
        int64_t due = rlk_now_ms() + a->granted_ttl / 3;
        h->due_ms = due < h->due_ms ? due : h->due_ms;
        wd_arm(lc);
        return;
    }
    if (a->lease_ms <= a->granted_ttl) {
        return;
    }
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_add(&keys, h->name, h->name_len);
    rlk_args_init(&args);
    rlk_args_addi(&args, a->lease_ms);
    rlk_args_add(&args, a->field, a->field_len);
    char *cmd = NULL;
    size_t len = 0;
    if (rlk_script_format(RLK_SCRIPT_RENEW_HASH, &keys, &args, &cmd, &len) != RLOCK_OK ||
        rlk_loop_eval(lc, RLK_SCRIPT_RENEW_HASH, cmd, len, wd_ignore, NULL) != RLOCK_OK) {
        rlk_log(lc->c, RLOCK_LOG_WARN, "lock '%s': a granted hold's lease could not be set",
                h->name);
    }
    free(cmd);
}

int rlk_loop_hold_grant(rlk_loop_client *lc, rlock *lock, const rlk_acq *a)
{
    rlk_loop_hold *h =
        rlk_loop_hold_get(lc, lock->name, lock->name_len, a->tid, rlk_loop_hold_side(lock), 1);
    if (h == NULL) {
        return rlk_err(RLOCK_ENOMEM, "lock '%s': out of memory recording a hold", lock->name);
    }
    if (h->lost) { /* a new hold after a lost one */
        *h = (rlk_loop_hold){.prev = h->prev,
                             .next = h->next,
                             .name = h->name,
                             .name_len = h->name_len,
                             .tid = h->tid,
                             .side = h->side};
    }
    if (h->count++ == 0) {
        h->obs_t0 = rlk_obs_now_ns();
        h->kind = rlk_obs_kind_of((rlock_kind)lock->kind);
    }
    h->lease_ms = a->lease_ms;
    memcpy(h->field, a->field, a->field_len + 1);
    h->field_len = a->field_len;
    if (a->token != 0) {
        h->token = a->token;
    }
    if (a->watchdog && !h->watchdog) {
        rlk_loop_wd_add(lc, h);
    }
    if (a->granted_ttl > 0) {
        wd_granted(lc, h, a);
    }
    return RLOCK_OK;
}

void rlk_loop_hold_drop(rlk_loop_client *lc, rlk_loop_hold *h)
{
    if (h->prev != NULL) {
        h->prev->next = h->next;
    } else {
        lc->holds = h->next;
    }
    if (h->next != NULL) {
        h->next->prev = h->prev;
    }
    free(h->name);
    free(h->label);
    free(h);
}

/* A permit's record key: its id's first 8 bytes with the top bit set, far from owner numbers. */
static uint64_t wd_permit_tid(const unsigned char id[16])
{
    uint64_t t = 0;
    memcpy(&t, id, sizeof(t));
    return t | (UINT64_C(1) << 63);
}

int rlk_loop_permit_add(rlk_loop_client *lc, rlock_semaphore *sem, const unsigned char id[16])
{
    rlk_loop_hold *h = rlk_loop_hold_get(lc, sem->timeout.p, sem->timeout.len, wd_permit_tid(id),
                                         RLK_LOOP_HASH, 1);
    char *label = h != NULL ? strdup(sem->name) : NULL;
    if (label == NULL) {
        if (h != NULL) {
            rlk_loop_hold_drop(lc, h);
        }
        return rlk_err(RLOCK_ENOMEM, "semaphore '%s': out of memory recording a permit", sem->name);
    }
    h->permit = 1;
    h->label = label;
    h->count = 1;
    h->kind = RLOCK_MK_SEMAPHORE_LEASED;
    h->obs_t0 = rlk_obs_now_ns();
    h->lease_ms = lc->c->opts.watchdog_timeout_ms;
    memcpy(h->field, id, 16);
    h->field_len = 16;
    rlk_loop_wd_add(lc, h);
    return RLOCK_OK;
}

rlk_loop_hold *rlk_loop_permit_get(rlk_loop_client *lc, const rlock_semaphore *sem,
                                   const unsigned char id[16])
{
    rlk_loop_hold *h = rlk_loop_hold_get(lc, sem->timeout.p, sem->timeout.len, wd_permit_tid(id),
                                         RLK_LOOP_HASH, 0);
    return h != NULL && h->permit && memcmp(h->field, id, 16) == 0 ? h : NULL;
}

static void wd_batch_free(wd_batch *b)
{
    for (int i = 0; i < b->n; i++) {
        free(b->h[i].name);
    }
    free(b);
}

/* Reports the hold h found lost: once, on the loop; the client-wide on_lost, then the hold's own
 * (rlock_lock_args.on_lost), as the threaded watchdog calls them. */
static void wd_report(rlk_loop_client *lc, rlk_loop_hold *h)
{
    const rlock_options *o = &lc->c->opts;
    h->lost = 1;
    h->watchdog = 0;
    void (*own)(rlock *, void *) = h->on_lost;
    void *own_ud = h->lost_ud;
    rlock *own_lock = h->lost_lock;
    h->on_lost = NULL;
    if (h->permit) {
        char hex[RLOCK_PERMIT_ID_LEN + 1];
        rlk_sem_hex((const unsigned char *)h->field, hex);
        rlk_log(lc->c, RLOCK_LOG_WARN, "a leased permit of semaphore '%s' was lost", h->label);
        rlk_obs_lost(lc->c, h->kind, h->label, hex, h->obs_t0, 0);
    } else {
        rlk_log(lc->c, RLOCK_LOG_WARN, "lock '%s': a loop hold was lost", h->name);
        rlk_obs_lost(lc->c, h->kind, h->name, h->field, h->obs_t0, h->token);
    }
    if (o->on_lost != NULL) { /* on the loop, as every callback of a loop client */
        o->on_lost(h->permit ? h->label : h->name, o->user_data);
    }
    if (own != NULL) {
        /* As the owner, so that a group member's forwarding (loop_group.c) knows whose hold. */
        rlk_call_ctx saved;
        rlk_call_enter(h->tid, NULL, &saved);
        own(own_lock, own_ud);
        rlk_call_leave(&saved);
    }
}

/* renew_hash.lua's reply: 0 for a hold whose owner no longer holds the lock, which is lost: it
 * is renewed no more and reported once; its record stays for the owner's release, which then
 * answers RLOCK_ELOST (as rlock_unlock() does). The user's callback runs after the batch is
 * freed, from a walk of the records. */
static void wd_on_reply(void *arg, redisReply *rep, int err)
{
    wd_batch *b = arg;
    rlk_loop_client *lc = b->lc;
    int acked = 0, n = 0;
    int doubt = rlk_sync_short(&acked, &n);
    int64_t now = rlk_now_ms();
    if (err == RLOCK_OK && rep->type == REDIS_REPLY_ARRAY && (int)rep->elements == b->n) {
        for (int i = 0; i < b->n; i++) {
            rlk_loop_hold *h =
                rlk_loop_hold_get(lc, b->h[i].name, b->h[i].len, b->h[i].tid, wd_side(b->cls), 0);
            if (h == NULL || h->lost || rep->element[i]->type != REDIS_REPLY_INTEGER) {
                continue;
            }
            if (rep->element[i]->integer != 0) {
                h->renewed_ms = now; /* renewed on the master: it stands, acknowledged or not */
            } else if (!doubt || now - h->renewed_ms >= lc->c->opts.watchdog_timeout_ms) {
                h->lost = 2; /* found now: reported below */
            }
            /* A "gone" from a pipeline whose WAIT fell short (or was not read) may come from
             * a master that is not the one the replicas follow: the next renewal asks again,
             * and only the lease running out unrenewed makes the hold lost (watchdog.c). */
        }
    }
    wd_batch_free(b);
    for (rlk_loop_hold *h = lc->holds; h != NULL; h = h->next) {
        if (h->lost == 2) {
            wd_report(lc, h);
        }
    }
}

/* The renewal script of each side: the one the threaded watchdog uses for such holds. */

/* Sends one renewal call for the holds of b (all of one side: the scripts share their KEYS and
 * ARGV shape, lock names then the lease and each hold's field). */
static void wd_send(rlk_loop_client *lc, wd_batch *b, rlk_loop_hold **holds)
{
    int script = wd_scripts[b->cls];
    const rlk_script_src *s = rlk_script_get(script);
    const char *argv[4 + 2 * WD_BATCH];
    size_t lens[4 + 2 * WD_BATCH];
    char nkeys[24], lease[24];
    int argc = 0;
    (void)rlk_fmt_i64(nkeys, b->n);
    (void)rlk_fmt_i64(lease, lc->c->opts.watchdog_timeout_ms);
    argv[argc++] = "EVALSHA";
    argv[argc++] = s->sha1;
    argv[argc++] = nkeys;
    for (int i = 0; i < b->n; i++) {
        argv[argc++] = holds[i]->name;
    }
    argv[argc++] = lease;
    for (int i = 0; i < b->n; i++) {
        argv[argc++] = holds[i]->field;
    }
    for (int i = 0; i < argc; i++) {
        lens[i] = strlen(argv[i]);
    }
    for (int i = 0; i < b->n; i++) {
        lens[3 + i] = holds[i]->name_len;
        lens[4 + b->n + i] = holds[i]->field_len; /* a permit's id is 16 raw bytes */
    }
    char *cmd = NULL;
    long long n = rlk_resp_format(argc, argv, lens, &cmd);
    int r = n < 0 ? RLOCK_ENOMEM : rlk_loop_eval_synced(lc, script, cmd, (size_t)n, wd_on_reply, b);
    free(cmd);
    if (r != RLOCK_OK) {
        rlk_log(lc->c, RLOCK_LOG_WARN, "loop watchdog: a renewal could not be sent (%d)", r);
        wd_batch_free(b);
    }
}

/* Sends the records of one renewal class due by until, WD_BATCH per call, and moves their next
 * renewal a period on. */
static void wd_sweep(rlk_loop_client *lc, int cls, int64_t now, int64_t until)
{
    int64_t period = lc->c->opts.watchdog_timeout_ms / 3;
    rlk_loop_hold *holds[WD_BATCH];
    wd_batch *b = NULL;
    for (rlk_loop_hold *h = lc->holds; h != NULL; h = h->next) {
        if (!h->watchdog || wd_class(h) != cls || h->due_ms > until) {
            continue;
        }
        if (b == NULL && (b = calloc(1, sizeof(*b))) == NULL) {
            break; /* the timer comes back at once: the holds are still due */
        }
        b->lc = lc;
        b->cls = cls;
        if ((b->h[b->n].name = malloc(h->name_len + 1)) == NULL) {
            break;
        }
        memcpy(b->h[b->n].name, h->name, h->name_len + 1);
        b->h[b->n].len = h->name_len;
        b->h[b->n].tid = h->tid;
        holds[b->n++] = h;
        h->due_ms = now + period;
        if (b->n == WD_BATCH) {
            wd_send(lc, b, holds);
            b = NULL;
        }
    }
    if (b != NULL && b->n > 0) {
        wd_send(lc, b, holds);
    } else {
        free(b);
    }
}

/* Renews every hold and watchdog permit due now (or within the slack), class by class. */
static void wd_on_timer(void *arg)
{
    rlk_loop_client *lc = arg;
    int64_t period = lc->c->opts.watchdog_timeout_ms / 3;
    int64_t now = rlk_now_ms(), until = now + period / 10;
    for (int cls = 0; cls < WD_CLASSES; cls++) {
        wd_sweep(lc, cls, now, until);
    }
    wd_arm(lc);
}

/* Starts the timer for the earliest due hold (none: it stays stopped). */
static void wd_arm(rlk_loop_client *lc)
{
    int64_t first = INT64_MAX;
    for (rlk_loop_hold *h = lc->holds; h != NULL; h = h->next) {
        first = h->watchdog && h->due_ms < first ? h->due_ms : first;
    }
    if (first == INT64_MAX) {
        lc->loop.timer_stop(lc->wd_timer);
        return;
    }
    int64_t delay = first - rlk_now_ms();
    (void)lc->loop.timer_start(lc->wd_timer, delay < 0 ? 0 : delay);
}

void rlk_loop_wd_add(rlk_loop_client *lc, rlk_loop_hold *h)
{
    if (lc->wd_timer == NULL) {
        lc->wd_timer = lc->loop.timer_new(lc->loop.loop_data, wd_on_timer, lc);
        if (lc->wd_timer == NULL) {
            rlk_log(lc->c, RLOCK_LOG_WARN, "loop watchdog: the loop gave no timer");
            return;
        }
    }
    h->watchdog = 1;
    h->renewed_ms = rlk_now_ms();
    h->due_ms = h->renewed_ms + lc->c->opts.watchdog_timeout_ms / 3;
    wd_arm(lc);
}
