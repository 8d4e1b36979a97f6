/*
 * The cluster tests' shared setup (tc_cluster.h).
 */
#include "tc_cluster.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_slot.h"
#include "tc_redis.h"

rc_cluster *tc_cl;

int tc_cluster_setup(void **state)
{
    rh_skip_if_unavailable();
    (void)state;
    tc_cl = rc_start(3, 1);
    return tc_cl != NULL ? 0 : -1;
}

int tc_cluster_teardown(void **state)
{
    (void)state;
    rc_free(tc_cl);
    tc_cl = NULL;
    return 0;
}

rlock_client *tc_cluster_client(int64_t command_timeout_ms)
{
    rlock_options o;
    tc_options_url(&o, rc_seed_url(tc_cl));
    if (command_timeout_ms > 0) {
        o.command_timeout_ms = command_timeout_ms;
    }
    return tc_client(&o);
}

rh_server *tc_cluster_owner(const char *key)
{
    return rc_slot_owner(tc_cl, rlk_cluster_key_slot(key, strlen(key)));
}

long long tc_cluster_exists(const char *key)
{
    rh_server *owner = tc_cluster_owner(key);
    const char *argv[] = {"EXISTS", key, NULL};
    return owner != NULL ? rh_cmd_int(owner, argv) : -1;
}

void tc_cluster_name_on(int i, const char *prefix, char *buf, size_t len)
{
    /* The masters in the order of the slots they serve: the first of slot 0, and so on. */
    rh_server *masters[3] = {NULL, NULL, NULL};
    int found = 0;
    for (int slot = 0; slot < 16384 && found < 3; slot += 1024) {
        rh_server *o = rc_slot_owner(tc_cl, slot);
        int seen = 0;
        for (int k = 0; k < found; k++) {
            seen |= masters[k] == o;
        }
        if (o != NULL && !seen) {
            masters[found++] = o;
        }
    }
    assert_true(i >= 0 && i < found);
    for (int n = 0;; n++) {
        snprintf(buf, len, "%s%d", prefix, n);
        if (tc_cluster_owner(buf) == masters[i]) {
            return;
        }
    }
}

void tc_cluster_proc_close(void *proc_ctx)
{
    tc_cluster_proc *p = proc_ctx;
    for (int i = 0; p != NULL && i < TC_CLUSTER_NAMES_MAX; i++) {
        rlock_free(p->h[i]);
    }
    if (p != NULL) {
        rlock_client_free(p->c);
    }
    free(p);
}

void *tc_cluster_proc_open(int proc, void *names)
{
    (void)proc;
    const tc_cluster_names *nm = names;
    rlock_options o;
    tc_options_url(&o, nm->url);
    if (nm->tune != NULL) {
        nm->tune(&o);
    }
    tc_cluster_proc *p = calloc(1, sizeof(*p));
    p->c = p != NULL && nm->n <= TC_CLUSTER_NAMES_MAX ? tc_client_try(&o) : NULL;
    for (int i = 0; p != NULL && p->c != NULL && i < nm->n; i++) {
        char name[64];
        snprintf(name, sizeof(name), "%s%d", nm->prefix, i);
        p->h[i] = rlock_open(p->c, RLOCK_REENTRANT, name);
    }
    if (p == NULL || p->c == NULL || p->h[nm->n - 1] == NULL) {
        tc_cluster_proc_close(p);
        return NULL;
    }
    return p;
}
