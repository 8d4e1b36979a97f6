/*
 * Small helpers shared by every source file (util.c): clocks, thread ids and a growable byte
 * buffer; error.h declares error reporting (error.c). Private to the library.
 */
#ifndef RLK_UTIL_H
#define RLK_UTIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include "rlock.h"

#if defined(__GNUC__)
#define RLK_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define RLK_PRINTF(a, b)
#endif

/* Checks the name of a lock or another object (what: "lock", "semaphore", ...): non-empty and at
 * most 1 MiB, which keeps every derived key small. RLOCK_OK or RLOCK_EINVAL with a message. */
int rlk_check_name(const char *name, const char *what);

/* Monotonic time in milliseconds (CLOCK_MONOTONIC); never goes back, unaffected by wall clock. */
int64_t rlk_now_ms(void);
/* Monotonic time in microseconds. */
int64_t rlk_now_us(void);

/* The calling thread's rlock thread id: given on first use from a process-wide counter starting
 * at 1, unique in the process and never reused (thread ids of the OS are reused). */
uint64_t rlk_thread_id(void);

/* What an rlock_lock_ex() family call acts as, for the calls it makes on the way (a group's
 * member calls included): the owner's number, which rlk_thread_id() then returns, so that hold
 * records, the watchdog and the settling of unsure outcomes work for owners as for threads; and
 * the call's cancellation token. Owner numbers start at RLK_OWNER_TID_BASE, far above any thread
 * id (a process-wide counter from 1), and stay below 2^53 so that Lua reads them exactly. */
#define RLK_OWNER_TID_BASE (UINT64_C(1) << 52)
typedef struct rlk_call_ctx {
    uint64_t tid;               /* 0: the calling thread */
    const rlock_cancel *cancel; /* NULL: not cancellable */
} rlk_call_ctx;
/* Sets the calling thread's context (tid 0 keeps the thread's own id), saving the previous one
 * into saved for rlk_call_leave(). */
void rlk_call_enter(uint64_t tid, const rlock_cancel *cancel, rlk_call_ctx *saved);
void rlk_call_leave(const rlk_call_ctx *saved);
/* The token of the calling thread's current call, or NULL. */
const rlock_cancel *rlk_call_cancel(void);

/* The struct of type that contains member at address ptr (intrusive nodes: timers, watchdog
 * entries, hold records). */
#define RLK_CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* Initialises cv to time its waits on CLOCK_MONOTONIC (deadlines here are monotonic, so a
 * wall-clock step must not shorten or stretch a wait). */
void rlk_cond_init_monotonic(pthread_cond_t *cv);

/* Saturating add for deadlines: a + b, capped at INT64_MAX. */
int64_t rlk_add_sat(int64_t a, int64_t b);

/* Writes v in decimal to out (at least 21 bytes), NUL-terminated; returns the length. Every
 * command carries a few numbers (lease, key count, owner thread id), and snprintf's format
 * parsing was a visible share of a lock+unlock pair's client CPU. */
size_t rlk_fmt_i64(char *out, int64_t v);
size_t rlk_fmt_u64(char *out, uint64_t v);

/* A byte buffer with inline storage, so that most derived key names need no malloc. */
typedef struct rlk_buf {
    char *p;    /* data, always NUL-terminated */
    size_t len; /* bytes used, excluding the NUL */
    size_t cap; /* capacity of p, excluding the NUL */
    char inline_[192];
} rlk_buf;

void rlk_buf_init(rlk_buf *b);
void rlk_buf_free(rlk_buf *b);
int rlk_buf_append(rlk_buf *b, const void *p, size_t n); /* 0 or RLOCK_ENOMEM */
int rlk_buf_appends(rlk_buf *b, const char *s);

/* Redisson's derived names. prefix_name: "prefix:{name}" ("prefix:name" if name has a '{').
 * suffix_name: "{name}:suffix" ("name:suffix" if name has a '{'). Appended to b. */
int rlk_prefix_name(rlk_buf *b, const char *prefix, const char *name, size_t name_len);
int rlk_suffix_name(rlk_buf *b, const char *name, size_t name_len, const char *suffix);
/* rlock's grant hash of a reentrant or fair lock: "rlock_lock_waiters:{name}:grants". It sits
 * under the waiters zset's name, so an ACL key pattern written for the zset (docs/acl.md) covers
 * it, and it shares the lock name's hash slot. Appended to b. */
int rlk_grant_name(rlk_buf *b, const char *name, size_t name_len);

#endif
