/*
 * redis_harness: see redis_harness.h for the contract and the layers of cleanup.
 *
 * Two registries describe the servers of this process. g_servers (protected by g_lock) holds the
 * rh_server objects for ordinary code. g_sig_slots mirrors what the atexit and signal handlers
 * need (owner PID, server PID, temp dir) in plain fixed-size memory, because a signal handler may
 * neither take a mutex nor follow heap pointers that another thread is changing.
 */
#include "redis_harness.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <hiredis.h>

#define RH_DIR_MAX          256
#define RH_START_TIMEOUT_MS 5000
#define RH_PORT_ATTEMPTS    5
#define RH_ADMIN_TIMEOUT_MS 1000
#define RH_PROBE_TIMEOUT_MS 200

struct rh_server {
    int slot;
    int port;
    int reserve_fd; /* Bound, never-listening socket that holds the port; see rh__reserve. */
    int tls_port;   /* 0 for a plain server */
    int tls_reserve_fd;
    char *tls_args[4]; /* cert, key, CA paths and "yes"/"no" for --tls-auth-clients */
    pid_t pid;         /* 0 while stopped. */
    pid_t owner;       /* Only this process may kill the server or remove its directory. */
    int paused;
    int pdeathsig;
    char *password;
    char **argv; /* The full redis-server command line, reused by rh_restart. */
    char dir[RH_DIR_MAX];
    char log_path[RH_DIR_MAX + 16];
    char out_path[RH_DIR_MAX + 16];
    char conf_path[RH_DIR_MAX + 16]; /* rh_start_conf(): the config file, "" otherwise */
    char url[64];
    pthread_mutex_t admin_lock;
    redisContext *admin; /* Cached connection for rh_cmd*; see rh_cmd. */
    pid_t admin_pid;     /* The process that opened admin: a forked child must not share it. */
};

/* What the async-signal-safe cleanup needs to know about one server. */
typedef struct {
    volatile sig_atomic_t used; /* dir holds a directory that still has to be removed. */
    volatile sig_atomic_t owner;
    volatile sig_atomic_t pid; /* The running server, or 0. */
    char dir[RH_DIR_MAX];
} rh_sig_slot;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static rh_server *g_servers[RH_MAX_SERVERS];
static rh_sig_slot g_sig_slots[RH_MAX_SERVERS];

static const int g_fatal_signals[] = {SIGINT, SIGTERM, SIGABRT, SIGSEGV, SIGBUS};
#define RH_NFATAL ((int)(sizeof(g_fatal_signals) / sizeof(g_fatal_signals[0])))
static struct sigaction g_prev_actions[RH_NFATAL];

static void rh__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void rh__log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("redis_harness: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ------------------------------------------------------------------------------------------ */
/* Async-signal-safe cleanup.                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* The kernel's record layout for getdents64, which glibc only exposes under other names. */
struct rh_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/*
 * Removes the files in dir and then dir itself. It uses raw getdents64 rather than opendir()
 * because opendir() allocates, and this also runs inside signal handlers. Redis only creates
 * plain files in its --dir, so one level is enough.
 */
static void rh__remove_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        /* Deleting entries while reading can make getdents skip some, so rescan a few times. */
        for (int pass = 0; pass < 4; pass++) {
            int removed = 0;
            char buf[4096] __attribute__((aligned(8)));
            lseek(fd, 0, SEEK_SET);
            for (;;) {
                long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
                if (n <= 0) {
                    break;
                }
                for (long off = 0; off < n;) {
                    struct rh_dirent64 *d = (struct rh_dirent64 *)(void *)(buf + off);
                    const char *name = d->d_name;
                    off += d->d_reclen;
                    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
                        continue;
                    }
                    if (unlinkat(fd, name, 0) == 0 || unlinkat(fd, name, AT_REMOVEDIR) == 0) {
                        removed++;
                    }
                }
            }
            if (removed == 0) {
                break;
            }
        }
        close(fd);
    }
    rmdir(dir);
}

static void rh__reap(pid_t pid)
{
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

/*
 * Kills, reaps and removes every server that this very process started. Only async-signal-safe
 * calls are used, and no lock is taken, because it runs from signal handlers and from atexit
 * while other threads may hold g_lock. Servers inherited from a parent across fork() carry the
 * parent's PID as owner and are left alone.
 */
static void rh__cleanup_owned(void)
{
    pid_t self = getpid();
    for (int i = 0; i < RH_MAX_SERVERS; i++) {
        rh_sig_slot *slot = &g_sig_slots[i];
        if (!slot->used || slot->owner != self) {
            continue;
        }
        pid_t pid = slot->pid;
        if (pid > 0) {
            kill(pid, SIGKILL);
            slot->pid = 0;
            rh__reap(pid);
        }
        rh__remove_dir(slot->dir);
        slot->used = 0;
    }
}

static int rh__fatal_index(int sig)
{
    for (int i = 0; i < RH_NFATAL; i++) {
        if (g_fatal_signals[i] == sig) {
            return i;
        }
    }
    return -1;
}

static void rh__on_fatal(int sig, siginfo_t *info, void *ucontext)
{
    (void)ucontext;
    int saved_errno = errno;
    rh__cleanup_owned();

    /* Hand the signal on to whoever handled it before us (ASan, for one) or to the default. */
    int idx = rh__fatal_index(sig);
    if (idx >= 0) {
        sigaction(sig, &g_prev_actions[idx], NULL);
    }
    errno = saved_errno;

    /* A fault raised by the kernel repeats when we return, now meeting the restored handler with
     * its original siginfo; anything sent with kill()/raise() has to be sent again. The signal
     * stays blocked until this handler returns, so the re-raise is delivered only then. */
    if ((sig == SIGSEGV || sig == SIGBUS) && info != NULL && info->si_code > 0) {
        return;
    }
    raise(sig);
}

static void rh__install_fatal_handlers(void)
{
    for (int i = 0; i < RH_NFATAL; i++) {
        struct sigaction prev;
        if (sigaction(g_fatal_signals[i], NULL, &prev) != 0) {
            continue;
        }
        /* An ignored signal (for example SIGINT under nohup) must stay ignored. */
        if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_IGN) {
            continue;
        }
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = rh__on_fatal;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(g_fatal_signals[i], &sa, &g_prev_actions[i]);
    }
}

static void rh__atexit(void)
{
    rh__cleanup_owned();
}

/* fork() copies g_lock in whatever state it is; holding it across fork() keeps the copy sane. */
static void rh__atfork_prepare(void)
{
    pthread_mutex_lock(&g_lock);
}

static void rh__atfork_release(void)
{
    pthread_mutex_unlock(&g_lock);
}

/*
 * Runs before main() so that the handlers are in place before cmocka first saves the signal
 * dispositions: cmocka installs its own SIGSEGV/SIGBUS handlers around each test and restores
 * the saved ones afterwards, and if we installed ours during a test, that restore would drop it.
 */
__attribute__((constructor)) static void rh__init(void)
{
    signal(SIGPIPE, SIG_IGN);
    rh__install_fatal_handlers();
    pthread_atfork(rh__atfork_prepare, rh__atfork_release, rh__atfork_release);
    atexit(rh__atexit);
}

/* ------------------------------------------------------------------------------------------ */
/* Small helpers.                                                                              */
/* ------------------------------------------------------------------------------------------ */

int64_t rh_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void rh_sleep_ms(int64_t ms)
{
    if (ms <= 0) {
        return;
    }
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static struct timeval rh__tv(int ms)
{
    struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (suseconds_t)(ms % 1000) * 1000};
    return tv;
}

/* PR_SET_PDEATHSIG is tied to the forking thread, so forking elsewhere silently weakens cleanup. */
static void rh__warn_if_not_main_thread(const char *fn)
{
    static int warned;
    if (gettid() != getpid() && !warned) {
        warned = 1;
        rh__log("%s called from a non-main thread: its children die when THIS thread exits", fn);
    }
}

/* fork() for the harness' entry points (warned about off the main thread): output buffered in
 * the parent is flushed first, or the child would write it again; -1 after a log line when
 * fork fails. */
static pid_t rh__fork(const char *fn)
{
    rh__warn_if_not_main_thread(fn);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        rh__log("fork: %s", strerror(errno));
    }
    return pid;
}

static char g_binary[PATH_MAX];
static pthread_once_t g_binary_once = PTHREAD_ONCE_INIT;

static int rh__find_in_path(const char *name, char *out, size_t outlen)
{
    if (strchr(name, '/') != NULL) {
        size_t len = strlen(name);
        if (access(name, X_OK) != 0 || len >= outlen) {
            return -1;
        }
        memcpy(out, name, len + 1);
        return 0;
    }
    const char *path = getenv("PATH");
    if (path == NULL || *path == '\0') {
        path = "/usr/local/bin:/usr/bin:/bin";
    }
    while (*path != '\0') {
        const char *end = strchr(path, ':');
        size_t len = end != NULL ? (size_t)(end - path) : strlen(path);
        if (len > 0) {
            int n = snprintf(out, outlen, "%.*s/%s", (int)len, path, name);
            if (n > 0 && (size_t)n < outlen && access(out, X_OK) == 0) {
                return 0;
            }
        }
        path += len;
        if (*path == ':') {
            path++;
        }
    }
    return -1;
}

/* The build may bake in the redis-server it found (RLOCK_REDIS_SERVER_DEFAULT); the environment
 * still wins, so that one test binary can be pointed at another server version. */
#ifndef RLOCK_REDIS_SERVER_DEFAULT
#define RLOCK_REDIS_SERVER_DEFAULT ""
#endif

static void rh__resolve_binary(void)
{
    const char *env = getenv("RLOCK_REDIS_SERVER");
    const char *candidates[] = {env, RLOCK_REDIS_SERVER_DEFAULT, "redis-server"};
    g_binary[0] = '\0';
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        if (candidates[i] == NULL || candidates[i][0] == '\0') {
            continue;
        }
        if (rh__find_in_path(candidates[i], g_binary, sizeof(g_binary)) == 0) {
            return;
        }
        g_binary[0] = '\0';
        /* An explicit choice that does not exist is an error, not a reason to use another. */
        if (i == 0) {
            return;
        }
    }
}

const char *rh_server_binary(void)
{
    pthread_once(&g_binary_once, rh__resolve_binary);
    return g_binary[0] != '\0' ? g_binary : NULL;
}

void rh_skip_if_unavailable(void)
{
    if (rh_server_binary() == NULL) {
        fprintf(stderr, "SKIP: no redis-server binary (set RLOCK_REDIS_SERVER or PATH)\n");
        exit(RH_EXIT_SKIP);
    }
}

/* Closes every descriptor above stderr; used between fork() and exec(), so no allocation. */
static void rh__close_from_3(void)
{
    if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0) {
        return;
    }
    struct rlimit rl;
    long max = 4096;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 65536) {
        max = (long)rl.rlim_cur;
    }
    for (long fd = 3; fd < max; fd++) {
        close((int)fd);
    }
}

/*
 * The part of every fork() child that ties its life to the parent. getppid() is checked after
 * prctl() because the parent may have died between fork() and prctl(), in which case no death
 * signal would ever arrive.
 */
static void rh__child_bind_to_parent(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) {
        _exit(127);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Registry.                                                                                   */
/* ------------------------------------------------------------------------------------------ */

static int rh__claim_slot(rh_server *s)
{
    int found = -1;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < RH_MAX_SERVERS; i++) {
        if (g_servers[i] == NULL && !g_sig_slots[i].used) {
            found = i;
            g_servers[i] = s;
            g_sig_slots[i].pid = 0;
            g_sig_slots[i].owner = s->owner;
            memcpy(g_sig_slots[i].dir, s->dir, sizeof(s->dir));
            /* The signal handler must see a complete entry once it sees used != 0. */
            atomic_signal_fence(memory_order_seq_cst);
            g_sig_slots[i].used = 1;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    s->slot = found;
    return found;
}

static void rh__set_slot_pid(rh_server *s, pid_t pid)
{
    if (s->slot >= 0) {
        g_sig_slots[s->slot].pid = pid;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Server processes.                                                                           */
/* ------------------------------------------------------------------------------------------ */

/*
 * Picks a free port by binding a SO_REUSEADDR socket to 127.0.0.1:0 and KEEPS that socket open
 * (bound, never listening) for the server's whole life. redis-server also sets SO_REUSEADDR, so
 * it can still bind and listen on the port, but the kernel will not hand the port to anyone
 * else's bind(0) or outgoing connection, nor to a plain bind() while the server is stopped:
 * this is what keeps the port free for rh_restart() and makes port races rare.
 */
static int rh__reserve_port(int *port, int *reserve_fd)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    int one = 1;
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = 0;
    socklen_t len = sizeof(sa);
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        close(fd);
        return -1;
    }
    *reserve_fd = fd;
    *port = ntohs(sa.sin_port);
    return 0;
}

/* The plain port (the harness's own admin connections use it) and, for a TLS server, the TLS
 * port that rh_url() names. */
static int rh__reserve(rh_server *s)
{
    if (rh__reserve_port(&s->port, &s->reserve_fd) != 0) {
        return -1;
    }
    snprintf(s->url, sizeof(s->url), "redis://127.0.0.1:%d", s->port);
    if (s->tls_args[0] == NULL) {
        return 0;
    }
    if (rh__reserve_port(&s->tls_port, &s->tls_reserve_fd) != 0) {
        return -1;
    }
    snprintf(s->url, sizeof(s->url), "rediss://127.0.0.1:%d", s->tls_port);
    return 0;
}

static void rh__free_argv(char **argv)
{
    if (argv == NULL) {
        return;
    }
    for (char **p = argv; *p != NULL; p++) {
        free(*p);
    }
    free(argv);
}

static int rh__build_argv(rh_server *s, const char *binary, const char *const *extra)
{
    char port[16];
    snprintf(port, sizeof(port), "%d", s->port);
    const char *base[] = {binary,   "--save",      "",       "--appendonly", "no",
                          "--port", port,          "--bind", "127.0.0.1",    "--dir",
                          s->dir,   "--daemonize", "no",     "--logfile",    s->log_path};
    char tls_port[16];
    snprintf(tls_port, sizeof(tls_port), "%d", s->tls_port);
    const char *tls[] = {"--tls-port",         tls_port,       "--tls-cert-file",    s->tls_args[0],
                         "--tls-key-file",     s->tls_args[1], "--tls-ca-cert-file", s->tls_args[2],
                         "--tls-auth-clients", s->tls_args[3]};
    size_t nbase = sizeof(base) / sizeof(base[0]);
    size_t ntls = s->tls_args[0] != NULL ? sizeof(tls) / sizeof(tls[0]) : 0;
    size_t nextra = 0;
    while (extra != NULL && extra[nextra] != NULL) {
        nextra++;
    }
    /* A config file must come right after the binary. */
    size_t nconf = s->conf_path[0] != '\0';
    char **argv = calloc(nconf + nbase + ntls + nextra + 1, sizeof(char *));
    if (argv == NULL) {
        return -1;
    }
    for (size_t i = 0; i < nconf + nbase + ntls + nextra; i++) {
        size_t j = i == 0 ? 0 : i - nconf; /* index without the config file */
        argv[i] = strdup(i > 0 && i <= nconf ? s->conf_path
                         : j < nbase         ? base[j]
                         : j < nbase + ntls  ? tls[j - nbase]
                                             : extra[j - nbase - ntls]);
        if (argv[i] == NULL) {
            rh__free_argv(argv);
            return -1;
        }
    }
    rh__free_argv(s->argv);
    s->argv = argv;
    return 0;
}

/* Forks and execs redis-server; everything the child needs is prepared before fork(). */
static int rh__launch(rh_server *s)
{
    pid_t parent = getpid();
    pid_t pid = rh__fork("rh_start/rh_restart");
    if (pid < 0) {
        return -1;
    }
    if (pid == 0) {
        if (s->pdeathsig) {
            rh__child_bind_to_parent(parent);
        }
        /* Undo what exec would otherwise carry over from the test program. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        struct sigaction dfl;
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGPIPE, &dfl, NULL);
        int in = open("/dev/null", O_RDONLY);
        if (in >= 0 && in != 0) {
            dup2(in, 0);
        }
        int out = open(s->out_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (out >= 0) {
            dup2(out, 1);
            dup2(out, 2);
        }
        /* Redis needs only stdio; inherited sockets (hiredis connections, our port reservation,
         * pipes of other tests) must not be kept alive by the server. */
        rh__close_from_3();
        execv(s->argv[0], s->argv);
        _exit(127);
    }
    s->pid = pid;
    s->paused = 0;
    pthread_mutex_lock(&g_lock);
    rh__set_slot_pid(s, pid);
    pthread_mutex_unlock(&g_lock);
    return 0;
}

/* Kill first, then forget the PID, then reap: until it is reaped the PID cannot be reused, so a
 * signal handler that kills it a second time in between is harmless. */
static void rh__kill_and_reap(rh_server *s)
{
    if (s->pid <= 0) {
        return;
    }
    kill(s->pid, SIGKILL);
    pthread_mutex_lock(&g_lock);
    rh__set_slot_pid(s, 0);
    pthread_mutex_unlock(&g_lock);
    rh__reap(s->pid);
    s->pid = 0;
    s->paused = 0;
}

static redisContext *rh__connect_ex(int port, const char *password, int timeout_ms)
{
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, rh__tv(timeout_ms));
    if (c == NULL) {
        return NULL;
    }
    if (c->err) {
        redisFree(c);
        return NULL;
    }
    /* hiredis 0.14 does not open its socket with SOCK_CLOEXEC; children must not inherit it. */
    fcntl(c->fd, F_SETFD, FD_CLOEXEC);
    redisSetTimeout(c, rh__tv(timeout_ms));
    if (password != NULL) {
        redisReply *r = redisCommand(c, "AUTH %s", password);
        int ok = r != NULL && r->type == REDIS_REPLY_STATUS;
        if (r != NULL) {
            freeReplyObject(r);
        }
        if (!ok) {
            redisFree(c);
            return NULL;
        }
    }
    return c;
}

/* 0 once the server answers PING (PONG, or NOAUTH when it has a password). */
static int rh__probe(const rh_server *s)
{
    redisContext *c = rh__connect_ex(s->port, NULL, RH_PROBE_TIMEOUT_MS);
    if (c == NULL) {
        return -1;
    }
    redisReply *r = redisCommand(c, "PING");
    int ok = 0;
    if (r != NULL) {
        ok = (r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0) ||
             (r->type == REDIS_REPLY_ERROR && strncmp(r->str, "NOAUTH", 6) == 0);
        freeReplyObject(r);
    }
    redisFree(c);
    return ok ? 0 : -1;
}

enum { RH_READY = 0, RH_EXITED = -1, RH_HUNG = -2 };

static int rh__wait_ready(rh_server *s, int64_t deadline)
{
    for (;;) {
        int status;
        pid_t r = waitpid(s->pid, &status, WNOHANG);
        if (r == s->pid) {
            pthread_mutex_lock(&g_lock);
            rh__set_slot_pid(s, 0);
            pthread_mutex_unlock(&g_lock);
            s->pid = 0;
            return RH_EXITED;
        }
        if (rh__probe(s) == 0) {
            return RH_READY;
        }
        if (rh_now_ms() >= deadline) {
            rh__kill_and_reap(s);
            return RH_HUNG;
        }
        rh_sleep_ms(10);
    }
}

static int rh__file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return 0;
    }
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, needle) != NULL;
    }
    fclose(f);
    return found;
}

static int rh__port_conflict(const rh_server *s)
{
    return rh__file_contains(s->log_path, "Address already in use") ||
           rh__file_contains(s->out_path, "Address already in use");
}

static void rh__dump_tail(const char *path)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, size > 2048 ? size - 2048 : 0, SEEK_SET);
    char buf[2049];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    if (n > 0) {
        fprintf(stderr, "---- %s (tail) ----\n%s\n----\n", path, buf);
    }
}

/* Launches on s->port and waits; retries on a lost port race only while allowed and in time. */
static int rh__launch_and_wait(rh_server *s, int64_t deadline)
{
    if (rh__launch(s) != 0) {
        return -1;
    }
    return rh__wait_ready(s, deadline);
}

/* Copies tls (or the RH_TLS_DIR default) into s: absolute paths of the server's files. */
static int rh__set_tls(rh_server *s, const rh_tls *tls)
{
    rh_tls def = {0};
    if (tls == NULL && rh_tls_dir() != NULL) {
        def.dir = rh_tls_dir();
        tls = &def;
    }
    if (tls == NULL) {
        return 0;
    }
    const char *names[3] = {tls->cert ? tls->cert : "server.crt",
                            tls->key ? tls->key : "server.key", tls->ca ? tls->ca : "ca.crt"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(tls->dir) + strlen(names[i]) + 2;
        s->tls_args[i] = malloc(n);
        if (s->tls_args[i] == NULL) {
            return -1;
        }
        snprintf(s->tls_args[i], n, "%s/%s", tls->dir, names[i]);
    }
    s->tls_args[3] = strdup(tls->auth_clients ? "yes" : "no");
    return s->tls_args[3] == NULL ? -1 : 0;
}

const char *rh_tls_dir(void)
{
    const char *d = getenv(RH_ENV_TLS_DIR);
    return d != NULL && d[0] != '\0' ? d : NULL;
}

int rh_tls_port(const rh_server *s)
{
    return s != NULL ? s->tls_port : 0;
}

rh_server *rh_start(const char *const *extra_args)
{
    return rh_start_tls(NULL, extra_args);
}

/* Writes conf into the server's directory as redis.conf. 0 or -1. */
static int rh__write_conf(rh_server *s, const char *conf)
{
    snprintf(s->conf_path, sizeof(s->conf_path), "%s/redis.conf", s->dir);
    FILE *f = fopen(s->conf_path, "w");
    if (f == NULL) {
        rh__log("cannot write %s: %s", s->conf_path, strerror(errno));
        return -1;
    }
    int ok = fputs(conf, f) >= 0;
    ok = fclose(f) == 0 && ok;
    return ok ? 0 : -1;
}

static rh_server *rh__start(const rh_tls *tls, const char *conf, const char *const *extra_args);

rh_server *rh_start_tls(const rh_tls *tls, const char *const *extra_args)
{
    return rh__start(tls, NULL, extra_args);
}

rh_server *rh_start_conf(const char *conf, const char *const *extra_args)
{
    return rh__start(NULL, conf, extra_args);
}

static rh_server *rh__start(const rh_tls *tls, const char *conf, const char *const *extra_args)
{
    const char *binary = rh_server_binary();
    if (binary == NULL) {
        rh__log("no redis-server binary found (set RLOCK_REDIS_SERVER or PATH)");
        return NULL;
    }
    rh_server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    s->slot = -1;
    s->reserve_fd = -1;
    s->tls_reserve_fd = -1;
    s->owner = getpid();
    if (rh__set_tls(s, tls) != 0) {
        rh_free(s);
        return NULL;
    }
    pthread_mutex_init(&s->admin_lock, NULL);
    const char *no_pds = getenv(RH_ENV_NO_PDEATHSIG);
    s->pdeathsig = !(no_pds != NULL && strcmp(no_pds, "1") == 0);

    for (size_t i = 0; extra_args != NULL && extra_args[i] != NULL; i++) {
        if (strcmp(extra_args[i], "--requirepass") == 0 && extra_args[i + 1] != NULL) {
            free(s->password);
            s->password = strdup(extra_args[i + 1]);
        }
    }

    /* An absolute directory, because redis chdir()s into --dir while parsing its arguments. */
    const char *tmp = getenv("TMPDIR");
    char tmpl[RH_DIR_MAX];
    char real[PATH_MAX];
    if (tmp == NULL || *tmp == '\0' || realpath(tmp, real) == NULL) {
        snprintf(real, sizeof(real), "/tmp");
    }
    int n = snprintf(tmpl, sizeof(tmpl), "%s/rlock-rh-XXXXXX", real);
    if (n < 0 || (size_t)n >= sizeof(tmpl) || mkdtemp(tmpl) == NULL) {
        rh__log("mkdtemp under %s failed: %s", real, strerror(errno));
        rh_free(s);
        return NULL;
    }
    memcpy(s->dir, tmpl, sizeof(s->dir));
    snprintf(s->log_path, sizeof(s->log_path), "%s/redis.log", s->dir);
    snprintf(s->out_path, sizeof(s->out_path), "%s/redis.out", s->dir);
    if (conf != NULL && rh__write_conf(s, conf) != 0) {
        rh__remove_dir(s->dir);
        s->dir[0] = '\0';
        rh_free(s);
        return NULL;
    }
    if (rh__claim_slot(s) < 0) {
        rh__log("more than %d servers at once", RH_MAX_SERVERS);
        rh__remove_dir(s->dir);
        s->dir[0] = '\0';
        rh_free(s);
        return NULL;
    }

    int64_t deadline = rh_now_ms() + RH_START_TIMEOUT_MS;
    int rc = -1;
    for (int attempt = 0; attempt < RH_PORT_ATTEMPTS; attempt++) {
        if (rh__reserve(s) != 0) {
            rh__log("cannot reserve a loopback port: %s", strerror(errno));
            break;
        }
        if (rh__build_argv(s, binary, extra_args) != 0) {
            break;
        }
        rc = rh__launch_and_wait(s, deadline);
        if (rc == RH_READY || !rh__port_conflict(s) || rh_now_ms() >= deadline) {
            break;
        }
        /* Someone else grabbed the port between our reservation and redis's bind: new port. */
        close(s->reserve_fd);
        s->reserve_fd = -1;
        if (s->tls_reserve_fd >= 0) {
            close(s->tls_reserve_fd);
            s->tls_reserve_fd = -1;
        }
        unlink(s->log_path);
        unlink(s->out_path);
    }
    if (rc != RH_READY) {
        rh__log("redis-server (%s) did not come up on port %d%s", binary, s->port,
                rc == RH_HUNG ? " in time" : "");
        rh__dump_tail(s->log_path);
        rh__dump_tail(s->out_path);
        rh_free(s);
        return NULL;
    }
    return s;
}

int rh_port(const rh_server *s)
{
    return s != NULL ? s->port : -1;
}

const char *rh_url(const rh_server *s)
{
    return s != NULL ? s->url : NULL;
}

const char *rh_password(const rh_server *s)
{
    return s != NULL ? s->password : NULL;
}

pid_t rh_pid(const rh_server *s)
{
    return s != NULL ? s->pid : -1;
}

const char *rh_dir(const rh_server *s)
{
    return s != NULL ? s->dir : NULL;
}

static int rh__is_owner(const rh_server *s)
{
    return s != NULL && s->owner == getpid();
}

int rh_pause(rh_server *s)
{
    if (!rh__is_owner(s) || s->pid <= 0) {
        return -1;
    }
    if (s->paused) {
        return 0;
    }
    if (kill(s->pid, SIGSTOP) != 0) {
        return -1;
    }
    /* Wait for the stop to take effect, so that a command sent right after cannot be answered. */
    int status;
    pid_t r;
    while ((r = waitpid(s->pid, &status, WUNTRACED)) < 0 && errno == EINTR) {
    }
    if (r != s->pid || !WIFSTOPPED(status)) {
        return -1;
    }
    s->paused = 1;
    return 0;
}

int rh_resume(rh_server *s)
{
    if (!rh__is_owner(s) || s->pid <= 0) {
        return -1;
    }
    if (kill(s->pid, SIGCONT) != 0) {
        return -1;
    }
    if (!s->paused) {
        return 0;
    }
    int status;
    pid_t r;
    while ((r = waitpid(s->pid, &status, WCONTINUED)) < 0 && errno == EINTR) {
    }
    s->paused = 0;
    return r == s->pid && WIFCONTINUED(status) ? 0 : -1;
}

static void rh__drop_admin(rh_server *s)
{
    pthread_mutex_lock(&s->admin_lock);
    if (s->admin != NULL) {
        redisFree(s->admin);
        s->admin = NULL;
    }
    pthread_mutex_unlock(&s->admin_lock);
}

int rh_stop(rh_server *s)
{
    if (!rh__is_owner(s) || s->pid <= 0) {
        return -1;
    }
    rh__kill_and_reap(s);
    rh__drop_admin(s);
    return 0;
}

int rh_restart(rh_server *s)
{
    if (!rh__is_owner(s) || s->argv == NULL) {
        return -1;
    }
    if (s->pid > 0) {
        rh__kill_and_reap(s);
    }
    rh__drop_admin(s);
    /* Persistence is off, but make sure no old snapshot can be loaded into the new server. */
    char rdb[RH_DIR_MAX + 16];
    snprintf(rdb, sizeof(rdb), "%s/dump.rdb", s->dir);
    unlink(rdb);

    int64_t deadline = rh_now_ms() + RH_START_TIMEOUT_MS;
    for (;;) {
        int rc = rh__launch_and_wait(s, deadline);
        if (rc == RH_READY) {
            return 0;
        }
        /* Only a foreign process can hold the port now; it may let go, so keep trying a while. */
        if (rc != RH_EXITED || !rh__port_conflict(s) || rh_now_ms() >= deadline) {
            rh__log("restart on port %d failed", s->port);
            rh__dump_tail(s->log_path);
            return -1;
        }
        rh_sleep_ms(50);
    }
}

void rh_free(rh_server *s)
{
    if (s == NULL) {
        return;
    }
    if (rh__is_owner(s)) {
        rh__kill_and_reap(s);
        pthread_mutex_lock(&g_lock);
        if (s->slot >= 0) {
            g_sig_slots[s->slot].used = 0;
            g_servers[s->slot] = NULL;
        }
        pthread_mutex_unlock(&g_lock);
        if (s->dir[0] != '\0') {
            rh__remove_dir(s->dir);
        }
    }
    /* In a forked child these are the child's own copies: closing them affects nobody else. */
    if (s->admin != NULL) {
        redisFree(s->admin);
    }
    if (s->tls_reserve_fd >= 0) {
        close(s->tls_reserve_fd);
    }
    for (int i = 0; i < 4; i++) {
        free(s->tls_args[i]);
    }
    if (s->reserve_fd >= 0) {
        close(s->reserve_fd);
    }
    pthread_mutex_destroy(&s->admin_lock);
    rh__free_argv(s->argv);
    free(s->password);
    free(s);
}

/* ------------------------------------------------------------------------------------------ */
/* Commands.                                                                                   */
/* ------------------------------------------------------------------------------------------ */

redisContext *rh_connect(const rh_server *s)
{
    if (s == NULL) {
        return NULL;
    }
    return rh__connect_ex(s->port, s->password, RH_ADMIN_TIMEOUT_MS);
}

redisContext *rh_connect_noauth(const rh_server *s)
{
    if (s == NULL) {
        return NULL;
    }
    return rh__connect_ex(s->port, NULL, RH_ADMIN_TIMEOUT_MS);
}

redisReply *rh_cmd(rh_server *s, const char *const *argv)
{
    if (s == NULL || argv == NULL || argv[0] == NULL) {
        return NULL;
    }
    int argc = 0;
    while (argv[argc] != NULL) {
        argc++;
    }
    redisReply *reply = NULL;
    pthread_mutex_lock(&s->admin_lock);
    /* A connection inherited across fork() is shared with the parent; interleaving commands on
     * one socket from two processes would garble both, so a child opens its own. */
    if (s->admin != NULL && (s->admin_pid != getpid() || s->admin->err)) {
        redisFree(s->admin);
        s->admin = NULL;
    }
    for (int attempt = 0; attempt < 2 && reply == NULL; attempt++) {
        int reused = s->admin != NULL;
        if (s->admin == NULL) {
            s->admin = rh_connect(s);
            s->admin_pid = getpid();
        }
        if (s->admin == NULL) {
            break;
        }
        /* hiredis 0.14 takes `const char **` but does not modify the array. */
        reply = redisCommandArgv(s->admin, argc, (const char **)argv, NULL);
        if (reply == NULL) {
            /* Retry only a cached connection that the server closed (killed or restarted behind
             * our back): then the command was never run. A timeout may have run it, so no retry. */
            int closed = s->admin->err == REDIS_ERR_EOF ||
                         (s->admin->err == REDIS_ERR_IO && (errno == EPIPE || errno == ECONNRESET));
            redisFree(s->admin);
            s->admin = NULL;
            if (!reused || !closed) {
                break;
            }
        }
    }
    pthread_mutex_unlock(&s->admin_lock);
    return reply;
}

long long rh_cmd_int(rh_server *s, const char *const *argv)
{
    redisReply *r = rh_cmd(s, argv);
    long long v = -1;
    if (r == NULL) {
        return -1;
    }
    if (r->type == REDIS_REPLY_INTEGER) {
        v = r->integer;
    } else if (r->type == REDIS_REPLY_STRING && r->len > 0) {
        char *end;
        errno = 0;
        long long parsed = strtoll(r->str, &end, 10);
        if (errno == 0 && *end == '\0' && !isspace((unsigned char)r->str[0])) {
            v = parsed;
        }
    }
    freeReplyObject(r);
    return v;
}

char *rh_cmd_str(rh_server *s, const char *const *argv)
{
    redisReply *r = rh_cmd(s, argv);
    char *out = NULL;
    if (r == NULL) {
        return NULL;
    }
    if (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_STRING) {
        out = malloc(r->len + 1);
        if (out != NULL) {
            memcpy(out, r->str, r->len);
            out[r->len] = '\0';
        }
    }
    freeReplyObject(r);
    return out;
}

/* Finds the INFO commandstats line of cmd and returns the text after "cmdstat_<cmd>:", copied
 * into line. 1 if found, 0 if absent, -1 on error. */
static int rh__cmdstat_line(rh_server *s, const char *cmd, char *line, size_t linelen)
{
    char needle[128];
    int n = snprintf(needle, sizeof(needle), "\ncmdstat_%s:", cmd);
    if (n < 0 || (size_t)n >= sizeof(needle)) {
        return -1;
    }
    for (char *p = needle; *p != '\0'; p++) {
        *p = (char)tolower((unsigned char)*p);
    }
    const char *argv[] = {"INFO", "commandstats", NULL};
    redisReply *r = rh_cmd(s, argv);
    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        if (r != NULL) {
            freeReplyObject(r);
        }
        return -1;
    }
    int found = 0;
    const char *hit = strstr(r->str, needle);
    if (hit != NULL) {
        hit += strlen(needle);
        size_t len = strcspn(hit, "\r\n");
        if (len >= linelen) {
            len = linelen - 1;
        }
        memcpy(line, hit, len);
        line[len] = '\0';
        found = 1;
    }
    freeReplyObject(r);
    return found;
}

static const char *rh__field(const char *line, const char *key)
{
    size_t klen = strlen(key);
    for (const char *p = line; p != NULL && *p != '\0';) {
        if (strncmp(p, key, klen) == 0 && p[klen] == '=') {
            return p + klen + 1;
        }
        p = strchr(p, ',');
        if (p != NULL) {
            p++;
        }
    }
    return NULL;
}

long long rh_cmdstat_calls(rh_server *s, const char *cmd)
{
    char line[512];
    int found = rh__cmdstat_line(s, cmd, line, sizeof(line));
    if (found <= 0) {
        return found;
    }
    const char *v = rh__field(line, "calls");
    return v != NULL ? strtoll(v, NULL, 10) : -1;
}

double rh_cmdstat_usec_per_call(rh_server *s, const char *cmd)
{
    char line[512];
    int found = rh__cmdstat_line(s, cmd, line, sizeof(line));
    if (found <= 0) {
        return found;
    }
    const char *v = rh__field(line, "usec_per_call");
    return v != NULL ? strtod(v, NULL) : -1.0;
}

int rh_reset_stats(rh_server *s)
{
    const char *argv[] = {"CONFIG", "RESETSTAT", NULL};
    char *r = rh_cmd_str(s, argv);
    int ok = r != NULL && strcmp(r, "OK") == 0;
    free(r);
    return ok ? 0 : -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Child processes.                                                                            */
/* ------------------------------------------------------------------------------------------ */

pid_t rh_fork_child(int (*fn)(void *), void *arg)
{
    if (fn == NULL) {
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = rh__fork("rh_fork_child");
    if (pid < 0) {
        return -1;
    }
    if (pid == 0) {
        rh__child_bind_to_parent(parent);
        int rc = fn(arg);
        fflush(NULL);
        _exit(rc & 0xff);
    }
    return pid;
}

pid_t rh_spawn_self(const char *const *argv)
{
    static char exe[PATH_MAX];
    /* readlink() rather than exec("/proc/self/exe"): under valgrind only the former names the
     * test program instead of valgrind itself. */
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) {
        rh__log("readlink /proc/self/exe: %s", strerror(errno));
        return -1;
    }
    exe[n] = '\0';
    size_t argc = 0;
    while (argv != NULL && argv[argc] != NULL) {
        argc++;
    }
    char **args = calloc(argc + 2, sizeof(char *));
    if (args == NULL) {
        return -1;
    }
    args[0] = exe;
    for (size_t i = 1; i < argc; i++) {
        args[i] = (char *)argv[i];
    }
    pid_t parent = getpid();
    pid_t pid = rh__fork("rh_spawn_self");
    if (pid < 0) {
        free(args);
        return -1;
    }
    if (pid == 0) {
        rh__child_bind_to_parent(parent);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execv(exe, args);
        _exit(127);
    }
    free(args);
    return pid;
}

int rh_wait_child(pid_t pid, int64_t timeout_ms)
{
    int64_t deadline = rh_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    int64_t nap = 1;
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            break;
        }
        if (r < 0 && errno != EINTR) {
            return -1;
        }
        if (rh_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            rh__reap(pid);
            return -1;
        }
        rh_sleep_ms(nap);
        nap = nap < 20 ? nap * 2 : 20;
    }
    if (WIFEXITED(status)) {
        return WEXITSTATUS(status);
    }
    if (WIFSIGNALED(status)) {
        return 128 + WTERMSIG(status);
    }
    return -1;
}
