/*
 * test_readers.c - the lock-free readers' slots and grace wait
 * (core/readers.h), which the policy, override and counter tables share:
 * a thread keeps one slot for life, no two threads share one, a thread
 * past READERS_MAX has none; readers_wait() returns only after a reader
 * that was inside has left, and is not held by one that is outside.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

#include "core/readers.h"
#include "test.h"

static struct readers table;

static void *slot_of(void *arg)
{
    int *out = arg;

    out[0] = readers_slot();
    out[1] = readers_slot();        /* the same on every call */
    return NULL;
}

/* Slots are given once per thread, never reused: READERS_MAX threads one
 * after another get distinct slots, and the threads after them get none. */
static void test_readers_slot_a_thread_each_until_none_left(void)
{
    static int seen[READERS_MAX + 8][2];
    static char taken[READERS_MAX];
    int mine = readers_slot(), withslot = 0, without = 0;

    CHECK(mine >= 0);
    CHECK_INT(readers_slot(), mine);
    taken[mine] = 1;
    for (int i = 0; i < READERS_MAX + 8; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, slot_of, seen[i]) != 0) {
            CHECK(!"pthread_create");
            return;
        }
        pthread_join(t, NULL);
        CHECK_INT(seen[i][1], seen[i][0]);
        if (seen[i][0] < 0) {
            without++;
            continue;
        }
        CHECK(seen[i][0] < READERS_MAX);
        CHECK(!taken[seen[i][0]]);  /* a slot of a thread that ended is not given again */
        taken[seen[i][0]] = 1;
        withslot++;
    }
    CHECK_INT(withslot, READERS_MAX - 1);   /* this thread took one */
    CHECK_INT(without, 9);
}

struct inside {
    int me;
    atomic_int entered, release, left;
};

static void *read_slowly(void *arg)
{
    struct inside *in = arg;

    readers_enter(&table, in->me);
    atomic_store(&in->entered, 1);
    while (!atomic_load(&in->release))
        sched_yield();
    atomic_store(&in->left, 1);
    readers_leave(&table, in->me);
    return NULL;
}

struct waiter {
    atomic_int done;
    int left_when_done;
    struct inside *in;
};

static void *wait_for_readers(void *arg)
{
    struct waiter *w = arg;

    readers_wait(&table);
    w->left_when_done = atomic_load(&w->in->left);
    atomic_store(&w->done, 1);
    return NULL;
}

/* A writer's wait lasts until the reader that was inside leaves: the
 * reader is held inside until the waiter has run for a while, and the
 * waiter must not have returned before it left. The counter a slot keeps
 * is the table's own: the reader inside this table does not hold a wait
 * on another table. The reader's slot here is any below READERS_MAX: the
 * test drives readers_enter() with it as a reading thread would. */
static void test_readers_wait_outlasts_a_reader_inside(void)
{
    static struct readers other;
    struct inside in = {.me = 3};
    struct waiter w = {.in = &in};
    pthread_t r, wt;

    pthread_create(&r, NULL, read_slowly, &in);
    while (!atomic_load(&in.entered))
        sched_yield();
    readers_wait(&other);           /* returns at once: nobody inside `other` */
    pthread_create(&wt, NULL, wait_for_readers, &w);
    usleep(50000);                  /* the waiter spins meanwhile, or returned too early */
    CHECK(!atomic_load(&w.done));
    atomic_store(&in.release, 1);
    pthread_join(wt, NULL);
    pthread_join(r, NULL);
    CHECK(atomic_load(&w.done));
    CHECK_INT(w.left_when_done, 1);
}

/* A reader that keeps coming back holds a wait no longer than the read it
 * is in when the wait looks at its slot: a thread entering and leaving in
 * a loop, inside nearly all the time, lets every one of 1,000 waits
 * return (a wait for its slot's counter to be even, or for a quiet
 * moment, could spin for good here). */
static atomic_int churning;

static void *churn(void *arg)
{
    int me = *(int *)arg;

    while (atomic_load(&churning)) {
        readers_enter(&table, me);
        readers_leave(&table, me);
    }
    return NULL;
}

static void test_readers_wait_is_not_held_by_later_readers(void)
{
    int me = 5;
    pthread_t t;

    atomic_store(&churning, 1);
    pthread_create(&t, NULL, churn, &me);
    for (int i = 0; i < 1000; i++)
        readers_wait(&table);
    atomic_store(&churning, 0);
    pthread_join(t, NULL);
    CHECK_INT(atomic_load(&table.slot[me].n) % 2, 0);
}

int main(void)
{
    TEST_RUN(test_readers_slot_a_thread_each_until_none_left);
    TEST_RUN(test_readers_wait_outlasts_a_reader_inside);
    TEST_RUN(test_readers_wait_is_not_held_by_later_readers);
    return TEST_REPORT();
}
