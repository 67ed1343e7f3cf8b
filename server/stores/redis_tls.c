/*
 * redis_tls.c - TLS to Redis with GnuTLS, and the I/O every Redis
 * connection goes through (redis_tls.h).
 *
 * The idea: permitd owns the socket and the TLS session; hiredis stays the
 * protocol. hiredis 0.14 has no TLS and calls read()/write() on its
 * context's fd itself, so nothing can be hooked under it; but its output
 * buffer (filled by redisAppendCommandArgv), its reply reader
 * (redisReaderFeed, redisGetReplyFromReader) and its error fields are the
 * context's, in the open. redis_io_*() do what redisBufferRead/Write,
 * redisGetReply and redisCommandArgv do, with gnutls_record_recv/send in
 * place of read/write: the blocking calls, the pipelines (which write
 * their own buffer and read through the reader with no allocation), the
 * change notices and the cluster's discovery all keep their code and
 * their round trips. On a plaintext connection they are hiredis's own
 * calls, unchanged.
 *
 * A TLS socket is always non-blocking: a blocking context's wait is a
 * poll() bounded by its timeout (hiredis's SO_RCVTIMEO would leave a
 * half-read record behind in GnuTLS). A read takes every record the
 * socket holds, so a caller that polls the fd next (the pipe's epoll, the
 * notice thread's poll) never sleeps on data GnuTLS has already decrypted.
 *
 * Verification: the CA file (or the system store), the name (the server
 * name setting, else the host dialled: a DNS name or an IP address, matched
 * against the certificate's SANs), the dates; TLS 1.2 and 1.3 only. A
 * failure names the host and the reason, and counts by reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <hiredis/hiredis.h>
#include <hiredis/sds.h>

#include "core/clock.h"
#include "core/log.h"
#include "stores/redis_tls.h"

/* TLS 1.2 and 1.3, no static-RSA key exchange (no forward secrecy). */
#define REDIS_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-RSA"
#define READ_CHUNK 16384

struct redis_tls {
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio;
    char server_name[256];      /* "" = the host dialled */
    int skip_verify;
    _Atomic uint64_t failures[REDIS_TLS_REASONS];
};

struct redis_tls_session {
    struct redis_tls *tls;
    gnutls_session_t s;
    int fd;
    int timeout_ms;             /* a blocking context's wait per read or write */
    int send_pending;           /* the last send was cut short: resend it (NULL, 0) */
    size_t send_size;           /* its size */
    int established;            /* a reply came: Redis took the handshake */
    int handshaking;            /* started without waiting: not done yet (drive()) */
    int stepped;                /* drive() has run: the connect is done */
    char where[300];
    char name[256];             /* the name verified */
};

static const char *const reason_names[REDIS_TLS_REASONS] = {
    [REDIS_TLS_UNKNOWN_CA] = "unknown_ca",
    [REDIS_TLS_NAME_MISMATCH] = "name_mismatch",
    [REDIS_TLS_EXPIRED] = "expired",
    [REDIS_TLS_UNTRUSTED] = "untrusted",
    [REDIS_TLS_REFUSED] = "refused",
    [REDIS_TLS_TIMEOUT] = "timeout",
    [REDIS_TLS_OTHER] = "other",
};

const char *redis_tls_reason_name(enum redis_tls_reason reason)
{
    return (unsigned)reason < REDIS_TLS_REASONS ? reason_names[reason] : "?";
}

uint64_t redis_tls_failures(const struct redis_tls *t, enum redis_tls_reason reason)
{
    return t != NULL && (unsigned)reason < REDIS_TLS_REASONS ? atomic_load(&t->failures[reason])
                                                             : 0;
}

int redis_tls_new(const struct config *cfg, struct redis_tls **out, struct permitd_error *err)
{
    struct redis_tls *t = calloc(1, sizeof(*t));
    const char *at = NULL;
    int rc;

    *out = NULL;
    if (t == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (gnutls_certificate_allocate_credentials(&t->cred) != GNUTLS_E_SUCCESS) {
        free(t);
        return permitd_error_set(err, PERMITD_EINTERNAL, "redis tls: out of memory");
    }
    if (gnutls_priority_init(&t->prio, REDIS_TLS_PRIORITIES, &at) != GNUTLS_E_SUCCESS) {
        gnutls_certificate_free_credentials(t->cred);
        free(t);
        return permitd_error_set(err, PERMITD_EINTERNAL, "redis tls: priority string refused");
    }
    if (cfg->redis_tls_ca_file[0] != '\0')
        rc = gnutls_certificate_set_x509_trust_file(t->cred, cfg->redis_tls_ca_file,
                                                    GNUTLS_X509_FMT_PEM);
    else
        rc = gnutls_certificate_set_x509_system_trust(t->cred);
    if (rc <= 0 && (cfg->redis_tls_ca_file[0] != '\0' || !cfg->redis_tls_insecure_skip_verify)) {
        redis_tls_free(t);
        if (cfg->redis_tls_ca_file[0] != '\0')
            return permitd_error_set(err, PERMITD_EINVAL, "--redis-tls-ca-file "
                                     "(PERMITD_REDIS_TLS_CA_FILE): \"%s\" holds no PEM "
                                     "certificate that can be read (%s)", cfg->redis_tls_ca_file,
                                     rc < 0 ? gnutls_strerror(rc) : "none found");
        return permitd_error_set(err, PERMITD_EINVAL, "rediss: the system's trust store holds "
                                 "no CA (%s): give --redis-tls-ca-file",
                                 rc < 0 ? gnutls_strerror(rc) : "none found");
    }
    if (cfg->redis_tls_cert_file[0] != '\0' &&
        (rc = gnutls_certificate_set_x509_key_file(t->cred, cfg->redis_tls_cert_file,
                                                   cfg->redis_tls_key_file,
                                                   GNUTLS_X509_FMT_PEM)) != GNUTLS_E_SUCCESS) {
        redis_tls_free(t);
        return permitd_error_set(err, PERMITD_EINVAL, "--redis-tls-cert-file "
                                 "(PERMITD_REDIS_TLS_CERT_FILE) \"%s\" with --redis-tls-key-file "
                                 "\"%s\": %s", cfg->redis_tls_cert_file, cfg->redis_tls_key_file,
                                 gnutls_strerror(rc));
    }
    snprintf(t->server_name, sizeof(t->server_name), "%s", cfg->redis_tls_server_name);
    t->skip_verify = cfg->redis_tls_insecure_skip_verify;
    if (t->skip_verify)
        log_msg(LOG_LEVEL_WARN, "REDIS TLS CERTIFICATE VERIFICATION IS OFF",
                "setting=--redis-tls-insecure-skip-verify effect=\"any server on the path to "
                "Redis is accepted: it can read and change every decision\"");
    *out = t;
    return PERMITD_OK;
}

void redis_tls_free(struct redis_tls *t)
{
    if (t == NULL)
        return;
    gnutls_priority_deinit(t->prio);
    gnutls_certificate_free_credentials(t->cred);
    free(t);
}

/* Milliseconds left until deadline_us (at least 0). */
static int left_ms(int64_t deadline_us)
{
    int64_t left = (deadline_us - clock_now_us() + 999) / 1000;
    return left < 0 ? 0 : (left > 3600000 ? 3600000 : (int)left);
}

/* Waits until fd is ready for what GnuTLS asked (gnutls_record_get_direction)
 * or until deadline_us: 1 ready, 0 timed out. */
static int wait_fd(gnutls_session_t s, int fd, int64_t deadline_us)
{
    struct pollfd p = {.fd = fd, .events = gnutls_record_get_direction(s) ? POLLOUT : POLLIN};
    int n;

    do
        n = poll(&p, 1, left_ms(deadline_us));
    while (n < 0 && errno == EINTR);
    return n > 0;
}

/* The reason a verification status's bits name first. */
static enum redis_tls_reason verify_reason(unsigned status)
{
    if (status & GNUTLS_CERT_SIGNER_NOT_FOUND)
        return REDIS_TLS_UNKNOWN_CA;
    if (status & GNUTLS_CERT_UNEXPECTED_OWNER)
        return REDIS_TLS_NAME_MISMATCH;
    if (status & (GNUTLS_CERT_EXPIRED | GNUTLS_CERT_NOT_ACTIVATED))
        return REDIS_TLS_EXPIRED;
    return REDIS_TLS_UNTRUSTED;
}

/* Counts a failure and logs it naming the node and the reason. */
static void failed(struct redis_tls *t, const char *where, enum redis_tls_reason reason,
                   const char *why)
{
    atomic_fetch_add(&t->failures[reason], 1);
    log_msg(LOG_LEVEL_WARN, "redis tls handshake failed", "addr=%s reason=%s error=\"%s\"",
            where, reason_names[reason], why);
}

/* One step of ts's handshake: 0 done, 1 to be called again when the
 * socket is ready (gnutls_record_get_direction), -1 failed: why says so,
 * naming the node and the reason, and the failure is counted. */
static int handshake_step(struct redis_tls_session *ts, char *why, size_t whylen)
{
    enum redis_tls_reason reason = REDIS_TLS_OTHER;
    int rc = gnutls_handshake(ts->s);

    if (rc == GNUTLS_E_SUCCESS)
        return 0;
    if (!gnutls_error_is_fatal(rc))
        return 1;
    if (rc == GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR) {
        unsigned status = gnutls_session_get_verify_cert_status(ts->s);
        gnutls_datum_t text = {NULL, 0};
        reason = verify_reason(status);
        gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &text, 0);
        /* Cut to whylen when it must be (the return value checked, not
         * ignored: what it says is true as far as it goes). */
        if (snprintf(why, whylen, "TLS: the certificate of %.150s is refused (%s, name "
                     "checked: %.120s): %.180s", ts->where, reason_names[reason], ts->name,
                     text.data ? (const char *)text.data : "?") < 0)
            why[0] = '\0';
        gnutls_free(text.data);
    } else if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED) {
        reason = REDIS_TLS_REFUSED;
        if (snprintf(why, whylen, "TLS: %s refused the handshake (alert: %s)", ts->where,
                     gnutls_alert_get_name(gnutls_alert_get(ts->s))) < 0)
            why[0] = '\0';
    } else {
        if (snprintf(why, whylen, "TLS handshake with %s failed: %s", ts->where,
                     gnutls_strerror(rc)) < 0)
            why[0] = '\0';
    }
    failed(ts->tls, ts->where, reason, why);
    return -1;
}

int redis_tls_start(struct redis_tls *t, struct redisContext *ctx, const char *host,
                    const char *where, int timeout_ms, int wait, struct redis_tls_session **out,
                    struct permitd_error *err)
{
    char *why = err->message;
    size_t whylen = sizeof(err->message);
    struct redis_tls_session *ts = calloc(1, sizeof(*ts));
    int64_t deadline_us = clock_now_us() + (int64_t)timeout_ms * 1000;
    unsigned char addr[16];
    int rc, flags;

    *out = NULL;
    if (ts == NULL || gnutls_init(&ts->s, GNUTLS_CLIENT | GNUTLS_NONBLOCK) != GNUTLS_E_SUCCESS) {
        free(ts);
        snprintf(why, whylen, "TLS: out of memory");
        return err->code = PERMITD_EUNAVAILABLE;
    }
    ts->tls = t;
    ts->fd = ctx->fd;
    ts->timeout_ms = timeout_ms;
    snprintf(ts->where, sizeof(ts->where), "%s", where);
    snprintf(ts->name, sizeof(ts->name), "%s", t->server_name[0] ? t->server_name : host);
    flags = fcntl(ctx->fd, F_GETFL);
    if (flags < 0 || fcntl(ctx->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        snprintf(why, whylen, "TLS: cannot make the socket non-blocking: %s", strerror(errno));
        redis_tls_session_free(ts);
        return err->code = PERMITD_EUNAVAILABLE;
    }
    gnutls_priority_set(ts->s, t->prio);
    gnutls_credentials_set(ts->s, GNUTLS_CRD_CERTIFICATE, t->cred);
    /* SNI carries a DNS name only (RFC 6066), never an address. */
    if (inet_pton(AF_INET, ts->name, addr) != 1 && inet_pton(AF_INET6, ts->name, addr) != 1)
        gnutls_server_name_set(ts->s, GNUTLS_NAME_DNS, ts->name, strlen(ts->name));
    if (!t->skip_verify)
        gnutls_session_set_verify_cert(ts->s, ts->name, 0);
    gnutls_transport_set_int(ts->s, ctx->fd);
    gnutls_handshake_set_timeout(ts->s, 0);
    if (!wait) {
        ts->handshaking = 1;    /* driven by the first reads and writes */
        *out = ts;
        return PERMITD_OK;
    }
    while ((rc = handshake_step(ts, why, whylen)) == 1)
        if (!wait_fd(ts->s, ctx->fd, deadline_us)) {
            snprintf(why, whylen, "TLS handshake with %s: no answer within %d ms", where,
                     timeout_ms);
            failed(t, where, REDIS_TLS_TIMEOUT, why);
            redis_tls_session_free(ts);
            return err->code = PERMITD_EUNAVAILABLE;
        }
    if (rc < 0) {
        redis_tls_session_free(ts);
        return err->code = PERMITD_EUNAVAILABLE;
    }
    *out = ts;
    return PERMITD_OK;
}

/* A session started without waiting: its handshake goes on. REDIS_OK when
 * it is done, 1 while it waits for the socket, REDIS_ERR (ctx's error set)
 * when it failed. */
static int drive(redisContext *ctx, struct redis_tls_session *s)
{
    char why[300];
    int rc;

    if (!s->handshaking)
        return REDIS_OK;
    rc = handshake_step(s, why, sizeof(why));
    s->stepped = 1;
    if (rc == 1)
        return 1;
    if (rc < 0) {
        ctx->err = REDIS_ERR_IO;
        snprintf(ctx->errstr, sizeof(ctx->errstr), "%.127s", why);
        errno = ECONNRESET;
        return REDIS_ERR;
    }
    s->handshaking = 0;
    return REDIS_OK;
}

int redis_tls_waits_to_read(const struct redis_tls_session *s)
{
    return s != NULL && s->handshaking && s->stepped && gnutls_record_get_direction(s->s) == 0;
}

void redis_tls_session_free(struct redis_tls_session *s)
{
    if (s == NULL)
        return;
    gnutls_deinit(s->s);
    free(s);
}

void redis_tls_set_timeout(struct redis_tls_session *s, int timeout_ms)
{
    if (s != NULL)
        s->timeout_ms = timeout_ms;
}

/* Sets ctx's error as hiredis's __redisSetError would. */
static void set_error(redisContext *ctx, int type, const char *why)
{
    ctx->err = type;
    snprintf(ctx->errstr, sizeof(ctx->errstr), "%.127s", why);
}

/* A fatal GnuTLS error on a read or write: into ctx; a fatal alert before
 * the first reply is Redis refusing the handshake (TLS 1.3 finishes the
 * client's side before the server checks a client certificate). */
static int tls_failed(redisContext *ctx, struct redis_tls_session *s, ssize_t rc)
{
    if (rc == GNUTLS_E_FATAL_ALERT_RECEIVED) {
        char why[256];
        snprintf(why, sizeof(why), "TLS: %.120s sent a fatal alert: %.60s", s->where,
                 gnutls_alert_get_name(gnutls_alert_get(s->s)));
        if (!s->established)
            failed(s->tls, s->where, REDIS_TLS_REFUSED, why);
        set_error(ctx, REDIS_ERR_IO, why);
        errno = ECONNRESET;
        return REDIS_ERR;
    }
    if (rc == GNUTLS_E_PREMATURE_TERMINATION || rc == 0) {
        set_error(ctx, REDIS_ERR_EOF, "Server closed the connection");
        return REDIS_ERR;
    }
    {
        char why[128];
        snprintf(why, sizeof(why), "TLS: %.120s", gnutls_strerror((int)rc));
        set_error(ctx, REDIS_ERR_IO, why);
    }
    errno = EIO;
    return REDIS_ERR;
}

int redis_io_read(struct redisContext *ctx, struct redis_tls_session *s)
{
    char buf[READ_CHUNK];
    int blocking, got = 0, rc;
    int64_t deadline_us;

    if (s == NULL)
        return redisBufferRead(ctx);
    if (ctx->err)
        return REDIS_ERR;
    if ((rc = drive(ctx, s)) != REDIS_OK)
        return rc == 1 ? REDIS_OK : REDIS_ERR;
    blocking = (ctx->flags & REDIS_BLOCK) != 0;
    deadline_us = clock_now_us() + (int64_t)s->timeout_ms * 1000;
    for (;;) {
        ssize_t n = gnutls_record_recv(s->s, buf, sizeof(buf));
        if (n > 0) {
            got = 1;
            s->established = 1;
            if (redisReaderFeed(ctx->reader, buf, (size_t)n) != REDIS_OK) {
                set_error(ctx, ctx->reader->err, ctx->reader->errstr);
                return REDIS_ERR;
            }
            /* A blocking caller parses what came; anyone takes what GnuTLS
             * holds already; a non-blocking one empties the socket. */
            if (blocking && gnutls_record_check_pending(s->s) == 0)
                return REDIS_OK;
            continue;
        }
        if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
            if (!blocking || got)
                return REDIS_OK;
            if (!wait_fd(s->s, s->fd, deadline_us)) {
                errno = EAGAIN;
                set_error(ctx, REDIS_ERR_IO, strerror(EAGAIN));
                return REDIS_ERR;
            }
            continue;
        }
        if (n == 0 && got)
            return REDIS_OK;    /* the close comes again on the next read */
        return tls_failed(ctx, s, n);
    }
}

ssize_t redis_io_send(struct redisContext *ctx, struct redis_tls_session *s, const char *buf,
                      size_t len)
{
    ssize_t n;

    if (s == NULL) {
        do
            n = write(ctx->fd, buf, len);
        while (n < 0 && errno == EINTR);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            set_error(ctx, REDIS_ERR_IO, strerror(errno));
        return n;
    }
    if ((n = drive(ctx, s)) != REDIS_OK) {
        if (n == 1)
            errno = EAGAIN;
        return -1;
    }
    if (s->send_pending) {
        n = gnutls_record_send(s->s, NULL, 0);
    } else {
        s->send_size = len > READ_CHUNK ? READ_CHUNK : len;
        n = gnutls_record_send(s->s, buf, s->send_size);
    }
    if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) {
        s->send_pending = 1;
        errno = EAGAIN;
        return -1;
    }
    s->send_pending = 0;
    if (n < 0) {
        tls_failed(ctx, s, n);
        return -1;
    }
    return n;
}

/* Sends all of buf on a blocking context, waiting up to its timeout for
 * each part. */
static int send_all(redisContext *ctx, struct redis_tls_session *s, const char *buf, size_t len,
                    size_t *sent)
{
    int64_t deadline_us = clock_now_us() + (int64_t)s->timeout_ms * 1000;

    *sent = 0;
    while (*sent < len) {
        ssize_t n = redis_io_send(ctx, s, buf + *sent, len - *sent);
        if (n > 0) {
            *sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EAGAIN && (ctx->flags & REDIS_BLOCK)) {
            if (wait_fd(s->s, s->fd, deadline_us))
                continue;
            set_error(ctx, REDIS_ERR_IO, strerror(EAGAIN));
            errno = EAGAIN;
            return REDIS_ERR;
        }
        if (n < 0 && errno == EAGAIN)
            return REDIS_OK;
        return REDIS_ERR;
    }
    return REDIS_OK;
}

int redis_io_write(struct redisContext *ctx, struct redis_tls_session *s, int *done)
{
    size_t len, sent = 0;
    int rc;

    if (s == NULL)
        return redisBufferWrite(ctx, done);
    if (ctx->err)
        return REDIS_ERR;
    len = sdslen(ctx->obuf);
    rc = send_all(ctx, s, ctx->obuf, len, &sent);
    if (rc != REDIS_OK)
        return rc;
    if (sent > 0)
        sdsrange(ctx->obuf, (int)sent, -1);
    if (done != NULL)
        *done = sdslen(ctx->obuf) == 0;
    return REDIS_OK;
}

int redis_io_get_reply(struct redisContext *ctx, struct redis_tls_session *s, void **reply)
{
    void *aux = NULL;
    int done = 0;

    if (s == NULL)
        return redisGetReply(ctx, reply);
    if (redisGetReplyFromReader(ctx, &aux) == REDIS_ERR)
        return REDIS_ERR;
    if (aux == NULL && (ctx->flags & REDIS_BLOCK)) {
        do
            if (redis_io_write(ctx, s, &done) == REDIS_ERR)
                return REDIS_ERR;
        while (!done);
        do {
            if (redis_io_read(ctx, s) == REDIS_ERR)
                return REDIS_ERR;
            if (redisGetReplyFromReader(ctx, &aux) == REDIS_ERR)
                return REDIS_ERR;
        } while (aux == NULL);
    }
    if (reply != NULL)
        *reply = aux;
    else
        freeReplyObject(aux);
    return REDIS_OK;
}

void *redis_io_command(struct redisContext *ctx, struct redis_tls_session *s, int argc,
                       const char **argv, const size_t *lens)
{
    void *reply = NULL;

    if (s == NULL)
        return redisCommandArgv(ctx, argc, argv, lens);
    if (redisAppendCommandArgv(ctx, argc, argv, lens) != REDIS_OK)
        return NULL;
    if (redis_io_get_reply(ctx, s, &reply) != REDIS_OK)
        return NULL;
    return reply;
}
