/*
 * redis_tls.h - TLS to Redis (rediss://, rediss+cluster://) with GnuTLS,
 * and the one I/O layer every Redis connection reads and writes through.
 *
 * hiredis 0.14 has no TLS and reads and writes its socket itself. permitd
 * keeps hiredis as the protocol (its context's output buffer, its reply
 * reader, redisFormatCommandArgv) and does the I/O: redis_io_*() below are
 * hiredis's redisBufferRead/Write, redisGetReply and redisCommandArgv, the
 * same calls on a plaintext connection (no session) and the same contract
 * over a GnuTLS session. Like redis_conn.h, this header stays inside the
 * stores layer's Redis files (redis.c, redis_pipe.c, redis_notice.c,
 * cluster.c).
 */
#ifndef PERMITD_REDIS_TLS_H
#define PERMITD_REDIS_TLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/config.h"
#include "core/status.h"

struct redisContext;

/* Why a handshake failed, for /metrics and the log. */
enum redis_tls_reason {
    REDIS_TLS_UNKNOWN_CA,      /* no trusted CA signed the certificate */
    REDIS_TLS_NAME_MISMATCH,   /* the certificate is for another name */
    REDIS_TLS_EXPIRED,         /* expired, or not valid yet */
    REDIS_TLS_UNTRUSTED,       /* any other verification failure (revoked, bad signature) */
    REDIS_TLS_REFUSED,         /* Redis sent a fatal alert (no client certificate, no
                                * common protocol version or suite) */
    REDIS_TLS_TIMEOUT,         /* no handshake within the connect timeout */
    REDIS_TLS_OTHER,           /* broken connection, protocol error */
    REDIS_TLS_REASONS
};

/* The settings and credentials of one struct redis: made at start. */
struct redis_tls;
/* One connection's TLS session. */
struct redis_tls_session;

/* Loads the CA file (or the system's trust store), the client certificate
 * and key, and checks the priority string; logs a warning when
 * verification is off. Free with redis_tls_free(). PERMITD_EINVAL naming
 * the setting and the file when one cannot be read. */
int redis_tls_new(const struct config *cfg, struct redis_tls **out, struct permitd_error *err);

/* NULL is a no-op. */
void redis_tls_free(struct redis_tls *t);

/* A TLS session over ctx's socket (which it turns non-blocking; hiredis
 * never reads or writes it again), verifying the certificate against host
 * (--redis-tls-server-name when set). `where` names the node for
 * messages. wait: the handshake is made here, within timeout_ms; else
 * (a pipe, whose connect may still be under way) the first reads and
 * writes drive it, answering EAGAIN until it is done. PERMITD_OK with
 * *out (free with redis_tls_session_free()); else unavailable, err naming
 * the node and the reason, and the failure counted by reason (a handshake
 * driven later fails its read or write the same way, ctx->errstr saying
 * why). */
int redis_tls_start(struct redis_tls *t, struct redisContext *ctx, const char *host,
                    const char *where, int timeout_ms, int wait,
                    struct redis_tls_session **out, struct permitd_error *err);

/* 1 while s's handshake, driven by reads and writes, waits for Redis to
 * answer: a caller that waits on the socket should not ask for
 * writability then (it would be woken at once, again and again). */
int redis_tls_waits_to_read(const struct redis_tls_session *s);

/* Ends the session (no close_notify wait). NULL is a no-op. */
void redis_tls_session_free(struct redis_tls_session *s);

/* A blocking context's wait for each read or write, as redisSetTimeout
 * sets it for a plaintext one. */
void redis_tls_set_timeout(struct redis_tls_session *s, int timeout_ms);

/* Handshake failures by reason since start; the reason's metric label. */
uint64_t redis_tls_failures(const struct redis_tls *t, enum redis_tls_reason reason);
const char *redis_tls_reason_name(enum redis_tls_reason reason);

/* ---- The I/O layer: s NULL = plaintext, hiredis's own calls ---- */

/* redisBufferRead: what the socket has, into ctx's reader. A blocking
 * context waits (its timeout); a non-blocking one takes what is there.
 * REDIS_OK, or REDIS_ERR with ctx->err and ctx->errstr set (a timeout:
 * REDIS_ERR_IO with errno EAGAIN, as hiredis). */
int redis_io_read(struct redisContext *ctx, struct redis_tls_session *s);

/* redisBufferWrite: ctx's output buffer; *done when all of it went. */
int redis_io_write(struct redisContext *ctx, struct redis_tls_session *s, int *done);

/* write(2) on the connection for a non-blocking caller with a buffer of
 * its own (redis_pipe.c): bytes taken, or -1 with errno (EAGAIN: later,
 * with the same bytes) and ctx->errstr saying why. */
ssize_t redis_io_send(struct redisContext *ctx, struct redis_tls_session *s, const char *buf,
                      size_t len);

/* redisGetReply: the next reply (a blocking context flushes and waits). */
int redis_io_get_reply(struct redisContext *ctx, struct redis_tls_session *s, void **reply);

/* redisCommandArgv on a blocking context: the reply (free with
 * freeReplyObject), or NULL with ctx->errstr saying why. */
void *redis_io_command(struct redisContext *ctx, struct redis_tls_session *s, int argc,
                       const char **argv, const size_t *lens);

#endif
