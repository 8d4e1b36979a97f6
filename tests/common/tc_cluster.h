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
