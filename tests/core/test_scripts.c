/*
 * Acceptance tests of the script registry against a real redis-server: the embedded scripts are
 * the lua/ files byte for byte with the SHA1 Redis computes; SCRIPT FLUSH and a server restart
 * are invisible to callers (NOSCRIPT loads and retries, dead connections are redialled), also
 * for the watchdog's pipelined renewals.
 *
 * Usage: test_scripts <lua dir>   (the build passes its expanded scripts, generated/lua/)
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client.h"
#include "core_util.h"
#include "tc_redis.h"
#include "pool.h"
#include "scripts.h"

static const char *g_lua_dir;

/* Reads a whole file; NULL if it cannot. */
static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf != NULL && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    *len = n;
    return buf;
}

static int script_exists(rh_server *s, const char *sha1)
{
    const char *argv[] = {"SCRIPT", "EXISTS", sha1, NULL};
    redisReply *r = rh_cmd(s, argv);
    int v = r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 1
                ? (int)r->element[0]->integer
                : -1;
    if (r != NULL) {
        freeReplyObject(r);
    }
    return v;
}

static void test_embedded_bytes_and_sha1(void **state)
{
    rh_server *s = *state;
    /* Every .lua file is in the table (and nothing else is). */
    DIR *d = opendir(g_lua_dir);
    assert_non_null(d);
    int files = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (n > 4 && strcmp(e->d_name + n - 4, ".lua") == 0) {
            files++;
        }
    }
    closedir(d);
    assert_int_equal(files, RLK_SCRIPT__COUNT);
    assert_null(rlk_script_get(-1));
    assert_null(rlk_script_get(RLK_SCRIPT__COUNT));

    for (int id = 0; id < RLK_SCRIPT__COUNT; id++) {
        const rlk_script_src *src = rlk_script_get(id);
        assert_ptr_equal(src, &rlk_script_table[id]);
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s.lua", g_lua_dir, src->name);
        size_t len = 0;
        char *file = read_file(path, &len);
        if (file == NULL) {
            fail_msg("cannot read %s", path);
        }
        assert_int_equal(len, src->len);
        assert_memory_equal(file, src->body, len);
        assert_int_equal(src->body[src->len], '\0');
        free(file);
        /* Redis' SHA1 of the exact bytes is the one compiled in. */
        const char *load[] = {"SCRIPT", "LOAD", (const char *)src->body, NULL};
        char *sha = rh_cmd_str(s, load);
        assert_non_null(sha);
        if (strcmp(sha, src->sha1) != 0) {
            fail_msg("%s: Redis says %s, embedded %s", src->name, sha, src->sha1);
        }
        free(sha);
    }
}

/* A handle on name that took (with lease_ms) and released the lock once: its scripts are
 * loaded on the server. */
static rlock *used_once(rlock_client *c, const char *name, int64_t lease_ms)
{
    rlock *l = tc_open(c, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_try_lock(l, 0, lease_ms), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    return l;
}

/* After SCRIPT FLUSH the next calls succeed; Redis shows that the library loaded the scripts. */
static void test_script_flush(void **state)
{
    rh_server *s = *state;
    rlock_client *c = cu_client(s);
    rlock *l = used_once(c, "flush-lock", 10000);

    const char *flush[] = {"SCRIPT", "FLUSH", NULL};
    char *ok = rh_cmd_str(s, flush);
    assert_non_null(ok);
    free(ok);
    const char *acq_sha = rlk_script_table[RLK_SCRIPT_LOCK_ACQUIRE].sha1;
    const char *rel_sha = rlk_script_table[RLK_SCRIPT_LOCK_RELEASE].sha1;
    assert_int_equal(script_exists(s, acq_sha), 0);
    assert_int_equal(rh_reset_stats(s), 0);

    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    assert_int_equal(rlock_hold_count(l), 1);
    assert_int_equal(script_exists(s, acq_sha), 1);
    assert_int_equal(script_exists(s, rel_sha), 0);
    long long loads = rh_cmdstat_calls(s, "script|load");
    assert_int_equal(loads, 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_is_locked(l), 0);
    assert_int_equal(script_exists(s, rel_sha), 1);
    assert_int_equal(rh_cmdstat_calls(s, "script|load"), 2);
    /* Loaded once: further calls run by EVALSHA without loading again. */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
    }
    assert_int_equal(rh_cmdstat_calls(s, "script|load"), 2);
    assert_true(rh_cmdstat_calls(s, "evalsha") >= 2 + 10);
    assert_int_equal(rh_cmdstat_calls(s, "eval"), 0);
    rlock_free(l);
    rlock_client_free(c);
}

/* The watchdog renews through pipelines; a flush between two renewals must not lose the hold. */
static void test_script_flush_watchdog(void **state)
{
    rh_server *s = *state;
    rlock_options o;
    cu_opts(&o, s);
    o.watchdog_timeout_ms = 600; /* renewed every 200 ms */
    rlock_client *c = tc_client(&o);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "flush-wd-lock");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    const char *flush[] = {"SCRIPT", "FLUSH", NULL};
    for (int i = 0; i < 3; i++) {
        free(rh_cmd_str(s, flush));
        rh_sleep_ms(500);
    }
    /* 1.5 s is 2.5 leases: only working renewals keep the key alive. */
    int64_t ttl = rlock_remaining_ttl_ms(l);
    assert_in_range(ttl, 1, 600);
    assert_int_equal(rlock_is_held(l), 1);
    assert_int_equal(script_exists(s, rlk_script_table[RLK_SCRIPT_RENEW_HASH].sha1), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_free(c);
}

/* A restarted server has no scripts and no connections: the same client keeps working. */
static void test_server_restart(void **state)
{
    rh_server *s = *state;
    rlock_client *c = cu_client(s);
    rlock *l = used_once(c, "restart-lock", 20000);

    assert_int_equal(rh_restart(s), 0);
    assert_int_equal(script_exists(s, rlk_script_table[RLK_SCRIPT_LOCK_ACQUIRE].sha1), 0);
    int64_t t0 = rh_now_ms();
    int r = rlock_try_lock(l, 0, 20000);
    int64_t dt = rh_now_ms() - t0;
    print_message("first lock call after the restart: %d in %lld ms\n", r, (long long)dt);
    assert_int_equal(r, RLOCK_OK);
    assert_true(dt < 1000);
    const char *exists[] = {"EXISTS", "restart-lock", NULL};
    assert_int_equal(rh_cmd_int(s, exists), 1);
    assert_int_equal(rlock_hold_count(l), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rh_cmd_int(s, exists), 0);
    /* Restarted twice more: every later call still works. */
    for (int i = 0; i < 2; i++) {
        assert_int_equal(rh_restart(s), 0);
        assert_int_equal(rlock_is_locked(l), 0);
        assert_int_equal(rlock_lock(l, 5000), RLOCK_OK);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
    }
    rlock_free(l);
    rlock_client_free(c);
}

TC_MAIN_PATH(g_lua_dir, "lua dir", tc_require_server, NULL,
             TC_SERVER_TEST(test_embedded_bytes_and_sha1), TC_SERVER_TEST(test_script_flush),
             TC_SERVER_TEST(test_script_flush_watchdog), TC_SERVER_TEST(test_server_restart))
