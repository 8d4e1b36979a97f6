/*
 * The real Redisson peer (redisson_java.h): spawns the peer JVM with pipes, reads its replies on
 * a thread of its own into a list the callers wait on, and the file-backed checker.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "redisson_java.h"
#include "rlock.h"
#include "tc_redis.h"

typedef struct rj_reply {
    int id;
    char *text;
    struct rj_reply *next;
} rj_reply;

struct rj_peer {
    pid_t pid;
    int in;  /* the peer's stdin */
    int out; /* the peer's stdout, read by reader */
    pthread_t reader;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rj_reply *replies;
    int next_id, eof;
    char id[64], version[32];
};

const char *rj_jar(void)
{
    const char *jar = getenv("RLOCK_REDISSON_JAR");
    return jar != NULL && jar[0] != '\0' && access(jar, R_OK) == 0 ? jar : NULL;
}

int rj_require(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    if (rj_jar() == NULL || system("java -version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "skipped: no java or no peer jar ($RLOCK_REDISSON_JAR; tests/run.sh "
                        "builds it from tests/compat/java)\n");
        exit(RH_EXIT_SKIP);
    }
    return 0;
}

double rj_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Files a reply line "<id> <text>" (or "ready <text>", id 0) for its waiter. */
static void peer_file(rj_peer *p, const char *line)
{
    const char *sp = strchr(line, ' ');
    rj_reply *r = calloc(1, sizeof(*r));
    r->id = strncmp(line, "ready", 5) == 0 ? 0 : atoi(line);
    r->text = strdup(sp != NULL ? sp + 1 : "");
    pthread_mutex_lock(&p->mu);
    r->next = p->replies;
    p->replies = r;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* The reader thread. It reads the pipe with read(), not stdio: a FILE locked by a blocked
 * getline() would hang every fflush(NULL), which the harness calls before each fork(). */
static void *peer_read(void *arg)
{
    rj_peer *p = arg;
    char buf[8192];
    size_t have = 0;
    ssize_t n;
    while ((n = read(p->out, buf + have, sizeof(buf) - 1 - have)) > 0) {
        have += (size_t)n;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            *nl = '\0';
            peer_file(p, line);
            line = nl + 1;
        }
        have = strlen(line);
        memmove(buf, line, have);
        if (have == sizeof(buf) - 1) {
            have = 0; /* a line longer than the buffer is not one of the peer's */
        }
    }
    pthread_mutex_lock(&p->mu);
    p->eof = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Forks the JVM with its stdin and stdout on pipes (stderr stays the test's). */
static pid_t peer_spawn(rj_peer *p, const char *url, int64_t watchdog_ms, int64_t fair_wait_ms,
                        const char *faketime)
{
    int to[2], from[2];
    if (pipe2(to, O_CLOEXEC) != 0 || pipe2(from, O_CLOEXEC) != 0) {
        return -1;
    }
    char wd[32], fw[32];
    snprintf(wd, sizeof(wd), "%lld", (long long)(watchdog_ms > 0 ? watchdog_ms : 0));
    snprintf(fw, sizeof(fw), "%lld", (long long)fair_wait_ms);
    pid_t pid = fork();
    if (pid == 0) {
        /* The JVM must not outlive the test program (a ctest timeout kills only the program). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (faketime != NULL) {
            /* The wall clock only: System.nanoTime() (the replies' times) stays the C side's. */
            setenv("LD_PRELOAD", RJ_LIBFAKETIME, 1);
            setenv("FAKETIME", faketime, 1);
            setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
        }
        dup2(to[0], 0);
        dup2(from[1], 1);
        execlp("java", "java", "-XX:+UseSerialGC", "-Xss512k", "-jar", rj_jar(), url,
               watchdog_ms > 0 || fair_wait_ms > 0 ? wd : NULL, fair_wait_ms > 0 ? fw : NULL,
               (char *)NULL);
        _exit(127);
    }
    close(to[0]);
    close(from[1]);
    p->in = to[1];
    p->out = from[0];
    return pid;
}

rj_peer *rj_start(rh_server *s, int64_t watchdog_ms)
{
    return rj_start_at(rh_url(s), watchdog_ms);
}

rj_peer *rj_start_at(const char *where, int64_t watchdog_ms)
{
    return rj_start_fair(where, watchdog_ms, 0, NULL);
}

rj_peer *rj_start_fair(const char *where, int64_t watchdog_ms, int64_t fair_wait_ms,
                       const char *faketime)
{
    rj_peer *p = calloc(1, sizeof(*p));
    assert_non_null(p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->next_id = 1;
    p->pid = peer_spawn(p, where, watchdog_ms, fair_wait_ms, faketime);
    assert_true(p->pid > 0);
    pthread_create(&p->reader, NULL, peer_read, p);
    char *ready = rj_wait(p, 0, 30000);
    if (ready == NULL) {
        fail_msg("the Redisson peer did not connect within 30 s");
    }
    sscanf(ready, "%63s %31s", p->id, p->version);
    free(ready);
    return p;
}

const char *rj_id(const rj_peer *p)
{
    return p->id;
}

const char *rj_version(const rj_peer *p)
{
    return p->version;
}

/* Sends "<id> <worker> <request>\n" and returns the id. */
static int peer_send_line(rj_peer *p, const char *worker, const char *request)
{
    char line[1100];
    pthread_mutex_lock(&p->mu);
    int id = p->next_id++;
    int n = snprintf(line, sizeof(line), "%d %s %s\n", id, worker, request);
    assert_true(n > 0 && n < (int)sizeof(line));
    assert_int_equal(write(p->in, line, (size_t)n), n);
    pthread_mutex_unlock(&p->mu);
    return id;
}

int rj_send(rj_peer *p, const char *worker, const char *fmt, ...)
{
    char req[1024];
    va_list ap;
    va_start(ap, fmt);
    /* clang-tidy 14 takes ap for uninitialized here (it is not: va_start above). */
    vsnprintf(req, sizeof(req), fmt, ap); // NOLINT(clang-analyzer-valist.Uninitialized)
    va_end(ap);
    return peer_send_line(p, worker, req);
}

/* Takes the reply to id out of the list, or NULL. Called with mu held. */
static char *peer_take(rj_peer *p, int id)
{
    for (rj_reply **at = &p->replies; *at != NULL; at = &(*at)->next) {
        if ((*at)->id == id) {
            rj_reply *r = *at;
            *at = r->next;
            char *text = r->text;
            free(r);
            return text;
        }
    }
    return NULL;
}

char *rj_wait(rj_peer *p, int id, int64_t timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&p->mu);
    char *text;
    while ((text = peer_take(p, id)) == NULL && !p->eof) {
        if (pthread_cond_timedwait(&p->cv, &p->mu, &dl) != 0) {
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return text;
}

char *rj_call(rj_peer *p, const char *worker, const char *fmt, ...)
{
    char req[1024];
    va_list ap;
    va_start(ap, fmt);
    /* clang-tidy 14 takes ap for uninitialized here (it is not: va_start above). */
    vsnprintf(req, sizeof(req), fmt, ap); // NOLINT(clang-analyzer-valist.Uninitialized)
    va_end(ap);
    int id = peer_send_line(p, worker, req);
    char *text = rj_wait(p, id, 60000);
    if (text == NULL) {
        fail_msg("no reply from the Redisson peer to request %d (%s)", id, req);
        return NULL;
    }
    return text;
}

void rj_expect(rj_peer *p, const char *worker, const char *want, const char *fmt, ...)
{
    char req[1024];
    va_list ap;
    va_start(ap, fmt);
    /* clang-tidy 14 takes ap for uninitialized here (it is not: va_start above). */
    vsnprintf(req, sizeof(req), fmt, ap); // NOLINT(clang-analyzer-valist.Uninitialized)
    va_end(ap);
    int id = peer_send_line(p, worker, req);
    char *text = rj_wait(p, id, 60000);
    if (text == NULL) {
        fail_msg("no reply from the Redisson peer to request %d (%s)", id, req);
        return;
    }
    size_t n = strcspn(text, " ");
    if (strlen(want) != n || strncmp(text, want, n) != 0) {
        fail_msg("the Redisson peer answered \"%s\" to \"%s\", expected \"%s\"", text, req, want);
    }
    free(text);
}

double rj_reply_ms(const char *reply)
{
    const char *sp = strchr(reply, ' ');
    return sp != NULL ? strtod(sp + 1, NULL) : -1.0;
}

void rj_kill(rj_peer *p)
{
    /* rj_stop()'s "quit" then meets a closed pipe: EPIPE, not a signal that ends the test. */
    signal(SIGPIPE, SIG_IGN);
    kill(p->pid, SIGKILL);
    rj_stop(p);
}

void rj_stop(rj_peer *p)
{
    if (p == NULL) {
        return;
    }
    const char quit[] = "0 main quit\n";
    if (write(p->in, quit, sizeof(quit) - 1) < 0) {
        /* The peer is gone already; waitpid() below reaps it. */
    }
    close(p->in);
    int64_t deadline = rh_now_ms() + 30000;
    int status;
    while (waitpid(p->pid, &status, WNOHANG) == 0) {
        if (rh_now_ms() > deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            break;
        }
        rh_sleep_ms(20);
    }
    pthread_join(p->reader, NULL);
    close(p->out);
    while (p->replies != NULL) {
        rj_reply *r = p->replies;
        p->replies = r->next;
        free(r->text);
        free(r);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

rj_checker *rj_checker_new(char path[64])
{
    snprintf(path, 64, "/dev/shm/rlock-rj-%d-XXXXXX", (int)getpid());
    int fd = mkstemp(path);
    if (fd < 0 || ftruncate(fd, sizeof(rj_checker)) != 0) {
        return NULL;
    }
    void *m = mmap(NULL, sizeof(rj_checker), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return m == MAP_FAILED ? NULL : m;
}

void rj_checker_free(rj_checker *ck, const char *path)
{
    munmap(ck, sizeof(*ck));
    unlink(path);
}

void rj_ck_enter(rj_checker *ck, int slot)
{
    rj_ck_slot *s = &ck->slot[slot];
    if (atomic_fetch_add(&s->writers, 1) != 0 || atomic_load(&s->readers) != 0) {
        atomic_fetch_add(&s->violations, 1);
    }
    atomic_fetch_add(&s->entries, 1);
}

void rj_ck_leave(rj_checker *ck, int slot)
{
    atomic_fetch_sub(&ck->slot[slot].writers, 1);
}

void rj_ck_read_enter(rj_checker *ck, int slot)
{
    rj_ck_slot *s = &ck->slot[slot];
    atomic_fetch_add(&s->readers, 1);
    if (atomic_load(&s->writers) != 0) {
        atomic_fetch_add(&s->violations, 1);
    }
    atomic_fetch_add(&s->reads, 1);
}

void rj_ck_read_leave(rj_checker *ck, int slot)
{
    atomic_fetch_sub(&ck->slot[slot].readers, 1);
}

void rj_ck_permit_enter(rj_checker *ck, int slot, long long bound)
{
    rj_ck_slot *s = &ck->slot[slot];
    if (atomic_fetch_add(&s->readers, 1) + 1 > bound) {
        atomic_fetch_add(&s->violations, 1);
    }
    atomic_fetch_add(&s->reads, 1);
}

rlock_client *rj_client(const rh_server *s)
{
    rlock_options o;
    tc_options(&o, s);
    return tc_client(&o);
}

rlock *rj_open_own(const rh_server *s, rlock_kind kind, const char *name, rlock_client **c)
{
    *c = rj_client(s);
    return tc_open(*c, kind, name);
}
