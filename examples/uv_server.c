/*
 * uv_server - a small TCP counter service on libuv, one fair lock per key (rlock_async.h).
 *
 * A request is a line naming a key; the answer is "<key> <count>\n", the key's counter after this
 * request's increment ("ERR ...\n" on failure). For each request the server takes the fair lock
 * "uv_server:lock:<key>" with rlock_lock_async() (one owner per connection; the watchdog renews
 * the hold on the loop's timer), reads and writes "uv_server:count:<key>" with GET then SET on a
 * plain hiredis async context attached to the same libuv loop (a loop client has no general
 * command call), and releases with rlock_unlock_async(). GET then SET is not atomic: only the
 * lock keeps several servers from losing increments, which examples/uv_server_demo.sh checks.
 * Nothing blocks the loop and no thread is started. SIGINT or SIGTERM stops accepting, lets the
 * requests in progress finish, frees everything and exits.
 *
 * usage: uv_server [--url redis://HOST:PORT] [--port PORT]
 *        (default: $REDIS_URL, else redis://127.0.0.1:6379; port 0, the default: any free port;
 *        it prints "listening on 127.0.0.1:PORT" once ready; HOST is a numeric IPv4 address)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <rlock/libuv.h>
#include <uv.h>

#define LINE_MAX_LEN 200

typedef struct key_lock {
    struct key_lock *next;
    rlock *lock;
    char key[];
} key_lock;

typedef struct conn conn;

typedef struct server {
    uv_loop_t *loop;
    char redis_host[64];
    int redis_port;
    uv_tcp_t listener;
    uv_signal_t sigint, sigterm;
    rlock_client *client;
    redisAsyncContext *redis; /* NULL until needed, and after a failure until needed again */
    key_lock *locks;
    conn *conns;
    int busy;     /* requests in progress */
    int stopping; /* a signal came: no new request starts */
    long served;
} server;

struct conn {
    uv_tcp_t tcp;
    server *s;
    conn *prev, *next;
    rlock_owner *owner;
    rlock *lock; /* the current request's */
    char key[LINE_MAX_LEN + 1];
    char out[LINE_MAX_LEN + 64]; /* the answer, made before the release */
    char in[4 * LINE_MAX_LEN];
    size_t in_len;
    int busy;   /* a request is in progress */
    int closed; /* uv_close() was called */
    int gone;   /* its close callback ran: freed once no request is in progress */
};

static void server_finish(server *s);
static redisAsyncContext *server_redis(server *s);
static void conn_next(conn *c);

/* ---- connections --------------------------------------------------------------------------- */

static void conn_maybe_free(conn *c)
{
    if (!c->gone || c->busy) {
        return;
    }
    server *s = c->s;
    *(c->prev != NULL ? &c->prev->next : &s->conns) = c->next;
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    rlock_owner_free(c->owner);
    free(c);
}

static void conn_on_closed(uv_handle_t *h)
{
    conn *c = h->data;
    c->gone = 1;
    conn_maybe_free(c);
}

static void conn_close(conn *c)
{
    if (!c->closed) {
        c->closed = 1;
        uv_close((uv_handle_t *)&c->tcp, conn_on_closed);
    }
}

typedef struct answer {
    uv_write_t req;
    char text[LINE_MAX_LEN + 64];
} answer;

static void answer_written(uv_write_t *req, int status)
{
    (void)status;
    free(req->data);
}

static void conn_write(conn *c, const char *text)
{
    answer *a = malloc(sizeof(*a));
    if (!c->closed && a != NULL) {
        snprintf(a->text, sizeof(a->text), "%s\n", text);
        a->req.data = a;
        uv_buf_t buf = uv_buf_init(a->text, (unsigned)strlen(a->text));
        if (uv_write(&a->req, (uv_stream_t *)&c->tcp, &buf, 1, answer_written) == 0) {
            a = NULL;
        }
    }
    free(a);
}

/* Answers the request in progress, then starts the next one (or closes, or stops). */
static void conn_answer(conn *c, const char *text)
{
    server *s = c->s;
    conn_write(c, text);
    c->busy = 0;
    s->busy--;
    s->served++;
    if (s->stopping) {
        conn_close(c);
    }
    if (c->gone) {
        conn_maybe_free(c);
    } else {
        conn_next(c);
    }
    if (s->stopping && s->busy == 0) {
        server_finish(s);
    }
}

/* ---- one request: lock, GET, SET, unlock, answer ---------------------------------------- */

static void on_unlocked(rlock *lock, int rc, void *arg)
{
    (void)lock;
    conn *c = arg;
    if (rc != RLOCK_OK) {
        snprintf(c->out, sizeof(c->out), "ERR unlock: %s", rlock_strerror(rc));
    }
    conn_answer(c, c->out);
}

/* Releases the lock; c->out is the answer to give once it is released. */
static void request_release(conn *c)
{
    if (rlock_unlock_async(c->lock, c->owner, on_unlocked, c) != RLOCK_OK) {
        snprintf(c->out, sizeof(c->out), "ERR unlock: %s", rlock_last_error());
        conn_answer(c, c->out);
    }
}

static void on_set(redisAsyncContext *ac, void *reply, void *arg)
{
    (void)ac;
    conn *c = arg;
    redisReply *r = reply;
    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        snprintf(c->out, sizeof(c->out), "ERR SET failed");
    }
    request_release(c);
}

static void on_get(redisAsyncContext *ac, void *reply, void *arg)
{
    conn *c = arg;
    redisReply *r = reply;
    if (r == NULL || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_NIL)) {
        snprintf(c->out, sizeof(c->out), "ERR GET failed");
        request_release(c);
        return;
    }
    long long next = (r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0) + 1;
    snprintf(c->out, sizeof(c->out), "%s %lld", c->key, next);
    if (redisAsyncCommand(ac, on_set, c, "SET uv_server:count:%s %lld", c->key, next) != REDIS_OK) {
        snprintf(c->out, sizeof(c->out), "ERR SET not sent");
        request_release(c);
    }
}

static void on_locked(rlock *lock, int rc, void *arg)
{
    (void)lock;
    conn *c = arg;
    server *s = c->s;
    if (rc != RLOCK_OK) {
        snprintf(c->out, sizeof(c->out), "ERR lock: %s", rlock_strerror(rc));
        conn_answer(c, c->out);
        return;
    }
    redisAsyncContext *ac = server_redis(s);
    if (ac == NULL ||
        redisAsyncCommand(ac, on_get, c, "GET uv_server:count:%s", c->key) != REDIS_OK) {
        snprintf(c->out, sizeof(c->out), "ERR no Redis connection");
        request_release(c);
    }
}

/* The fair lock handle of key, opened on first use and kept until the server stops. */
static rlock *key_lock_get(server *s, const char *key)
{
    for (key_lock *k = s->locks; k != NULL; k = k->next) {
        if (strcmp(k->key, key) == 0) {
            return k->lock;
        }
    }
    size_t len = strlen(key);
    key_lock *k = malloc(sizeof(*k) + len + 1);
    char name[LINE_MAX_LEN + 32];
    snprintf(name, sizeof(name), "uv_server:lock:%s", key);
    if (k == NULL || (k->lock = rlock_open(s->client, RLOCK_FAIR, name)) == NULL) {
        free(k);
        return NULL;
    }
    memcpy(k->key, key, len + 1);
    k->next = s->locks;
    s->locks = k;
    return k->lock;
}

/* A key is letters, digits and "_:.-" (it goes into Redis key names as it is). */
static int key_ok(const char *key)
{
    if (key[0] == '\0') {
        return 0;
    }
    for (const char *p = key; *p != '\0'; p++) {
        if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:.-", *p) ==
            NULL) {
            return 0;
        }
    }
    return 1;
}

/* Takes the next complete line off the input buffer into c->key: 1, or 0 when there is none. */
static int conn_take_line(conn *c)
{
    char *nl = memchr(c->in, '\n', c->in_len);
    if (nl == NULL) {
        return 0;
    }
    size_t n = (size_t)(nl - c->in);
    size_t keep = n > 0 && c->in[n - 1] == '\r' ? n - 1 : n;
    keep = keep < LINE_MAX_LEN ? keep : LINE_MAX_LEN;
    memcpy(c->key, c->in, keep);
    c->key[keep] = '\0';
    c->in_len -= n + 1;
    memmove(c->in, nl + 1, c->in_len);
    return 1;
}

/* Starts the request in c->key: 1 when its lock call started (its done goes on), 0 when it was
 * answered at once (a bad key, a refused call). */
static int request_start(conn *c)
{
    server *s = c->s;
    c->lock = key_ok(c->key) ? key_lock_get(s, c->key) : NULL;
    if (c->lock == NULL) {
        conn_write(c, "ERR bad key");
        return 0;
    }
    rlock_lock_args args;
    rlock_lock_args_init(&args);
    args.owner = c->owner; /* the connection is the owner: one request at a time */
    args.wait_ms = RLOCK_WAIT_FOREVER;
    args.lease_ms = -1; /* the loop's watchdog renews it */
    if (rlock_lock_async(c->lock, &args, on_locked, c) != RLOCK_OK) {
        snprintf(c->out, sizeof(c->out), "ERR lock: %s", rlock_last_error());
        conn_write(c, c->out);
        return 0;
    }
    c->busy = 1;
    s->busy++;
    return 1;
}

/* Starts the connection's next request, if a whole line is there and none is in progress. */
static void conn_next(conn *c)
{
    server *s = c->s;
    while (!c->busy && !c->closed && !s->stopping && conn_take_line(c)) {
        if (request_start(c)) {
            return;
        }
    }
}

static void conn_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    conn *c = h->data;
    *buf = uv_buf_init(c->in + c->in_len, (unsigned)(sizeof(c->in) - c->in_len));
}

static void conn_on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
    (void)buf;
    conn *c = st->data;
    if (n < 0 || (n == 0 && c->in_len == sizeof(c->in))) {
        conn_close(c); /* the peer went, or a line longer than the buffer */
        return;
    }
    c->in_len += (size_t)n;
    conn_next(c);
}

static void on_connection(uv_stream_t *listener, int status)
{
    server *s = listener->data;
    conn *c = calloc(1, sizeof(*c));
    if (status < 0 || c == NULL || rlock_owner_new(s->client, &c->owner) != RLOCK_OK) {
        free(c);
        return;
    }
    c->s = s;
    c->next = s->conns;
    if (s->conns != NULL) {
        s->conns->prev = c;
    }
    s->conns = c;
    uv_tcp_init(s->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0 ||
        uv_read_start((uv_stream_t *)&c->tcp, conn_alloc, conn_on_read) != 0) {
        conn_close(c);
    }
}

/* ---- start and stop ------------------------------------------------------------------------ */

/* No request is in progress any more: everything is freed, and the loop ends. */
static void server_finish(server *s)
{
    if (s->client == NULL) {
        return;
    }
    for (conn *c = s->conns; c != NULL; c = c->next) {
        conn_close(c);
    }
    while (s->locks != NULL) {
        key_lock *k = s->locks;
        s->locks = k->next;
        rlock_free(k->lock);
        free(k);
    }
    rlock_client_free(s->client);
    s->client = NULL;
    if (s->redis != NULL) {
        redisAsyncDisconnect(s->redis);
        s->redis = NULL;
    }
}

static void on_signal(uv_signal_t *sig, int signum)
{
    (void)signum;
    server *s = sig->data;
    if (s->stopping) {
        return;
    }
    s->stopping = 1;
    uv_close((uv_handle_t *)&s->listener, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    for (conn *c = s->conns; c != NULL; c = c->next) {
        if (!c->busy) {
            conn_close(c);
        }
    }
    if (s->busy == 0) {
        server_finish(s);
    }
}

/* The counter connection failed to connect or broke: hiredis frees it (its pending commands
 * get a NULL reply), and the next request connects again. */
static void on_redis_gone(const redisAsyncContext *ac, int status)
{
    server *s = ac->data;
    if (status != REDIS_OK) {
        fprintf(stderr, "uv_server: Redis connection: %s\n", ac->errstr);
    }
    if (s->redis == ac) {
        s->redis = NULL;
    }
}

static void on_redis_connect(const redisAsyncContext *ac, int status)
{
    if (status != REDIS_OK) {
        on_redis_gone(ac, status);
    }
}

/* The counter connection, connected on first use (commands wait in hiredis until it is up). */
static redisAsyncContext *server_redis(server *s)
{
    if (s->redis != NULL) {
        return s->redis;
    }
    redisAsyncContext *ac = redisAsyncConnect(s->redis_host, s->redis_port);
    if (ac == NULL || ac->err != 0 || redisLibuvAttach(ac, s->loop) != REDIS_OK) {
        if (ac != NULL) {
            redisAsyncFree(ac);
        }
        return NULL;
    }
    ac->data = s;
    redisAsyncSetConnectCallback(ac, on_redis_connect);
    redisAsyncSetDisconnectCallback(ac, on_redis_gone);
    s->redis = ac;
    return ac;
}

/* "redis://HOST:PORT" into host and port (the counter connection's address). */
static int parse_url(const char *url, char *host, size_t len, int *port)
{
    const char *p = strstr(url, "://");
    p = p != NULL ? p + 3 : url;
    const char *at = strrchr(p, '@'); /* a password is for rlock's client only here */
    p = at != NULL ? at + 1 : p;
    const char *colon = strchr(p, ':');
    size_t n = colon != NULL ? (size_t)(colon - p) : strcspn(p, "/");
    if (n == 0 || n >= len) {
        return -1;
    }
    memcpy(host, p, n);
    host[n] = '\0';
    *port = colon != NULL ? (int)strtol(colon + 1, NULL, 10) : 6379;
    return *port > 0 ? 0 : -1;
}

static int server_listen(server *s, int port)
{
    struct sockaddr_in addr;
    struct sockaddr_storage got;
    int len = sizeof(got);
    uv_ip4_addr("127.0.0.1", port, &addr);
    uv_tcp_init(s->loop, &s->listener);
    s->listener.data = s;
    if (uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0) != 0 ||
        uv_listen((uv_stream_t *)&s->listener, 128, on_connection) != 0 ||
        uv_tcp_getsockname(&s->listener, (struct sockaddr *)&got, &len) != 0) {
        fprintf(stderr, "uv_server: cannot listen on 127.0.0.1:%d\n", port);
        return -1;
    }
    printf("listening on 127.0.0.1:%d\n", ntohs(((struct sockaddr_in *)&got)->sin_port));
    fflush(stdout);
    return 0;
}

static int server_start(server *s, const char *url, int port)
{
    rlock_options o;
    rlock_options_init(&o);
    o.url = url;
    if (parse_url(url, s->redis_host, sizeof(s->redis_host), &s->redis_port) != 0 ||
        rlock_libuv_client_new(&o, s->loop, &s->client) != RLOCK_OK) {
        fprintf(stderr, "uv_server: %s: %s\n", url, rlock_last_error());
        return -1;
    }
    uv_signal_init(s->loop, &s->sigint);
    uv_signal_init(s->loop, &s->sigterm);
    s->sigint.data = s->sigterm.data = s;
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    return server_listen(s, port);
}

int main(int argc, char **argv)
{
    const char *env = getenv("REDIS_URL");
    const char *url = env != NULL ? env : "redis://127.0.0.1:6379";
    int port = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--url") == 0) {
            url = argv[i + 1];
        } else if (strcmp(argv[i], "--port") == 0) {
            port = (int)strtol(argv[i + 1], NULL, 10);
        } else {
            break;
        }
    }
    if (argc % 2 == 0) {
        fprintf(stderr, "usage: uv_server [--url redis://HOST:PORT] [--port PORT]\n");
        return 2;
    }
    server s = {.loop = uv_default_loop()};
    if (server_start(&s, url, port) != 0) {
        return 1; /* a failed start leaves the process, and the OS reclaims what it made */
    }
    uv_run(s.loop, UV_RUN_DEFAULT);
    fprintf(stderr, "uv_server: %ld requests served\n", s.served);
    return uv_loop_close(s.loop) == 0 ? 0 : 1;
}
