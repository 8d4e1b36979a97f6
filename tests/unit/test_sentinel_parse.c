/*
 * The pure parsers of Sentinel replies that threaded and loop clients share (sentinel.h,
 * sentinel_watch.h), no server: SENTINEL get-master-addr-by-name's reply, ROLE's, and a
 * +switch-master message, each well formed and in the shapes a client must refuse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis.h>

#include "sentinel.h"
#include "sentinel_watch.h"

/* The reply hiredis reads from RESP text. */
static redisReply *reply_of(const char *resp)
{
    redisReader *r = redisReaderCreate();
    void *rep = NULL;
    assert_int_equal(redisReaderFeed(r, resp, strlen(resp)), REDIS_OK);
    assert_int_equal(redisReaderGetReply(r, &rep), REDIS_OK);
    assert_non_null(rep);
    redisReaderFree(r);
    return rep;
}

/* parse_addr's code for resp, with host and port when it is RLOCK_OK. */
static int addr_of(const char *resp, char *host, int *port)
{
    redisReply *rep = reply_of(resp);
    int r = rlk_sentinel_parse_addr("m", rep, host, port);
    freeReplyObject(rep);
    return r;
}

static void test_addr(void **state)
{
    (void)state;
    char host[RLK_HOST_MAX] = "";
    int port = 0;
    assert_int_equal(addr_of("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n", host, &port), RLOCK_OK);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 6380);
    assert_int_equal(addr_of("$-1\r\n", host, &port), RLOCK_EPROTO);
    assert_non_null(strstr(rlock_last_error(), "'m'"));
    assert_int_equal(addr_of("-ERR no\r\n", host, &port), RLOCK_EREDIS);
    assert_int_equal(addr_of("*1\r\n$1\r\na\r\n", host, &port), RLOCK_EPROTO);
    assert_int_equal(addr_of("*2\r\n$0\r\n\r\n$4\r\n6380\r\n", host, &port), RLOCK_EPROTO);
    assert_int_equal(addr_of("*2\r\n$1\r\na\r\n$5\r\n65536\r\n", host, &port), RLOCK_EPROTO);
    assert_int_equal(addr_of("*2\r\n$1\r\na\r\n$3\r\n63x\r\n", host, &port), RLOCK_EPROTO);
    assert_int_equal(addr_of("*2\r\n$1\r\na\r\n:6380\r\n", host, &port), RLOCK_EPROTO);
}

static void test_role(void **state)
{
    (void)state;
    const char *yes = "*3\r\n$6\r\nmaster\r\n:10\r\n*0\r\n";
    const char *no[] = {"*5\r\n$5\r\nslave\r\n$1\r\na\r\n:1\r\n$9\r\nconnected\r\n:1\r\n", "*0\r\n",
                        "+master\r\n", "-ERR x\r\n"};
    redisReply *rep = reply_of(yes);
    assert_int_equal(rlk_sentinel_role_is_master(rep), 1);
    freeReplyObject(rep);
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        rep = reply_of(no[i]);
        assert_int_equal(rlk_sentinel_role_is_master(rep), 0);
        freeReplyObject(rep);
    }
}

/* parse_switch on a pushed message whose text is text (NULL: resp is the whole reply). */
static int switch_of(const char *text, const char *resp, char *host, int *port)
{
    char buf[512];
    if (text != NULL) {
        snprintf(buf, sizeof(buf), "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$%zu\r\n%s\r\n",
                 strlen(text), text);
        resp = buf;
    }
    redisReply *rep = reply_of(resp);
    int r = rlk_sentinel_parse_switch("m", rep, host, port);
    freeReplyObject(rep);
    return r;
}

static void test_switch(void **state)
{
    (void)state;
    char host[RLK_HOST_MAX] = "";
    int port = 0;
    assert_int_equal(switch_of("m 10.0.0.1 6379 10.0.0.2 6380", NULL, host, &port), 1);
    assert_string_equal(host, "10.0.0.2");
    assert_int_equal(port, 6380);
    assert_int_equal(switch_of("other 10.0.0.1 6379 10.0.0.2 6380", NULL, host, &port), 0);
    assert_int_equal(switch_of("m 10.0.0.1 6379 10.0.0.2", NULL, host, &port), 0);
    assert_int_equal(switch_of("m 10.0.0.1 6379 10.0.0.2 0", NULL, host, &port), 0);
    assert_int_equal(switch_of("m 10.0.0.1 6379 10.0.0.2 80x", NULL, host, &port), 0);
    const char *confirm = "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n";
    assert_int_equal(switch_of(NULL, confirm, host, &port), 0);
    assert_string_equal(host, "10.0.0.2"); /* a refused message writes nothing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addr),
        cmocka_unit_test(test_role),
        cmocka_unit_test(test_switch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
