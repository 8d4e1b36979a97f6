/*
 * Unit tests for src/topology/cluster_map.c: no server. The CLUSTER SHARDS and CLUSTER SLOTS
 * replies are RESP bytes read from a 4-master redis-server 7.0 cluster (ports 17001..17004), parsed
 * with hiredis' reader exactly as the client parses them; variants edit those bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis.h>

#include "cluster_map.h"
#include "rlock.h"

/* One shard of a CLUSTER SHARDS reply with the given slot range, endpoint, port and health. */
#define SHARD(lo, hi, ep_len, ep, port, health_len, health)                                        \
    "*4\r\n$5\r\nslots\r\n*2\r\n:" lo "\r\n:" hi "\r\n$5\r\nnodes\r\n*1\r\n*14\r\n"                \
    "$2\r\nid\r\n$40\r\nfc0ab93c939ff4dca5c4bd881d2138dd0411ba4a\r\n$4\r\nport\r\n:" port "\r\n"   \
    "$2\r\nip\r\n$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$" ep_len "\r\n" ep "\r\n"                   \
    "$4\r\nrole\r\n$6\r\nmaster\r\n$18\r\nreplication-offset\r\n:0\r\n"                            \
    "$6\r\nhealth\r\n$" health_len "\r\n" health "\r\n"

static const char shards_resp[] =
    "*4\r\n" SHARD("8192", "12287", "9", "127.0.0.1", "17003", "6", "online")
        SHARD("12288", "16383", "9", "127.0.0.1", "17004", "6", "online")
            SHARD("4096", "8191", "9", "127.0.0.1", "17002", "6", "online")
                SHARD("0", "4095", "9", "127.0.0.1", "17001", "6", "online");

/* The same cluster as CLUSTER SLOTS answers it. */
#define SLOTS_ROW(lo, hi, port)                                                                    \
    "*3\r\n:" lo "\r\n:" hi "\r\n*4\r\n$9\r\n127.0.0.1\r\n:" port                                  \
    "\r\n$40\r\n88c1517ccfa72d1391efe6300d45ec7b631a50df\r\n*0\r\n"

static const char slots_resp[] =
    "*4\r\n" SLOTS_ROW("0", "4095", "17001") SLOTS_ROW("4096", "8191", "17002")
        SLOTS_ROW("8192", "12287", "17003") SLOTS_ROW("12288", "16383", "17004");

static redisReply *parse(const char *resp)
{
    redisReader *rd = redisReaderCreate();
    void *reply = NULL;
    assert_non_null(rd);
    assert_int_equal(redisReaderFeed(rd, resp, strlen(resp)), REDIS_OK);
    assert_int_equal(redisReaderGetReply(rd, &reply), REDIS_OK);
    assert_non_null(reply);
    redisReaderFree(rd);
    return reply;
}

static int owner_port(const rlk_cluster_map *m, int slot)
{
    return m->owner[slot] < 0 ? -1 : m->nodes[m->owner[slot]].port;
}

static void assert_four_masters(const rlk_cluster_map *m)
{
    assert_int_equal(m->n_nodes, 4);
    assert_int_equal(rlk_cluster_map_covered(m), RLK_CLUSTER_SLOTS);
    assert_int_equal(owner_port(m, 0), 17001);
    assert_int_equal(owner_port(m, 4095), 17001);
    assert_int_equal(owner_port(m, 4096), 17002);
    assert_int_equal(owner_port(m, 12287), 17003);
    assert_int_equal(owner_port(m, 16383), 17004);
    assert_string_equal(m->nodes[m->owner[0]].host, "127.0.0.1");
}

static void test_shards(void **state)
{
    (void)state;
    redisReply *r = parse(shards_resp);
    rlk_cluster_map m;
    assert_int_equal(rlk_cluster_map_from_shards(r, "seed", &m), RLOCK_OK);
    assert_four_masters(&m);
    rlk_cluster_map_free(&m);
    freeReplyObject(r);
}

static void test_slots(void **state)
{
    (void)state;
    redisReply *r = parse(slots_resp);
    rlk_cluster_map m;
    assert_int_equal(rlk_cluster_map_from_slots(r, "seed", &m), RLOCK_OK);
    assert_four_masters(&m);
    rlk_cluster_map_free(&m);
    freeReplyObject(r);
}

static void test_unknown_endpoint_uses_asked_host(void **state)
{
    (void)state;
    static const char resp[] = "*2\r\n" SHARD("0", "8191", "1", "?", "17001", "6", "online")
        SHARD("8192", "16383", "0", "", "17002", "6", "online");
    redisReply *r = parse(resp);
    rlk_cluster_map m;
    assert_int_equal(rlk_cluster_map_from_shards(r, "10.1.2.3", &m), RLOCK_OK);
    /* An endpoint of "?" or "" falls back to the ip field. */
    assert_string_equal(m.nodes[m.owner[0]].host, "127.0.0.1");
    assert_string_equal(m.nodes[m.owner[8192]].host, "127.0.0.1");
    assert_int_equal(rlk_cluster_map_covered(&m), RLK_CLUSTER_SLOTS);
    rlk_cluster_map_free(&m);
    freeReplyObject(r);

    /* CLUSTER SLOTS names an empty host when the node does not know its own address: the node
     * is then the one that was asked. */
    static const char slots[] = "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$0\r\n\r\n:7000\r\n";
    r = parse(slots);
    assert_int_equal(rlk_cluster_map_from_slots(r, "10.1.2.3", &m), RLOCK_OK);
    assert_string_equal(m.nodes[m.owner[16383]].host, "10.1.2.3");
    assert_int_equal(m.nodes[m.owner[16383]].port, 7000);
    rlk_cluster_map_free(&m);
    freeReplyObject(r);
}

/* A TLS cluster whose nodes keep a plain port announces both: a TLS client must get the
 * tls-port (the plain port would fail its handshake), a plain client the port. */
static void test_tls_cluster_ports(void **state)
{
    (void)state;
    static const char resp[] =
        "*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n*12\r\n"
        "$8\r\ntls-port\r\n:27001\r\n$4\r\nport\r\n:17001\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n"
        "$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
        "$6\r\nhealth\r\n$6\r\nonline\r\n";
    redisReply *r = parse(resp);
    rlk_cluster_map m;
    assert_int_equal(rlk_cluster_map_from_shards_tls(r, "seed", 1, &m), RLOCK_OK);
    assert_int_equal(owner_port(&m, 16383), 27001);
    rlk_cluster_map_free(&m);
    assert_int_equal(rlk_cluster_map_from_shards_tls(r, "seed", 0, &m), RLOCK_OK);
    assert_int_equal(owner_port(&m, 16383), 17001);
    rlk_cluster_map_free(&m);
    freeReplyObject(r);

    /* A node that announces one port alone (a plain node, or a TLS node with port 0) is
     * reached there by either client. */
    r = parse("*1\r\n" SHARD("0", "16383", "9", "127.0.0.1", "17001", "6", "online"));
    assert_int_equal(rlk_cluster_map_from_shards_tls(r, "seed", 1, &m), RLOCK_OK);
    assert_int_equal(owner_port(&m, 0), 17001);
    rlk_cluster_map_free(&m);
    freeReplyObject(r);
}

static void test_failed_master_leaves_slots_unserved(void **state)
{
    (void)state;
    static const char resp[] = "*2\r\n" SHARD("0", "8191", "9", "127.0.0.1", "17001", "4", "fail")
        SHARD("8192", "16383", "9", "127.0.0.1", "17002", "6", "online");
    redisReply *r = parse(resp);
    rlk_cluster_map m;
    assert_int_equal(rlk_cluster_map_from_shards(r, "seed", &m), RLOCK_OK);
    assert_int_equal(m.n_nodes, 1);
    assert_int_equal(owner_port(&m, 0), -1);
    assert_int_equal(owner_port(&m, 8192), 17002);
    assert_int_equal(rlk_cluster_map_covered(&m), 8192);
    rlk_cluster_map_free(&m);
    freeReplyObject(r);
}

static void test_malformed_topologies(void **state)
{
    (void)state;
    static const char *const bad_slots[] = {
        "+OK\r\n",
        "*1\r\n*2\r\n:0\r\n:1\r\n",                                /* no master entry */
        "*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$1\r\nh\r\n:1\r\n",     /* slot out of range */
        "*1\r\n*3\r\n:5\r\n:4\r\n*2\r\n$1\r\nh\r\n:1\r\n",         /* end before start */
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n:0\r\n",         /* port 0 */
        "*1\r\n*3\r\n:0\r\n:1\r\n*2\r\n$1\r\nh\r\n$4\r\n6379\r\n", /* port as a string */
        "*2\r\n" SLOTS_ROW("0", "1", "17001") "*3\r\n$1\r\n0\r\n:1\r\n*2\r\n$1\r\nh\r\n:1\r\n",
    };
    for (size_t i = 0; i < sizeof(bad_slots) / sizeof(bad_slots[0]); i++) {
        redisReply *r = parse(bad_slots[i]);
        rlk_cluster_map m;
        assert_int_equal(rlk_cluster_map_from_slots(r, "seed", &m), RLOCK_EPROTO);
        assert_null(m.nodes);
        assert_int_equal(m.n_nodes, 0);
        freeReplyObject(r);
    }
    static const char *const bad_shards[] = {
        ":1\r\n", "*1\r\n*2\r\n$5\r\nslots\r\n*1\r\n:0\r\n", /* odd number of slot bounds */
        "*1\r\n*2\r\n$5\r\nnodes\r\n*0\r\n",                 /* no slots field */
    };
    for (size_t i = 0; i < sizeof(bad_shards) / sizeof(bad_shards[0]); i++) {
        redisReply *r = parse(bad_shards[i]);
        rlk_cluster_map m;
        assert_int_equal(rlk_cluster_map_from_shards(r, "seed", &m), RLOCK_EPROTO);
        assert_null(m.nodes);
        freeReplyObject(r);
    }
}

static void test_redirects(void **state)
{
    (void)state;
    rlk_redirect rd;
    const char *moved = "MOVED 3999 127.0.0.1:6381";
    assert_int_equal(rlk_cluster_parse_redirect(moved, strlen(moved), &rd), RLK_REDIRECT_MOVED);
    assert_int_equal(rd.slot, 3999);
    assert_string_equal(rd.host, "127.0.0.1");
    assert_int_equal(rd.port, 6381);

    const char *ask = "ASK 16383 ::1:7000";
    assert_int_equal(rlk_cluster_parse_redirect(ask, strlen(ask), &rd), RLK_REDIRECT_ASK);
    assert_int_equal(rd.slot, 16383);
    assert_string_equal(rd.host, "::1");
    assert_int_equal(rd.port, 7000);

    const char *anon = "MOVED 0 :6380";
    assert_int_equal(rlk_cluster_parse_redirect(anon, strlen(anon), &rd), RLK_REDIRECT_MOVED);
    assert_string_equal(rd.host, "");
    assert_int_equal(rd.port, 6380);
}

static void test_not_redirects(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "ERR unknown command", "MOVED",        "MOVED ",       "MOVED 16384 h:1", "MOVED 1 h:",
        "MOVED 1 h:70000",     "MOVED 1 h:1x", "MOVED 1 h",    "MOVEDX 1 h:1",    "ASK -1 h:1",
        "MOVED 123456 h:1",    "ask 1 h:1",    "MOVED 1  h:1x"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        rlk_redirect rd = {.slot = -7};
        if (rlk_cluster_parse_redirect(cases[i], strlen(cases[i]), &rd) != RLK_REDIRECT_NONE) {
            fail_msg("'%s' was taken for a redirection", cases[i]);
        }
        assert_int_equal(rd.slot, -7);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shards),
        cmocka_unit_test(test_slots),
        cmocka_unit_test(test_unknown_endpoint_uses_asked_host),
        cmocka_unit_test(test_failed_master_leaves_slots_unserved),
        cmocka_unit_test(test_tls_cluster_ports),
        cmocka_unit_test(test_malformed_topologies),
        cmocka_unit_test(test_redirects),
        cmocka_unit_test(test_not_redirects),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
