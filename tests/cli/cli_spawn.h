/*
 * What the tests of the rlock command share: the built binary spawned as a user's shell would,
 * its output in files of a private temp dir, and small readers of those files.
 */
#ifndef RLOCK_TESTS_CLI_SPAWN_H
#define RLOCK_TESTS_CLI_SPAWN_H

#include <sys/types.h>

/* The binary under test (argv[1] of the test program). */
extern const char *ct_bin;

/* Makes the private temp dir; 0 or -1. */
int ct_dir_init(void);
/* Removes it and everything in it. */
void ct_dir_remove(void);

/* A path in the temp dir (static buffer rotation: up to 4 live at once). */
const char *ct_path(const char *name);

/* Spawns argv (argv[0] "rlock" means the binary under test) with stdout/stderr to files out/err
 * in the temp dir (NULL: /dev/null). */
pid_t ct_spawn(const char *const *argv, const char *out, const char *err);

/* Spawns argv and returns its exit status (128+N for signal N) within 60 s. */
int ct_run(const char *const *argv, const char *out, const char *err);

/* The content of the temp dir's file name ("" if missing; one static buffer of 8 KB). */
char *ct_slurp(const char *name);

/* How often needle occurs in hay. */
int ct_count_of(const char *hay, const char *needle);

/* Waits up to 5 s for the temp dir's file name to exist; 1 if it does. */
int ct_await_file(const char *name);

#endif
