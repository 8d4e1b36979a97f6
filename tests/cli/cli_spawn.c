/*
 * The rlock command's test helpers (cli_spawn.h): spawning the built binary and reading what it
 * and its commands wrote into a private temp dir.
 */
#include "cli_spawn.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "redis_harness.h"

const char *ct_bin;
static char ct_dir[64];

int ct_dir_init(void)
{
    snprintf(ct_dir, sizeof(ct_dir), "%s", "/tmp/rlock-cli.XXXXXX");
    return mkdtemp(ct_dir) != NULL ? 0 : -1;
}

void ct_dir_remove(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", ct_dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", ct_dir);
    }
}

const char *ct_path(const char *name)
{
    static char buf[4][128];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof(buf[0]), "%s/%s", ct_dir, name);
    return p;
}

/* Only async-signal-safe calls after fork. */
pid_t ct_spawn(const char *const *argv, const char *out, const char *err)
{
    int fo = open(out ? ct_path(out) : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(err ? ct_path(err) : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const char *bin = strcmp(argv[0], "rlock") == 0 ? ct_bin : argv[0];
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fo, 1);
        dup2(fe, 2);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(fo);
    close(fe);
    return pid;
}

int ct_run(const char *const *argv, const char *out, const char *err)
{
    pid_t pid = ct_spawn(argv, out, err);
    return pid > 0 ? rh_wait_child(pid, 60000) : -1;
}

char *ct_slurp(const char *name)
{
    static char buf[8192];
    FILE *f = fopen(ct_path(name), "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    buf[n] = '\0';
    if (f) {
        fclose(f);
    }
    return buf;
}

int ct_count_of(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

int ct_await_file(const char *name)
{
    for (int i = 0; i < 500 && access(ct_path(name), F_OK) != 0; i++) {
        rh_sleep_ms(10);
    }
    return access(ct_path(name), F_OK) == 0;
}
