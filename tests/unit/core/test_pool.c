/*
 * test_pool.c - the admin listener's thread pool (core/pool.c): a job runs
 * on a pool thread and its done() back on the loop that asked, exactly once
 * each; a full pool refuses at once and says how full; a job whose loop
 * ended is dropped, not answered; bad sizes are named.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/loop.h"
#include "core/pool.h"
#include "test.h"

/* A job that may be held on its pool thread until the test lets it go. */
struct tjob {
    struct pool_job pj;
    pthread_t ran_on, done_on;
    int ran, done, dropped;
    atomic_int *hold;           /* NULL: run at once; else wait while *hold */
    atomic_int started;
};

static void tjob_run(struct pool_job *j)
{
    struct tjob *t = (struct tjob *)j;

    atomic_store(&t->started, 1);
    while (t->hold != NULL && atomic_load(t->hold))
        sched_yield();
    t->ran_on = pthread_self();
    t->ran++;
}

static void tjob_done(struct pool_job *j)
{
    struct tjob *t = (struct tjob *)j;

    t->done_on = pthread_self();
    t->done++;
}

static void tjob_drop(struct pool_job *j)
{
    ((struct tjob *)j)->dropped++;
}

static void tjob_init(struct tjob *t, atomic_int *hold)
{
    *t = (struct tjob){.pj = {tjob_run, tjob_done, tjob_drop, NULL, NULL}, .hold = hold};
}

/* Turns l until every job in ts is done (a few seconds at the most). */
static void turn_until_done(struct loop *l, struct tjob *ts, int n)
{
    for (int tries = 0; tries < 1000; tries++) {
        int all = 1;
        for (int i = 0; i < n; i++)
            all &= ts[i].done > 0;
        if (all)
            return;
        loop_turn(l);
    }
}

static void wait_started(struct tjob *t)
{
    while (!atomic_load(&t->started))
        sched_yield();
}

static void test_pool_runs_on_a_thread_answers_on_the_loop(void)
{
    struct permitd_error err;
    struct pool *p;
    struct loop *l;
    struct pool_inbox *ib;
    struct tjob ts[8];

    CHECK_INT(pool_new(2, 8, "test pool", &p, &err), PERMITD_OK);
    CHECK_INT(loop_new(&l, &err), PERMITD_OK);
    CHECK_INT(pool_inbox_new(p, l, &ib, &err), PERMITD_OK);
    for (int i = 0; i < 8; i++) {
        tjob_init(&ts[i], NULL);
        CHECK_INT(pool_submit(p, ib, &ts[i].pj, NULL), PERMITD_OK);
        CHECK_INT(ts[i].done, 0);           /* never before submit returns */
    }
    turn_until_done(l, ts, 8);
    for (int i = 0; i < 8; i++) {
        CHECK_INT(ts[i].ran, 1);
        CHECK_INT(ts[i].done, 1);
        CHECK_INT(ts[i].dropped, 0);
        CHECK(!pthread_equal(ts[i].ran_on, pthread_self()));
        CHECK(pthread_equal(ts[i].done_on, pthread_self()));
    }
    loop_close(l);
    loop_free(l);
    pool_free(p);
}

static void test_pool_full_refuses_at_once_and_says_how_full(void)
{
    struct permitd_error err;
    struct pool *p;
    struct loop *l;
    struct pool_inbox *ib;
    struct pool_load seen = {0, 0, 0, 0}, now;
    struct tjob ts[3];
    atomic_int hold = 1;

    CHECK_INT(pool_new(1, 1, "test pool", &p, &err), PERMITD_OK);
    CHECK_INT(loop_new(&l, &err), PERMITD_OK);
    CHECK_INT(pool_inbox_new(p, l, &ib, &err), PERMITD_OK);
    for (int i = 0; i < 3; i++)
        tjob_init(&ts[i], &hold);
    CHECK_INT(pool_submit(p, ib, &ts[0].pj, &seen), PERMITD_OK);
    wait_started(&ts[0]);                   /* the one thread is busy */
    CHECK_INT(pool_submit(p, ib, &ts[1].pj, &seen), PERMITD_OK);    /* the one queue place */
    CHECK_INT(pool_submit(p, ib, &ts[2].pj, &seen), PERMITD_EEXHAUSTED);
    CHECK_INT(seen.workers, 1);
    CHECK_INT(seen.queue, 1);
    CHECK_INT(seen.busy, 1);
    CHECK_INT(seen.waiting, 1);
    pool_load(p, &now);
    CHECK_INT(now.busy, 1);
    CHECK_INT(now.waiting, 1);
    atomic_store(&hold, 0);
    turn_until_done(l, ts, 2);
    CHECK_INT(ts[0].done, 1);
    CHECK_INT(ts[1].done, 1);
    CHECK_INT(ts[2].ran + ts[2].done + ts[2].dropped, 0);     /* refused: never ran */
    pool_load(p, &now);
    CHECK_INT(now.busy + now.waiting, 0);
    /* room again */
    tjob_init(&ts[2], NULL);
    CHECK_INT(pool_submit(p, ib, &ts[2].pj, NULL), PERMITD_OK);
    turn_until_done(l, &ts[2], 1);
    CHECK_INT(ts[2].done, 1);
    loop_close(l);
    loop_free(l);
    pool_free(p);
}

/* The loop ends with one job run and not yet answered, and one still
 * running: both are dropped (nothing answers on a loop that is gone), and
 * the inbox is freed with the last (ASan would tell a leak). */
static void test_pool_loop_ended_drops_jobs(void)
{
    struct permitd_error err;
    struct pool *p;
    struct loop *l;
    struct pool_inbox *ib;
    struct tjob ts[2];
    atomic_int hold = 1;
    struct pool_load now;

    CHECK_INT(pool_new(1, 1, "test pool", &p, &err), PERMITD_OK);
    CHECK_INT(loop_new(&l, &err), PERMITD_OK);
    CHECK_INT(pool_inbox_new(p, l, &ib, &err), PERMITD_OK);
    tjob_init(&ts[0], NULL);
    tjob_init(&ts[1], &hold);
    CHECK_INT(pool_submit(p, ib, &ts[0].pj, NULL), PERMITD_OK);
    CHECK_INT(pool_submit(p, ib, &ts[1].pj, NULL), PERMITD_OK);
    wait_started(&ts[1]);                   /* ts[0] has run: it waits in the inbox */
    loop_close(l);
    loop_free(l);
    atomic_store(&hold, 0);
    do
        pool_load(p, &now);
    while (now.busy + now.waiting > 0);
    pool_free(p);                           /* joins: ts[1] is delivered by then */
    CHECK_INT(ts[0].ran, 1);
    CHECK_INT(ts[0].done, 0);
    CHECK_INT(ts[0].dropped, 1);
    CHECK_INT(ts[1].ran, 1);
    CHECK_INT(ts[1].done, 0);
    CHECK_INT(ts[1].dropped, 1);
}

static void test_pool_bad_sizes_named(void)
{
    struct permitd_error err;
    struct pool *p = (struct pool *)&err;

    CHECK_INT(pool_new(0, 4, "test pool", &p, &err), PERMITD_EINVAL);
    CHECK(p == NULL);
    CHECK_CONTAINS(err.message, "test pool: 0 threads and a queue of 4");
    CHECK_INT(pool_new(2, -1, "admin rpc pool", &p, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "admin rpc pool: 2 threads and a queue of -1");
    pool_free(NULL);
}

int main(void)
{
    TEST_RUN(test_pool_runs_on_a_thread_answers_on_the_loop);
    TEST_RUN(test_pool_full_refuses_at_once_and_says_how_full);
    TEST_RUN(test_pool_loop_ended_drops_jobs);
    TEST_RUN(test_pool_bad_sizes_named);
    return TEST_REPORT();
}
