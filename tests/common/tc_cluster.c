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
#include <hiredis.h>

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

/* The node id of s (CLUSTER MYID), malloc()ed. */
char *tc_cluster_node_id(rh_server *s)
{
    const char *argv[] = {"CLUSTER", "MYID", NULL};
    char *id = rh_cmd_str(s, argv);
    assert_non_null(id);
    return id;
}

/* Runs a command (NULL-terminated argv) on s that must answer a status (+OK). */
void tc_cluster_cmd_ok(rh_server *s, const char *const *argv)
{
    redisReply *r = rh_cmd(s, argv);
    assert_non_null(r);
    if (r->type != REDIS_REPLY_STATUS) {
        fail_msg("%s %s: %s", argv[0], argv[1], r->type == REDIS_REPLY_ERROR ? r->str : "?");
    }
    freeReplyObject(r);
}

void tc_cluster_setslot(rh_server *s, const char *slot, const char *how, const char *id)
{
    const char *argv[] = {"CLUSTER", "SETSLOT", slot, how, id, NULL};
    tc_cluster_cmd_ok(s, argv);
}

/* MIGRATEs every key of slot from src to dst (at most 100: one lock has a handful). */
void tc_cluster_migrate_keys(rh_server *src, rh_server *dst, const char *slot)
{
    const char *get[] = {"CLUSTER", "GETKEYSINSLOT", slot, "100", NULL};
    redisReply *keys = rh_cmd(src, get);
    assert_non_null(keys);
    assert_int_equal(keys->type, REDIS_REPLY_ARRAY);
    assert_true(keys->elements > 0);
    char port[16];
    /* A TLS cluster's MIGRATE dials the target over TLS, on its TLS port. */
    snprintf(port, sizeof(port), "%d", rh_tls_port(dst) > 0 ? rh_tls_port(dst) : rh_port(dst));
    for (size_t i = 0; i < keys->elements; i++) {
        const char *argv[] = {"MIGRATE", "127.0.0.1", port, keys->element[i]->str,
                              "0",       "5000",      NULL};
        tc_cluster_cmd_ok(src, argv);
    }
    freeReplyObject(keys);
}

/* Another master than s. */
rh_server *tc_cluster_other_master(rh_server *s)
{
    char name[32];
    for (int i = 0; i < 3; i++) {
        tc_cluster_name_on(i, "other-", name, sizeof(name));
        if (tc_cluster_owner(name) != s) {
            return tc_cluster_owner(name);
        }
    }
    fail_msg("no other master");
    return NULL;
}

void tc_cluster_move_slot(const char *key, rh_server *dst)
{
    char slot[16];
    snprintf(slot, sizeof(slot), "%d", rlk_cluster_key_slot(key, strlen(key)));
    rh_server *src = tc_cluster_owner(key);
    char *src_id = tc_cluster_node_id(src);
    char *dst_id = tc_cluster_node_id(dst);
    tc_cluster_setslot(dst, slot, "IMPORTING", src_id);
    tc_cluster_setslot(src, slot, "MIGRATING", dst_id);
    tc_cluster_migrate_keys(src, dst, slot);
    /* As redis-cli: the new owner first, then the old one; gossip tells the rest. */
    tc_cluster_setslot(dst, slot, "NODE", dst_id);
    tc_cluster_setslot(src, slot, "NODE", dst_id);
    free(src_id);
    free(dst_id);
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
