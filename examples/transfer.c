/*
 * transfer: worker processes move money between accounts; each transfer holds a multi-lock over
 * the two accounts involved, so it sees and writes both balances alone. The accounts are plain
 * files (one balance each) in a directory, the kind of shared resource Redis does not protect by
 * itself; the multi-lock ("transfer:account:<i>" for each of the two) makes every transfer atomic
 * across processes.
 *
 *   transfer [--url URL] [--accounts N] [--workers W] [--transfers K] [--dir DIR] [--no-lock]
 *
 * URL defaults to $REDIS_URL, else redis://127.0.0.1:6379.
 *
 * Each transfer picks two different accounts at random, in random order, so groups over the same
 * two names are taken in opposite orders all the time: the multi-lock never holds one member
 * while waiting for another, so this cannot deadlock. Between reading and writing the balances a
 * transfer "thinks" for a millisecond, which makes lost updates certain when the lock is left out
 * (--no-lock). At the end the program checks that no money was created or destroyed and that no
 * balance went negative. Exit status: 0 when the books balance, 1 when they do not, 2 on errors.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rlock.h"

#define MAX_ACCOUNTS  64
#define START_BALANCE 1000

typedef struct config {
    const char *url;
    const char *dir;
    int accounts, workers, transfers, use_lock;
} config;

static void account_path(const config *c, int i, char *buf, size_t len)
{
    snprintf(buf, len, "%s/account-%d", c->dir, i);
}

static long read_balance(const config *c, int i)
{
    char path[512];
    account_path(c, i, path, sizeof(path));
    FILE *f = fopen(path, "r");
    char line[64], *end = line;
    long v = -1;
    if (f != NULL) {
        if (fgets(line, sizeof(line), f) != NULL) {
            v = strtol(line, &end, 10);
        }
        v = end == line ? -1 : v; /* No number: as if the account did not exist. */
        fclose(f);
    }
    return v;
}

static int write_balance(const config *c, int i, long v)
{
    char path[512];
    account_path(c, i, path, sizeof(path));
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        return -1;
    }
    fprintf(f, "%ld\n", v);
    return fclose(f);
}

static void think(void)
{
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
}

/* One transfer of a random amount from -> to, inside the group's critical section. */
static int move_money(const config *c, int from, int to, unsigned *seed)
{
    long a = read_balance(c, from), b = read_balance(c, to);
    if (a < 0 || b < 0) {
        return c->use_lock ? -1 : 0; /* without the lock a torn read is expected */
    }
    long amount = 1 + rand_r(seed) % 50;
    if (amount > a) {
        return 0; /* insufficient funds: nothing moves */
    }
    think();
    return write_balance(c, from, a - amount) == 0 && write_balance(c, to, b + amount) == 0 ? 0
                                                                                            : -1;
}

static int worker(const config *c, int id)
{
    rlock_options o;
    rlock_options_init(&o);
    o.url = c->url;
    rlock_client *client = NULL;
    if (rlock_client_new(&o, &client) != RLOCK_OK) {
        fprintf(stderr, "worker %d: %s\n", id, rlock_last_error());
        return 2;
    }
    rlock *acct[MAX_ACCOUNTS];
    for (int i = 0; i < c->accounts; i++) {
        char name[64];
        snprintf(name, sizeof(name), "transfer:account:%d", i);
        acct[i] = rlock_open(client, RLOCK_REENTRANT, name);
    }
    unsigned seed = (unsigned)(getpid() * 2654435761u);
    int rc = 0;
    for (int k = 0; k < c->transfers && rc == 0; k++) {
        int from = rand_r(&seed) % c->accounts;
        int to = (from + 1 + rand_r(&seed) % (c->accounts - 1)) % c->accounts;
        rlock *pair[2] = {acct[from], acct[to]};
        rlock *group = rlock_multi_new(pair, 2);
        /* A lease bounds the damage of a crashed worker; a transfer takes a few ms. */
        if (group == NULL || (c->use_lock && rlock_lock(group, 10000) != RLOCK_OK)) {
            fprintf(stderr, "worker %d: %s\n", id, rlock_last_error());
            rc = 2;
        } else {
            rc = move_money(c, from, to, &seed) == 0 ? 0 : 2;
            if (c->use_lock && rlock_unlock(group) != RLOCK_OK) {
                fprintf(stderr, "worker %d: unlock: %s\n", id, rlock_last_error());
                rc = 2;
            }
        }
        rlock_free(group);
    }
    for (int i = 0; i < c->accounts; i++) {
        rlock_free(acct[i]);
    }
    rlock_client_free(client);
    return rc;
}

static int parse(int argc, char **argv, config *c)
{
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--no-lock") == 0) {
            c->use_lock = 0;
            continue;
        }
        if (v == NULL) {
            return -1;
        }
        if (strcmp(argv[i], "--url") == 0) {
            c->url = v;
        } else if (strcmp(argv[i], "--dir") == 0) {
            c->dir = v;
        } else if (strcmp(argv[i], "--accounts") == 0) {
            c->accounts = (int)strtol(v, NULL, 10);
        } else if (strcmp(argv[i], "--workers") == 0) {
            c->workers = (int)strtol(v, NULL, 10);
        } else if (strcmp(argv[i], "--transfers") == 0) {
            c->transfers = (int)strtol(v, NULL, 10);
        } else {
            return -1;
        }
        i++;
    }
    return c->accounts >= 2 && c->accounts <= MAX_ACCOUNTS && c->workers >= 1 && c->transfers >= 0
               ? 0
               : -1;
}

/* The server when --url is not given: $REDIS_URL, else a local server. */
static const char *default_url(void)
{
    const char *env = getenv("REDIS_URL");
    return env != NULL && env[0] != '\0' ? env : "redis://127.0.0.1:6379";
}

int main(int argc, char **argv)
{
    config c = {default_url(), NULL, 4, 4, 200, 1};
    if (parse(argc, argv, &c) != 0) {
        fprintf(stderr,
                "usage: %s [--url URL] [--accounts N (2..64)] [--workers W] "
                "[--transfers K] [--dir DIR] [--no-lock]\n",
                argv[0]);
        return 2;
    }
    char tmpl[] = "/tmp/rlock-transfer.XXXXXX";
    if (c.dir == NULL && (c.dir = mkdtemp(tmpl)) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    mkdir(c.dir, 0700);
    for (int i = 0; i < c.accounts; i++) {
        if (write_balance(&c, i, START_BALANCE) != 0) {
            fprintf(stderr, "cannot write the accounts in %s: %s\n", c.dir, strerror(errno));
            return 2;
        }
    }
    printf("%d workers x %d transfers over %d accounts of %d in %s (%s)\n", c.workers, c.transfers,
           c.accounts, START_BALANCE, c.dir,
           c.use_lock ? "each under a multi-lock of both accounts" : "WITHOUT any lock");
    fflush(stdout);
    /* Fork before any client exists: every worker process makes its own. */
    pid_t pids[256];
    int n = c.workers < 256 ? c.workers : 256, failed = 0;
    for (int w = 0; w < n; w++) {
        pids[w] = fork();
        if (pids[w] == 0) {
            _exit(worker(&c, w));
        }
    }
    for (int w = 0; w < n; w++) {
        int status = 0;
        waitpid(pids[w], &status, 0);
        failed += !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    }
    long total = 0, negative = 0;
    for (int i = 0; i < c.accounts; i++) {
        long v = read_balance(&c, i);
        printf("  account %d: %ld\n", i, v);
        total += v;
        negative += v < 0;
    }
    long expected = (long)c.accounts * START_BALANCE;
    if (c.dir == tmpl) { /* our own temporary directory: leave nothing behind */
        for (int i = 0; i < c.accounts; i++) {
            char path[512];
            account_path(&c, i, path, sizeof(path));
            unlink(path);
        }
        rmdir(c.dir);
    }
    printf("total %ld, expected %ld: %s\n", total, expected,
           total == expected && negative == 0 ? "the books balance" : "MONEY WAS LOST OR MADE");
    if (failed) {
        fprintf(stderr, "%d workers failed\n", failed);
        return 2;
    }
    return total == expected && negative == 0 ? 0 : 1;
}
