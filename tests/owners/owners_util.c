/*
 * Subjects for the owner and cancellation tests (owners_util.h).
 */
#include "owners_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static const char *const labels[OW_SUBJECTS] = {"reentrant", "spin",  "fair",   "read",
                                                "write",     "multi", "redlock"};
static const rlock_kind kinds[] = {RLOCK_REENTRANT, RLOCK_SPIN, RLOCK_FAIR, RLOCK_READ,
                                   RLOCK_WRITE};

int ow_pool_size;

const char *ow_label(int which)
{
    return labels[which];
}

static void ow_open_group(ow_subject *sj, rlock_client *c, rh_server *s, int64_t watchdog_ms)
{
    sj->n = sj->which == OW_MULTI ? 2 : 3;
    for (size_t i = 0; i < sj->n; i++) {
        char mname[96];
        snprintf(mname, sizeof(mname), "%s:%zu", sj->name, i);
        rlock_client *mc = c;
        if (sj->which == OW_REDLOCK && i > 0) {
            rlock_options o;
            tc_options(&o, s);
            o.pool_size = ow_pool_size > 0 ? ow_pool_size : o.pool_size;
            o.watchdog_timeout_ms = watchdog_ms > 0 ? watchdog_ms : o.watchdog_timeout_ms;
            sj->extra[i - 1] = tc_client(&o);
            mc = sj->extra[i - 1];
        }
        sj->member[i] = tc_open(mc, RLOCK_REENTRANT, mname);
    }
    sj->l = sj->which == OW_MULTI ? rlock_multi_new(sj->member, sj->n)
                                  : rlock_redlock_new(sj->member, sj->n);
    assert_non_null(sj->l);
    sj->rival = sj->l;
}

void ow_open(ow_subject *sj, int which, rlock_client *c, rh_server *s, const char *prefix,
             int64_t watchdog_ms)
{
    memset(sj, 0, sizeof(*sj));
    sj->which = which;
    snprintf(sj->name, sizeof(sj->name), "%s-%s", prefix, labels[which]);
    if (which >= OW_MULTI) {
        ow_open_group(sj, c, s, watchdog_ms);
        return;
    }
    sj->l = tc_open(c, kinds[which], sj->name);
    sj->rival = which == OW_READ ? tc_open(c, RLOCK_WRITE, sj->name) : sj->l;
}

void ow_close(ow_subject *sj)
{
    if (sj->rival != sj->l) {
        rlock_free(sj->rival);
    }
    rlock_free(sj->l);
    for (size_t i = 0; i < sj->n; i++) {
        rlock_free(sj->member[i]);
    }
    for (int i = 0; i < 2; i++) {
        rlock_client_free(sj->extra[i]);
    }
    memset(sj, 0, sizeof(*sj));
}

int ow_any_key(const ow_subject *sj, rh_server *s)
{
    if (sj->n == 0) {
        const char *argv[] = {"EXISTS", sj->name, NULL};
        return rh_cmd_int(s, argv) != 0;
    }
    for (size_t i = 0; i < sj->n; i++) {
        char mname[96];
        snprintf(mname, sizeof(mname), "%s:%zu", sj->name, i);
        const char *argv[] = {"EXISTS", mname, NULL};
        if (rh_cmd_int(s, argv) != 0) {
            return 1;
        }
    }
    return 0;
}

const char *ow_key(const ow_subject *sj)
{
    static _Thread_local char key[96];
    snprintf(key, sizeof(key), sj->n == 0 ? "%s" : "%s:0", sj->name);
    return key;
}
