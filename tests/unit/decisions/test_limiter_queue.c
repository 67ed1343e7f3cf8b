/*
 * test_limiter_queue.c - a worker queue's spare jobs (limiter_queue.c):
 * a finished job is kept for the next decision, so that once a worker has
 * had as many in flight as it will, queuing one allocates nothing (the
 * gRPC and Connect hot paths count on it); at most QUEUE_SPARE_MAX are
 * kept, the rest freed (AddressSanitizer reports any job lost).
 */
#include <stdlib.h>

#include "decisions/limiter_internal.h"
#include "test.h"

static void test_limiter_queue_spare_jobs_reused(void)
{
    struct limiter_queue *q = calloc(1, sizeof(*q));
    struct job *a = limiter_queue_job_get(q), *b = limiter_queue_job_get(q);

    CHECK(a != NULL && b != NULL && a != b);
    CHECK_INT(q->nspare, 0);
    limiter_queue_job_put(q, a);
    limiter_queue_job_put(q, b);
    CHECK_INT(q->nspare, 2);
    /* The last one put back is the next one given. */
    CHECK(limiter_queue_job_get(q) == b);
    CHECK(limiter_queue_job_get(q) == a);
    CHECK_INT(q->nspare, 0);
    CHECK(q->spare == NULL);
    free(a);
    free(b);
    free(q);
}

static void test_limiter_queue_spare_jobs_bounded(void)
{
    struct limiter_queue *q = calloc(1, sizeof(*q));
    struct job *jobs[QUEUE_SPARE_MAX + 10];
    size_t n = sizeof(jobs) / sizeof(jobs[0]);

    for (size_t i = 0; i < n; i++)
        CHECK((jobs[i] = limiter_queue_job_get(q)) != NULL);
    for (size_t i = 0; i < n; i++)
        limiter_queue_job_put(q, jobs[i]);
    CHECK_INT(q->nspare, QUEUE_SPARE_MAX);
    /* The kept ones are the first put back; the last ten were freed. */
    for (size_t i = QUEUE_SPARE_MAX; i-- > 0;)
        CHECK(limiter_queue_job_get(q) == jobs[i]);
    CHECK_INT(q->nspare, 0);
    for (size_t i = 0; i < QUEUE_SPARE_MAX; i++)
        free(jobs[i]);
    free(q);
}

int main(void)
{
    TEST_RUN(test_limiter_queue_spare_jobs_reused);
    TEST_RUN(test_limiter_queue_spare_jobs_bounded);
    return TEST_REPORT();
}
