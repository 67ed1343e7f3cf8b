/*
 * grpc_conn.c - the gRPC listener's connections: nghttp2's session
 * callbacks, the connection's bytes (the socket, or TLS over it), the
 * flow-control budget (hold(), grpc_conn_release()), and time: call
 * deadlines, idle-by-progress and shedding (grpc_conn_sweep(),
 * grpc_conn_shed()). grpc.c's opening comment tells the whole listener's
 * story.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <nghttp2/nghttp2.h>

#include "core/clock.h"
#include "core/iplimit.h"
#include "core/log.h"
#include "core/loop.h"
#include "transport/grpc_conn.h"

#define READ_CHUNK 16384
#define READS_PER_EVENT 8          /* fairness: then back to the other connections */
#define SHED_AGE_US 1000000        /* when full, a connection stalled this long may be shed */
#define CLOSING_US 1000000         /* a connection told to go (GOAWAY) is closed this after */
#define BUFFER_MESSAGES 4          /* a connection buffers this many whole messages' bytes */

/* ---- flow control ----
 *
 * nghttp2 gives window back to the client (WINDOW_UPDATE) only for the
 * bytes we say we consumed (NGHTTP2_OPT_NO_AUTO_WINDOW_UPDATE). A
 * request's bytes are consumed as they come while its connection holds at
 * most budget() of them, over all its calls; past it they are held
 * unacknowledged, so the client can send at most the connection's window
 * (64 KiB, never raised) more, however many streams it opens. A call's
 * bytes leave the count when it is answered or its stream closes, and
 * then, under the budget again, the ones waiting are acknowledged. */

/* The request bytes one connection may hold before the window stops. */
static size_t budget(const struct grpc_conn *c)
{
    return BUFFER_MESSAGES * (c->w->s->opts.max_message_bytes + 5);
}

/* len bytes just stored in call's body count against its connection. */
static void hold(struct grpc_conn *c, struct grpc_call *call, size_t len)
{
    call->held += len;
    c->held += len;
    if (c->held <= budget(c)) {
        nghttp2_session_consume(c->session, call->id, len);
    } else {
        call->unacked += len;
        c->unacked += len;
    }
}

/* call's bytes leave its connection's count (it was answered, or its
 * stream is closing: stream_open 0) and its body buffer, when it grew
 * past GRPC_CALL_KEEP_BYTES and no handler reads it, is freed now; when the
 * connection is under its budget again, every call's waiting bytes are
 * acknowledged. */
void grpc_conn_release(struct grpc_call *call, int stream_open)
{
    struct grpc_conn *c = call->conn;

    if (c == NULL || c->session == NULL)
        return;
    c->held -= call->held;
    call->held = 0;
    if (call->unacked > 0) {
        if (stream_open)
            nghttp2_session_consume(c->session, call->id, call->unacked);
        else
            nghttp2_session_consume_connection(c->session, call->unacked);
        c->unacked -= call->unacked;
        call->unacked = 0;
    }
    if (call->body_cap > GRPC_CALL_KEEP_BYTES && (!call->dispatched || call->answered)) {
        free(call->body);       /* the handler may still read it until it answers */
        call->body = NULL;
        call->body_cap = call->body_len = 0;
    }
    if (c->unacked > 0 && c->held <= budget(c)) {
        for (struct grpc_call *o = c->calls; o != NULL; o = o->next) {
            if (o->unacked == 0)
                continue;
            nghttp2_session_consume(c->session, o->id, o->unacked);
            c->unacked -= o->unacked;
            o->unacked = 0;
        }
    }
}

/* ---- nghttp2's callbacks (user_data: the conn) ---- */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct grpc_conn *c = ud;
    struct grpc_call *call;

    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    call = grpc_call_take(c->w);
    if (call == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    call->conn = c;
    call->id = frame->hd.stream_id;
    call->deadline_us = INT64_MAX;
    call->opened_us = c->opened_us = clock_now_us();
    /* The request must be whole in time whatever grpc-timeout says:
     * opening a call is not progress of the connection (active_us). */
    call->request_due_us = INT64_MAX;
    if (c->w->s->opts.request_timeout_s > 0) {
        call->request_due_us = call->opened_us + (int64_t)c->w->s->opts.request_timeout_s * 1000000;
        if (call->request_due_us < c->w->next_due)
            c->w->next_due = call->request_due_us;
    }
    call->next = c->calls;
    if (c->calls != NULL)
        c->calls->prev = call;
    c->calls = call;
    nghttp2_session_set_stream_user_data(session, call->id, call);
    return 0;
}

static int on_header(nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                     void *ud)
{
    struct grpc_conn *c = ud;
    struct grpc_call *call;

    (void)flags;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (call == NULL)
        return 0;
#define IS(s) (namelen == sizeof(s) - 1 && memcmp(name, s, namelen) == 0)
    if (IS(":method")) {
        call->bad_method = !(valuelen == 4 && memcmp(value, "POST", 4) == 0);
    } else if (IS(":path")) {
        if (valuelen >= sizeof(call->path)) {
            call->head_too_big = 1;
        } else {
            memcpy(call->path, value, valuelen);
            call->path[valuelen] = '\0';
        }
    } else if (IS("content-type")) {
        call->bad_type = !(valuelen >= 16 && memcmp(value, "application/grpc", 16) == 0 &&
                           (valuelen == 16 || value[16] == '+' || value[16] == ';'));
    } else if (IS("authorization")) {
        call->authz = NULL;
        if (valuelen > GRPC_CALL_AUTHZ_MAX_LEN) {
            call->head_too_big = 1;
        } else {
            memcpy(call->authz_buf, value, valuelen);
            call->authz_buf[valuelen] = '\0';
            call->authz = call->authz_buf;
        }
    } else if (IS("grpc-timeout")) {
        char v[16];
        int64_t us;
        snprintf(v, sizeof(v), "%.*s", (int)(valuelen < 15 ? valuelen : 15), value);
        if (valuelen >= 15) {
            permitd_error_set(&call->head_err, PERMITD_EINVAL, "grpc-timeout: \"%s...\" is "
                              "longer than 8 digits and a unit", v);
        } else if (grpc_parse_timeout(v, &us, &call->head_err) == PERMITD_OK) {
            int64_t now = clock_now_us();
            call->deadline_us = us > INT64_MAX - now ? INT64_MAX - 1 : now + us;
            if (call->deadline_us < c->w->next_due)
                c->w->next_due = call->deadline_us;
        }
    } else if (IS("grpc-encoding")) {
        if (!(valuelen == 8 && memcmp(value, "identity", 8) == 0))
            permitd_error_set(&call->head_err, PERMITD_EUNIMPLEMENTED,
                              "grpc-encoding: \"%.*s\" is not accepted; send identity "
                              "(uncompressed) messages", (int)(valuelen < 64 ? valuelen : 64),
                              value);
    }
#undef IS
    return 0;
}

static int on_data_chunk(nghttp2_session *session, uint8_t flags, int32_t stream_id,
                         const uint8_t *data, size_t len, void *ud)
{
    struct grpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);
    struct grpc_conn *c = ud;
    size_t max = c->w->s->opts.max_message_bytes + 5;

    (void)flags;
    if (call == NULL || call->answered) {
        /* Dropped: the window is given back at once. */
        nghttp2_session_consume(session, stream_id, len);
        return 0;
    }
    if (call->body_len + len > max) {
        /* Refused now, not once the client has sent it all. */
        call->too_large = 1;
        nghttp2_session_consume(session, stream_id, len);
        GRPC_CALL_FAIL(call, PERMITD_EEXHAUSTED,
                       "the request message is over %zu bytes (the limit)",
                       c->w->s->opts.max_message_bytes);
        return 0;
    }
    if (call->body_len + len > call->body_cap) {
        size_t cap = call->body_cap ? call->body_cap : 256;
        uint8_t *b;
        while (cap < call->body_len + len)
            cap *= 2;
        if (cap > max)
            cap = max;
        /* realloc keeps what came so far; a record reused keeps its
         * buffer, so this runs only for a body bigger than its last. */
        if ((b = realloc(call->body, cap)) == NULL)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        call->body = b;
        call->body_cap = cap;
    }
    memcpy(call->body + call->body_len, data, len);
    call->body_len += len;
    hold(c, call, len);
    /* A prefix announcing more than the limit is refused before the bytes. */
    if (call->body_len >= 5 && call->body_len - len < 5) {
        uint32_t mlen = (uint32_t)call->body[1] << 24 | (uint32_t)call->body[2] << 16 |
                        (uint32_t)call->body[3] << 8 | call->body[4];
        if (mlen > c->w->s->opts.max_message_bytes)
            GRPC_CALL_FAIL(call, PERMITD_EEXHAUSTED,
                           "the message prefix announces %u bytes, over the "
                           "limit of %zu", (unsigned)mlen, c->w->s->opts.max_message_bytes);
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    struct grpc_call *call;

    (void)ud;
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    call = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (call != NULL && !call->dispatched)
        grpc_call_dispatch(call);
    return 0;
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code,
                           void *ud)
{
    struct grpc_call *call = nghttp2_session_get_stream_user_data(session, stream_id);

    (void)error_code;
    (void)ud;
    if (call == NULL)
        return 0;
    nghttp2_session_set_stream_user_data(session, stream_id, NULL);
    grpc_conn_release(call, 0);
    grpc_call_unlink(call);
    if (call->dispatched && !call->answered)
        call->conn = NULL;      /* RST_STREAM: the handler's answer will end it */
    else
        grpc_call_end(call);
    return 0;
}

/* A frame went out. When it ended our side of a stream whose client is
 * still sending (an early answer: a message over the limit, a deadline
 * passed before the request was whole), RST_STREAM NO_ERROR follows, as
 * RFC 9113 section 8.1 lets a server that has sent a complete response do:
 * the client stops sending a body nobody will read, and the stream closes
 * now, not whenever the client ends it. */
static int on_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *ud)
{
    (void)ud;
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
        nghttp2_session_get_stream_remote_close(session, frame->hd.stream_id) == 0)
        nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                  NGHTTP2_NO_ERROR);
    return 0;
}

static nghttp2_session_callbacks *callbacks_new(void)
{
    nghttp2_session_callbacks *cb;

    if (nghttp2_session_callbacks_new(&cb) != 0)
        return NULL;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    return cb;
}

/* ---- connections ---- */

void grpc_conn_mark_dirty(struct grpc_conn *c)
{
    if (c->dirty)
        return;
    c->dirty = 1;
    c->dirty_next = c->w->dirty;
    c->w->dirty = c;
    if (c->w->loop != NULL)
        loop_again(c->w->loop);
}

static int set_epollout(struct grpc_conn *c, int on)
{
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};

    if (c->epollout == on || c->fd < 0)
        return 0;
    c->epollout = on;
    return epoll_ctl(c->w->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* ---- the connection's bytes: the socket itself, or TLS over it ---- */

/* read(2)'s contract over either: > 0 bytes, 0 at the end, -1 with errno
 * (EAGAIN: nothing now). */
static ssize_t io_read(struct grpc_conn *c, void *buf, size_t n)
{
    ssize_t r;

    if (c->tls == NULL)
        return read(c->fd, buf, n);
    r = gnutls_record_recv(c->tls, buf, n);
    if (r >= 0)
        return r;
    errno = r == GNUTLS_E_AGAIN ? EAGAIN : r == GNUTLS_E_INTERRUPTED ? EINTR : EPROTO;
    return -1;
}

/* write(2)'s contract over either. GnuTLS keeps a record it could not send
 * whole and sends it at the next call, which gives the same bytes again
 * (they wait in c->out). */
static ssize_t io_write(struct grpc_conn *c, const void *buf, size_t n)
{
    ssize_t r;

    if (c->tls == NULL)
        return write(c->fd, buf, n);
    r = gnutls_record_send(c->tls, buf, n);
    if (r >= 0)
        return r;
    errno = r == GNUTLS_E_AGAIN ? EAGAIN : r == GNUTLS_E_INTERRUPTED ? EINTR : EPIPE;
    return -1;
}

/* TLS: moves the handshake on. 1 when it is over (ALPN chose h2), 0 while
 * it waits for the socket (EPOLLOUT asked for when it must write), -1 when
 * it failed (the connection closed). */
static int handshake(struct grpc_conn *c)
{
    gnutls_datum_t alpn;
    int rv;

    if (c->tls == NULL || c->handshaken)
        return 1;
    rv = gnutls_handshake(c->tls);
    if (rv == GNUTLS_E_AGAIN || rv == GNUTLS_E_INTERRUPTED) {
        set_epollout(c, gnutls_record_get_direction(c->tls) == 1);
        return 0;
    }
    if (rv < 0 || gnutls_alpn_get_selected_protocol(c->tls, &alpn) != 0 || alpn.size != 2 ||
        memcmp(alpn.data, "h2", 2) != 0) {
        grpc_conn_close(c);
        return -1;
    }
    c->handshaken = 1;
    set_epollout(c, 0);
    return 1;
}

/* Writes what nghttp2 has to send, as far as the socket takes it; the rest
 * waits in c->out for EPOLLOUT. Closes a connection nghttp2 is done with. */
void grpc_conn_send(struct grpc_conn *c)
{
    if (handshake(c) != 1)
        return;
    for (;;) {
        const uint8_t *data;
        ssize_t n, m;

        while (c->out_off < c->out_len) {
            m = io_write(c, c->out + c->out_off, c->out_len - c->out_off);
            if (m < 0 && errno == EINTR)
                continue;
            if (m < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                set_epollout(c, 1);
                return;
            }
            if (m <= 0) {
                grpc_conn_close(c);
                return;
            }
            c->out_off += (size_t)m;
        }
        c->out_off = c->out_len = 0;
        n = nghttp2_session_mem_send(c->session, &data);
        if (n < 0) {
            grpc_conn_close(c);
            return;
        }
        if (n == 0)
            break;
        if (c->fd < 0)
            continue;           /* grpc_feed(): nobody to send to */
        m = io_write(c, data, (size_t)n);
        if (m < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            grpc_conn_close(c);
            return;
        }
        if (m < 0)
            m = 0;
        if (m < n) {
            size_t rest = (size_t)(n - m);
            if (rest > c->out_cap) {
                uint8_t *b = realloc(c->out, rest);
                if (b == NULL) {
                    grpc_conn_close(c);
                    return;
                }
                c->out = b;
                c->out_cap = rest;
            }
            memcpy(c->out, data + m, rest);
            c->out_len = rest;
        }
    }
    set_epollout(c, 0);
    if (!nghttp2_session_want_read(c->session) && !nghttp2_session_want_write(c->session))
        grpc_conn_close(c);
}

static void conn_unlink_worker(struct grpc_conn *c)
{
    struct grpc_worker *w = c->w;

    if (c->prev != NULL)
        c->prev->next = c->next;
    else if (w->conns == c)
        w->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* Closes c's socket at once and frees it at the end of the pass (it may be
 * on the dirty list): its calls still pending are detached, to be freed by
 * their answers. */
void grpc_conn_close(struct grpc_conn *c)
{
    struct grpc_call *call, *next;

    if (c->dead)
        return;
    c->dead = 1;
    for (call = c->calls; call != NULL; call = next) {
        next = call->next;
        call->prev = call->next = NULL;
        if (call->dispatched && !call->answered)
            call->conn = NULL;
        else
            grpc_call_end(call);
    }
    c->calls = NULL;
    nghttp2_session_del(c->session);
    c->session = NULL;
    if (c->tls != NULL)
        gnutls_deinit(c->tls);
    c->tls = NULL;
    if (c->fd >= 0) {
        epoll_ctl(c->w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        close(c->fd);
        atomic_fetch_sub(&c->w->s->nconns, 1);
    }
    if (c->per_ip)
        iplimit_put(c->w->s->perip, (const struct sockaddr *)&c->peer);
    c->per_ip = 0;
    c->fd = -1;
    conn_unlink_worker(c);
    grpc_conn_mark_dirty(c);    /* freed by flush */
}

void grpc_conn_free(struct grpc_conn *c)
{
    free(c->out);
    free(c);
}

/* A new connection's session, with its SETTINGS queued. */
struct grpc_conn *grpc_conn_add(struct grpc_worker *w, int fd)
{
    nghttp2_session_callbacks *cb = callbacks_new();
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, (uint32_t)w->s->opts.max_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384},
    };
    struct grpc_conn *c = calloc(1, sizeof(*c));
    nghttp2_option *opt = NULL;

    if (c == NULL || cb == NULL || nghttp2_option_new(&opt) != 0)
        goto fail;
    c->w = w;
    c->fd = fd;
    c->active_us = clock_now_us();
    /* Streams over max_streams are refused (REFUSED_STREAM) even before
     * the client has acknowledged our SETTINGS: nghttp2 holds incoming
     * streams to the value it has sent. The window is ours to give back
     * (hold(), grpc_conn_release()). */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    if (nghttp2_session_server_new2(&c->session, cb, c, opt) != 0)
        goto fail;
    if (nghttp2_submit_settings(c->session, NGHTTP2_FLAG_NONE, settings, 2) != 0)
        goto fail;
    if (w->s->cred != NULL && fd >= 0) {
        /* gRPC over TLS is HTTP/2 chosen by ALPN: a client that offers
         * ALPN without h2 fails the handshake (GNUTLS_ALPN_MANDATORY). */
        gnutls_datum_t h2 = {(unsigned char *)"h2", 2};
        if (gnutls_init(&c->tls, GNUTLS_SERVER | GNUTLS_NONBLOCK) != GNUTLS_E_SUCCESS ||
            gnutls_priority_set(c->tls, w->s->prio) != GNUTLS_E_SUCCESS ||
            gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, w->s->cred) !=
                GNUTLS_E_SUCCESS ||
            gnutls_alpn_set_protocols(c->tls, &h2, 1, GNUTLS_ALPN_MANDATORY) != GNUTLS_E_SUCCESS)
            goto fail;
        gnutls_transport_set_int(c->tls, fd);
    }
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    c->next = w->conns;
    if (w->conns != NULL)
        w->conns->prev = c;
    w->conns = c;
    return c;
fail:
    if (c != NULL && c->session != NULL)
        nghttp2_session_del(c->session);
    if (c != NULL && c->tls != NULL)
        gnutls_deinit(c->tls);
    free(c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_option_del(opt);
    return NULL;
}

/* Bytes from the client: nghttp2 parses them (and calls grpc_call_dispatch()). */
void grpc_conn_read(struct grpc_conn *c)
{
    uint8_t buf[READ_CHUNK];

    if (handshake(c) != 1)
        return;
    for (int i = 0; i < READS_PER_EVENT && !c->dead; i++) {
        ssize_t n = io_read(c, buf, sizeof(buf)), rv;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            grpc_conn_close(c);
            return;
        }
        rv = nghttp2_session_mem_recv(c->session, buf, (size_t)n);
        if (rv < 0) {
            /* A frame that breaks HTTP/2: nghttp2 queued a GOAWAY naming
             * the error; send it, then close. */
            nghttp2_session_terminate_session(c->session, NGHTTP2_PROTOCOL_ERROR);
            break;
        }
        /* TLS may hold whole records already read off the socket, for
         * which epoll will not wake us: read on while it does. */
        if ((size_t)n < sizeof(buf) && (c->tls == NULL || gnutls_record_check_pending(c->tls) == 0))
            break;
    }
    if (!c->dead)
        grpc_conn_mark_dirty(c);
}

/* 1 when one of c's calls is with the handler: the connection is at work,
 * whatever its client does or does not send. */
static int conn_busy(const struct grpc_conn *c)
{
    for (const struct grpc_call *call = c->calls; call != NULL; call = call->next)
        if (call->dispatched && !call->answered)
            return 1;
    return 0;
}

/* What grpc_conn_shed() may close: 2, a connection without a call that has served
 * one or is a second old (a new one is likely a caller a moment from
 * sending, as http_conn.c spares a young head); 1, one whose calls make no
 * progress (none whole nor answered for SHED_AGE_US, none opened in that
 * time); 0, any other, and never one with a call at the handler. */
static int shed_rank(const struct grpc_conn *c, int64_t now)
{
    if (c->dead || conn_busy(c))
        return 0;
    if (c->calls == NULL)
        return c->served || now - c->active_us >= SHED_AGE_US ? 2 : 0;
    return now - c->active_us >= SHED_AGE_US && now - c->opened_us >= SHED_AGE_US;
}

/* The listener is full: closes one of w's connections to make room for
 * the next caller, as http_conn_shed() does: of the highest
 * shed_rank(), the one without progress the longest. 1 when one was
 * closed. */
int grpc_conn_shed(struct grpc_worker *w, int64_t now)
{
    struct grpc_conn *best = NULL;
    int best_rank = 0;

    for (struct grpc_conn *c = w->conns; c != NULL; c = c->next) {
        int rank = shed_rank(c, now);
        if (rank > best_rank || (rank > 0 && rank == best_rank && c->active_us < best->active_us)) {
            best = c;
            best_rank = rank;
        }
    }
    if (best == NULL)
        return 0;
    atomic_fetch_add_explicit(best_rank == 2 ? &w->s->shed_idle : &w->s->shed_stalled, 1,
                              memory_order_relaxed);
    /* A GOAWAY if the socket takes it now; the slot is needed at once. */
    nghttp2_session_terminate_session(best->session, NGHTTP2_NO_ERROR);
    grpc_conn_send(best);
    grpc_conn_close(best);
    return 1;
}

/* Calls whose request is not whole by their deadline (grpc-timeout's, or
 * --grpc-request-timeout after their HEADERS, whichever comes first) are
 * answered deadline_exceeded, their stream reset after it and their bytes
 * let go (those handed over are the handler's: the limiter answers at the
 * deadline). A connection without progress for the idle timeout, and no
 * call with the handler, is told to go (GOAWAY; calls whose requests are
 * still coming may finish for CLOSING_US), then closed. When the listener
 * is full, one connection of the worker is shed, so the next caller finds
 * room (its accept may have landed on another worker). */
void grpc_conn_sweep(struct grpc_worker *w, int64_t now)
{
    int64_t idle = (int64_t)w->s->opts.idle_timeout_s * 1000000, due = now + GRPC_CONN_SWEEP_US;
    struct grpc_conn *c, *next;

    for (c = w->conns; c != NULL; c = next) {
        next = c->next;
        for (struct grpc_call *call = c->calls; call != NULL; call = call->next) {
            if (call->dispatched || call->answered)
                continue;
            if (call->deadline_us <= now) {
                GRPC_CALL_FAIL(call, PERMITD_EDEADLINE,
                               "grpc-timeout passed before the request was whole");
            } else if (call->request_due_us <= now) {
                GRPC_CALL_FAIL(call, PERMITD_EDEADLINE,
                               "the request was not whole %d s after its headers "
                               "(--grpc-request-timeout)", w->s->opts.request_timeout_s);
            } else {
                if (call->deadline_us < due)
                    due = call->deadline_us;
                if (call->request_due_us < due)
                    due = call->request_due_us;
            }
        }
        if (conn_busy(c))
            continue;
        if (c->closing_us != 0 && now - c->closing_us >= CLOSING_US) {
            grpc_conn_close(c);
        } else if (c->closing_us == 0 && idle > 0 && now - c->active_us > idle) {
            c->closing_us = now;
            nghttp2_submit_goaway(c->session, NGHTTP2_FLAG_NONE,
                                  nghttp2_session_get_last_proc_stream_id(c->session),
                                  NGHTTP2_NO_ERROR, NULL, 0);
            grpc_conn_mark_dirty(c);
        }
    }
    if (atomic_load(&w->s->nconns) >= (unsigned)w->s->opts.max_connections)
        grpc_conn_shed(w, now);
    w->next_due = due;
}
