/*
 * The cluster tests' shared setup: one 3 masters x 1 replica cluster per test program (the
 * harness' rc_start), clients on its seed URL, and questions about where a key lives. Part of
 * the rlock_testcommon library.
 */
#ifndef RLOCK_TESTS_TC_CLUSTER_H
#define RLOCK_TESTS_TC_CLUSTER_H

#include "redis_cluster.h"
#include "rlock.h"

/* The program's cluster, started by tc_cluster_setup (a cmocka group setup: skips the program
 * when redis-server is missing, fails it when the cluster cannot be built) and stopped by
 * tc_cluster_teardown. */
extern rc_cluster *tc_cl;
int tc_cluster_setup(void **state);
int tc_cluster_teardown(void **state);

/* A client on the cluster's seed URL (tc_options_url) with the command timeout when > 0;
 * fails the running test when there is none. */
rlock_client *tc_cluster_client(int64_t command_timeout_ms);

/* The master that serves key's slot now. */
rh_server *tc_cluster_owner(const char *key);

/* EXISTS key on the master that serves it (1 or 0), -1 on error. */
long long tc_cluster_exists(const char *key);

/* A name "<prefix><n>" whose slot the i-th master (in node order) serves, written into buf;
 * for tests that need locks on different nodes. */
void tc_cluster_name_on(int i, const char *prefix, char *buf, size_t len);

/* Slot migration as `redis-cli --cluster reshard` does it, step by step (the slot is given as
 * its decimal text): CLUSTER MYID of s (malloc()ed); a command (NULL-terminated argv) that must
 * answer +OK; CLUSTER SETSLOT slot how id; MIGRATE of every key of slot from src to dst (at most
 * 100); another master than s. Each fails the running test on an error. */
char *tc_cluster_node_id(rh_server *s);
void tc_cluster_cmd_ok(rh_server *s, const char *const *argv);
void tc_cluster_setslot(rh_server *s, const char *slot, const char *how, const char *id);
void tc_cluster_migrate_keys(rh_server *src, rh_server *dst, const char *slot);
rh_server *tc_cluster_other_master(rh_server *s);
/* The whole migration of key's slot to dst: IMPORTING, MIGRATING, the keys, then NODE on the new
 * owner and the old one. */
void tc_cluster_move_slot(const char *key, rh_server *dst);

/* A stress process (tc_stress.h) on the cluster: a client on url with tc_options_url()'s options
 * (edited by tune when set) and n reentrant handles "<prefix><i>" its threads share. The spec's
 * arg is a tc_cluster_names, its proc_init and proc_fini these two. */
#define TC_CLUSTER_NAMES_MAX 256
typedef struct tc_cluster_names {
    const char *url;
    const char *prefix;
    int n;
    void (*tune)(rlock_options *o);
} tc_cluster_names;

typedef struct tc_cluster_proc {
    rlock_client *c;
    rlock *h[TC_CLUSTER_NAMES_MAX];
} tc_cluster_proc;

void *tc_cluster_proc_open(int proc, void *names);
void tc_cluster_proc_close(void *proc_ctx);

#endif
