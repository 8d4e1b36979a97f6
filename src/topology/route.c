/*
 * Which node a command goes to: the client's only pool, or on a cluster client the master of the
 * command's slot through the cluster router (cluster_route.c), redirections followed.
 */
#include "route.h"

#include "cluster_route.h"
#include "cluster_slot.h"

static int exchange_cmd(rlk_conn *conn, void *arg, redisReply **out)
{
    const rlk_args *a = arg;
    return rlk_conn_command(conn, a->n, a->v, a->len, out);
}

int rlk_cmd(rlock_client *c, int flags, const rlk_args *argv, redisReply **out)
{
    /* Every command rlk_cmd() sends names its key right after the command name. */
    if (c->cluster != NULL && argv->n >= 2) {
        int slot = rlk_cluster_key_slot(argv->v[1], argv->len[1]);
        return rlk_pool_run_slot(c, slot, flags, exchange_cmd, (void *)argv, out);
    }
    return rlk_pool_run(c, flags, exchange_cmd, (void *)argv, out);
}

int rlk_pool_run(rlock_client *c, int flags, rlk_exchange_fn fn, void *arg, redisReply **out)
{
    if (c->cluster != NULL) {
        return rlk_cluster_run(c, -1, flags, fn, arg, out);
    }
    return rlk_pool_run_on(c, c->pool, flags, fn, arg, out);
}

int rlk_pool_run_slot(rlock_client *c, int slot, int flags, rlk_exchange_fn fn, void *arg,
                      redisReply **out)
{
    if (c->cluster != NULL) {
        return rlk_cluster_run(c, slot, flags, fn, arg, out);
    }
    return rlk_pool_run_on(c, c->pool, flags, fn, arg, out);
}
