/*
 * Error reporting (error.c): the calling thread's last error, set where a call fails. Private to
 * the library.
 */
#ifndef RLK_ERROR_H
#define RLK_ERROR_H

#include "util.h"

/* Records a detail message for the calling thread and returns code, so call sites can write
 * `return rlk_err(RLOCK_EINVAL, "lease_ms must be > 0, got %lld", x);`. */
int rlk_err(int code, const char *fmt, ...) RLK_PRINTF(2, 3);
/* Clears the calling thread's last error (successful public calls do not clear it: like errno,
 * it is only meaningful right after a failure). */
void rlk_err_clear(void);
/* Puts back a last error saved as text (rlock_last_error() copied before work that may
 * overwrite it, such as a failover recheck run on the way out of a failed call). */
void rlk_err_restore(const char *saved);

#endif
