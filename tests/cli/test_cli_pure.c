/*
 * Unit tests of the rlock command's pure parts: DURATION parsing, signal names, JSON escaping,
 * URLs with their user information hidden.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_pure.h"
#include "rlock.h"
#include "tc_redis.h"

static void test_duration_units(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int64_t ms;
    } cases[] = {{"500ms", 500},  {"10s", 10000}, {"5m", 300000},
                 {"1h", 3600000}, {"250", 250},   {"0", 0}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t ms = -1;
        assert_int_equal(cli_parse_duration(cases[i].text, &ms), 0);
        assert_int_equal(ms, cases[i].ms);
    }
}

static void test_duration_rejects(void **state)
{
    (void)state;
    int64_t ms = 77;
    const char *bad[] = {"",
                         "s",
                         "-1",
                         "+5",
                         "1.5s",
                         "10 s",
                         "10sec",
                         "5d",
                         "ms10",
                         "1e3",
                         "99999999999999999999",
                         "3153600000001",
                         "900000h",
                         NULL};
    for (int i = 0; bad[i] != NULL; i++) {
        assert_int_equal(cli_parse_duration(bad[i], &ms), -1);
    }
    assert_int_equal(cli_parse_duration(NULL, &ms), -1);
    assert_int_equal(ms, 77); /* untouched on failure */
    assert_int_equal(cli_parse_duration("3153600000000", &ms), 0);
    assert_int_equal(ms, RLOCK_MAX_DURATION_MS);
}

static void test_signals(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        int want; /* -1: refused */
    } cases[] = {
        {"TERM", SIGTERM},
        {"SIGTERM", SIGTERM},
        {"sigkill", SIGKILL},
        {"int", SIGINT},
        {"9", 9},
        {"USR1", SIGUSR1},
        {"", -1},
        {"SIG", -1},
        {"NOPE", -1},
        {"0", -1},
        {"99", -1},
        {"15x", -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (cli_parse_signal(cases[i].in) != cases[i].want) {
            fail_msg("'%s': %d, not %d", cases[i].in, cli_parse_signal(cases[i].in), cases[i].want);
        }
    }
    assert_string_equal(cli_signal_name(SIGTERM), "TERM");
    assert_string_equal(cli_signal_name(SIGKILL), "KILL");
    assert_null(cli_signal_name(0));
}

static void expect_json(const char *in, size_t len, const char *want)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    assert_non_null(f);
    cli_json_string(f, in, len);
    fclose(f);
    assert_string_equal(buf, want);
    free(buf);
}

static void test_json_escaping(void **state)
{
    (void)state;
    expect_json("plain", 5, "\"plain\"");
    expect_json("a\"b\\c", 5, "\"a\\\"b\\\\c\"");
    expect_json("l\n\t\r", 4, "\"l\\n\\t\\r\"");
    expect_json("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\\u007f\"");
    expect_json("caf\xc3\xa9", 5, "\"caf\xc3\xa9\"");
    expect_json("a\0b", 3, "\"a\\u0000b\"");
    expect_json("", 0, "\"\"");
}

/* Every character a password may hold, encoded or not, and user:password forms: nothing between
 * the scheme and the last '@' is shown. */
static void test_redact_url(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        const char *shown;
    } cases[] = {
        {"redis://:Pw#Secret2@h:1", "redis://***@h:1"},
        {"redis://:Pw/Secret2@h:1/2", "redis://***@h:1/2"},
        {"redis://:Pw?Secret2@h:1", "redis://***@h:1"},
        {"redis://:Pw@Secret2@h:1", "redis://***@h:1"},
        {"redis://user:Pw:Secret2@h", "redis://***@h"},
        {"redis://us:er:P/w?#@Secret2@h:1?db=2", "redis://***@h:1?db=2"},
        {"redis-sentinel://:Secret2@s1:1,s2:2#mymaster", "redis-sentinel://***@s1:1,s2:2#mymaster"},
        {"unix://:Secret2@/run/redis.sock", "unix://***@/run/redis.sock"},
        {"redis://h:1/0", "redis://h:1/0"},
        {"Secret2@h", "***@h"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[128];
        cli_redact_url(cases[i].url, out, sizeof(out));
        assert_string_equal(out, cases[i].shown);
    }
    char small[8];
    cli_redact_url("redis://:Secret2@h:1", small, sizeof(small));
    assert_string_equal(small, "redis:/");
}

TC_MAIN(NULL, NULL, cmocka_unit_test(test_duration_units), cmocka_unit_test(test_duration_rejects),
        cmocka_unit_test(test_signals), cmocka_unit_test(test_json_escaping),
        cmocka_unit_test(test_redact_url))
