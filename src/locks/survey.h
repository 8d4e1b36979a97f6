/*
 * rlock_survey()'s pure part (survey.c): which name a scanned key stands for, unit-tested on its
 * own (tests/unit/test_survey_base.c).
 */
#ifndef RLK_SURVEY_H
#define RLK_SURVEY_H

#include <stddef.h>

/* The name the key of len bytes stands for, in *base (a pointer into key) and *blen: the key
 * itself, or for one of Redisson's and rlock's auxiliary keys ("redisson_lock_queue:{name}",
 * "{name}:rlock_request:...", "{name}:<uuid>:<thread>:rwlock_timeout" ...) the name it belongs
 * to. Returns 1 when *base is the key itself or a name derived from it, 0 for a key that stands
 * for nothing (an auxiliary key whose name is empty). */
int rlk_survey_base(const char *key, size_t len, const char **base, size_t *blen);

#endif
