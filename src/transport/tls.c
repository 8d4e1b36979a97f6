/*
 * TLS with OpenSSL (tls.h). The session runs over a BIO of rlock's own whose writes are
 * send(..., MSG_NOSIGNAL): OpenSSL's socket BIO writes with write(), which raises SIGPIPE when
 * the server has gone, and a library must never raise a signal in its user's process.
 * Static helpers are named tls_*.
 */
#include "tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "conn.h"
#include "error.h"
#include "util.h"

struct rlk_tls {
    SSL_CTX *ctx;
    char *server_name; /* tls_server_name, or NULL: the host dialled */
    int insecure;
};

/* ---- the socket BIO ------------------------------------------------------------------- */

static BIO_METHOD *tls_bio_method_;
static pthread_once_t tls_bio_once = PTHREAD_ONCE_INIT;

/* The BIO's socket, and whether its next calls may block. A connection's socket is blocking
 * once dialled (its waits bounded by SO_RCVTIMEO/SO_SNDTIMEO, one system call per read as on a
 * plain connection); a call that must not wait (an event loop's read, a liveness check, a
 * close_notify) says so with MSG_DONTWAIT. */
typedef struct tls_sock {
    int fd;
    int flags; /* 0 or MSG_DONTWAIT */
} tls_sock;

static tls_sock *tls_bio_sock(BIO *b)
{
    return BIO_get_data(b);
}

static int tls_bio_write(BIO *b, const char *buf, int n)
{
    tls_sock *s = tls_bio_sock(b);
    BIO_clear_retry_flags(b);
    ssize_t w = send(s->fd, buf, (size_t)n, s->flags | MSG_NOSIGNAL);
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        BIO_set_retry_write(b);
    }
    return (int)w;
}

static int tls_bio_read(BIO *b, char *buf, int n)
{
    tls_sock *s = tls_bio_sock(b);
    BIO_clear_retry_flags(b);
    ssize_t r = recv(s->fd, buf, (size_t)n, s->flags);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
        BIO_set_retry_read(b);
    }
    return (int)r;
}

static int tls_bio_destroy(BIO *b)
{
    free(BIO_get_data(b));
    BIO_set_data(b, NULL);
    return 1;
}

static int tls_bio_puts(BIO *b, const char *s)
{
    return tls_bio_write(b, s, (int)strlen(s));
}

static long tls_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    /* A socket has nothing to flush and no state to push or pop; everything else (kTLS, fd
     * queries) is "not supported", which makes OpenSSL use plain reads and writes. */
    return cmd == BIO_CTRL_FLUSH || cmd == BIO_CTRL_PUSH || cmd == BIO_CTRL_POP;
}

static void tls_bio_init_method(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
                                 "rlock socket");
    if (m != NULL &&
        (!BIO_meth_set_write(m, tls_bio_write) || !BIO_meth_set_read(m, tls_bio_read) ||
         !BIO_meth_set_puts(m, tls_bio_puts) || !BIO_meth_set_ctrl(m, tls_bio_ctrl) ||
         !BIO_meth_set_destroy(m, tls_bio_destroy))) {
        BIO_meth_free(m);
        m = NULL;
    }
    tls_bio_method_ = m;
}

static BIO *tls_bio_new(int fd)
{
    pthread_once(&tls_bio_once, tls_bio_init_method);
    tls_sock *s = malloc(sizeof(*s));
    BIO *b = tls_bio_method_ != NULL && s != NULL ? BIO_new(tls_bio_method_) : NULL;
    if (b == NULL) {
        free(s);
        return NULL;
    }
    s->fd = fd;
    s->flags = 0;
    BIO_set_data(b, s);
    BIO_set_init(b, 1);
    return b;
}

/* Sets whether the session's next socket calls may block (see tls_sock). */
static void tls_may_block(SSL *ssl, int may_block)
{
    tls_sock *s = BIO_get_data(SSL_get_rbio(ssl));
    s->flags = may_block ? 0 : MSG_DONTWAIT;
}

/* ---- the context ---------------------------------------------------------------------- */

/* OpenSSL's most recent reason in words ("no reason" when its queue is empty). */
static const char *tls_reason(char *buf, size_t len)
{
    unsigned long e = ERR_peek_last_error();
    if (e == 0) {
        snprintf(buf, len, "no reason given by OpenSSL");
    } else {
        ERR_error_string_n(e, buf, len);
    }
    ERR_clear_error();
    return buf;
}

/* A file option must name a readable file: checked first, so that the message says so plainly
 * instead of OpenSSL's "system library" wording. */
static int tls_check_file(const char *what, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return rlk_err(RLOCK_EINVAL, "%s \"%s\" cannot be read: %s", what, path, strerror(errno));
    }
    fclose(f);
    return RLOCK_OK;
}

static int tls_load_ca(SSL_CTX *ctx, const char *ca)
{
    char why[256];
    if (ca == NULL) {
        return SSL_CTX_set_default_verify_paths(ctx) == 1
                   ? RLOCK_OK
                   : rlk_err(RLOCK_ETLS, "cannot load the system's CA store: %s",
                             tls_reason(why, sizeof(why)));
    }
    int r = tls_check_file("tls_ca_file", ca);
    if (r == RLOCK_OK && SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1) {
        r = rlk_err(RLOCK_EINVAL, "tls_ca_file \"%s\" holds no usable certificate: %s", ca,
                    tls_reason(why, sizeof(why)));
    }
    return r;
}

static int tls_load_identity(SSL_CTX *ctx, const char *cert, const char *key)
{
    char why[256];
    if (cert == NULL && key == NULL) {
        return RLOCK_OK;
    }
    if (cert == NULL || key == NULL) {
        return rlk_err(RLOCK_EINVAL, "tls_cert_file and tls_key_file go together (%s is missing)",
                       cert == NULL ? "tls_cert_file" : "tls_key_file");
    }
    int r = tls_check_file("tls_cert_file", cert);
    r = r ? r : tls_check_file("tls_key_file", key);
    if (r == RLOCK_OK && SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        r = rlk_err(RLOCK_EINVAL, "tls_cert_file \"%s\" holds no usable certificate: %s", cert,
                    tls_reason(why, sizeof(why)));
    }
    if (r == RLOCK_OK && SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        r = rlk_err(RLOCK_EINVAL, "tls_key_file \"%s\" holds no usable private key: %s", key,
                    tls_reason(why, sizeof(why)));
    }
    if (r == RLOCK_OK && SSL_CTX_check_private_key(ctx) != 1) {
        r = rlk_err(RLOCK_EINVAL, "tls_key_file \"%s\" does not match tls_cert_file \"%s\": %s",
                    key, cert, tls_reason(why, sizeof(why)));
    }
    return r;
}

static int tls_ctx_new(const rlock_options *o, SSL_CTX **out)
{
    *out = SSL_CTX_new(TLS_client_method());
    if (*out == NULL) {
        char why[256];
        return rlk_err(RLOCK_ENOMEM, "cannot create a TLS context: %s",
                       tls_reason(why, sizeof(why)));
    }
    SSL_CTX *ctx = *out;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* Partial writes and a moving buffer: the output buffer may grow between two attempts. A
     * peer that vanished without close_notify ends the stream (EOF), as on a plain socket. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_verify(ctx, o->tls_insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    int r = tls_load_ca(ctx, o->tls_ca_file);
    return r ? r : tls_load_identity(ctx, o->tls_cert_file, o->tls_key_file);
}

int rlk_tls_new(const rlock_options *o, rlk_tls **out)
{
    *out = NULL;
    rlk_tls *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return rlk_err(RLOCK_ENOMEM, "cannot allocate the TLS settings");
    }
    t->insecure = o->tls_insecure != 0;
    int r = RLOCK_OK;
    if (o->tls_server_name != NULL) {
        t->server_name = strdup(o->tls_server_name);
        r = t->server_name == NULL ? rlk_err(RLOCK_ENOMEM, "cannot copy tls_server_name") : r;
    }
    r = r ? r : tls_ctx_new(o, &t->ctx);
    if (r != RLOCK_OK) {
        rlk_tls_free(t);
        return r;
    }
    *out = t;
    return RLOCK_OK;
}

void rlk_tls_free(rlk_tls *t)
{
    if (t == NULL) {
        return;
    }
    SSL_CTX_free(t->ctx);
    free(t->server_name);
    free(t);
}

/* ---- the handshake -------------------------------------------------------------------- */

static int tls_is_ip(const char *name)
{
    unsigned char addr[16];
    return inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;
}

/* SNI (for a name; RFC 6066 forbids addresses) and the name or address the certificate must
 * carry. */
static int tls_set_peer(const rlk_tls *t, SSL *ssl, const char *name)
{
    int ip = tls_is_ip(name);
    if (!ip && SSL_set_tlsext_host_name(ssl, name) != 1) {
        return 0;
    }
    if (t->insecure) {
        return 1;
    }
    X509_VERIFY_PARAM *p = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(p, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    return ip ? X509_VERIFY_PARAM_set1_ip_asc(p, name) == 1
              : X509_VERIFY_PARAM_set1_host(p, name, 0) == 1;
}

/* Why a handshake failed, in the most specific words available. */
static int tls_handshake_error(SSL *ssl, int ret, const char *name)
{
    int e = SSL_get_error(ssl, ret);
    long v = SSL_get_verify_result(ssl);
    char why[256];
    if (v != X509_V_OK) {
        ERR_clear_error();
        return rlk_err(RLOCK_ETLS, "TLS handshake with %s: certificate verify failed: %s", name,
                       X509_verify_cert_error_string(v));
    }
    if (e == SSL_ERROR_SSL) {
        return rlk_err(RLOCK_ETLS, "TLS handshake with %s: %s", name, tls_reason(why, sizeof(why)));
    }
    if (e == SSL_ERROR_SYSCALL && errno != 0 && ret < 0) {
        return rlk_err(RLOCK_ECONN, "TLS handshake with %s: %s", name, strerror(errno));
    }
    ERR_clear_error();
    return rlk_err(RLOCK_ETLS, "TLS handshake with %s: the server closed the connection", name);
}

static int tls_handshake(SSL *ssl, int fd, const char *name, int64_t deadline_ms)
{
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int ret = SSL_connect(ssl);
        if (ret == 1) {
            return RLOCK_OK;
        }
        int e = SSL_get_error(ssl, ret);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
            return tls_handshake_error(ssl, ret, name);
        }
        int64_t left = deadline_ms - rlk_now_ms();
        struct pollfd pfd = {.fd = fd, .events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT};
        if (left <= 0 || poll(&pfd, 1, (int)(left > INT_MAX ? INT_MAX : left)) == 0) {
            return rlk_err(RLOCK_ECONN,
                           "TLS handshake with %s: no answer within connect_timeout_ms", name);
        }
    }
}

int rlk_tls_session(const rlk_tls *t, int fd, const char *host, SSL **out)
{
    *out = NULL;
    const char *name = t->server_name != NULL ? t->server_name : host;
    SSL *ssl = SSL_new(t->ctx);
    BIO *bio = ssl != NULL ? tls_bio_new(fd) : NULL;
    if (bio == NULL) {
        SSL_free(ssl);
        return rlk_err(RLOCK_ENOMEM, "cannot allocate a TLS session");
    }
    SSL_set_bio(ssl, bio, bio);
    if (!tls_set_peer(t, ssl, name)) {
        SSL_free(ssl);
        return rlk_err(RLOCK_ETLS, "TLS: cannot use \"%s\" as the server's name", name);
    }
    *out = ssl;
    return RLOCK_OK;
}

int rlk_tls_handshake_step(const rlk_tls *t, SSL *ssl, const char *host, short *events)
{
    const char *name = t->server_name != NULL ? t->server_name : host;
    tls_may_block(ssl, 0);
    ERR_clear_error();
    errno = 0;
    int ret = SSL_connect(ssl);
    if (ret == 1) {
        return 1;
    }
    int e = SSL_get_error(ssl, ret);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        *events = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
        return 0;
    }
    return tls_handshake_error(ssl, ret, name);
}

int rlk_tls_connect(const rlk_tls *t, int fd, const char *host, int64_t deadline_ms, SSL **out)
{
    SSL *ssl = NULL;
    int r = rlk_tls_session(t, fd, host, &ssl);
    r = r ? r : tls_handshake(ssl, fd, t->server_name != NULL ? t->server_name : host, deadline_ms);
    if (r != RLOCK_OK) {
        SSL_free(ssl);
        return r;
    }
    *out = ssl;
    return RLOCK_OK;
}

/* ---- a session's I/O ------------------------------------------------------------------ */

static ssize_t tls_io_result(SSL *ssl, int ret, short *events, char *why, size_t whylen)
{
    int e = SSL_get_error(ssl, ret);
    switch (e) {
    case SSL_ERROR_WANT_READ:
        *events = POLLIN;
        return 0;
    case SSL_ERROR_WANT_WRITE:
        *events = POLLOUT;
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        return -RLK_CONN_EEOF;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        return errno != 0 ? -RLK_CONN_EIO : -RLK_CONN_EEOF;
    default:
        tls_reason(why, whylen);
        return -RLK_CONN_ETLS;
    }
}

/* SSL_get_error() needs the thread's error queue empty before each call. It nearly always is
 * (every failure path here clears it), and looking costs less than clearing its 16 slots. */
static void tls_empty_errors(void)
{
    if (ERR_peek_error() != 0) {
        ERR_clear_error();
    }
}

ssize_t rlk_tls_read(SSL *ssl, int may_block, char *buf, size_t n, short *events, char *why,
                     size_t whylen)
{
    tls_may_block(ssl, may_block);
    tls_empty_errors();
    errno = 0;
    int r = SSL_read(ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
    return r > 0 ? r : tls_io_result(ssl, r, events, why, whylen);
}

ssize_t rlk_tls_write(SSL *ssl, int may_block, const char *buf, size_t n, short *events, char *why,
                      size_t whylen)
{
    tls_may_block(ssl, may_block);
    tls_empty_errors();
    errno = 0;
    int r = SSL_write(ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
    return r > 0 ? r : tls_io_result(ssl, r, events, why, whylen);
}

int rlk_tls_pending(SSL *ssl)
{
    return SSL_pending(ssl);
}

void rlk_tls_end(SSL *ssl, int notify)
{
    if (ssl == NULL) {
        return;
    }
    if (notify) {
        tls_may_block(ssl, 0);
        (void)SSL_shutdown(ssl); /* one attempt: a close never waits for the server */
        ERR_clear_error();
    }
    SSL_free(ssl);
}
