/*
 * The reply of a script that publishes a release (release_reply.c).
 */
#ifndef RLK_RELEASE_REPLY_H
#define RLK_RELEASE_REPLY_H

#include <hiredis.h>

#include "lock.h"

/* The reply of a script that publishes through lua/inc/notify.lua: an integer, or {integer,
 * Redis' error text} when its PUBLISH was refused. The pure decoder (release_reply.c) sets *v
 * and *refused (NULL when published); rlk_notify_reply() also logs a refusal at WARN, once per
 * client. Both return RLOCK_OK or RLOCK_EPROTO. */
int rlk_notify_reply_decode(const redisReply *r, long long *v, const char **refused);
int rlk_notify_reply(rlock_client *c, const redisReply *r, long long *v, const char *what);

#endif
