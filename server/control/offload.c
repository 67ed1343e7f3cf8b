/*
 * offload.c - the admin RPCs' thread pool: a queue under one mutex, a few
 * threads, and an inbox per loop through which finished jobs go back.
 *
 * The shape is verifier.c's (a job submitted on a loop thread, run by a
 * pool thread, handed to the inbox of the loop that asked, whose eventfd
 * wakes it; the inbox's ready() runs done() there), for any work: admin
 * traffic is light, so one mutex for the queue and the inboxes is enough.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "control/offload.h"
#include "core/loop.h"

struct job {
    struct job *next;
    struct offload_inbox *inbox;
    void (*run)(void *ud);
    void (*done)(void *ud);
    void *ud;
};

/* Lists and counts are under the pool's lock. */
struct offload_inbox {
    struct offload *o;
    int efd;
    struct job *head, *tail;    /* run, done() not yet called */
    int outstanding;            /* submitted here, done() not yet called */
    int closed;                 /* its loop has ended */
};

struct offload {
    pthread_mutex_t lock;
    pthread_cond_t work;
    struct job *head, *tail;    /* waiting for a thread */
    unsigned waiting, busy, queue_max;
    int stopping;
    int nthreads;
    pthread_t threads[];
};

static void inbox_free(struct offload_inbox *ib)
{
    close(ib->efd);
    free(ib);
}

/* With o->lock held: hands j to its inbox and wakes that loop. A closed
 * inbox (its loop ended with the job out, which http.c does not let
 * happen) drops the job and, with the last one, itself. */
static void deliver(struct job *j)
{
    struct offload_inbox *ib = j->inbox;

    if (ib->closed) {
        free(j);
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

static void *offload_main(void *arg)
{
    struct offload *o = arg;

    pthread_mutex_lock(&o->lock);
    for (;;) {
        struct job *j;

        while (o->head == NULL && !o->stopping)
            pthread_cond_wait(&o->work, &o->lock);
        if ((j = o->head) == NULL)
            break;
        o->head = j->next;
        if (o->head == NULL)
            o->tail = NULL;
        o->waiting--;
        o->busy++;
        pthread_mutex_unlock(&o->lock);
        j->run(j->ud);
        pthread_mutex_lock(&o->lock);
        o->busy--;
        deliver(j);
    }
    pthread_mutex_unlock(&o->lock);
    return NULL;
}

int offload_new(int workers, int queue, struct offload **out, struct permitd_error *err)
{
    struct offload *o;
    int rc;

    *out = NULL;
    if (workers < 1 || queue < 0)
        return permitd_error_set(err, PERMITD_EINVAL, "admin rpc pool: %d threads and a queue "
                                 "of %d (need >= 1 and >= 0)", workers, queue);
    if ((o = calloc(1, sizeof(*o) + (size_t)workers * sizeof(pthread_t))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    o->queue_max = (unsigned)queue;
    pthread_mutex_init(&o->lock, NULL);
    pthread_cond_init(&o->work, NULL);
    for (; o->nthreads < workers; o->nthreads++) {
        if ((rc = pthread_create(&o->threads[o->nthreads], NULL, offload_main, o)) != 0) {
            permitd_error_set(err, PERMITD_EINTERNAL, "admin rpc pool: starting thread %d of "
                              "%d: %s", o->nthreads + 1, workers, strerror(rc));
            offload_free(o);
            return err->code;
        }
    }
    *out = o;
    return PERMITD_OK;
}

void offload_free(struct offload *o)
{
    if (o == NULL)
        return;
    pthread_mutex_lock(&o->lock);
    o->stopping = 1;
    pthread_cond_broadcast(&o->work);
    pthread_mutex_unlock(&o->lock);
    for (int i = 0; i < o->nthreads; i++)
        pthread_join(o->threads[i], NULL);
    pthread_cond_destroy(&o->work);
    pthread_mutex_destroy(&o->lock);
    free(o);
}

static void inbox_want(void *ud, struct loop_want *want)
{
    struct offload_inbox *ib = ud;

    want->fd = ib->efd;
    want->events = EPOLLIN;
    want->at_us = INT64_MAX;
    want->generation = 0;
}

/* Calls the done() of every job run so far, on the loop's thread. */
static void inbox_ready(void *ud, uint32_t revents)
{
    struct offload_inbox *ib = ud;
    struct job *list;
    eventfd_t n;

    (void)revents;
    eventfd_read(ib->efd, &n);
    pthread_mutex_lock(&ib->o->lock);
    list = ib->head;
    ib->head = ib->tail = NULL;
    for (struct job *j = list; j != NULL; j = j->next)
        ib->outstanding--;
    pthread_mutex_unlock(&ib->o->lock);
    while (list != NULL) {
        struct job *j = list;
        list = j->next;
        j->done(j->ud);
        free(j);
    }
}

static void inbox_flush(void *ud, int woke)
{
    (void)ud;
    (void)woke;
}

static void inbox_close(void *ud)
{
    struct offload_inbox *ib = ud;
    int last;

    pthread_mutex_lock(&ib->o->lock);
    while (ib->head != NULL) {
        struct job *j = ib->head;
        ib->head = j->next;
        ib->outstanding--;
        free(j);
    }
    ib->tail = NULL;
    ib->closed = 1;
    last = ib->outstanding == 0;
    pthread_mutex_unlock(&ib->o->lock);
    if (last)
        inbox_free(ib);
}

int offload_inbox_new(struct offload *o, struct loop *loop, struct offload_inbox **out,
                      struct permitd_error *err)
{
    struct offload_inbox *ib;
    struct loop_source src = {NULL, inbox_want, inbox_ready, inbox_flush, inbox_close};
    int rc;

    *out = NULL;
    if ((ib = calloc(1, sizeof(*ib))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "admin rpc pool: out of memory");
    ib->o = o;
    if ((ib->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "admin rpc pool: eventfd: %s",
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

int offload_submit(struct offload *o, struct offload_inbox *ib, void (*run)(void *ud),
                   void (*done)(void *ud), void *ud, struct permitd_error *err)
{
    struct job *j = calloc(1, sizeof(*j));

    if (j == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    *j = (struct job){NULL, ib, run, done, ud};
    pthread_mutex_lock(&o->lock);
    if (o->busy + o->waiting >= (unsigned)o->nthreads + o->queue_max) {
        unsigned busy = o->busy, waiting = o->waiting;
        pthread_mutex_unlock(&o->lock);
        free(j);
        return permitd_error_set(err, PERMITD_EEXHAUSTED, "too many admin calls at once (%u "
                                 "running, %u waiting); try again in a moment", busy, waiting);
    }
    if (o->tail != NULL)
        o->tail->next = j;
    else
        o->head = j;
    o->tail = j;
    o->waiting++;
    ib->outstanding++;
    pthread_cond_signal(&o->work);
    pthread_mutex_unlock(&o->lock);
    return PERMITD_OK;
}
