/*
 * Clocks, thread ids, saturating arithmetic and the small byte buffer used for derived names.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"
#include "error.h"

int64_t rlk_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t rlk_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* OS thread ids (gettid, pthread_t) are reused after a thread exits; a reused id would let a
 * new thread inherit a dead thread's holds in Redis. A counter never repeats. */
static atomic_uint_fast64_t next_tid = 1;
static _Thread_local uint64_t thread_tid;

/* The owner a call of this thread acts for (rlk_call_enter), 0 for the thread itself. */
static _Thread_local rlk_call_ctx call_ctx;

uint64_t rlk_thread_id(void)
{
    if (call_ctx.tid != 0) {
        return call_ctx.tid;
    }
    if (thread_tid == 0) {
        thread_tid = (uint64_t)atomic_fetch_add(&next_tid, 1);
    }
    return thread_tid;
}

void rlk_call_enter(uint64_t tid, const rlock_cancel *cancel, rlk_call_ctx *saved)
{
    *saved = call_ctx;
    call_ctx.tid = tid;
    call_ctx.cancel = cancel;
}

void rlk_call_leave(const rlk_call_ctx *saved)
{
    call_ctx = *saved;
}

const rlock_cancel *rlk_call_cancel(void)
{
    return call_ctx.cancel;
}

void rlk_cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &ca);
    pthread_condattr_destroy(&ca);
}

int64_t rlk_add_sat(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b) {
        return INT64_MAX;
    }
    return a + b;
}

size_t rlk_fmt_u64(char *out, uint64_t u)
{
    char digits[20];
    size_t nd = 0;
    size_t n = 0;
    do {
        digits[nd++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    while (nd > 0) {
        out[n++] = digits[--nd];
    }
    out[n] = '\0';
    return n;
}

size_t rlk_fmt_i64(char *out, int64_t v)
{
    if (v >= 0) {
        return rlk_fmt_u64(out, (uint64_t)v);
    }
    /* The magnitude as unsigned, so that INT64_MIN does not overflow. */
    out[0] = '-';
    return 1 + rlk_fmt_u64(out + 1, (uint64_t)0 - (uint64_t)v);
}

void rlk_buf_init(rlk_buf *b)
{
    b->p = b->inline_;
    b->len = 0;
    b->cap = sizeof(b->inline_) - 1;
    b->p[0] = '\0';
}

void rlk_buf_free(rlk_buf *b)
{
    if (b->p != b->inline_) {
        free(b->p);
    }
    rlk_buf_init(b);
}

static int buf_grow(rlk_buf *b, size_t need)
{
    if (need <= b->cap) {
        return 0;
    }
    size_t cap = b->cap * 2 > need ? b->cap * 2 : need;
    char *p = malloc(cap + 1);
    if (p == NULL) {
        return rlk_err(RLOCK_ENOMEM, "cannot grow a buffer to %zu bytes", cap);
    }
    memcpy(p, b->p, b->len + 1);
    if (b->p != b->inline_) {
        free(b->p);
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

int rlk_buf_append(rlk_buf *b, const void *p, size_t n)
{
    if (buf_grow(b, b->len + n) != 0) {
        return RLOCK_ENOMEM;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int rlk_buf_appends(rlk_buf *b, const char *s)
{
    return rlk_buf_append(b, s, strlen(s));
}

int rlk_prefix_name(rlk_buf *b, const char *prefix, const char *name, size_t name_len)
{
    int tagged = memchr(name, '{', name_len) != NULL;
    int r = rlk_buf_appends(b, prefix);
    r = r ? r : rlk_buf_appends(b, tagged ? ":" : ":{");
    r = r ? r : rlk_buf_append(b, name, name_len);
    return r ? r : (tagged ? 0 : rlk_buf_appends(b, "}"));
}

int rlk_grant_name(rlk_buf *b, const char *name, size_t name_len)
{
    int r = rlk_prefix_name(b, "rlock_lock_waiters", name, name_len);
    return r ? r : rlk_buf_appends(b, ":grants");
}

int rlk_suffix_name(rlk_buf *b, const char *name, size_t name_len, const char *suffix)
{
    int tagged = memchr(name, '{', name_len) != NULL;
    int r = tagged ? 0 : rlk_buf_appends(b, "{");
    r = r ? r : rlk_buf_append(b, name, name_len);
    r = r ? r : rlk_buf_appends(b, tagged ? ":" : "}:");
    return r ? r : rlk_buf_appends(b, suffix);
}

#define RLK_NAME_MAX ((size_t)1024 * 1024)

int rlk_check_name(const char *name, const char *what)
{
    if (name == NULL || name[0] == '\0') {
        return rlk_err(RLOCK_EINVAL, "a %s name must be a non-empty string", what);
    }
    if (strnlen(name, RLK_NAME_MAX + 1) > RLK_NAME_MAX) {
        return rlk_err(RLOCK_EINVAL, "a %s name must be at most %zu bytes", what, RLK_NAME_MAX);
    }
    return RLOCK_OK;
}
