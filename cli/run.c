/*
 * rlock run: take a lock (or, with --semaphore N, a leased permit), run a command as a child in
 * its own process group while holding it, release it when the child exits, and exit with the
 * child's status. Every handled signal is blocked in all threads and taken by one signal thread
 * (sigtimedwait): while acquiring it fires the wait's cancellation token (a grant that raced
 * with it is released), it forwards signals to the group while the command runs, and it ticks
 * every 100 ms for the status line, the end of --lease and the SIGKILL after a loss's grace
 * period. on_lost only signals the group.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char cli_run_usage[] =
    "usage: rlock [GLOBAL] run [OPTIONS] NAME -- COMMAND [ARG...]\n"
    "\n"
    "Acquires the lock NAME, runs COMMAND (no shell unless you give one) with RLOCK_NAME and\n"
    "RLOCK_TOKEN (the fencing token) in its environment, keeps the lease alive while it runs,\n"
    "releases the lock when it exits and exits with its status (128+N if killed by signal N).\n"
    "COMMAND runs in its own process group: a lost lock signals the whole group.\n"
    "With --semaphore N, NAME is a semaphore of N permits (set if it was never set) and at most\n"
    "N commands run at once; COMMAND gets RLOCK_NAME and RLOCK_PERMIT_ID instead.\n"
    "\n"
    "  -k, --kind KIND              reentrant (default), fair (FIFO queue), read, write,\n"
    "                               spin (polls; no pub/sub needed)\n"
    "      --semaphore N            hold one leased permit of semaphore NAME instead of a lock\n"
    "  -w, --wait DURATION          give up after this long (default: wait forever)\n"
    "  -n, --nonblock               one attempt; do not wait\n"
    "      --lease DURATION         fixed lease, no watchdog renewal (default: watchdog);\n"
    "                               COMMAND is signalled when it ends\n"
    "  -E, --conflict-exit-code N   exit N instead of 1 when the lock was not acquired\n"
    "                               (-E 0: a skip is normal and prints nothing)\n"
    "      --kill-signal SIG        sent to COMMAND's process group when the lock is lost\n"
    "                               or its --lease ends (default TERM)\n"
    "      --grace DURATION         then SIGKILL to the group after this long (default 10s)\n"
    "  -q, --quiet                  no status line on a terminal while waiting, and no\n"
    "                               message when the lock was not acquired\n"
    "      --hold-at-least DURATION a command that ends sooner leaves the lock held until\n"
    "                               DURATION after it was taken (not with --semaphore)\n"
    "      --once-per DURATION      at most one run per DURATION across hosts: a run that\n"
    "                               succeeded leaves a marker for DURATION from when it took\n"
    "                               the lock; later runs skip (exit as not acquired)\n"
    "      --mark-on-failure        with --once-per: a failed run leaves the marker too\n"
    "\n"
    "Exit: COMMAND's status; 1 (or -E N) not acquired, nothing ran; 2 usage; 3 lock (or permit)\n"
    "lost, or its --lease ended, while COMMAND ran; 4 Redis error; 126/127 COMMAND not "
    "executable/not found; 130/143\n"
    "SIGINT/SIGTERM while waiting (the waiter left the queue). SIGINT/SIGTERM/SIGHUP/SIGQUIT\n"
    "while COMMAND runs are forwarded to it.\n";

static const char cli_elect_usage[] =
    "usage: rlock [GLOBAL] elect [OPTIONS] NAME -- COMMAND [ARG...]\n"
    "\n"
    "Campaigns in the election NAME (candidates take over in arrival order) and runs COMMAND\n"
    "while this host leads, with RLOCK_NAME and RLOCK_TERM (the leader's term, larger for each\n"
    "new leader) in its environment; a lost leadership signals COMMAND's process group as a\n"
    "lost lock does under rlock run (exit 3). When COMMAND exits, rlock resigns and exits with\n"
    "its status.\n"
    "\n"
    "      --value V                the leader's value that rlock leader shows\n"
    "                               (default: HOSTNAME:PID)\n"
    "  -w, --wait DURATION          give up after this long (default: wait forever)\n"
    "  -n, --nonblock               one attempt; do not wait\n"
    "  -E, --conflict-exit-code N   exit N instead of 1 when not elected\n"
    "      --kill-signal SIG        sent to COMMAND's process group when leadership is lost\n"
    "      --grace DURATION         then SIGKILL to the group after this long (default 10s)\n"
    "  -q, --quiet                  no status line, no message when not elected\n"
    "\n"
    "Exit: as rlock run.\n";

/* The command being parsed: "run", or "elect" (rlock run's machinery over an election). */
static const char *cli_cmd = "run";

enum { CLI_WAITING, CLI_RUNNING, CLI_DONE };

typedef struct cli_run_opts {
    rlock_kind kind;
    int kind_set;     /* -k was given (not allowed with --semaphore) */
    int64_t permits;  /* --semaphore N: > 0; 0 runs under a lock */
    int64_t wait_ms;  /* RLOCK_WAIT_FOREVER, 0 with -n */
    int64_t lease_ms; /* -1: watchdog */
    int conflict_exit;
    int kill_signal;
    int64_t grace_ms;
    int64_t hold_least_ms; /* --hold-at-least; 0 = none */
    int64_t once_per_ms;   /* --once-per; 0 = none */
    int mark_on_failure;
    int elect;         /* rlock elect: campaign in the election NAME */
    const char *value; /* rlock elect --value */
    int lock_opts;     /* -k, --semaphore, --lease or a cron option was given */
    const char *name;
    char **cmd;
} cli_run_opts;

/* What rlock run holds while the command runs: a lock, or one leased permit of a semaphore. */
typedef struct cli_guard {
    rlock *lock;
    rlock_election *el;
    rlock_semaphore *sem;
    char permit[RLOCK_PERMIT_ID_LEN + 1]; /* the permit's id while held */
} cli_guard;

typedef struct cli_run_state {
    const cli_run_opts *o;
    const cli_global *g;
    rlock_client *client;
    cli_guard guard;
    rlock_cancel *cancel; /* fired by SIGINT/SIGTERM/SIGHUP/SIGQUIT while waiting */
    pthread_mutex_t mu;
    int phase;              /* CLI_WAITING, CLI_RUNNING, CLI_DONE (under mu) */
    pid_t child;            /* under mu */
    int got_signal;         /* a terminating signal arrived while waiting (under mu) */
    atomic_int lost;        /* on_lost fired */
    atomic_llong lost_at;   /* monotonic ms of the loss */
    atomic_int child_pid;   /* for on_lost, which must not take mu; also the process group */
    atomic_llong lease_end; /* monotonic ms when a --lease ends; 0 without --lease */
    atomic_int lease_ended; /* the command was signalled because its --lease ended */
    int status_shown;       /* the status line is on screen (under mu) */
    int64_t asked_at;       /* monotonic ms: when the acquisition began (main thread) */
    int64_t taken_at;       /* monotonic ms: when the lock was taken (main thread) */
    int extended;           /* --hold-at-least: the hold was extended while the command ran */
    int64_t next_status;    /* signal thread only */
} cli_run_state;

static int64_t cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int cli_parse_kind(const char *s, rlock_kind *k)
{
    static const struct {
        const char *name;
        rlock_kind kind;
    } kinds[] = {{"reentrant", RLOCK_REENTRANT},
                 {"fair", RLOCK_FAIR},
                 {"read", RLOCK_READ},
                 {"write", RLOCK_WRITE},
                 {"spin", RLOCK_SPIN}};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (strcmp(s, kinds[i].name) == 0) {
            *k = kinds[i].kind;
            return 0;
        }
    }
    return -1;
}

static int cli_bad(const char *what, const char *value)
{
    cli_usage_error(cli_cmd, "bad %s '%s'", what, value);
    return -1;
}

/* One option of rlock run; returns 0, 1 for --help, -1 for a bad value. */
static int cli_run_opt(cli_run_opts *o, int c, const char *arg)
{
    long v = 0;
    char *end = NULL;
    switch (c) {
    case 'k':
        o->kind_set = 1;
        return cli_parse_kind(arg, &o->kind) ? cli_bad("kind", arg) : 0;
    case 'S':
        v = strtol(arg, &end, 10);
        o->permits = v;
        return *arg == '\0' || *end != '\0' || v < 1 || v > INT32_MAX ? cli_bad("permits", arg) : 0;
    case 'w':
        return cli_parse_duration(arg, &o->wait_ms) ? cli_bad("wait", arg) : 0;
    case 'n':
        o->wait_ms = 0;
        return 0;
    case 'l':
        return cli_parse_duration(arg, &o->lease_ms) || o->lease_ms == 0 ? cli_bad("lease", arg)
                                                                         : 0;
    case 'E':
        v = strtol(arg, &end, 10);
        o->conflict_exit = (int)v;
        return *arg == '\0' || *end != '\0' || v < 0 || v > 255 ? cli_bad("exit code", arg) : 0;
    case 's':
        o->kill_signal = cli_parse_signal(arg);
        return o->kill_signal < 0 ? cli_bad("signal", arg) : 0;
    case 'g':
        return cli_parse_duration(arg, &o->grace_ms) ? cli_bad("grace", arg) : 0;
    case 'H':
        return cli_parse_duration(arg, &o->hold_least_ms) || o->hold_least_ms <= 0
                   ? cli_bad("hold-at-least", arg)
                   : 0;
    case 'P':
        return cli_parse_duration(arg, &o->once_per_ms) || o->once_per_ms <= 0
                   ? cli_bad("once-per", arg)
                   : 0;
    case 'M':
        o->mark_on_failure = 1;
        return 0;
    case 'V':
        o->value = arg;
        return 0;
    case 'h':
        return 1;
    default:
        return -1;
    }
}

/* NAME, "--" and COMMAND after the options; 0, or CLI_EXIT_USAGE after saying what is
 * missing. A "--" that ended the options is followed by NAME only when a second "--" follows
 * it (a name beginning with '-'); otherwise it stood where NAME should be. */
static int cli_run_operands(cli_run_opts *o, int argc, char **argv)
{
    int i = optind;
    if (cli_dashdash_seen(argv) && (i + 1 >= argc || strcmp(argv[i + 1], "--") != 0)) {
        return cli_usage_error(cli_cmd, "missing NAME before '--'");
    }
    if (i >= argc) {
        return cli_usage_error(cli_cmd, "missing NAME and '-- COMMAND'");
    }
    o->name = argv[i];
    if (*o->name == '\0') {
        return cli_usage_error(cli_cmd, "empty NAME");
    }
    if (i + 1 >= argc) {
        return cli_usage_error(cli_cmd, "missing '-- COMMAND' after NAME");
    }
    const char *next = argv[i + 1];
    if (strcmp(next, "--") != 0) {
        return next[0] == '-' ? cli_usage_error(cli_cmd,
                                                "option '%s' after NAME: options go "
                                                "before NAME",
                                                next)
                              : cli_usage_error(cli_cmd, "missing '--' between NAME and COMMAND");
    }
    if (i + 2 >= argc) {
        return cli_usage_error(cli_cmd, "missing COMMAND after '--'");
    }
    o->cmd = argv + i + 2;
    return 0;
}

/* The cron options' combinations; 0, or CLI_EXIT_USAGE after the error. */
static int cli_cron_check(const cli_run_opts *o)
{
    if (o->permits > 0 && (o->hold_least_ms > 0 || o->once_per_ms > 0)) {
        return cli_usage_error(cli_cmd,
                               "--hold-at-least and --once-per take a lock, not --semaphore");
    }
    if (o->mark_on_failure && o->once_per_ms == 0) {
        return cli_usage_error(cli_cmd, "--mark-on-failure needs --once-per");
    }
    if (o->hold_least_ms > 0 && o->lease_ms > 0 && o->hold_least_ms > o->lease_ms) {
        return cli_usage_error(cli_cmd, "--hold-at-least is longer than --lease");
    }
    return 0;
}

/* Returns 0 to run, 1 after --help, or CLI_EXIT_USAGE after a one-line error. */
static int cli_run_parse(cli_run_opts *o, cli_global *g, int argc, char **argv, int elect)
{
    static const struct option opts[] = {{"kind", required_argument, NULL, 'k'},
                                         {"semaphore", required_argument, NULL, 'S'},
                                         {"wait", required_argument, NULL, 'w'},
                                         {"nonblock", no_argument, NULL, 'n'},
                                         {"lease", required_argument, NULL, 'l'},
                                         {"conflict-exit-code", required_argument, NULL, 'E'},
                                         {"kill-signal", required_argument, NULL, 's'},
                                         {"grace", required_argument, NULL, 'g'},
                                         {"quiet", no_argument, NULL, 'q'},
                                         {"hold-at-least", required_argument, NULL, 'H'},
                                         {"once-per", required_argument, NULL, 'P'},
                                         {"mark-on-failure", no_argument, NULL, 'M'},
                                         {"value", required_argument, NULL, 'V'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    *o = (cli_run_opts){.kind = RLOCK_REENTRANT,
                        .wait_ms = RLOCK_WAIT_FOREVER,
                        .lease_ms = -1,
                        .conflict_exit = CLI_EXIT_CONFLICT,
                        .kill_signal = SIGTERM,
                        .grace_ms = 10000,
                        .elect = elect};
    int c;
    while ((c = getopt_long(argc, argv, "+:k:w:nE:qh", opts, NULL)) != -1) {
        if (c == 'q') {
            g->quiet = 1;
            continue;
        }
        if (c == '?' || c == ':') {
            return cli_option_error(cli_cmd, c, argv);
        }
        o->lock_opts |= c == 'k' || c == 'S' || c == 'l' || c == 'H' || c == 'P' || c == 'M';
        if (c == 'V' && !o->elect) {
            return cli_usage_error(cli_cmd, "--value is rlock elect's");
        }
        int r = cli_run_opt(o, c, optarg);
        if (r != 0) {
            if (r > 0) {
                fputs(o->elect ? cli_elect_usage : cli_run_usage, stdout);
            }
            return r > 0 ? 1 : CLI_EXIT_USAGE;
        }
    }
    if (o->permits > 0 && o->kind_set) {
        return cli_usage_error(cli_cmd, "--kind and --semaphore exclude each other");
    }
    if (o->elect && o->lock_opts) {
        return cli_usage_error(cli_cmd, "-k, --semaphore, --lease and the cron options are "
                                        "rlock run's");
    }
    int r = cli_cron_check(o);
    return r != 0 ? r : cli_run_operands(o, argc, argv);
}

/* A loss (on_lost, or the end of a --lease): signal the command's process group now, SIGKILL
 * it after the grace period (signal thread). */
static void cli_lose(cli_run_state *st)
{
    atomic_store(&st->lost_at, cli_now_ms());
    atomic_store(&st->lost, 1);
    pid_t pid = atomic_load(&st->child_pid);
    if (pid > 0) {
        kill(-pid, st->o->kill_signal);
    }
}

/* The watchdog thread's report of a loss. */
static void cli_on_lost(const char *name, void *user_data)
{
    (void)name;
    cli_lose(user_data);
}

/* The status line of a semaphore: what Redis counts as available (usually none, as we wait). */
static void cli_draw_sem_status(cli_run_state *st)
{
    int64_t n = rlock_semaphore_available(st->guard.sem);
    if (n < 0) {
        return;
    }
    fprintf(stderr, "\rrlock: waiting for %s: %" PRId64 " permit(s) available\033[K", st->o->name,
            n);
    st->status_shown = 1;
}

/* The one-line status while waiting: holder, TTL, and for a fair lock our place in line. */
static void cli_draw_status(cli_run_state *st)
{
    if (st->guard.sem != NULL) {
        cli_draw_sem_status(st);
        return;
    }
    rlock_lock_info *in = NULL;
    if (rlock_inspect(st->client, st->o->name, &in) != RLOCK_OK) {
        return;
    }
    const char *id = rlock_client_id(st->client);
    size_t pos = 0;
    for (size_t i = 0; i < in->n_queue; i++) {
        if (strncmp(in->queue[i].owner, id, strlen(id)) == 0) {
            pos = i + 1;
        }
    }
    fprintf(stderr, "\rrlock: waiting for %s: ", st->o->name);
    if (in->n_holders > 0) {
        fprintf(stderr, "held by %s", in->holders[0].owner);
        if (in->n_holders > 1) {
            fprintf(stderr, " and %zu more", in->n_holders - 1);
        }
    } else {
        fputs("free", stderr);
    }
    if (in->ttl_ms >= 0) {
        fprintf(stderr, ", ttl %" PRId64 ".%01" PRId64 "s", in->ttl_ms / 1000,
                in->ttl_ms % 1000 / 100);
    }
    if (pos > 0) {
        fprintf(stderr, ", place %zu of %zu in the queue", pos, in->n_queue);
    }
    fputs("\033[K", stderr);
    st->status_shown = 1;
    rlock_lock_info_free(in);
}

static void cli_clear_status(cli_run_state *st)
{
    if (st->status_shown) {
        fputs("\r\033[K", stderr);
        st->status_shown = 0;
    }
}

/* One signal: interrupt the wait, or forward it to the child. */
static void cli_on_signal(cli_run_state *st, int sig)
{
    pthread_mutex_lock(&st->mu);
    if (st->phase == CLI_WAITING && sig != SIGCHLD) {
        st->got_signal = sig;
        rlock_cancel_fire(st->cancel);
        if (st->guard.el != NULL) {
            rlock_client_interrupt(st->client); /* an election's campaign takes no token */
        }
    } else if (st->phase == CLI_RUNNING && st->child > 0 && sig != SIGCHLD) {
        kill(-st->child, sig); /* The command's whole group, as a terminal would. */
    }
    pthread_mutex_unlock(&st->mu);
}

/* A tick: the status line while waiting on a terminal, the kill signal when a --lease ends,
 * SIGKILL once a loss's grace is over. */
static int cli_tick(cli_run_state *st)
{
    int64_t now = cli_now_ms();
    /* Drawn under the mutex, so the main thread can erase the line before the child writes. */
    pthread_mutex_lock(&st->mu);
    int phase = st->phase;
    pid_t child = st->child;
    if (phase == CLI_WAITING && !st->g->quiet && isatty(STDERR_FILENO) && now >= st->next_status) {
        cli_draw_status(st);
        st->next_status = now + 500;
    }
    pthread_mutex_unlock(&st->mu);
    int64_t lease_end = atomic_load(&st->lease_end);
    if (phase == CLI_RUNNING && lease_end > 0 && now >= lease_end && !atomic_load(&st->lost)) {
        atomic_store(&st->lease_ended, 1);
        cli_lose(st);
    }
    if (phase == CLI_RUNNING && atomic_load(&st->lost) && child > 0 &&
        now >= atomic_load(&st->lost_at) + st->o->grace_ms) {
        kill(-child, SIGKILL);
    }
    return phase != CLI_DONE;
}

static sigset_t cli_handled(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGUSR1); /* wakes the thread when the run is over */
    return set;
}

/* Until the next tick: 100 ms, or less when a --lease ends sooner. */
static struct timespec cli_tick_len(cli_run_state *st)
{
    int64_t ms = 100;
    int64_t end = atomic_load(&st->lease_end);
    int64_t now = cli_now_ms();
    if (end > now && end - now < ms) {
        ms = end - now;
    }
    return (struct timespec){ms / 1000, (long)(ms % 1000) * 1000000L};
}

static void *cli_signal_thread(void *arg)
{
    cli_run_state *st = arg;
    sigset_t set = cli_handled();
    while (cli_tick(st)) {
        struct timespec tick = cli_tick_len(st);
        int sig = sigtimedwait(&set, NULL, &tick);
        if (sig > 0 && sig != SIGUSR1) {
            cli_on_signal(st, sig);
        }
    }
    pthread_mutex_lock(&st->mu);
    cli_clear_status(st);
    pthread_mutex_unlock(&st->mu);
    return NULL;
}

/* The child: its own process group (given the terminal if rlock had it), default signal mask
 * back, the lock's name and token already in the environment. */
static void cli_exec_child(const cli_run_opts *o, const sigset_t *old_mask, int tty)
{
    setpgid(0, 0);
    if (tty) {
        /* SIGTTOU is not in the mask rlock blocked, and a background group that sets the
         * terminal's group gets it: blocked here, as shells do. */
        sigset_t ttou;
        sigemptyset(&ttou);
        sigaddset(&ttou, SIGTTOU);
        sigprocmask(SIG_BLOCK, &ttou, NULL);
        tcsetpgrp(STDIN_FILENO, getpid());
    }
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    execvp(o->cmd[0], o->cmd);
    int e = errno;
    fprintf(stderr, "rlock: cannot run %s: %s\n", o->cmd[0], strerror(e));
    _exit(e == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC);
}

static int cli_exit_status(int wstatus)
{
    if (WIFEXITED(wstatus)) {
        return WEXITSTATUS(wstatus);
    }
    return WIFSIGNALED(wstatus) ? 128 + WTERMSIG(wstatus) : CLI_EXIT_ERROR;
}

/* The child's environment: the name, and the lock's fencing token or the permit's id. */
static void cli_guard_env(const cli_run_state *st)
{
    setenv("RLOCK_NAME", st->o->name, 1);
    char token[24];
    if (st->guard.el != NULL) {
        char *v = NULL;
        uint64_t term = 0;
        (void)rlock_election_leader(st->guard.el, &v, &term);
        free(v);
        snprintf(token, sizeof(token), "%" PRIu64, term);
        setenv("RLOCK_TERM", token, 1);
        return;
    }
    if (st->guard.sem != NULL) {
        setenv("RLOCK_PERMIT_ID", st->guard.permit, 1);
        return;
    }
    snprintf(token, sizeof(token), "%" PRIu64, rlock_token(st->guard.lock));
    setenv("RLOCK_TOKEN", token, 1);
}

/* 1 if rlock runs in the foreground of a terminal, whose keyboard signals and input then
 * belong to the command's group while it runs. */
static int cli_have_terminal(void)
{
    return isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
}

/* Gives the terminal to group pgid (rlock's own back when the command is over). */
static void cli_set_terminal(pid_t pgid)
{
    sigset_t ttou, old;
    sigemptyset(&ttou);
    sigaddset(&ttou, SIGTTOU);
    pthread_sigmask(SIG_BLOCK, &ttou, &old);
    tcsetpgrp(STDIN_FILENO, pgid);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* The command was stopped from the terminal (^Z goes to its group, which has the terminal):
 * rlock stops too, so that the shell sees its job stopped and gets the terminal back; when the
 * shell continues rlock (fg, bg), the command's group is continued, with the terminal for fg. */
static void cli_stopped(pid_t pid)
{
    cli_set_terminal(getpgrp());
    kill(getpid(), SIGTSTP);
    if (tcgetpgrp(STDIN_FILENO) == getpgrp()) {
        cli_set_terminal(pid);
    }
    kill(-pid, SIGCONT);
}

static void cli_sleep_ms(int64_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* --hold-at-least: the hold has a lease of DURATION only, so that a command that ends sooner
 * leaves it to expire then. Until that lease is about to end this polls for the command's end
 * (its time does not matter: the lock stays held anyway); a command still running then gets its
 * hold extended (the watchdog, or the rest of --lease). Returns 1 when the command ended, with
 * *wstatus set. Main thread: the hold is its own. */
static int cli_poll_child(cli_run_state *st, pid_t pid, int tty, int *wstatus)
{
    const cli_run_opts *o = st->o;
    int64_t margin = o->hold_least_ms / 3 < 2000 ? o->hold_least_ms / 3 : 2000;
    int64_t extend_at = st->asked_at + o->hold_least_ms - margin;
    int64_t now;
    while ((now = cli_now_ms()) < extend_at) {
        pid_t r = waitpid(pid, wstatus, WNOHANG | (tty ? WUNTRACED : 0));
        if (r == pid && WIFSTOPPED(*wstatus)) {
            cli_stopped(pid);
        } else if (r == pid) {
            return 1;
        } else if (r < 0 && errno != EINTR) {
            return 0; /* The blocking wait reports it. */
        } else {
            cli_sleep_ms(extend_at - now < 100 ? extend_at - now : 100);
        }
    }
    int64_t lease = o->lease_ms > 0 ? o->lease_ms - (now - st->asked_at) : -1;
    int rc = lease != 0 ? cli_hold_extend(st->guard.lock, lease) : RLOCK_OK;
    if (rc != RLOCK_OK) {
        cli_report(o->name, rc);
        cli_lose(st);
    }
    st->extended = rc == RLOCK_OK;
    return 0;
}

/* Waits for the command; after a loss nothing of its group may run on, so what is left of it
 * gets SIGKILL once the command itself has exited. */
static int cli_wait_child(cli_run_state *st, pid_t pid, int tty)
{
    int wstatus = 0;
    int done = st->o->hold_least_ms > 0 && cli_poll_child(st, pid, tty, &wstatus);
    while (!done) {
        pid_t r = waitpid(pid, &wstatus, tty ? WUNTRACED : 0);
        if (r == pid && WIFSTOPPED(wstatus)) {
            cli_stopped(pid);
        } else if (r >= 0 || errno != EINTR) {
            done = 1;
        }
    }
    if (tty) {
        cli_set_terminal(getpgrp());
    }
    if (atomic_load(&st->lost)) {
        kill(-pid, SIGKILL);
    }
    return wstatus;
}

/* Holding the lock: start the child unless a signal came first; returns its wait status or -1
 * (*sig set) if a signal cancelled the run, -2 if fork failed. */
static int cli_run_child(cli_run_state *st, const sigset_t *old_mask, int *sig)
{
    cli_guard_env(st);
    fflush(NULL);
    int tty = cli_have_terminal();
    pthread_mutex_lock(&st->mu);
    cli_clear_status(st);
    if (st->got_signal) {
        *sig = st->got_signal;
        pthread_mutex_unlock(&st->mu);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        cli_exec_child(st->o, old_mask, tty);
    }
    if (pid > 0) {
        /* Also here, so that no signal to the group can come before the child made it. */
        setpgid(pid, pid);
        if (tty) {
            cli_set_terminal(pid);
        }
    }
    st->child = pid;
    st->phase = pid > 0 ? CLI_RUNNING : CLI_DONE;
    atomic_store(&st->child_pid, pid);
    pthread_mutex_unlock(&st->mu);
    if (pid < 0) {
        perror("rlock: fork");
        return -2;
    }
    if (atomic_load(&st->lost)) {
        kill(-pid, st->o->kill_signal); /* Lost between the grant and the fork. */
    }
    return cli_wait_child(st, pid, tty);
}

/* Takes the lock, or sets the semaphore's permits if it was never set and takes one leased
 * permit (the watchdog keeps it unless --lease is given). */
static int cli_guard_take(cli_run_state *st)
{
    cli_guard *gd = &st->guard;
    if (gd->el != NULL) {
        return rlock_election_campaign(gd->el, st->o->value, st->o->wait_ms);
    }
    if (gd->sem == NULL) {
        rlock_lock_args a;
        rlock_lock_args_init(&a);
        a.wait_ms = st->o->wait_ms;
        /* --hold-at-least: a lease of that long, extended if the command outlasts it. */
        a.lease_ms = st->o->hold_least_ms > 0 ? st->o->hold_least_ms : st->o->lease_ms;
        a.cancel = st->cancel;
        return rlock_lock_ex(gd->lock, &a);
    }
    int rc = rlock_semaphore_try_set_permits(gd->sem, st->o->permits);
    if (rc < 0) {
        return rc;
    }
    return rlock_semaphore_acquire_leased_ex(gd->sem, st->o->wait_ms, st->o->lease_ms, st->cancel,
                                             gd->permit);
}

/* Takes the guard and, with --lease, sets when the lease ends on rlock's clock. Redis started
 * the lease while the call ran: with -n (one attempt) that is after the call began, so the end
 * is not later than Redis'; after a wait, the call's return is the bound (Redis' lease began at
 * most one reply earlier, or later for a grant that the waiter's client extends). */
static int cli_guard_acquire(cli_run_state *st)
{
    st->asked_at = cli_now_ms();
    int rc = cli_guard_take(st);
    st->taken_at = st->o->wait_ms == 0 ? st->asked_at : cli_now_ms();
    if (rc == RLOCK_OK && st->o->lease_ms > 0) {
        atomic_store(&st->lease_end, st->taken_at + st->o->lease_ms);
    }
    return rc;
}

static int cli_guard_release(cli_run_state *st)
{
    cli_guard *gd = &st->guard;
    if (gd->el != NULL) {
        return rlock_election_resign(gd->el);
    }
    return gd->sem != NULL ? rlock_semaphore_release_leased(gd->sem, gd->permit)
                           : rlock_unlock(gd->lock);
}

/* --once-per: a marker left by a run within the period means this run is skipped (the lock,
 * taken to look, is released). Returns -1 to go on, or rlock run's exit status. */
static int cli_once_skip(cli_run_state *st)
{
    const cli_run_opts *o = st->o;
    int m = o->once_per_ms > 0 ? cli_once_marked(st->client, o->name) : 0;
    if (m == 0) {
        return -1;
    }
    (void)cli_guard_release(st);
    if (m < 0) {
        cli_report(o->name, m);
        return CLI_EXIT_ERROR;
    }
    if (!st->g->quiet && o->conflict_exit != 0) {
        fprintf(stderr, "rlock: %s: already ran within the --once-per period; skipped\n", o->name);
    }
    return o->conflict_exit;
}

/* After the command ran (wstatus >= 0): --once-per's marker is set while the lock is still held,
 * so that no other host runs in between; then the lock is released, except that
 * --hold-at-least leaves a command that ended sooner its hold until DURATION after it was taken
 * (a re-entry makes sure the lease reaches that far) and holds an extended one until then. */
static int cli_guard_finish(cli_run_state *st, int wstatus)
{
    const cli_run_opts *o = st->o;
    int ok = WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
    if (o->once_per_ms > 0 && !atomic_load(&st->lost) && (ok || o->mark_on_failure)) {
        int64_t ttl = st->taken_at + o->once_per_ms - cli_now_ms();
        int r = ttl > 0 ? cli_once_mark(st->client, o->name, ttl) : RLOCK_OK;
        if (r != RLOCK_OK) {
            cli_report(o->name, r);
        }
    }
    int64_t left = st->taken_at + o->hold_least_ms - cli_now_ms();
    if (o->hold_least_ms > 0 && !atomic_load(&st->lost) && left > 0) {
        if (!st->extended) {
            int r = rlock_try_lock(st->guard.lock, 0, left);
            return r == RLOCK_OK && rlock_hold_count(st->guard.lock) > 0 ? RLOCK_OK : RLOCK_ELOST;
        }
        cli_sleep_ms(left);
    }
    return cli_guard_release(st);
}

/* Acquired (or not), ran (or not): the exit status of rlock run. */
static int cli_run_locked(cli_run_state *st, const sigset_t *old_mask)
{
    int rc = cli_guard_acquire(st);
    pthread_mutex_lock(&st->mu);
    int sig = st->got_signal;
    pthread_mutex_unlock(&st->mu);
    if (rc == RLOCK_ECANCELED || (rc == RLOCK_ETIMEDOUT && sig)) {
        return 128 + sig; /* the waiter left; nothing is held */
    }
    if (rc == RLOCK_ETIMEDOUT) {
        /* -E 0 declares a skip normal, and -q asks for silence: a cron line stays quiet. */
        if (!st->g->quiet && st->o->conflict_exit != 0) {
            fprintf(stderr, "rlock: %s: not acquired%s\n", st->o->name,
                    st->o->wait_ms == 0 ? " (busy)" : " within the wait");
        }
        return st->o->conflict_exit;
    }
    if (rc != RLOCK_OK) {
        cli_report(st->o->name, rc);
        return CLI_EXIT_ERROR;
    }
    int skip = cli_once_skip(st);
    if (skip >= 0) {
        return skip;
    }
    int wstatus = cli_run_child(st, old_mask, &sig);
    rc = wstatus >= 0 ? cli_guard_finish(st, wstatus) : cli_guard_release(st);
    if (wstatus == -1) {
        return 128 + sig;
    }
    if (wstatus == -2) {
        return CLI_EXIT_ERROR;
    }
    const char *what = st->guard.el != NULL    ? "leadership"
                       : st->guard.sem != NULL ? "permit"
                                               : "lock";
    if (atomic_load(&st->lease_ended)) {
        fprintf(stderr,
                "rlock: %s: the %s's --lease ended while the command ran; it was sent "
                "SIG%s\n",
                st->o->name, what, cli_signal_name(st->o->kill_signal));
        return CLI_EXIT_LOST;
    }
    if (atomic_load(&st->lost)) {
        fprintf(stderr, "rlock: %s: the %s was lost while the command ran; it was sent SIG%s\n",
                st->o->name, what, cli_signal_name(st->o->kill_signal));
        return CLI_EXIT_LOST;
    }
    if (rc == RLOCK_ELOST || rc == RLOCK_ENOTOWNER) {
        /* Lost after the last renewal (a force unlock after it) or a fixed lease that ran out
         * on Redis before rlock's clock: only the release saw it. */
        fprintf(stderr, "rlock: %s: the %s was lost while the command ran (found at release)\n",
                st->o->name, what);
        return CLI_EXIT_LOST;
    }
    if (rc != RLOCK_OK) {
        cli_report(st->o->name, rc); /* The command ran under the lock; the release failed. */
    }
    return cli_exit_status(wstatus);
}

/* Opens what NAME guards: an election, a semaphore or a lock. 0, or -1 after the error. */
static int cli_guard_open(cli_run_state *st)
{
    const cli_run_opts *o = st->o;
    if (o->elect) {
        st->guard.el = rlock_election_open(st->client, o->name);
    } else if (o->permits > 0) {
        st->guard.sem = rlock_semaphore_open(st->client, o->name);
    } else {
        st->guard.lock = rlock_open(st->client, o->kind, o->name);
    }
    if (st->guard.lock == NULL && st->guard.sem == NULL && st->guard.el == NULL) {
        cli_report(o->name, RLOCK_EINVAL);
        return -1;
    }
    return 0;
}

static int cli_run_mode(const cli_global *g0, int argc, char **argv, int elect);

/* Frees what cli_run_mode() made once connected (NULL handles and token included). */
static void cli_run_close(cli_run_state *st)
{
    rlock_free(st->guard.lock);
    rlock_semaphore_free(st->guard.sem);
    rlock_election_free(st->guard.el);
    rlock_cancel_free(st->cancel);
    rlock_client_free(st->client);
    pthread_mutex_destroy(&st->mu);
}

int cli_run(const cli_global *g, int argc, char **argv)
{
    return cli_run_mode(g, argc, argv, 0);
}

int cli_elect(const cli_global *g, int argc, char **argv)
{
    cli_cmd = "elect";
    return cli_run_mode(g, argc, argv, 1);
}

static int cli_run_mode(const cli_global *g0, int argc, char **argv, int elect)
{
    cli_global g = *g0;
    cli_run_opts o;
    char value[300];
    int r = cli_run_parse(&o, &g, argc, argv, elect);
    if (r != 0) {
        return r == 1 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    }
    cli_run_state st = {.o = &o, .g = &g, .phase = CLI_WAITING};
    pthread_mutex_init(&st.mu, NULL);
    sigset_t set = cli_handled();
    sigset_t old_mask;
    /* Blocked before the client starts its threads, so that they inherit the mask and only the
     * signal thread takes these signals. */
    pthread_sigmask(SIG_BLOCK, &set, &old_mask);
    int status = CLI_EXIT_ERROR;
    st.client = cli_connect(&g, cli_on_lost, &st, &status);
    if (st.client == NULL) {
        return status;
    }
    if (elect && o.value == NULL) {
        char host[256] = "";
        gethostname(host, sizeof(host) - 1);
        snprintf(value, sizeof(value), "%s:%ld", host, (long)getpid());
        o.value = value;
    }
    /* The token's helper thread starts here, after the mask above, as the client's threads do. */
    int rc = cli_guard_open(&st) != 0 ? RLOCK_EINVAL : rlock_cancel_new(&st.cancel);
    if (rc != RLOCK_OK) {
        if (rc != RLOCK_EINVAL) {
            cli_report(o.name, rc);
        }
        cli_run_close(&st);
        return CLI_EXIT_ERROR;
    }
    pthread_t th;
    pthread_create(&th, NULL, cli_signal_thread, &st);
    status = cli_run_locked(&st, &old_mask);
    pthread_mutex_lock(&st.mu);
    st.phase = CLI_DONE;
    pthread_mutex_unlock(&st.mu);
    pthread_kill(th, SIGUSR1);
    pthread_join(th, NULL);
    cli_run_close(&st);
    return status;
}
