/*
 * pool.c - a queue under one mutex, a few threads, and an inbox per loop
 * through which finished jobs go back (pool.h).
 *
 * Written once for the admin listener's two pools, which were copies of
 * each other (its RPCs', admin.c; argon2's, verifier.c): a job is
 * queued under the pool's lock, run by a pool thread, then put on the
 * inbox of the loop that asked, whose eventfd wakes that loop; the inbox's
 * ready() calls done() there. Admin traffic is light, so one mutex for the
 * queue and the inboxes is enough, and it is also what keeps an inbox
 * alive while a thread delivers to it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/loop.h"
#include "core/pool.h"

/* The way back to one loop thread: its finished jobs and the eventfd that
 * wakes it. Lists and counts are under the pool's lock. */
struct pool_inbox {
    struct pool *p;
    int efd;
    struct pool_job *head, *tail;   /* run, done() not yet called */
    int outstanding;                /* submitted here, done() not yet called */
    int closed;                     /* its loop has ended */
};

struct pool {
    pthread_mutex_t lock;
    pthread_cond_t work;
    struct pool_job *head, *tail;   /* waiting for a thread */
    unsigned waiting, busy, queue_max;
    int stopping;
    const char *name;
    int nthreads;
    pthread_t threads[];
};

static void inbox_free(struct pool_inbox *ib)
{
    close(ib->efd);
    free(ib);
}

/* Appends j to the list head..tail (the pool's queue, or an inbox). */
static void push(struct pool_job **head, struct pool_job **tail, struct pool_job *j)
{
    j->next = NULL;
    if (*tail != NULL)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
}

static void drop(struct pool_job *j)
{
    if (j->drop != NULL)
        j->drop(j);
}

/* With the pool's lock held: hands j to its inbox and wakes that loop
 * (under the lock, so the inbox cannot be freed meanwhile). A closed inbox
 * drops the job and, with the last one, itself. */
static void deliver(struct pool_job *j)
{
    struct pool_inbox *ib = j->inbox;

    if (ib->closed) {
        drop(j);
        if (--ib->outstanding == 0)
            inbox_free(ib);
        return;
    }
    push(&ib->head, &ib->tail, j);
    eventfd_write(ib->efd, 1);
}

static void *pool_main(void *arg)
{
    struct pool *p = arg;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        struct pool_job *j;

        while (p->head == NULL && !p->stopping)
            pthread_cond_wait(&p->work, &p->lock);
        if ((j = p->head) == NULL)
            break;                  /* stopping, and nothing left */
        p->head = j->next;
        if (p->head == NULL)
            p->tail = NULL;
        p->waiting--;
        p->busy++;
        pthread_mutex_unlock(&p->lock);
        j->run(j);
        pthread_mutex_lock(&p->lock);
        p->busy--;
        deliver(j);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

int pool_new(int workers, int queue, const char *name, struct pool **out,
             struct permitd_error *err)
{
    struct pool *p;
    int rc;

    *out = NULL;
    if (workers < 1 || queue < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "%s: %d threads and a queue of %d (need "
                                 ">= 1 and >= 0)", name, workers, queue);
    if ((p = calloc(1, sizeof(*p) + (size_t)workers * sizeof(pthread_t))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    p->queue_max = (unsigned)queue;
    p->name = name;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    for (; p->nthreads < workers; p->nthreads++) {
        if ((rc = pthread_create(&p->threads[p->nthreads], NULL, pool_main, p)) != 0) {
            permitd_error_set(err, PERMITD_EINTERNAL, "%s: starting thread %d of %d: %s", name,
                              p->nthreads + 1, workers, strerror(rc));
            pool_free(p);
            return err->code;
        }
    }
    *out = p;
    return PERMITD_OK;
}

void pool_free(struct pool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* ---- the inbox: a source of the asking thread's loop ---- */

static void inbox_want(void *ud, struct loop_want *want)
{
    struct pool_inbox *ib = ud;

    want->fd = ib->efd;
    want->events = EPOLLIN;
    want->at_us = INT64_MAX;
    want->generation = 0;           /* the same eventfd for the inbox's life */
}

/* Calls the done() of every job run so far, on the loop's thread. */
static void inbox_ready(void *ud, uint32_t revents)
{
    struct pool_inbox *ib = ud;
    struct pool_job *list;
    eventfd_t n;

    (void)revents;
    eventfd_read(ib->efd, &n);
    pthread_mutex_lock(&ib->p->lock);
    list = ib->head;
    ib->head = ib->tail = NULL;
    for (struct pool_job *j = list; j != NULL; j = j->next)
        ib->outstanding--;
    pthread_mutex_unlock(&ib->p->lock);
    while (list != NULL) {
        struct pool_job *j = list;
        list = j->next;             /* done() may free j */
        j->done(j);
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
    struct pool_inbox *ib = ud;
    int last;

    pthread_mutex_lock(&ib->p->lock);
    while (ib->head != NULL) {
        struct pool_job *j = ib->head;
        ib->head = j->next;
        ib->outstanding--;
        drop(j);
    }
    ib->tail = NULL;
    ib->closed = 1;
    last = ib->outstanding == 0;
    pthread_mutex_unlock(&ib->p->lock);
    if (last)
        inbox_free(ib);
}

int pool_inbox_new(struct pool *p, struct loop *loop, struct pool_inbox **out,
                   struct permitd_error *err)
{
    struct pool_inbox *ib;
    struct loop_source src = {NULL, inbox_want, inbox_ready, inbox_flush, inbox_close};
    int rc;

    *out = NULL;
    if ((ib = calloc(1, sizeof(*ib))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "%s: out of memory", p->name);
    ib->p = p;
    if ((ib->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "%s: eventfd: %s", p->name,
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

int pool_submit(struct pool *p, struct pool_inbox *ib, struct pool_job *j,
                struct pool_load *seen)
{
    pthread_mutex_lock(&p->lock);
    if (p->busy + p->waiting >= (unsigned)p->nthreads + p->queue_max) {
        if (seen != NULL)
            *seen = (struct pool_load){(unsigned)p->nthreads, p->queue_max, p->busy,
                                       p->waiting};
        pthread_mutex_unlock(&p->lock);
        return PERMITD_EEXHAUSTED;
    }
    j->inbox = ib;
    push(&p->head, &p->tail, j);
    p->waiting++;
    ib->outstanding++;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->lock);
    return PERMITD_OK;
}

void pool_load(struct pool *p, struct pool_load *out)
{
    pthread_mutex_lock(&p->lock);
    *out = (struct pool_load){(unsigned)p->nthreads, p->queue_max, p->busy, p->waiting};
    pthread_mutex_unlock(&p->lock);
}
