/*
 * readers.h - lock-free readers of a table that a writer replaces whole.
 *
 * A table read at every decision and written rarely (the policies, their
 * overrides, the per-policy counters) keeps what readers look at behind an
 * atomic pointer or in places a writer moves under its own mutex. Readers
 * take no lock: each reading thread owns a slot, and its counter in a
 * table is odd while the thread is inside a read of that table
 * (readers_enter() ... readers_leave()). A writer that took something out
 * of readers' reach calls readers_wait(), which returns once every reader
 * that was inside when it was called has left (a lookup: nanoseconds),
 * never waiting for the ones that came in after; then it may free or reuse
 * what it took out.
 *
 * A slot is the thread's identity, the same in every table (each table has
 * its own counters): handed out at the thread's first read, never reused.
 * A thread past READERS_MAX has none (readers_slot() answers -1) and reads
 * under the table's writers' mutex instead.
 */
#ifndef PERMITD_READERS_H
#define PERMITD_READERS_H

#include <stdatomic.h>

#define READERS_MAX 1024            /* threads with a slot of their own */

/* One table's counters, a cache line each: the workers' counters do not
 * share one. */
struct readers {
    struct {
        _Atomic unsigned long n;    /* odd while its thread is inside a read */
        char pad[64 - sizeof(unsigned long)];
    } slot[READERS_MAX];
};

extern _Thread_local int readers_mine;  /* this thread's slot; -1 before its first read */

int readers_first_slot(void);

/* This thread's slot, or -1 when it has none. */
static inline int readers_slot(void)
{
    int me = readers_mine;

    if (me < 0)
        me = readers_first_slot();
    return me < READERS_MAX ? me : -1;
}

static inline void readers_enter(struct readers *r, int me)
{
    atomic_fetch_add(&r->slot[me].n, 1);                        /* odd: inside */
}

/* Even again, release: what was read inside happens before the
 * readers_wait() that sees it. */
static inline void readers_leave(struct readers *r, int me)
{
    atomic_fetch_add_explicit(&r->slot[me].n, 1, memory_order_release);
}

/* Returns once no thread is still inside a read of r that it began before
 * this call. Under the table's writers' mutex. */
void readers_wait(struct readers *r);

#endif
