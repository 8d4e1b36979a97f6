/*
 * TLS for rlock's connections (OpenSSL): one context per client built from its options, the
 * handshake on a connected non-blocking socket, and the reads and writes of a session. Used by
 * conn.c, client.c and the loop's connections (loop/loop_conn.c); no OpenSSL type leaves this
 * header except as an opaque pointer.
 */
#ifndef RLK_TLS_H
#define RLK_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rlock.h"

struct ssl_st;
typedef struct rlk_tls rlk_tls;

/* Builds the client's TLS context from o (tls_ca_file, tls_cert_file, tls_key_file,
 * tls_server_name, tls_insecure; everything needed later is copied). RLOCK_EINVAL naming the
 * file that cannot be read or does not hold what it should, RLOCK_ETLS, RLOCK_ENOMEM. */
int rlk_tls_new(const rlock_options *o, rlk_tls **out);
void rlk_tls_free(rlk_tls *t);

/* Runs the TLS handshake on fd (connected, non-blocking), verifying the server's chain and its
 * name (tls_server_name, else host) unless tls_insecure; bounded by deadline_ms (monotonic).
 * RLOCK_OK and *out, RLOCK_ETLS with OpenSSL's reason, RLOCK_ECONN (the socket failed or the
 * deadline passed), RLOCK_ENOMEM. */
int rlk_tls_connect(const rlk_tls *t, int fd, const char *host, int64_t deadline_ms,
                    struct ssl_st **out);

/* A session on fd (connected, non-blocking) whose handshake the caller drives with
 * rlk_tls_handshake_step(): SNI and the name the certificate must carry set as rlk_tls_connect()
 * sets them. RLOCK_OK and *out (rlk_tls_end() frees it), RLOCK_ETLS, RLOCK_ENOMEM. */
int rlk_tls_session(const rlk_tls *t, int fd, const char *host, struct ssl_st **out);
/* One step of that handshake, never waiting: 1 done; 0 not yet, *events (POLLIN or POLLOUT)
 * says what the socket must be ready for before the next step; RLOCK_ETLS (a refused
 * certificate, a name mismatch, a server that closed: with OpenSSL's reason) or RLOCK_ECONN. */
int rlk_tls_handshake_step(const rlk_tls *t, struct ssl_st *ssl, const char *host, short *events);

/* One read or write of a session. may_block 0: the socket calls never wait (MSG_DONTWAIT);
 * 1: they may wait as the socket does (a blocking socket's SO_RCVTIMEO/SO_SNDTIMEO). > 0: bytes
 * moved; 0: it would block (or that bound passed), *events says what to poll for; < 0: minus
 * an RLK_CONN_E* kind (errno set for RLK_CONN_EIO; why holds OpenSSL's reason for
 * RLK_CONN_ETLS). */
ssize_t rlk_tls_read(struct ssl_st *ssl, int may_block, char *buf, size_t n, short *events,
                     char *why, size_t whylen);
ssize_t rlk_tls_write(struct ssl_st *ssl, int may_block, const char *buf, size_t n, short *events,
                      char *why, size_t whylen);
/* Decrypted bytes already inside the session, which poll() cannot see. */
int rlk_tls_pending(struct ssl_st *ssl);
/* Frees a session; close_notify (one non-blocking attempt) when notify is 1. */
void rlk_tls_end(struct ssl_st *ssl, int notify);

#endif
