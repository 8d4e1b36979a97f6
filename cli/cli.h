/*
 * The rlock command's commands, which main.c dispatches to (run.c, leader.c, status.c,
 * unlock.c, top.c), and rlock run's cron semantics (cron.c). The command uses the public API only.
 */
#ifndef RLOCK_CLI_H
#define RLOCK_CLI_H

#include <stdint.h>

#include "common.h"

int cli_run(const cli_global *g, int argc, char **argv);
int cli_elect(const cli_global *g, int argc, char **argv);
int cli_leader(const cli_global *g, int argc, char **argv);
int cli_status(const cli_global *g, int argc, char **argv);
int cli_unlock(const cli_global *g, int argc, char **argv);
int cli_top(const cli_global *g, int argc, char **argv);

/* rlock run's cron semantics (cron.c). --once-per's marker of lock name: 1 if a run left it
 * within its period, 0 if not, or a negative RLOCK_E* code; cli_once_mark leaves it for ttl_ms
 * (RLOCK_OK or a negative code). cli_hold_extend gives the calling thread's hold of l the lease
 * lease_ms (< 0: the watchdog's) if that is longer, keeping one hold; RLOCK_ELOST when the hold is
 * gone. */
int cli_once_marked(rlock_client *c, const char *name);
int cli_once_mark(rlock_client *c, const char *name, int64_t ttl_ms);
int cli_hold_extend(rlock *l, int64_t lease_ms);

#endif
