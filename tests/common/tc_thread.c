#include "tc_thread.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "redis_harness.h"

static void *bg_main(void *p)
{
    tc_bg *b = p;
    int r = b->call(b->arg);
    b->done_at = rh_now_ms();
    atomic_store(&b->result, r);
    return NULL;
}

void tc_bg_start(tc_bg *b, int (*call)(void *arg), void *arg)
{
    b->call = call;
    b->arg = arg;
    b->done_at = 0;
    atomic_init(&b->result, TC_BG_RUNNING);
    if (pthread_create(&b->thread, NULL, bg_main, b) != 0) {
        fail_msg("tc_bg_start: pthread_create failed");
    }
}

int tc_bg_join(tc_bg *b)
{
    pthread_join(b->thread, NULL);
    return atomic_load(&b->result);
}
