/*
 * rlock top [--once] [--json] [PATTERN]: the locks, semaphores and latches whose names match
 * PATTERN (rlock_survey), one row each, most waiters first; refreshed every second until `q`,
 * or one snapshot as text or as one JSON document. Read-only.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define TOP_PATTERN_MAX 1024

static const char top_usage[] =
    "usage: rlock [GLOBAL] top [--once] [--json] [--] [PATTERN]\n"
    "\n"
    "A live view of the locks, semaphores and latches whose names match PATTERN (a Redis glob:\n"
    "* ? [abc] [^a] [a-z] \\x; default *), found by SCAN on every master and read without\n"
    "changing anything: type, holders, TTL, fencing counter, fair queue, waiting writers,\n"
    "permits available, waiters. Rows are sorted by waiters (most first), then by name, and\n"
    "refreshed every second, as many as fit the terminal; q quits (so do Ctrl-C and SIGTERM).\n"
    "Redisson's auxiliary keys (fair queue, fencing counter, {name}:... keys) are shown as\n"
    "part of their lock. A semaphore and a latch store the same data: one that nobody waits\n"
    "for shows as counter.\n"
    "\n"
    "  --once   print one snapshot as text and exit\n"
    "  --json   print one snapshot as one JSON document and exit (schema: docs/cli.md)\n"
    "\n"
    "Exit: 0, 2 usage (unknown option, bad PATTERN: empty, over 1024 bytes, an unclosed [),\n"
    "4 Redis unreachable or a Redis error (e.g. SCAN refused).\n";

static volatile sig_atomic_t top_signal;

static void top_on_signal(int sig)
{
    top_signal = sig;
}

/* Empty, too long, or a '[' class that is never closed (Redis would match it literally). */
static int top_pattern_ok(const char *p)
{
    size_t n = strlen(p);
    if (n == 0 || n > TOP_PATTERN_MAX) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\\') {
            i++;
        } else if (p[i] == '[') {
            const char *close = strchr(p + i + 1, ']');
            if (close == NULL) {
                return 0;
            }
            i = (size_t)(close - p);
        }
    }
    return 1;
}

static int64_t top_waiters(const rlock_object_info *o)
{
    if (o->lock != NULL) {
        return (int64_t)(o->lock->n_queue + o->lock->n_writers + o->lock->n_waiters);
    }
    return o->listeners > 0 ? o->listeners : 0;
}

static int top_cmp(const void *a, const void *b)
{
    const rlock_object_info *x = a, *y = b;
    int64_t wx = top_waiters(x), wy = top_waiters(y);
    if (wx != wy) {
        return wx > wy ? -1 : 1;
    }
    return strcmp(x->name, y->name);
}

static const char *top_type(const rlock_object_info *o)
{
    switch (o->type) {
    case RLOCK_OBJECT_LOCK:
        return cli_type_name(o->lock->type);
    case RLOCK_OBJECT_SEMAPHORE:
        return "semaphore";
    case RLOCK_OBJECT_SEMAPHORE_LEASED:
        return "semaphore_leased";
    case RLOCK_OBJECT_LATCH:
        return "latch";
    case RLOCK_OBJECT_COUNTER:
        break;
    }
    return "counter";
}

static void top_json_waiters(FILE *f, const char *key, const char *id, const rlock_lock_waiter *w,
                             size_t n)
{
    fprintf(f, ",\"%s\":[", key);
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s{\"%s\":", i ? "," : "", id);
        cli_json_string(f, w[i].owner, strlen(w[i].owner));
        fprintf(f, ",\"deadline_ms\":%" PRId64 "}", w[i].deadline_ms);
    }
    fputc(']', f);
}

static void top_json_lock(FILE *f, const rlock_lock_info *in)
{
    fputs(",\"holders\":[", f);
    for (size_t i = 0; i < in->n_holders; i++) {
        fputs(i ? ",{\"owner\":" : "{\"owner\":", f);
        cli_json_string(f, in->holders[i].owner, strlen(in->holders[i].owner));
        fprintf(f, ",\"count\":%" PRId64 "}", in->holders[i].count);
    }
    fprintf(f, "],\"ttl_ms\":%" PRId64 ",\"token\":%" PRIu64, in->ttl_ms, in->token);
    if (in->mode != NULL) {
        fprintf(f, ",\"mode\":\"%s\"", in->mode);
    } else {
        fputs(",\"mode\":null", f);
    }
    top_json_waiters(f, "queue", "owner", in->queue, in->n_queue);
    top_json_waiters(f, "writers", "owner", in->writers, in->n_writers);
    top_json_waiters(f, "lock_waiters", "owner", in->waiters, in->n_waiters);
    fputs(",\"permits\":null,\"latch_count\":null,\"leases\":[],\"listeners\":null", f);
}

static void top_json_counter(FILE *f, const rlock_object_info *o)
{
    int sem = o->type != RLOCK_OBJECT_LATCH,
        latch = o->type == RLOCK_OBJECT_LATCH || o->type == RLOCK_OBJECT_COUNTER;
    fprintf(f, ",\"holders\":[],\"ttl_ms\":%" PRId64 ",\"token\":null,\"mode\":null", o->ttl_ms);
    fputs(",\"queue\":[],\"writers\":[],\"lock_waiters\":[]", f);
    if (sem) {
        fprintf(f, ",\"permits\":%" PRId64, o->count);
    } else {
        fputs(",\"permits\":null", f);
    }
    if (latch) {
        fprintf(f, ",\"latch_count\":%" PRId64, o->count);
    } else {
        fputs(",\"latch_count\":null", f);
    }
    top_json_waiters(f, "leases", "id", o->leases, o->n_leases);
    if (o->listeners >= 0) {
        fprintf(f, ",\"listeners\":%" PRId64, o->listeners);
    } else {
        fputs(",\"listeners\":null", f);
    }
}

static void top_json(FILE *f, const char *pattern, const rlock_object_info *v, size_t n)
{
    fputs("{\"pattern\":", f);
    cli_json_string(f, pattern, strlen(pattern));
    fprintf(f, ",\"count\":%zu,\"objects\":[", n);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ",\n{\"name\":" : "\n{\"name\":", f);
        cli_json_string(f, v[i].name, strlen(v[i].name));
        fprintf(f, ",\"type\":\"%s\",\"waiters\":%" PRId64, top_type(&v[i]), top_waiters(&v[i]));
        if (v[i].lock != NULL) {
            top_json_lock(f, v[i].lock);
        } else {
            top_json_counter(f, &v[i]);
        }
        fputc('}', f);
    }
    fputs("]}\n", f);
}

static void top_ttl(char *buf, size_t n, int64_t ttl)
{
    if (ttl == -1) {
        snprintf(buf, n, "none");
    } else if (ttl >= 0) {
        snprintf(buf, n, "%" PRId64 ".%03" PRId64 "s", ttl / 1000, ttl % 1000);
    } else {
        snprintf(buf, n, "-");
    }
}

/* The holders column: the first owner, and how many more. */
static void top_holders(FILE *f, const rlock_object_info *o)
{
    if (o->lock != NULL && o->lock->n_holders > 0) {
        const rlock_lock_holder *h = &o->lock->holders[0];
        fprintf(f, "%s x%" PRId64, h->owner, h->count);
        if (o->lock->n_holders > 1) {
            fprintf(f, " (+%zu)", o->lock->n_holders - 1);
        }
    } else if (o->n_leases > 0) {
        fprintf(f, "%zu lease(s), first %s", o->n_leases, o->leases[0].owner);
    } else {
        fputc('-', f);
    }
}

static void top_text_row(FILE *f, const rlock_object_info *o)
{
    char ttl[32], token[24] = "-", queue[24] = "-", writers[24] = "-", permits[24] = "-";
    const rlock_lock_info *in = o->lock;
    top_ttl(ttl, sizeof(ttl), o->ttl_ms);
    if (in != NULL) {
        snprintf(token, sizeof(token), "%" PRIu64, in->token);
        snprintf(queue, sizeof(queue), "%zu", in->n_queue);
        snprintf(writers, sizeof(writers), "%zu", in->n_writers);
    } else {
        snprintf(permits, sizeof(permits), "%" PRId64, o->count);
    }
    fprintf(f, "%7" PRId64 "  %-16s %10s %8s %5s %7s %7s  %s  ", top_waiters(o), top_type(o), ttl,
            token, queue, writers, permits, o->name);
    top_holders(f, o);
    fputc('\n', f);
}

/* max: the rows that fit the screen (0: all), with a last line for the rest. */
static void top_text(FILE *f, const char *pattern, const rlock_object_info *v, size_t n, size_t max)
{
    char when[32] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm) != NULL) {
        strftime(when, sizeof(when), "%H:%M:%S UTC", &tm);
    }
    fprintf(f, "rlock top %s: %zu name(s), %s\n", pattern, n, when);
    fprintf(f, "WAITERS  %-16s %10s %8s %5s %7s %7s  %s  %s\n", "TYPE", "TTL", "TOKEN", "QUEUE",
            "WRITERS", "PERMITS", "NAME", "HOLDERS");
    size_t shown = max > 0 && n > max ? max - 1 : n;
    for (size_t i = 0; i < shown; i++) {
        top_text_row(f, &v[i]);
    }
    if (shown < n) {
        fprintf(f, "... %zu more (rlock top --once shows all)\n", n - shown);
    }
}

/* The rows of the live view that fit the terminal: its height less the header and a spare
 * line; 0 (all) when stdout is no terminal or too small to say. */
static size_t top_screen_rows(void)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row < 6) {
        return 0;
    }
    return (size_t)ws.ws_row - 3;
}

/* One snapshot, printed; CLI_EXIT_OK or CLI_EXIT_ERROR (reported). */
static int top_snapshot(rlock_client *c, const char *pattern, int json, int clear)
{
    rlock_object_info *v = NULL;
    size_t n = 0;
    int rc = rlock_survey(c, pattern, &v, &n);
    if (rc != RLOCK_OK) {
        cli_report("top", rc);
        return CLI_EXIT_ERROR;
    }
    if (n > 1) {
        qsort(v, n, sizeof(*v), top_cmp);
    }
    if (clear) {
        fputs("\033[H\033[2J", stdout);
    }
    if (json) {
        top_json(stdout, pattern, v, n);
    } else {
        top_text(stdout, pattern, v, n, clear ? top_screen_rows() : 0);
    }
    fflush(stdout);
    rlock_survey_free(v, n);
    return CLI_EXIT_OK;
}

/* Waits up to 1 s for a key on stdin: 1 when it was q, -1 after a signal, else 0. */
static int top_wait_key(int *stdin_open)
{
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    int r = poll(&p, *stdin_open ? 1 : 0, 1000);
    if (r < 0) {
        return errno == EINTR ? -1 : 0;
    }
    char ch = 0;
    if (r > 0) {
        ssize_t got = read(STDIN_FILENO, &ch, 1);
        /* At the end of a non-terminal stdin only a signal ends the view. */
        *stdin_open = got > 0;
    }
    return top_signal != 0 ? -1 : ch == 'q' || ch == 'Q';
}

/* The live view: snapshots every second until q or a signal; the terminal (when stdin is one)
 * reads keys without Enter or echo meanwhile, and is put back on every way out. */
static int top_live(rlock_client *c, const char *pattern)
{
    struct termios saved, raw;
    int tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
    struct sigaction sa = {.sa_handler = top_on_signal}; /* no SA_RESTART: poll() returns */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (tty) {
        raw = saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    }
    int status = CLI_EXIT_OK, open = 1, key = 0;
    while (status == CLI_EXIT_OK && top_signal == 0 && key == 0) {
        status = top_snapshot(c, pattern, 0, 1);
        key = status == CLI_EXIT_OK ? top_wait_key(&open) : 0;
    }
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    }
    if (top_signal != 0) {
        return 128 + top_signal;
    }
    return status;
}

int cli_top(const cli_global *g, int argc, char **argv)
{
    static const struct option opts[] = {{"once", no_argument, NULL, 'o'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    int once = 0, json = 0, c;
    while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
        if (c == 'o' || c == 'j') {
            once |= c == 'o';
            json |= c == 'j';
        } else if (c == 'h') {
            fputs(top_usage, stdout);
            return CLI_EXIT_OK;
        } else {
            return cli_option_error("top", c, argv);
        }
    }
    if (argc - optind > 1) {
        return cli_usage_error("top", "at most one PATTERN, got '%s' after '%s'", argv[optind + 1],
                               argv[optind]);
    }
    const char *pattern = optind < argc ? argv[optind] : "*";
    if (!top_pattern_ok(pattern)) {
        return cli_usage_error("top",
                               "bad PATTERN '%.64s' (a non-empty glob of at most %d "
                               "bytes, every [ closed)",
                               pattern, TOP_PATTERN_MAX);
    }
    int status = CLI_EXIT_ERROR;
    rlock_client *client = cli_connect(g, NULL, NULL, &status);
    if (client == NULL) {
        return status;
    }
    status = once || json ? top_snapshot(client, pattern, json, 0) : top_live(client, pattern);
    rlock_client_free(client);
    return status;
}
