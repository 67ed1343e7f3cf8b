/*
 * http_conn.h - what the files of the HTTP listener share: its workers, its
 * connection records and their phases, and the connection deadlines
 * (http_conn.c). Internal to the listener (http.c, http_conn.c,
 * http_recv.c): the layers above include http.h, never this.
 *
 * libmicrohttpd's types are only named here (pointers), so this header
 * does not include microhttpd.h: only the listener's .c files see it.
 */
#ifndef PERMITD_HTTP_CONN_H
#define PERMITD_HTTP_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/framing.h"
#include "transport/http.h"

struct MHD_Connection;
struct MHD_Daemon;
struct iplimit;
struct loop;

/* What a connection is doing; each phase is one list per worker. */
enum http_conn_phase {
    HTTP_PHASE_HEAD,    /* awaiting a whole request head: deadline header_timeout_s */
    HTTP_PHASE_BODY,    /* head read, awaiting the body: deadline request_timeout_s */
    HTTP_PHASE_BUSY,    /* a request read, answered or being answered: no deadline here */
    HTTP_PHASE_IDLE,    /* keep-alive between requests: the first to go when full */
    HTTP_PHASE_CLOSING, /* shut down by us; libmicrohttpd has yet to close it */
    HTTP_PHASES
};

/* One open connection (libmicrohttpd's socket_context), in the list of its
 * phase, which is ordered by since_us. */
struct http_conn {
    struct http_conn *prev, *next;
    struct MHD_Connection *mhd;
    int64_t since_us;           /* when it entered its phase; HTTP_PHASE_BODY: the request began */
    int phase;
    int first;                  /* its first request head is not whole yet */
    int fd;                     /* its socket, when its bytes go through framing (else -1) */
    uint32_t answered;          /* its requests libmicrohttpd has completed */
    struct framing framing;     /* its byte stream as read so far (http_recv()) */
    void *tls;                  /* its GnuTLS session on a TLS listener (libmicrohttpd's), else
                                 * NULL: then framing reads what http_recv_tls() decrypts */
};

struct http_conn_list {
    struct http_conn *head, *tail;
};

/* One worker thread: its daemon and its event loop (loop.c), where the
 * daemon is the first source. Everything in it is touched by that thread
 * only, save loop_wake(), quiesced and the counts. */
struct http_worker {
    struct http_server *s;
    struct MHD_Daemon *daemon;
    pthread_t thread;
    int started;
    int listen_fd;              /* its own listening socket (SO_REUSEPORT) */
    struct loop *loop;
    void *ctx;                  /* opts.worker_open's, for the handler */
    int opened;                 /* worker_open succeeded: worker_close frees ctx */
    int mhd_fd;                 /* libmicrohttpd's own epoll fd */
    int deferred;               /* deferred and not yet answered (or their client gone) */
    int waiting;                /* of those, the ones whose answer has not come */
    int answers;                /* answers come since libmicrohttpd last ran */
    int moved;                  /* its last run did more than ask the waiting ones */
    atomic_int quiesced;        /* no longer accepting */
    struct http_request *spare;   /* finished requests, for the next ones */
    int nspare;
    /* Connection records: `limit` of them, made at start. */
    struct http_conn *conns;
    struct http_conn *free_conns;
    struct http_conn_list phases[HTTP_PHASES];
    unsigned limit;             /* libmicrohttpd's connection limit for this worker */
    struct http_conn **by_fd;   /* the records of framed connections, by socket */
    int tls;                    /* a TLS listener's: framed by http_recv_tls(), not http_recv() */
    size_t nfds;
    int closed;                 /* connections closed since libmicrohttpd last ran */
    atomic_uint count[HTTP_PHASES]; /* connections per phase, read by http_server_load() */
};

struct http_server {
    int port;
    http_handler_fn fn;
    void *ud;
    struct http_options opts;
    char name[32];
    atomic_int in_flight;       /* requests begun and not yet completed */
    atomic_int stopping;
    int64_t stop_until_us;      /* grace for requests in flight, once stopping */
    struct iplimit *perip;      /* connections per client address, shared by the workers */
    struct framing_limits framing;
    atomic_uint_fast64_t header_timeouts, shed_idle, shed_head, refused, refused_per_ip;
    atomic_uint_fast64_t request_timeouts, shed_body;
    _Atomic int64_t refusal_logged_us;  /* when a per-address refusal was last logged */
    int nworkers;
    struct http_worker workers[];
};


/* The worker whose thread this is (NULL on any other thread); set by
 * worker_main() in http.c. */
extern _Thread_local struct http_worker *http_current_worker;

/* The connection deadlines, phases and shedding (http_conn.c); all on c's
 * worker's thread. */
void http_conn_unlink(struct http_worker *w, struct http_conn *c);
void http_conn_append(struct http_worker *w, struct http_conn *c, int phase, int64_t now);
void http_conn_move(struct http_worker *w, struct http_conn *c, int phase, int64_t now);
struct http_conn *http_conn_of(struct MHD_Connection *conn);
void http_conn_close(struct http_worker *w, struct http_conn *c, int64_t now);
int http_conn_shed(struct http_worker *w, int64_t now);
int64_t http_conn_due(const struct http_worker *w);
void http_conn_sweep(struct http_worker *w, int64_t now);

#endif
