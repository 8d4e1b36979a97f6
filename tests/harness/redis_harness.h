/*
 * redis_harness: starts and stops throw-away redis-server processes for rlock's test programs.
 *
 * Every server runs on a free 127.0.0.1 port inside its own mkdtemp() directory and is always
 * addressed by PID, never by name, so parallel test programs cannot disturb each other and no
 * test ever depends on a server at 6379.
 *
 * Cleanup is layered so that no redis-server outlives the test program, whatever happens to it:
 *   1. rh_free() kills, reaps and removes the directory of one server.
 *   2. An atexit() handler does the same for every server still registered when the program exits
 *      normally, including after a cmocka test failed or crashed (cmocka catches SIGSEGV/SIGBUS
 *      itself while a test runs and lets the program carry on to exit()).
 *   3. Handlers for SIGINT, SIGTERM, SIGABRT, SIGSEGV and SIGBUS SIGKILL every registered server
 *      with async-signal-safe calls, then hand the signal on to the previous handler or to the
 *      default action, so the program still dies from the original signal.
 *   4. Each redis-server is started with PR_SET_PDEATHSIG=SIGKILL, so even a test that is killed
 *      with SIGKILL (for example by ctest's timeout) takes its servers with it.
 *
 * Threads: PR_SET_PDEATHSIG fires when the *thread* that forked the server exits, not when the
 * process does. rh_start(), rh_restart(), rh_fork_child() and rh_spawn_self() must therefore be
 * called from the main thread (or from a thread that outlives every server and child it starts).
 * Every server and child is owned by the process that started it: the atexit and signal handlers
 * of a forked child never touch its parent's servers.
 *
 * The harness process ignores SIGPIPE, because writing to a server that the test has just killed
 * would otherwise kill the test program itself.
 */
#ifndef RLOCK_TESTS_REDIS_HARNESS_H
#define RLOCK_TESTS_REDIS_HARNESS_H

#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

struct redisContext;
struct redisReply;

typedef struct rh_server rh_server;

/* The exit status that CTest (SKIP_RETURN_CODE) and automake treat as "skipped". */
#define RH_EXIT_SKIP 77

/* The most servers one process may have registered at the same time. */
#define RH_MAX_SERVERS 64

/*
 * Starts redis-server on a free 127.0.0.1 port in a fresh mkdtemp() directory with
 * `--save '' --appendonly no --port P --bind 127.0.0.1 --dir D --daemonize no
 * --logfile D/redis.log` followed by the optional NULL-terminated extra_args (for example
 * {"--requirepass", "pw", NULL}). Waits up to about 5 s until the server answers PING (or NOAUTH
 * when a password is set) and retries with a new port if the server could not bind its port.
 * The binary is $RLOCK_REDIS_SERVER if set, else `redis-server` found on PATH.
 * Returns NULL on failure after printing the reason (and the tail of redis.log) on stderr.
 */
rh_server *rh_start(const char *const *extra_args);

/*
 * TLS servers. A TLS server listens for TLS on a second free port (--tls-port) with the
 * certificate files of tls->dir, and keeps its plain port for the harness's own admin
 * connections (rh_connect, rh_cmd*: Debian's hiredis 0.14 has no TLS); rlock clients are given
 * rh_url(), which names the TLS port. dir holds the files tests/tls/make_certs.sh writes; cert,
 * key and ca are file names in it (NULL: server.crt, server.key, ca.crt); auth_clients 1 is
 * --tls-auth-clients yes (a client certificate signed by ca is required), 0 is "no".
 */
typedef struct rh_tls {
    const char *dir;
    const char *cert;
    const char *key;
    const char *ca;
    int auth_clients;
} rh_tls;

/* When this environment variable names a certificate directory, rh_start() starts TLS servers
 * (server.crt, no client certificate required): how a second ctest registration runs a whole
 * scenario program over TLS. */
#define RH_ENV_TLS_DIR "RH_TLS_DIR"

/* Like rh_start(), a TLS server as tls says (NULL: as rh_start()). */
rh_server *rh_start_tls(const rh_tls *tls, const char *const *extra_args);
/* $RH_TLS_DIR, or NULL when it is unset or empty. */
const char *rh_tls_dir(void);
/* The TLS port, or 0 for a plain server. */
int rh_tls_port(const rh_server *s);

/* The plain port (admin connections). */
int rh_port(const rh_server *s);
/* "redis://127.0.0.1:PORT", or "rediss://127.0.0.1:TLSPORT" for a TLS server; the password,
 * if any, is not part of the URL (see rh_password). */
const char *rh_url(const rh_server *s);
/* The value given with --requirepass in extra_args, or NULL. */
const char *rh_password(const rh_server *s);
/* The PID of the running server, or 0 while it is stopped. */
pid_t rh_pid(const rh_server *s);
/* The server's private temp directory (holds redis.log). */
const char *rh_dir(const rh_server *s);

/* SIGSTOP: the server hangs; connections stay open but nothing is answered. Returns once the
 * server has actually stopped, so the next command is guaranteed to go unanswered. 0 or -1. */
int rh_pause(rh_server *s);
/* SIGCONT, and waits until the server runs again. 0 or -1. */
int rh_resume(rh_server *s);
/* SIGKILL by PID and reap. The port stays reserved for rh_restart(). 0 or -1. */
int rh_stop(rh_server *s);
/* Starts the server again on the SAME port with an empty data set (stopping it first if it is
 * still running) and waits until it answers. 0 or -1. */
int rh_restart(rh_server *s);
/* Kills by PID if running, reaps, removes the temp dir and frees. NULL is fine. In a process that
 * did not start the server (a forked child) this only releases memory. */
void rh_free(rh_server *s);

/* A fresh hiredis admin connection (1 s connect and command timeouts), already authenticated when
 * the server has a password. NULL on failure. The caller redisFree()s it. */
struct redisContext *rh_connect(const rh_server *s);
/* Like rh_connect() but never sends AUTH, for tests that check NOAUTH behaviour. */
struct redisContext *rh_connect_noauth(const rh_server *s);

/*
 * Runs one command, given as a NULL-terminated argv of strings, on a cached admin connection
 * (reconnecting once if the cached one is broken). Returns the integer reply; a string reply that
 * is a whole decimal integer (such as HGET of a counter) is converted too. Returns -1 on error,
 * nil or any other reply type, so use it for commands whose result cannot legitimately be -1.
 */
long long rh_cmd_int(rh_server *s, const char *const *argv);
/* Like rh_cmd_int() but returns a malloc()ed copy of a status or string reply (NULL on error,
 * nil or other reply types). The caller free()s it. */
char *rh_cmd_str(rh_server *s, const char *const *argv);
/* Like rh_cmd_int() but returns the raw reply (NULL on I/O error). freeReplyObject() it. */
struct redisReply *rh_cmd(rh_server *s, const char *const *argv);

/* The calls= count of cmdstat_<cmd> in INFO commandstats (cmd is case-insensitive, for example
 * "evalsha" or "client|list"); 0 if the command has not run since the last reset, -1 on error. */
long long rh_cmdstat_calls(rh_server *s, const char *cmd);
/* The usec_per_call= value of the same line; 0 if absent, -1 on error. */
double rh_cmdstat_usec_per_call(rh_server *s, const char *cmd);
/* CONFIG RESETSTAT. 0 or -1. */
int rh_reset_stats(rh_server *s);

/*
 * Multi-process tests: forks a child that runs fn(arg) and _exit()s with its return value.
 * Call it BEFORE the parent creates any threads: after fork() only the calling thread exists in
 * the child, so a lock (malloc's, stdio's, hiredis's) held by another parent thread at that
 * moment would stay locked forever in the child. fn should report failure through its return
 * value rather than with cmocka assertions, which would jump into the parent's copied test state.
 * The child gets PR_SET_PDEATHSIG=SIGKILL so that it cannot outlive the test program.
 * Returns the child's PID, or -1 on failure.
 */
pid_t rh_fork_child(int (*fn)(void *), void *arg);
/* Waits up to timeout_ms for a child from rh_fork_child() or rh_spawn_self(). On timeout it
 * SIGKILLs and reaps the child and returns -1; otherwise returns the exit status, or 128+signal
 * when the child was killed by a signal. Also -1 on a waitpid() error. */
int rh_wait_child(pid_t pid, int64_t timeout_ms);
/* Re-exec form, for children that need fresh state (no inherited threads or locks): runs the
 * current executable with the given NULL-terminated argv, argv[0] being replaced by the
 * executable's path. File descriptors without FD_CLOEXEC are inherited, so a pipe can be passed
 * by number; the harness's own descriptors are all close-on-exec. The child gets
 * PR_SET_PDEATHSIG=SIGKILL. Returns the child's PID, or -1 on failure. */
pid_t rh_spawn_self(const char *const *argv);

/* exit(RH_EXIT_SKIP) after a message when no redis-server binary can be found. */
void rh_skip_if_unavailable(void);
/* The redis-server binary that rh_start() would run, or NULL. */
const char *rh_server_binary(void);

int64_t rh_now_ms(void); /* CLOCK_MONOTONIC in milliseconds. */
void rh_sleep_ms(int64_t ms);

/*
 * Self-test hook: when the environment variable RH_HARNESS_NO_PDEATHSIG is set to 1 when a
 * server is started, that server does not get PR_SET_PDEATHSIG, so that the self-test can prove
 * that the atexit and signal handlers alone remove it. Never set it in real tests.
 */
#define RH_ENV_NO_PDEATHSIG "RH_HARNESS_NO_PDEATHSIG"

#ifdef __cplusplus
}
#endif

#endif /* RLOCK_TESTS_REDIS_HARNESS_H */
