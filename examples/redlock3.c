/*
 * redlock3: a RedLock over three independent Redis servers guarding a shared counter file.
 *
 *   redlock3 [--servers URL1,URL2,URL3] --dir DIR [--threads T] [--iterations N] [--lease MS]
 *       T threads (default 4) each take the RedLock N times (default 50) with a lease of MS
 *       (default 2000); inside, they read DIR/counter, think for a millisecond, write it back
 *       plus one, and append the grant's fencing token to DIR/journal. Several processes may
 *       run at once on the same DIR and servers. The servers default to $REDIS_URL (the three
 *       URLs, comma-separated), else redis://127.0.0.1:6379, :6380 and :6381.
 *   redlock3 --check DIR --expect TOTAL
 *       checks that the counter is TOTAL (no lost update), that the journal has TOTAL lines and
 *       that the tokens strictly increase in grant order.
 *
 * One client per server (that is what makes them independent), one reentrant handle per client,
 * one RedLock over the three handles; the group handle is shared by the threads. A grant needs 2
 * of 3 servers and enough validity left, so the program keeps working while one server is down.
 * examples/redlock3.sh starts three throwaway servers, runs two processes of this program,
 * kills one server mid-run and brings it back empty only after the longest lease has passed
 * (the restart-delay rule of the Redlock algorithm), then runs the check.
 * Exit status: 0 on success, 1 when the check fails, 2 on errors.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rlock.h"

#define MAX_THREADS 64

typedef struct run {
    rlock *group;
    const char *dir;
    int64_t lease_ms;
    int iterations;
    int errors, retries, unconfirmed;
} run;

static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[64];
    long v = 0;
    if (f != NULL) {
        if (fgets(line, sizeof(line), f) != NULL) {
            v = strtol(line, NULL, 10);
        }
        fclose(f);
    }
    return v;
}

/* The critical section: counter += 1 (read, think, write) and one journal line. The counter is
 * written to a file of the grant's own and renamed over the old one, so that a reader outside
 * the lock (redlock3.sh prints it mid-run) sees one whole value, never a file being rewritten. */
static int section(const run *r, uint64_t token)
{
    char path[512], tmp[560];
    snprintf(path, sizeof(path), "%s/counter", r->dir);
    snprintf(tmp, sizeof(tmp), "%s.%ld.%llu", path, (long)getpid(), (unsigned long long)token);
    long v = read_long(path);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
    FILE *f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%ld\n", v + 1) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
        return -1;
    }
    snprintf(path, sizeof(path), "%s/journal", r->dir);
    f = fopen(path, "a");
    if (f == NULL || fprintf(f, "%llu\n", (unsigned long long)token) < 0 || fclose(f) != 0) {
        return -1;
    }
    return 0;
}

static void *thread_main(void *arg)
{
    run *r = arg;
    for (int i = 0; i < r->iterations; i++) {
        int rc = rlock_try_lock(r->group, 30000, r->lease_ms);
        if (rc != RLOCK_OK) {
            /* No majority within the wait (for instance two servers down): try again. */
            fprintf(stderr, "try_lock: %s\n", rlock_last_error());
            r->retries++;
            i--;
            if (r->retries > 1000) {
                r->errors++;
                return NULL;
            }
            continue;
        }
        r->errors += section(r, rlock_token(r->group)) != 0;
        rc = rlock_unlock(r->group);
        if (rc == RLOCK_ECONN) {
            /* A server that granted the hold is down, so fewer than a majority confirmed the
             * release: its copy ends with its lease (or with the server), the others are gone.
             * Expected during an outage, and no threat to the counter. */
            fprintf(stderr, "unlock not confirmed: %s\n", rlock_last_error());
            r->unconfirmed++;
        } else if (rc != RLOCK_OK) {
            /* RLOCK_ELOST: the section outlived the validity; the data may be unsafe. */
            fprintf(stderr, "unlock: %s\n", rlock_last_error());
            r->errors++;
        }
    }
    return NULL;
}

static int check(const char *dir, long expect)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/counter", dir);
    long counter = read_long(path);
    snprintf(path, sizeof(path), "%s/journal", dir);
    FILE *f = fopen(path, "r");
    unsigned long long prev = 0;
    long lines = 0, inversions = 0;
    char line[64];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        unsigned long long token = strtoull(line, NULL, 10);
        inversions += lines > 0 && token <= prev;
        prev = token;
        lines++;
    }
    if (f != NULL) {
        fclose(f);
    }
    printf("counter %ld (expected %ld), %ld journal lines, %ld token inversions, last token "
           "%llu: %s\n",
           counter, expect, lines, inversions, prev,
           counter == expect && lines == expect && inversions == 0 ? "OK" : "VIOLATION");
    return counter == expect && lines == expect && inversions == 0 ? 0 : 1;
}

static int run_all(char *servers, const char *dir, int threads, int iterations, int64_t lease)
{
    rlock_client *clients[3] = {NULL, NULL, NULL};
    rlock *members[3] = {NULL, NULL, NULL};
    int n = 0, rc = 2;
    for (char *save = NULL, *url = strtok_r(servers, ",", &save); url != NULL && n < 3;
         url = strtok_r(NULL, ",", &save), n++) {
        rlock_options o;
        rlock_options_init(&o);
        o.url = url;
        o.connect_timeout_ms = 500;
        if (rlock_client_new(&o, &clients[n]) != RLOCK_OK) {
            fprintf(stderr, "%s: %s\n", url, rlock_last_error());
            goto out;
        }
        members[n] = rlock_open(clients[n], RLOCK_REENTRANT, "redlock3:counter");
    }
    rlock *group = n == 3 ? rlock_redlock_new(members, 3) : NULL;
    if (group == NULL) {
        fprintf(stderr, "need three servers: %s\n", n == 3 ? rlock_last_error() : "");
        goto out;
    }
    run r[MAX_THREADS];
    pthread_t t[MAX_THREADS];
    for (int i = 0; i < threads; i++) {
        r[i] = (run){.group = group, .dir = dir, .lease_ms = lease, .iterations = iterations};
        pthread_create(&t[i], NULL, thread_main, &r[i]);
    }
    int errors = 0, retries = 0, unconfirmed = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(t[i], NULL);
        errors += r[i].errors;
        retries += r[i].retries;
        unconfirmed += r[i].unconfirmed;
    }
    printf("process %ld: %d sections, %d attempts without a majority, %d releases not confirmed "
           "by a majority (a server down), %d errors\n",
           (long)getpid(), threads * iterations, retries, unconfirmed, errors);
    rlock_free(group);
    rc = errors ? 2 : 0;
out:
    for (int i = 0; i < 3; i++) {
        rlock_free(members[i]);
        rlock_client_free(clients[i]);
    }
    return rc;
}

/* The servers when --servers is not given: $REDIS_URL (three URLs, comma-separated), else three
 * local servers; copied, since run_all() splits the list in place. */
static char *default_servers(void)
{
    static char list[4096];
    const char *env = getenv("REDIS_URL");
    snprintf(list, sizeof(list), "%s",
             env != NULL && env[0] != '\0'
                 ? env
                 : "redis://127.0.0.1:6379,redis://127.0.0.1:6380,redis://127.0.0.1:6381");
    return list;
}

int main(int argc, char **argv)
{
    char *servers = default_servers();
    const char *dir = NULL, *check_dir = NULL;
    int threads = 4, iterations = 50;
    long expect = -1;
    int64_t lease = 2000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--servers") == 0) {
            servers = argv[i + 1];
        } else if (strcmp(argv[i], "--dir") == 0) {
            dir = argv[i + 1];
        } else if (strcmp(argv[i], "--check") == 0) {
            check_dir = argv[i + 1];
        } else if (strcmp(argv[i], "--expect") == 0) {
            expect = strtol(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--threads") == 0) {
            threads = (int)strtol(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--iterations") == 0) {
            iterations = (int)strtol(argv[i + 1], NULL, 10);
        } else if (strcmp(argv[i], "--lease") == 0) {
            lease = strtoll(argv[i + 1], NULL, 10);
        }
    }
    if (check_dir != NULL && expect >= 0) {
        return check(check_dir, expect);
    }
    if (dir == NULL || threads < 1 || threads > MAX_THREADS || lease <= 0) {
        fprintf(stderr,
                "usage: %s [--servers URL1,URL2,URL3] --dir DIR [--threads T] "
                "[--iterations N] [--lease MS]\n       %s --check DIR --expect TOTAL\n",
                argv[0], argv[0]);
        return 2;
    }
    return run_all(servers, dir, threads, iterations, lease);
}
