/*
 * grpc.c - the gRPC listener: HTTP/2 (libnghttp2) sessions on worker event
 * loops, and the gRPC framing of unary calls (issue 25).
 *
 * `threads` workers share one listening socket (each waits on it with
 * EPOLLEXCLUSIVE, so one wakes per connection). A worker's connections and
 * the listening socket sit in an epoll set of its own, whose fd is one
 * source of the worker's loop (loop.h); the handler's per-worker work (a
 * limiter queue) is another source of the same loop, attached after it.
 * So one turn reads every connection that has bytes, nghttp2 parses them,
 * each call whose request is whole goes to the handler, the handler queues
 * its decision, the queue's flush sends the pass's decisions to Redis
 * together, and the answers, handed back on this thread, are written out
 * by this source's flush in the pass after (loop_again()).
 *
 * A call (struct grpc_call) is one HTTP/2 stream. It lives until both its
 * stream has closed and, once handed to the handler, the handler has
 * answered: a client that resets the stream (RST_STREAM), or a connection
 * that closes, while a decision is pending leaves the call detached
 * (conn NULL), and the answer, when it comes, frees it unsent.
 * A finished call's record goes back to its worker (at most CALL_SPARE_MAX
 * wait there) with its buffers: the request body, the reply, and the
 * call's storage that grpc_call_alloc() bumps from (core/arena.h), where
 * the handler keeps its pending record, the decoded request and the
 * answer's arrays. A warmed-up call allocates nothing of permitd's own;
 * what does not fit in the storage comes from malloc, chained to the call
 * and freed with it (tests/e2e/grpc-allocs.test.mjs counts).
 *
 * The framing (https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md):
 * a request is HEADERS (:method POST, :path /pkg.Service/Method,
 * content-type application/grpc[+proto], optional grpc-timeout) then DATA
 * holding one length-prefixed message (1 byte compressed flag, 4 bytes
 * big-endian length); the answer is HEADERS (:status 200), DATA with one
 * message and trailers (grpc-status 0), or, for an error, "Trailers-Only":
 * one HEADERS frame with grpc-status and grpc-message, ending the stream.
 * An answer sent before the client has ended its side (a message over the
 * limit, a deadline passed) is followed by RST_STREAM NO_ERROR, so the
 * client stops sending (on_frame_send()).
 * Every refusal names the bad value: a length prefix that does not match
 * the bytes sent, a message over the limit, a compressed message, a bad
 * grpc-timeout. Limits: SETTINGS_MAX_CONCURRENT_STREAMS per connection,
 * a connection count over all workers, a count per client address (the
 * listener's own table, core/iplimit.c, as each HTTP listener has), the
 * message size, the request bytes a connection holds (flow control:
 * hold(), grpc_conn_release()), and time (issue 42): a call's request must
 * be whole request_timeout_s after its HEADERS whatever grpc-timeout says,
 * and a connection is idle when it makes no progress (a request whole, an
 * answer), not when it has no call, so stalled calls hold nothing for
 * ever (grpc_conn_sweep()).
 *
 * A connection over the count is given the slot of one of its worker's
 * connections that is idle or stalled (grpc_conn_shed(), the policy of
 * http_conn_shed()); when there is none, and for one over the count per
 * address, it is closed at accept, counted by reason, and logged at most
 * once a second (a client hammering a full listener must not flood the
 * log). A connection gives its slots back in grpc_conn_close(), the one
 * way every connection ends: a client's close, a protocol error, a failed
 * TLS handshake, the idle sweep, a shed, the drain at stop.
 *
 * The files: grpc.c is the listener (the listening socket, accept and its
 * refusals, the workers and their loop source, start and stop, the
 * fuzzer's door); grpc_call.c the calls (records, the call API, answers);
 * grpc_conn.c the connections (nghttp2's session callbacks, the bytes,
 * the flow-control budget, deadlines and shedding). grpc_call.h and
 * grpc_conn.h are theirs alone: grpc.h is the listener's door.
 */
#define _GNU_SOURCE 1   /* accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <nghttp2/nghttp2.h>

#include "transport/grpc.h"
#include "transport/grpc_conn.h"
#include "core/arena.h"
#include "core/clock.h"
#include "core/iplimit.h"
#include "core/log.h"
#include "core/loop.h"

#define REFUSAL_LOG_US 1000000     /* refused connections are logged at most this often */

/* A connection refused at accept: counted under its reason, and logged
 * when no refusal was logged in the last second (with the count so far). */
static void refused(struct grpc_server *s, const struct sockaddr_storage *peer, int per_ip)
{
    int64_t now = clock_now_us(), last = atomic_load(&s->refusal_logged_us);
    uint64_t full = per_ip ? atomic_load(&s->refused_full)
                           : atomic_fetch_add(&s->refused_full, 1) + 1;
    uint64_t ip = per_ip ? atomic_fetch_add(&s->refused_per_ip, 1) + 1
                         : atomic_load(&s->refused_per_ip);
    char addr[INET6_ADDRSTRLEN] = "?";

    if (now - last < REFUSAL_LOG_US ||
        !atomic_compare_exchange_strong(&s->refusal_logged_us, &last, now))
        return;
    if (peer->ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)peer)->sin6_addr, addr, sizeof(addr));
    else if (peer->ss_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)peer)->sin_addr, addr, sizeof(addr));
    if (per_ip)
        log_msg(LOG_LEVEL_WARN, "connection refused: its address has --max-connections-per-ip "
                "open", "listener=%s addr=%s limit=%d refused_per_ip_total=%llu", s->opts.name,
                addr, s->opts.max_connections_per_ip, (unsigned long long)ip);
    else
        log_msg(LOG_LEVEL_WARN, "connection refused: --max-connections open",
                "listener=%s addr=%s limit=%d refused_full_total=%llu", s->opts.name, addr,
                s->opts.max_connections, (unsigned long long)full);
}

/* A connection slot for an accepted one: from the count, else by shedding
 * one of w's connections. 1 when taken. */
static int slot_take(struct grpc_worker *w)
{
    struct grpc_server *s = w->s;

    if (atomic_fetch_add(&s->nconns, 1) < (unsigned)s->opts.max_connections)
        return 1;
    atomic_fetch_sub(&s->nconns, 1);
    if (!grpc_conn_shed(w, clock_now_us()))
        return 0;
    if (atomic_fetch_add(&s->nconns, 1) < (unsigned)s->opts.max_connections)
        return 1;
    atomic_fetch_sub(&s->nconns, 1);
    return 0;
}

/* Takes the connections waiting. One from an address with
 * --max-connections-per-ip open is closed at once; one over
 * --max-connections takes the slot of a connection grpc_conn_shed(), or is closed
 * at once when there is none. */
static void accept_all(struct grpc_worker *w)
{
    struct grpc_server *s = w->s;

    for (int i = 0; i < 64; i++) {
        struct sockaddr_storage peer;
        socklen_t peerlen = sizeof(peer);
        int fd = accept4(s->listen_fd, (struct sockaddr *)&peer, &peerlen,
                         SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1, rc;
        struct epoll_event ev;
        struct grpc_conn *c;

        if (fd < 0)
            return;
        if (atomic_load(&s->stopping)) {
            close(fd);
            continue;
        }
        /* The address's count first: a connection refused for it sheds
         * nobody. */
        if ((rc = iplimit_take(s->perip, (struct sockaddr *)&peer)) != PERMITD_OK) {
            close(fd);          /* --max-connections-per-ip, or out of memory */
            if (rc == PERMITD_EEXHAUSTED)
                refused(s, &peer, 1);
            continue;
        }
        if (!slot_take(w)) {
            iplimit_put(s->perip, (struct sockaddr *)&peer);
            close(fd);          /* full: --max-connections, nothing to shed */
            refused(s, &peer, 0);
            continue;
        }
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if ((c = grpc_conn_add(w, fd)) == NULL) {
            atomic_fetch_sub(&s->nconns, 1);
            iplimit_put(s->perip, (struct sockaddr *)&peer);
            close(fd);
            continue;
        }
        c->peer = peer;
        c->per_ip = 1;          /* given back by grpc_conn_close() */
        ev.events = EPOLLIN;
        ev.data.ptr = c;
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            grpc_conn_close(c);
            continue;
        }
        grpc_conn_mark_dirty(c); /* our SETTINGS */
    }
}

/* ---- the worker's loop source ---- */

static void src_want(void *ud, struct loop_want *want)
{
    struct grpc_worker *w = ud;

    want->fd = w->epfd;
    want->events = EPOLLIN;
    want->at_us = w->next_due;
    want->generation = 1;
}

static void src_ready(void *ud, uint32_t revents)
{
    struct grpc_worker *w = ud;
    struct epoll_event evs[64];
    int64_t now;
    int n;

    if (revents != 0) {
        n = epoll_wait(w->epfd, evs, 64, 0);
        for (int i = 0; i < n; i++) {
            struct grpc_conn *c = evs[i].data.ptr;
            if (c == NULL) {
                accept_all(w);
                continue;
            }
            if (c->dead)
                continue;
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                grpc_conn_read(c);
            if (!c->dead && (evs[i].events & EPOLLOUT))
                grpc_conn_mark_dirty(c);
        }
    }
    now = clock_now_us();
    if (now >= w->next_due)
        grpc_conn_sweep(w, now);
}

static void src_flush(void *ud, int woke)
{
    struct grpc_worker *w = ud;
    struct grpc_conn *c;

    (void)woke;
    while ((c = w->dirty) != NULL) {
        w->dirty = c->dirty_next;
        c->dirty = 0;
        if (!c->dead)
            grpc_conn_send(c);
        if (c->dead && !c->dirty)
            grpc_conn_free(c);
    }
}

static void close_all(struct grpc_worker *w)
{
    while (w->conns != NULL)
        grpc_conn_close(w->conns);
    src_flush(w, 0);
}

static void src_close(void *ud)
{
    close_all(ud);
}

/* Calls handed to the handler and not answered yet, over the worker. */
static int pending_calls(const struct grpc_worker *w)
{
    for (const struct grpc_conn *c = w->conns; c != NULL; c = c->next)
        for (const struct grpc_call *call = c->calls; call != NULL; call = call->next)
            if (!call->answered)
                return 1;
    return 0;
}

static void *worker_main(void *arg)
{
    struct grpc_worker *w = arg;
    struct grpc_server *s = w->s;

    while (!atomic_load(&s->stopping))
        loop_turn(w->loop);
    /* Drain: no new connections, GOAWAY to each, calls in flight finish. */
    epoll_ctl(w->epfd, EPOLL_CTL_DEL, s->listen_fd, NULL);
    for (struct grpc_conn *c = w->conns; c != NULL; c = c->next) {
        nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->session),
                              NGHTTP2_NO_ERROR, NULL, 0);
        grpc_conn_mark_dirty(c);
    }
    src_flush(w, 0);
    w->drain_until = clock_now_us() + (int64_t)s->grace_ms * 1000;
    while (pending_calls(w) && clock_now_us() < w->drain_until) {
        if (w->next_due > w->drain_until)
            w->next_due = w->drain_until;
        loop_turn(w->loop);
    }
    close_all(w);
    loop_close(w->loop);
    return NULL;
}

/* ---- the listening socket ---- */

static int open_listener(const struct grpc_options *o, int *port_out, struct permitd_error *err)
{
    struct addrinfo hints = {0}, *res = NULL;
    char port[16];
    const char *host = o->host != NULL && o->host[0] != '\0' ? o->host : NULL;
    int fd = -1, one = 1, rc;

    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(port, sizeof(port), "%d", o->port);
    if ((rc = getaddrinfo(host, port, &hints, &res)) != 0)
        return permitd_error_set(err, PERMITD_EINVAL, "%s listener: cannot resolve \"%s\": %s",
                                 o->name, host ? host : "", gai_strerror(rc));
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        rc = errno;
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return permitd_error_set(err, PERMITD_EUNAVAILABLE, "%s listener: cannot listen on "
                                 "%s:%d: %s", o->name, host ? host : "*", o->port, strerror(rc));
    }
    freeaddrinfo(res);
    {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        getsockname(fd, (struct sockaddr *)&ss, &sl);
        *port_out = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    }
    return fd;
}

/* The certificate, key and priorities of a TLS listener, from PEM text. */
static int tls_setup(struct grpc_server *s, struct permitd_error *err)
{
    gnutls_datum_t cert = {(unsigned char *)s->opts.tls_cert_pem,
                           (unsigned)strlen(s->opts.tls_cert_pem)};
    gnutls_datum_t key = {(unsigned char *)s->opts.tls_key_pem,
                          (unsigned)strlen(s->opts.tls_key_pem)};
    const char *where = NULL;
    int rv;

    if ((rv = gnutls_certificate_allocate_credentials(&s->cred)) != GNUTLS_E_SUCCESS)
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s listener: TLS: %s", s->opts.name,
                                 gnutls_strerror(rv));
    rv = gnutls_certificate_set_x509_key_mem(s->cred, &cert, &key, GNUTLS_X509_FMT_PEM);
    if (rv < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "%s listener: the certificate or key "
                                 "(--grpc-tls-cert, --grpc-tls-key) was refused: %s",
                                 s->opts.name, gnutls_strerror(rv));
    rv = s->opts.tls_priorities != NULL && s->opts.tls_priorities[0] != '\0'
             ? gnutls_priority_init(&s->prio, s->opts.tls_priorities, &where)
             : gnutls_priority_init(&s->prio, NULL, NULL);
    if (rv != GNUTLS_E_SUCCESS)
        return permitd_error_set(err, PERMITD_EINVAL, "%s listener: TLS priorities refused at "
                                 "\"%.60s\": %s", s->opts.name, where ? where : "",
                                 gnutls_strerror(rv));
    return PERMITD_OK;
}

int grpc_server_start(const struct grpc_options *opts, grpc_handler_fn fn, void *ud,
                      struct grpc_server **out, struct permitd_error *err)
{
    int n = opts->threads > 0 ? opts->threads : 1, rc;
    struct grpc_server *s = calloc(1, sizeof(*s) + (size_t)n * sizeof(struct grpc_worker));

    *out = NULL;
    if (s == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    s->opts = *opts;
    s->listen_fd = -1;
    s->nworkers = n;
    for (int i = 0; i < n; i++)
        s->workers[i].epfd = -1;
    if ((rc = iplimit_new(opts->max_connections_per_ip, &s->perip, err)) != PERMITD_OK) {
        grpc_server_stop(s, 0);
        return rc;
    }
    if (opts->tls_cert_pem != NULL && (rc = tls_setup(s, err)) != PERMITD_OK) {
        grpc_server_stop(s, 0);
        return rc;
    }
    s->fn = fn;
    s->ud = ud;
    if ((s->listen_fd = open_listener(opts, &s->port, err)) < 0) {
        rc = s->listen_fd;
        s->listen_fd = -1;
        grpc_server_stop(s, 0);
        return rc;
    }
    for (int i = 0; i < n; i++) {
        struct grpc_worker *w = &s->workers[i];
        struct epoll_event ev = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.ptr = NULL};
        struct loop_source src = {w, src_want, src_ready, src_flush, src_close};
        w->s = s;
        w->next_due = clock_now_us() + GRPC_CONN_SWEEP_US;
        if ((w->epfd = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
            epoll_ctl(w->epfd, EPOLL_CTL_ADD, s->listen_fd, &ev) != 0) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "%s listener: epoll: %s", opts->name,
                                   strerror(errno));
            goto fail;
        }
        if ((rc = loop_new(&w->loop, err)) != PERMITD_OK ||
            (rc = loop_attach(w->loop, &src, err)) != PERMITD_OK)
            goto fail;
        if (opts->worker_open != NULL) {
            if ((rc = opts->worker_open(ud, w->loop, &w->ctx, err)) != PERMITD_OK)
                goto fail;
            w->opened = 1;
        }
    }
    for (int i = 0; i < n; i++) {
        if (pthread_create(&s->workers[i].thread, NULL, worker_main, &s->workers[i]) != 0) {
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "%s listener: cannot start a "
                                   "thread", opts->name);
            goto fail;
        }
        s->workers[i].started = 1;
    }
    *out = s;
    return PERMITD_OK;
fail:
    grpc_server_stop(s, 0);
    return rc;
}

int grpc_server_port(const struct grpc_server *s)
{
    return s->port;
}

unsigned grpc_server_connections(const struct grpc_server *s)
{
    return atomic_load(&((struct grpc_server *)s)->nconns);
}

void grpc_server_load(const struct grpc_server *s, struct grpc_server_load *out)
{
    struct grpc_server *m = (struct grpc_server *)s;    /* atomics only */

    memset(out, 0, sizeof(*out));
    out->open = atomic_load(&m->nconns);
    out->limit = (unsigned)s->opts.max_connections;
    out->per_ip_limit = (unsigned)s->opts.max_connections_per_ip;
    out->refused_full = atomic_load(&m->refused_full);
    out->refused_per_ip = atomic_load(&m->refused_per_ip);
    out->shed_idle = atomic_load(&m->shed_idle);
    out->shed_stalled = atomic_load(&m->shed_stalled);
}

void grpc_server_stop(struct grpc_server *s, int grace_ms)
{
    if (s == NULL)
        return;
    s->grace_ms = grace_ms;
    atomic_store(&s->stopping, 1);
    for (int i = 0; i < s->nworkers; i++)
        if (s->workers[i].started)
            loop_wake(s->workers[i].loop);
    for (int i = 0; i < s->nworkers; i++) {
        struct grpc_worker *w = &s->workers[i];
        if (w->started)
            pthread_join(w->thread, NULL);
        else if (w->loop != NULL)
            loop_close(w->loop);
        if (w->opened && s->opts.worker_close != NULL)
            s->opts.worker_close(s->ud, w->ctx);  /* may answer detached calls */
        grpc_call_spare_free(w);
        loop_free(w->loop);
        if (w->epfd >= 0)
            close(w->epfd);
    }
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->prio != NULL)
        gnutls_priority_deinit(s->prio);
    if (s->cred != NULL)
        gnutls_certificate_free_credentials(s->cred);
    iplimit_free(s->perip);     /* after the workers: their closes put back into it */
    free(s);
}

/* ---- the fuzzer's door ---- */

struct feed_count {
    grpc_handler_fn fn;
    void *ud;
    int calls;
};

static void feed_handler(void *ud, struct grpc_call *call)
{
    struct feed_count *fc = ud;

    fc->calls++;
    fc->fn(fc->ud, call);
}

int grpc_feed(const struct grpc_options *opts, grpc_handler_fn fn, void *ud,
              const uint8_t *data, size_t len)
{
    struct grpc_server s = {0};
    struct grpc_worker w = {0};
    struct feed_count fc = {fn, ud, 0};
    struct grpc_conn *c;

    s.opts = *opts;
    s.fn = feed_handler;
    s.ud = &fc;
    s.listen_fd = -1;
    w.s = &s;
    w.epfd = -1;
    w.next_due = INT64_MAX;
    if ((c = grpc_conn_add(&w, -1)) == NULL)
        return 0;
    /* c leaves w.conns when it closes, and the flush may free it then. */
    while (len > 0 && w.conns == c) {
        size_t n = len < 4096 ? len : 4096;
        if (nghttp2_session_mem_recv(c->session, data, n) < 0)
            break;
        data += n;
        len -= n;
        grpc_conn_mark_dirty(c);
        src_flush(&w, 0);
    }
    close_all(&w);
    grpc_call_spare_free(&w);
    return fc.calls;
}
