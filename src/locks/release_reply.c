/*
 * The reply of a script that publishes (lua/inc/notify.lua): its integer result, or
 * {result, error text} when Redis refused the PUBLISH (an ACL user without the publish command or
 * the channel). The change the script made stands either way; only the notification is missing,
 * so waiters wake when their wait bound (the holder's lease) runs out. The first refusal a client
 * meets is logged at WARN, once per client: it is a deployment mistake, not an event per call.
 */
#include "lock.h"
#include "lock_query.h"
#include "release_reply.h"

int rlk_notify_reply_decode(const redisReply *r, long long *v, const char **refused)
{
    *refused = NULL;
    if (r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_INTEGER &&
        (r->element[1]->type == REDIS_REPLY_STRING || r->element[1]->type == REDIS_REPLY_STATUS)) {
        *v = r->element[0]->integer;
        *refused = r->element[1]->str;
        return RLOCK_OK;
    }
    return rlk_reply_int(r, v, "reply of a publishing script");
}

int rlk_notify_reply(rlock_client *c, const redisReply *r, long long *v, const char *what)
{
    const char *refused = NULL;
    int rc = rlk_notify_reply_decode(r, v, &refused);
    if (rc != RLOCK_OK) {
        return rc;
    }
    if (refused != NULL && atomic_exchange(&c->warned_nopublish, 1) == 0) {
        rlk_log(c, RLOCK_LOG_WARN,
                "%s could not notify waiters: Redis refused PUBLISH (%.200s); the ACL user needs "
                "the 'publish' command and the lock's channels, else waiters wake only when a "
                "lease runs out (logged once per client)",
                what, refused);
    }
    return RLOCK_OK;
}
