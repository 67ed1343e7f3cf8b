/*
 * http_conn.c - the HTTP listener's connection deadlines, phases and
 * shedding.
 *
 * A new connection starts in HTTP_PHASE_HEAD with libmicrohttpd's idle timer set
 * to first_byte_timeout_s (a silent socket is closed by libmicrohttpd
 * then), and its head must be whole within header_timeout_s of the accept,
 * however steadily its bytes trickle in. Once the access handler is first
 * called for a request its head is whole: HTTP_PHASE_BODY, and the idle timer
 * goes back to connection_timeout_s; the whole request, body included,
 * must then be read within request_timeout_s of its start (the accept for
 * a connection's first request, else the moment its head was whole), or
 * the connection is closed: a body trickling in a byte at a time holds a
 * slot no longer than a head may. Once the request is read (handed to the
 * handler, or refused) it is HTTP_PHASE_BUSY: its answer is bounded by the
 * handler's own deadlines. When the request completes the
 * connection is HTTP_PHASE_IDLE; libmicrohttpd closes it after
 * connection_timeout_s of silence. The start of a keep-alive request is
 * not visible (libmicrohttpd 0.9.75 calls nothing before the whole head),
 * so an idle connection still open connection_timeout_s +
 * header_timeout_s after its last answer (a head trickling in) is closed
 * too. Closing means shutdown(): libmicrohttpd sees the end of the stream
 * on its next run and closes the connection itself, with the usual
 * notifications.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "transport/http_conn.h"

#define HTTP_SHED_AGE_US 1000000 /* when full, a request awaited this long may be shed */

void http_conn_unlink(struct http_worker *w, struct http_conn *c)
{
    struct http_conn_list *l = &w->phases[c->phase];

    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        l->head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        l->tail = c->prev;
    c->prev = c->next = NULL;
    atomic_fetch_sub_explicit(&w->count[c->phase], 1, memory_order_relaxed);
}

/* Puts c in the list of phase, which it enters at now (HTTP_PHASE_BODY: at
 * the start of its request), after every entry that is not later: the
 * lists stay in order of since_us. Entries come nearly in order (a
 * request's start is at most header_timeout_s before its head was whole),
 * so the walk back from the tail is short. */
void http_conn_append(struct http_worker *w, struct http_conn *c, int phase, int64_t now)
{
    struct http_conn_list *l = &w->phases[phase];
    struct http_conn *after = l->tail;

    while (after != NULL && after->since_us > now)
        after = after->prev;
    c->phase = phase;
    c->since_us = now;
    c->prev = after;
    c->next = after != NULL ? after->next : l->head;
    if (c->next != NULL)
        c->next->prev = c;
    else
        l->tail = c;
    if (after != NULL)
        after->next = c;
    else
        l->head = c;
    atomic_fetch_add_explicit(&w->count[phase], 1, memory_order_relaxed);
}

void http_conn_move(struct http_worker *w, struct http_conn *c, int phase, int64_t now)
{
    if (c->phase == HTTP_PHASE_CLOSING)
        return;                 /* on its way out already */
    http_conn_unlink(w, c);
    http_conn_append(w, c, phase, now);
}

/* Our record of conn, or NULL (none was free; it goes untracked). */
struct http_conn *http_conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return ci != NULL ? ci->socket_context : NULL;
}

/* Shuts c's socket down; libmicrohttpd closes it on its next run. */
void http_conn_close(struct http_worker *w, struct http_conn *c, int64_t now)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c->mhd, MHD_CONNECTION_INFO_CONNECTION_FD);

    if (ci != NULL)
        shutdown(ci->connect_fd, SHUT_RDWR);
    http_conn_move(w, c, HTTP_PHASE_CLOSING, now);
}

/* Every slot of the worker taken by a connection that is not on its way out. */
static int conn_full(const struct http_worker *w)
{
    unsigned open = 0;

    for (int p = 0; p < HTTP_PHASE_CLOSING; p++)
        open += atomic_load_explicit(&w->count[p], memory_order_relaxed);
    return open >= w->limit;
}

/* Of the oldest connection awaiting its head and the oldest awaiting its
 * body, the one whose request began first (NULL: neither). */
static struct http_conn *oldest_unread(const struct http_worker *w)
{
    struct http_conn *head = w->phases[HTTP_PHASE_HEAD].head;
    struct http_conn *body = w->phases[HTTP_PHASE_BODY].head;

    if (head == NULL || (body != NULL && body->since_us < head->since_us))
        return body;
    return head;
}

/* When the worker is full, closes one connection to make room for the
 * next caller: the oldest idle keep-alive one, else the one whose request
 * (head or body) has been awaited longest, once that is HTTP_SHED_AGE_US
 * (younger ones are likely callers a moment from sending). Returns 1 when
 * it closed one. */
int http_conn_shed(struct http_worker *w, int64_t now)
{
    struct http_conn *c;

    if (!conn_full(w))
        return 0;
    if ((c = w->phases[HTTP_PHASE_IDLE].head) != NULL) {
        http_conn_close(w, c, now);
        atomic_fetch_add_explicit(&w->s->shed_idle, 1, memory_order_relaxed);
        return 1;
    }
    if ((c = oldest_unread(w)) != NULL && now - c->since_us >= HTTP_SHED_AGE_US) {
        atomic_fetch_add_explicit(c->phase == HTTP_PHASE_HEAD ? &w->s->shed_head : &w->s->shed_body,
                                  1, memory_order_relaxed);
        http_conn_close(w, c, now);
        return 1;
    }
    return 0;
}

static int64_t header_us(const struct http_server *s)
{
    return (int64_t)s->opts.header_timeout_s * 1000000;
}

static int64_t request_us(const struct http_server *s)
{
    return (int64_t)s->opts.request_timeout_s * 1000000;
}

static int64_t idle_cap_us(const struct http_server *s)
{
    return ((int64_t)s->opts.connection_timeout_s + s->opts.header_timeout_s) * 1000000;
}

/* When the loop must next call http_conn_sweep(): INT64_MAX for never. */
int64_t http_conn_due(const struct http_worker *w)
{
    const struct http_conn *head = w->phases[HTTP_PHASE_HEAD].head;
    const struct http_conn *idle = w->phases[HTTP_PHASE_IDLE].head;
    const struct http_conn *body = w->phases[HTTP_PHASE_BODY].head, *unread;
    int64_t due = INT64_MAX;

    if (head != NULL)
        due = head->since_us + header_us(w->s);
    if (body != NULL && body->since_us + request_us(w->s) < due)
        due = body->since_us + request_us(w->s);
    if (idle != NULL && idle->since_us + idle_cap_us(w->s) < due)
        due = idle->since_us + idle_cap_us(w->s);
    if (head == NULL && body == NULL && idle == NULL)
        return due;
    if (conn_full(w)) {
        if (idle != NULL)
            return 0;
        unread = oldest_unread(w);
        if (unread->since_us + HTTP_SHED_AGE_US < due)
            due = unread->since_us + HTTP_SHED_AGE_US;
    }
    return due;
}

/* Closes the connections past their deadline, then makes room if full. */
void http_conn_sweep(struct http_worker *w, int64_t now)
{
    struct http_conn *c;

    while ((c = w->phases[HTTP_PHASE_HEAD].head) != NULL && now >= c->since_us + header_us(w->s)) {
        http_conn_close(w, c, now);
        atomic_fetch_add_explicit(&w->s->header_timeouts, 1, memory_order_relaxed);
    }
    while ((c = w->phases[HTTP_PHASE_BODY].head) != NULL && now >= c->since_us + request_us(w->s)) {
        http_conn_close(w, c, now);
        atomic_fetch_add_explicit(&w->s->request_timeouts, 1, memory_order_relaxed);
    }
    while ((c = w->phases[HTTP_PHASE_IDLE].head) != NULL &&
           now >= c->since_us + idle_cap_us(w->s)) {
        http_conn_close(w, c, now);
        atomic_fetch_add_explicit(&w->s->header_timeouts, 1, memory_order_relaxed);
    }
    http_conn_shed(w, now);
}
