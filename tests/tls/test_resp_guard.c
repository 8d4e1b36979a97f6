/*
 * The reply stream's guard (src/transport/resp_guard.c), no server: what Redis sends passes, split
 * at every byte; what announces more than the caps, or is no number Redis would send, is refused
 * with RLOCK_EPROTO; and a bulk payload that looks like a header is passed over, not read.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "util.h"
#include "resp_guard.h"
#include "tc_redis.h"

/* Scans s whole in one call and, on a fresh guard, split into pieces of every length from 1 to
 * 7; every way must give the same answer, which is returned. */
static int scan_all_ways(const char *s)
{
    size_t n = strlen(s);
    rlk_resp_guard g;
    memset(&g, 0, sizeof(g));
    int whole = rlk_resp_guard_scan(&g, s, n);
    for (size_t piece = 1; piece <= 7; piece++) {
        int r = RLOCK_OK;
        memset(&g, 0, sizeof(g));
        for (size_t at = 0; at < n && r == RLOCK_OK; at += piece) {
            r = rlk_resp_guard_scan(&g, s + at, n - at < piece ? n - at : piece);
        }
        assert_int_equal(r, whole);
    }
    return whole;
}

/* Replies of the shapes rlock reads pass, whatever the split. */
static void test_redis_replies_pass(void **state)
{
    (void)state;
    assert_int_equal(scan_all_ways("+PONG\r\n:1\r\n:-42\r\n-ERR no\r\n"), RLOCK_OK);
    assert_int_equal(scan_all_ways("$5\r\nhello\r\n$0\r\n\r\n$-1\r\n*-1\r\n*0\r\n"), RLOCK_OK);
    assert_int_equal(scan_all_ways("*3\r\n:1\r\n*2\r\n$1\r\na\r\n:5\r\n$-1\r\n"), RLOCK_OK);
    /* A status with a lone CR in it (hiredis looks for CRLF) and one ending exactly at a split. */
    assert_int_equal(scan_all_ways("+a\rb\r\n:7\r\n"), RLOCK_OK);
    /* The caps themselves are allowed. */
    assert_int_equal(scan_all_ways("*1048576\r\n"), RLOCK_OK);
    assert_int_equal(scan_all_ways("$536870912\r\n"), RLOCK_OK);
}

/* A bulk payload holding what looks like a hostile header is data, not a header. */
static void test_bulk_payload_is_skipped(void **state)
{
    (void)state;
    assert_int_equal(scan_all_ways("$12\r\n*444444443\r\n\r\n:1\r\n"), RLOCK_OK);
    assert_int_equal(scan_all_ways("*2\r\n$14\r\n$9999999999\r\n\r\n+OK\r\n"), RLOCK_OK);
}

/* Announcements beyond the caps are refused, with the reason in the last error. */
static void test_caps(void **state)
{
    (void)state;
    assert_int_equal(scan_all_ways("*444444443\r\n"), RLOCK_EPROTO);
    assert_non_null(strstr(rlock_last_error(), "array of more than 1048576 elements"));
    assert_int_equal(scan_all_ways("*1048577\r\n"), RLOCK_EPROTO);
    assert_int_equal(scan_all_ways("+OK\r\n*2\r\n:1\r\n*99999999999999999999999999\r\n"),
                     RLOCK_EPROTO);
    assert_int_equal(scan_all_ways("$536870913\r\n"), RLOCK_EPROTO);
    assert_non_null(strstr(rlock_last_error(), "bulk string of more than 536870912 bytes"));
}

/* Headers Redis never sends: negative counts other than -1 (hiredis would calloc them as a huge
 * unsigned count), no digits, a sign after digits, a stray CR. */
static void test_malformed_headers(void **state)
{
    (void)state;
    const char *bad[] = {"*-5\r\n", "*-0\r\n", "$-2\r\n", "*\r\n",   "*+5\r\n",
                         "*5-\r\n", "*5\rx",   "$1x\r\n", "*--1\r\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        print_message("%zu\n", i);
        assert_int_equal(scan_all_ways(bad[i]), RLOCK_EPROTO);
    }
}

/* A refused stream stays refused: nothing after it is trusted. */
static void test_refusal_sticks(void **state)
{
    (void)state;
    rlk_resp_guard g;
    memset(&g, 0, sizeof(g));
    assert_int_equal(rlk_resp_guard_scan(&g, "*2000000\r\n", 10), RLOCK_EPROTO);
    assert_int_equal(rlk_resp_guard_scan(&g, "+OK\r\n", 5), RLOCK_EPROTO);
}

TC_MAIN(NULL, NULL, cmocka_unit_test(test_redis_replies_pass),
        cmocka_unit_test(test_bulk_payload_is_skipped), cmocka_unit_test(test_caps),
        cmocka_unit_test(test_malformed_headers), cmocka_unit_test(test_refusal_sticks))
