/*
 * verifier.c - argon2id checks on a small pool of threads, a bounded queue
 * in front of them, and the way back to the loop that asked.
 *
 * The idea: argon2 is the one piece of admin work whose cost is set on
 * purpose to be high, so it is the one piece that must not run on the
 * admin listener's thread (one event loop, http.c), and whose total must
 * be capped. A check is a job: submitted on a loop thread, queued under
 * one mutex (admin traffic is light), run by a verifier thread, then put
 * on the inbox of the loop that asked, whose eventfd wakes that loop; the
 * inbox is a source of that loop (loop.h), made for it when its worker
 * starts (verifier_inbox_new()), and its ready() calls each job's done() there, where the deferred
 * request it belongs to may be resumed. A job that finds `queue` jobs
 * waiting is refused at once: the answer to a flood is a quick
 * resource_exhausted, never a longer wait for everyone.
 *
 * Passwords are copied into the job and wiped once checked.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "control/auth.h"
#include "core/loop.h"
#include "control/verifier.h"

/* One check, from submission to done(). */
struct job {
    struct job *next;
    struct verifier_inbox *inbox;        /* whose loop done() runs on */
    char hash[AUTH_HASH_MAX];   /* "" = auth_dummy_hash() */
    char *password;             /* owned; wiped and freed once checked */
    size_t password_len;
    int match;
    verifier_done_fn done;
    void *ud;
};

/* The way back to one loop thread: its finished jobs and the eventfd that
 * wakes it. Lists and counts are under the verifier's lock. */
struct verifier_inbox {
    struct verifier *v;
    int efd;
    struct job *head, *tail;    /* checked, done() not yet run */
    int outstanding;            /* submitted here, done() not yet run */
    int closed;                 /* its loop has ended */
};

struct verifier {
    pthread_mutex_t lock;
    pthread_cond_t work;
    struct job *head, *tail;    /* waiting for a thread */
    unsigned waiting, busy;
    unsigned queue_max;
    int stopping;
    atomic_uint_fast64_t checked, refused;
    int nthreads;
    pthread_t threads[];
};

static void job_free(struct job *j)
{
    if (j == NULL)
        return;
    if (j->password != NULL) {
        explicit_bzero(j->password, j->password_len);
        free(j->password);
    }
    explicit_bzero(j->hash, sizeof(j->hash));
    free(j);
}

static void inbox_free(struct verifier_inbox *ib)
{
    close(ib->efd);
    free(ib);
}

/* Called with v->lock held: hands j to its inbox and wakes that loop
 * (under the lock, so the inbox cannot be freed meanwhile). A closed
 * inbox (its loop ended with the check still out, which http.c does not
 * let happen) drops the job and, with the last one, itself. */
static void deliver(struct job *j)
{
    struct verifier_inbox *ib = j->inbox;

    if (ib->closed) {
        job_free(j);
        if (--ib->outstanding == 0)
            inbox_free(ib);
        return;
    }
    j->next = NULL;
    if (ib->tail != NULL)
        ib->tail->next = j;
    else
        ib->head = j;
    ib->tail = j;
    eventfd_write(ib->efd, 1);
}

static void *verifier_main(void *arg)
{
    struct verifier *v = arg;

    pthread_mutex_lock(&v->lock);
    for (;;) {
        struct job *j;

        while (v->head == NULL && !v->stopping)
            pthread_cond_wait(&v->work, &v->lock);
        if ((j = v->head) == NULL)
            break;                  /* stopping, and nothing left */
        v->head = j->next;
        if (v->head == NULL)
            v->tail = NULL;
        v->waiting--;
        v->busy++;
        pthread_mutex_unlock(&v->lock);

        j->match = auth_verify_password(j->hash[0] ? j->hash : auth_dummy_hash(), j->password);
        explicit_bzero(j->password, j->password_len);
        atomic_fetch_add_explicit(&v->checked, 1, memory_order_relaxed);

        pthread_mutex_lock(&v->lock);
        v->busy--;
        deliver(j);
    }
    pthread_mutex_unlock(&v->lock);
    return NULL;
}

int verifier_new(int workers, int queue, struct verifier **out, struct permitd_error *err)
{
    struct verifier *v;
    int rc;

    *out = NULL;
    if (workers < 1 || queue < 0)
        return permitd_error_set(err, PERMITD_EINVAL,
                                 "password verifier: %d threads and a queue of %d (need >= 1 "
                                 "and >= 0)", workers, queue);
    v = calloc(1, sizeof(*v) + (size_t)workers * sizeof(pthread_t));
    if (v == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    v->queue_max = (unsigned)queue;
    pthread_mutex_init(&v->lock, NULL);
    pthread_cond_init(&v->work, NULL);
    for (; v->nthreads < workers; v->nthreads++) {
        if ((rc = pthread_create(&v->threads[v->nthreads], NULL, verifier_main, v)) != 0) {
            permitd_error_set(err, PERMITD_EINTERNAL,
                              "password verifier: starting thread %d of %d: %s",
                              v->nthreads + 1, workers, strerror(rc));
            verifier_free(v);
            return err->code;
        }
    }
    *out = v;
    return PERMITD_OK;
}

void verifier_free(struct verifier *v)
{
    if (v == NULL)
        return;
    pthread_mutex_lock(&v->lock);
    v->stopping = 1;
    pthread_cond_broadcast(&v->work);
    pthread_mutex_unlock(&v->lock);
    for (int i = 0; i < v->nthreads; i++)
        pthread_join(v->threads[i], NULL);
    pthread_cond_destroy(&v->work);
    pthread_mutex_destroy(&v->lock);
    free(v);
}

/* ---- the inbox: a source of the asking thread's loop ---- */

static void inbox_want(void *ud, struct loop_want *want)
{
    struct verifier_inbox *ib = ud;

    want->fd = ib->efd;
    want->events = EPOLLIN;
    want->at_us = INT64_MAX;
    want->generation = 0;       /* the same eventfd for the inbox's life */
}

/* Runs the done() of every job checked so far, on the loop's thread. */
static void inbox_ready(void *ud, uint32_t revents)
{
    struct verifier_inbox *ib = ud;
    struct verifier *v = ib->v;
    struct job *list;
    eventfd_t n;

    (void)revents;
    eventfd_read(ib->efd, &n);
    pthread_mutex_lock(&v->lock);
    list = ib->head;
    ib->head = ib->tail = NULL;
    for (struct job *j = list; j != NULL; j = j->next)
        ib->outstanding--;
    pthread_mutex_unlock(&v->lock);
    while (list != NULL) {
        struct job *j = list;
        list = j->next;
        j->done(j->ud, j->match);
        job_free(j);
    }
}

static void inbox_flush(void *ud, int woke)
{
    (void)ud;
    (void)woke;
}

/* The loop has ended: its deferred requests are all answered, so no job
 * should be out; one that is frees the inbox when it comes back. */
static void inbox_close(void *ud)
{
    struct verifier_inbox *ib = ud;
    struct verifier *v = ib->v;
    int last;

    pthread_mutex_lock(&v->lock);
    while (ib->head != NULL) {
        struct job *j = ib->head;
        ib->head = j->next;
        ib->outstanding--;
        job_free(j);
    }
    ib->tail = NULL;
    ib->closed = 1;
    last = ib->outstanding == 0;
    pthread_mutex_unlock(&v->lock);
    if (last)
        inbox_free(ib);
}

int verifier_inbox_new(struct verifier *v, struct loop *loop, struct verifier_inbox **out,
                       struct permitd_error *err)
{
    struct verifier_inbox *ib;
    struct loop_source src = {NULL, inbox_want, inbox_ready, inbox_flush, inbox_close};
    int rc;

    *out = NULL;
    if ((ib = calloc(1, sizeof(*ib))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "password verifier: out of memory");
    ib->v = v;
    ib->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (ib->efd < 0) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "password verifier: eventfd: %s",
                               strerror(errno));
        free(ib);
        return rc;
    }
    src.ud = ib;
    if ((rc = loop_attach(loop, &src, err)) != PERMITD_OK) {
        inbox_free(ib);
        return rc;
    }
    *out = ib;
    return PERMITD_OK;
}

int verifier_submit(struct verifier *v, struct verifier_inbox *ib, const char *encoded,
                    const char *password, verifier_done_fn done, void *ud,
                    struct permitd_error *err)
{
    struct job *j;

    if (ib == NULL) {
        /* No loop to answer on (a caller outside any worker): check in place. */
        int match = auth_verify_password(encoded ? encoded : auth_dummy_hash(), password);
        atomic_fetch_add_explicit(&v->checked, 1, memory_order_relaxed);
        done(ud, match);
        return PERMITD_OK;
    }
    if (encoded != NULL && strlen(encoded) >= AUTH_HASH_MAX)
        encoded = "";           /* not a hash auth.c made: never matches */
    if ((j = calloc(1, sizeof(*j))) == NULL ||
        (j->password = strdup(password)) == NULL) {
        free(j);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    j->password_len = strlen(password);
    if (encoded != NULL)
        snprintf(j->hash, sizeof(j->hash), "%s", encoded[0] ? encoded : "-");
    j->inbox = ib;
    j->done = done;
    j->ud = ud;
    pthread_mutex_lock(&v->lock);
    /* Every thread busy and the queue full (a job just queued for an
     * idle thread that has not woken yet counts as that thread's). */
    if (v->busy + v->waiting >= (unsigned)v->nthreads + v->queue_max) {
        unsigned busy = v->busy, waiting = v->waiting;
        pthread_mutex_unlock(&v->lock);
        job_free(j);
        atomic_fetch_add_explicit(&v->refused, 1, memory_order_relaxed);
        return permitd_error_set(err, PERMITD_EEXHAUSTED,
                                 "too many logins are being checked at once (%u checking, %u "
                                 "waiting); try again in a few seconds",
                                 busy, waiting);
    }
    if (v->tail != NULL)
        v->tail->next = j;
    else
        v->head = j;
    v->tail = j;
    v->waiting++;
    ib->outstanding++;
    pthread_cond_signal(&v->work);
    pthread_mutex_unlock(&v->lock);
    return PERMITD_OK;
}

void verifier_load(struct verifier *v, struct verifier_load *out)
{
    pthread_mutex_lock(&v->lock);
    out->workers = (unsigned)v->nthreads;
    out->queue = v->queue_max;
    out->busy = v->busy;
    out->waiting = v->waiting;
    pthread_mutex_unlock(&v->lock);
    out->checked = atomic_load_explicit(&v->checked, memory_order_relaxed);
    out->refused = atomic_load_explicit(&v->refused, memory_order_relaxed);
}
