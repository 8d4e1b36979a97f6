/*
 * Helpers shared by the multi-lock and RedLock tests: clients on harness servers, a Redis-side
 * mutual-exclusion checker, and small threads helpers.
 */
#ifndef RLOCK_TESTS_MULTI_UTIL_H
#define RLOCK_TESTS_MULTI_UTIL_H

#include <hiredis.h>
#include <stdint.h>

#include "redis_harness.h"
#include "rlock.h"
#include "tc_redis.h"

/* A client on url with small, test-friendly timeouts; watchdog_ms <= 0 keeps the default.
 * server_timeout_ms <= 0 keeps the default RedLock per-server timeout. NULL on failure. */
rlock_client *mu_client(const char *url, int64_t watchdog_ms, int64_t server_timeout_ms);
/* The servers and clients of a group test's fixture: n fresh servers into srv[] (skipping the
 * program when redis-server is missing), a mu_client() on each into cli[]; 0, or -1 when one
 * could not be had. mu_close() frees whatever of the n clients and servers there are (pass
 * srv = NULL to free clients only). */
int mu_start(rh_server **srv, int n);
int mu_clients(rlock_client **cli, rh_server **srv, int n, int64_t watchdog_ms,
               int64_t server_timeout_ms);
void mu_close(rlock_client **cli, rh_server **srv, int n);

/* The checker: a critical section is entered with `SET chk:<name> 1 NX PX 60000` (failure =
 * another holder is inside: a violation) and left with DEL; inside it the non-atomic
 * GET cnt:<name> / SET cnt:<name> v+1 counts the entries, so lost updates show as well.
 * Returns 0, or 1 for a violation; -1 on a Redis error. */
int mu_check_enter(redisContext *c, const char *name);
int mu_check_leave(redisContext *c, const char *name);
/* GET cnt:<name> as a number (0 if absent, -1 on error). */
long long mu_counter(redisContext *c, const char *name);

/* Integer reply of a command given as a NULL-terminated argv on the harness admin connection. */
long long mu_int(rh_server *s, const char *const *argv);
long long mu_exists(rh_server *s, const char *key);
/* Number of fields of hash key (HLEN). */
long long mu_hlen(rh_server *s, const char *key);

/* Scale for stress loops: 1 normally; smaller under ASan or TSan or when RLOCK_STRESS_SCALE
 * (a percentage) is set. */
double mu_scale(void);

void mu_sleep_ms(int64_t ms);

/* A group handle over member handles m[0..n-1] (each opened by the test), made by make
 * (rlock_multi_new or rlock_redlock_new); mu_group_close() frees the group, then the members. */
#define MU_MAX_MEMBERS 8
typedef struct mu_group {
    rlock *m[MU_MAX_MEMBERS];
    size_t n;
    rlock *g;
} mu_group;
void mu_group_make(mu_group *gr, size_t n, rlock *(*make)(rlock *const *locks, size_t n));
void mu_group_close(mu_group *gr);

#endif
