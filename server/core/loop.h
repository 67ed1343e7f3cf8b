/*
 * loop.h - one worker thread's event loop: epoll, timers, and the sources
 * that wait on them.
 *
 * A loop belongs to the thread that turns it (http.c makes one per worker).
 * Whatever must wait on a socket or for a time attaches to it as a source:
 * libmicrohttpd's daemon (http.c) and a limiter queue's pipelined Redis
 * connection (limiter.c). Every callback runs on the loop's thread, so a
 * source needs no lock and may hand answers straight to another source.
 *
 * One turn of the loop: ask every source what it waits for (want) and bring
 * epoll in line with it (an epoll_ctl only when that changed), wait for the
 * first fd or time, tell the sources concerned (ready), then make passes:
 * every source's flush, in the order they were attached, again and again
 * while a source asks for another pass (loop_again()). So the Acquires a
 * daemon's run queued leave together in the flush after it, and answers a
 * queue handed back are sent by the daemon's run in the pass after that.
 */
#ifndef PERMITD_LOOP_H
#define PERMITD_LOOP_H

#include <stdint.h>

#include "core/status.h"

struct loop;

/* What a source waits for now. */
struct loop_want {
    int fd;                     /* -1: no fd */
    uint32_t events;            /* EPOLLIN, EPOLLOUT */
    int64_t at_us;              /* call ready() at this time (clock_now_us()); INT64_MAX: never */
    uint64_t generation;        /* changes whenever fd is a new socket (the number may repeat) */
};

struct loop_source {
    void *ud;
    /* want arrives as {-1, 0, INT64_MAX, 0}; the source fills what it waits for. */
    void (*want)(void *ud, struct loop_want *want);
    /* The fd is ready (revents as epoll reports them) or at_us came (0). */
    void (*ready)(void *ud, uint32_t revents);
    /* One pass: send what this turn's work queued. woke is 1 in a turn's
     * first pass when the wait ended for something other than a bare
     * loop_wake() (an fd, a time, or the wait's end), 0 otherwise. */
    void (*flush)(void *ud, int woke);
    /* The loop is closing (loop_close()); nothing calls in again. */
    void (*close)(void *ud);
};

#define LOOP_SOURCES_MAX 4

/* Returns a new loop in *out (free with loop_free()), or an error saying
 * which system call failed. */
int loop_new(struct loop **out, struct permitd_error *err);

/* Frees l; call after loop_close(), once nothing turns or wakes it. NULL is
 * a no-op. */
void loop_free(struct loop *l);

/* Attaches src (copied) to l; from l's thread, or before that thread
 * starts. PERMITD_EEXHAUSTED when LOOP_SOURCES_MAX are attached already. */
int loop_attach(struct loop *l, const struct loop_source *src, struct permitd_error *err);

/* One turn: wait for the sources (at most until the earliest at_us), call
 * them, then make passes until none asks for another. */
void loop_turn(struct loop *l);

/* From a callback of l: make one more pass after this one (what it queued
 * needs another source's flush to leave). */
void loop_again(struct loop *l);

/* From any thread: ends the wait of l's current or next turn. */
void loop_wake(struct loop *l);

/* Calls every source's close, in the order attached, and detaches them all.
 * From l's thread, after its last turn. */
void loop_close(struct loop *l);

#endif
