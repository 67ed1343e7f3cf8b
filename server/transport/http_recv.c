/*
 * http_recv.c - the bytes libmicrohttpd reads, through framing.c first.
 *
 * libmicrohttpd 0.9.75 has no hook between its socket and its parser, and
 * reads plain sockets with recv() (through the PLT, like every libc call
 * of a shared library). http_recv() is that recv(): the executable's
 * definition comes first in the dynamic linker's search, so it is the one
 * libmicrohttpd calls. For a socket that is not a framed connection of the
 * calling worker (another thread, hiredis, a TLS listener) it is recvfrom()
 * and nothing more: one thread-local read and one table look-up. For a
 * framed connection, what it read goes through framing_read() before
 * libmicrohttpd sees it; on a failure libmicrohttpd gets the requests
 * before the failing one, then the end of the stream, after
 * http_recv_answer() has sent the refusal.
 *
 * A TLS listener's recv() reads ciphertext (GnuTLS's own pull function
 * calls it), so there http_recv() only reads. libmicrohttpd reads a TLS
 * connection's bytes with gnutls_record_recv(), through the PLT too:
 * http_recv_tls() is that function, GnuTLS's own found with
 * dlsym(RTLD_NEXT), and what it decrypted goes through framing_read() as
 * a plain connection's bytes do; the refusal is sent with
 * gnutls_record_send() and a close_notify. Every other caller (Redis over
 * TLS, redis_tls.c) gets GnuTLS's function and nothing more: its session
 * is not a framed connection's of the calling worker.
 */
#define _GNU_SOURCE                 /* RTLD_NEXT */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <gnutls/gnutls.h>
#include <microhttpd.h>

#include "core/clock.h"
#include "core/log.h"
#include "transport/framing.h"
#include "transport/http_recv.h"

/* Sends c's refusal (the request its framing failed on) on its socket:
 * the listener's error body with the status framing_read() chose, and
 * Connection: close. What the client has sent meanwhile is read and
 * dropped (closing a socket with unread bytes would reset the connection,
 * and the answer with it). The caller closes the connection. */
void http_recv_answer(struct http_worker *w, struct http_conn *c)
{
    struct http_server *s = w->s;
    struct http_response resp;
    struct permitd_error err;
    struct msghdr msg;
    struct iovec iov[2];
    char head[2048], sink[4096];
    size_t keep, n = 0;
    int status = 400;

    framing_read(&c->framing, &s->framing, NULL, 0, &keep, &status, &err);
    http_response_init(&resp);
    if (s->opts.refuse != NULL) {
        s->opts.refuse(&resp, &err);
    } else {
        resp.content_type = "text/plain; charset=utf-8";
        resp.body = err.message;
        resp.body_len = strlen(err.message);
    }
    resp.status = status;
    n += (size_t)snprintf(head, sizeof(head), "HTTP/1.1 %d %s\r\nConnection: close\r\n", status,
                          MHD_get_reason_phrase_for((unsigned)status));
    if (resp.content_type != NULL && n < sizeof(head))
        n += (size_t)snprintf(head + n, sizeof(head) - n, "Content-Type: %s\r\n",
                              resp.content_type);
    for (int i = 0; i < resp.nheaders && n < sizeof(head); i++)
        n += (size_t)snprintf(head + n, sizeof(head) - n, "%s: %s\r\n", resp.headers[i].name,
                              resp.headers[i].value);
    if (n < sizeof(head))
        n += (size_t)snprintf(head + n, sizeof(head) - n, "Content-Length: %zu\r\n\r\n",
                              resp.body_len);
    if (n < sizeof(head) && c->tls != NULL) {
        /* One record when it fits (a Connect error does), then the
         * close_notify: the client reads the answer, then the end. */
        char *all = malloc(n + resp.body_len);
        if (all != NULL) {
            memcpy(all, head, n);
            memcpy(all + n, resp.body, resp.body_len);
            for (size_t off = 0; off < n + resp.body_len;) {
                ssize_t sent = gnutls_record_send(c->tls, all + off, n + resp.body_len - off);
                if (sent <= 0)
                    break;
                off += (size_t)sent;
            }
            free(all);
        }
        gnutls_bye(c->tls, GNUTLS_SHUT_WR);
    } else if (n < sizeof(head)) {
        iov[0] = (struct iovec){head, n};
        iov[1] = (struct iovec){resp.body, resp.body_len};
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = iov;
        msg.msg_iovlen = 2;
        /* A fresh socket's buffer takes a few hundred bytes whole: nothing
         * else is being sent on it (see http_recv()). */
        sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    for (int i = 0; i < 256 && recvfrom(c->fd, sink, sizeof(sink), MSG_DONTWAIT, NULL, NULL) > 0;
         i++)
        ;
    if (s->opts.access_log)
        log_msg(LOG_LEVEL_INFO, "request", "listener=%s method=- path=- status=%d bytes=%zu "
                "refused=framing", s->name, status, resp.body_len);
    if (resp.body_owned)
        free(resp.body);
    atomic_fetch_add_explicit(&s->refused, 1, memory_order_relaxed);
}

ssize_t http_recv(int fd, void *buf, size_t len, int flags)
{
    struct http_worker *w = http_current_worker;
    struct permitd_error err;
    struct http_conn *c;
    size_t keep;
    ssize_t n;
    int status;

    if (w == NULL || w->tls || fd < 0 || (size_t)fd >= w->nfds || (c = w->by_fd[fd]) == NULL)
        return recvfrom(fd, buf, len, flags, NULL, NULL);
    if (c->phase == HTTP_PHASE_CLOSING && c->framing.fail)
        return 0;               /* refused: the end of the stream for libmicrohttpd */
    if (!c->framing.fail) {
        n = recvfrom(fd, buf, len, flags, NULL, NULL);
        if (n <= 0 || framing_read(&c->framing, &w->s->framing, buf, (size_t)n, &keep, &status,
                                   &err) == PERMITD_OK)
            return n;
        if (keep > 0)
            return (ssize_t)keep;   /* the requests before it first */
    }
    if (c->answered != c->framing.requests) {
        /* Requests before it are still to be answered: the refusal
         * follows the last one's answer (on_completed()). */
        errno = EAGAIN;
        return -1;
    }
    http_recv_answer(w, c);
    http_conn_move(w, c, HTTP_PHASE_CLOSING, clock_now_us());
    return 0;
}

/* GnuTLS's gnutls_record_recv(), found once (dlsym is thread-safe, and
 * every thread finds the same function). */
typedef ssize_t (*record_recv_fn)(gnutls_session_t, void *, size_t);
static record_recv_fn real_record_recv;
static pthread_once_t real_record_recv_once = PTHREAD_ONCE_INIT;

static void find_record_recv(void)
{
    real_record_recv = (record_recv_fn)dlsym(RTLD_NEXT, "gnutls_record_recv");
}

ssize_t http_recv_tls(void *session, void *data, size_t size)
{
    struct http_worker *w = http_current_worker;
    struct permitd_error err;
    struct http_conn *c = NULL;
    size_t keep;
    ssize_t n;
    int status, fd;

    pthread_once(&real_record_recv_once, find_record_recv);
    if (real_record_recv == NULL)
        return GNUTLS_E_INTERNAL_ERROR;     /* no GnuTLS: no session to read either */
    if (w != NULL && w->tls && (fd = gnutls_transport_get_int(session)) >= 0 &&
        (size_t)fd < w->nfds && (c = w->by_fd[fd]) != NULL && c->tls == NULL)
        c->tls = session;                   /* its first read after the handshake */
    if (c == NULL || c->tls != session)
        return real_record_recv(session, data, size);
    if (c->phase == HTTP_PHASE_CLOSING && c->framing.fail)
        return 0;
    if (!c->framing.fail) {
        n = real_record_recv(session, data, size);
        if (n <= 0 || framing_read(&c->framing, &w->s->framing, data, (size_t)n, &keep, &status,
                                   &err) == PERMITD_OK)
            return n;
        if (keep > 0)
            return (ssize_t)keep;
    }
    if (c->answered != c->framing.requests)
        return GNUTLS_E_AGAIN;              /* the refusal follows their answers */
    http_recv_answer(w, c);
    http_conn_move(w, c, HTTP_PHASE_CLOSING, clock_now_us());
    return 0;
}
