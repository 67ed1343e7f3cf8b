/*
 * test_deny_cache.c - one worker's memory of denied buckets: what it
 * answers, for how long, what makes an entry miss, and which waits it
 * refuses to keep (the integration test test_deny_cache.py proves the
 * cache exact against Redis; these are its pure parts).
 */
#include <string.h>

#include "decisions/deny_cache.h"
#include "test.h"

static struct deny_cache_answer denial(int64_t retry_ms)
{
    struct deny_cache_answer a = {0, 10, retry_ms, retry_ms, 10, 0};
    return a;
}

/* A denial is answered for the same size until a millisecond and 0.1%
 * before its wait ends, with the remaining wait rounded up; never for
 * another size, another stamp or another reset epoch. */
static void test_deny_cache_answers_the_remaining_wait(void)
{
    struct permitd_error err = {0, ""};
    struct deny_cache *c = NULL;
    struct deny_cache_answer a = denial(5000), out;
    int64_t t0 = 1000000000;

    CHECK_INT(deny_cache_new(8, &c, &err), PERMITD_OK);
    deny_cache_put(c, "api", "u1", 7, 0, 1, t0, t0 + 1000, &a);
    CHECK_INT(deny_cache_get(c, "api", "u1", 7, 0, 1, t0 + 2000000, &out), 1);
    CHECK(out.retry_after_ms > 0 && out.retry_after_ms <= 5000);
    CHECK(out.retry_after_ms >= 3000);          /* 5 s from the answer, 2 s later */
    CHECK_INT(deny_cache_get(c, "api", "u1", 7, 0, 2, t0 + 2000000, &out), 0);
    CHECK_INT(deny_cache_get(c, "api", "u1", 8, 0, 1, t0 + 2000000, &out), 0);
    deny_cache_put(c, "api", "u1", 7, 0, 1, t0, t0 + 1000, &a);
    CHECK_INT(deny_cache_get(c, "api", "u1", 7, 1, 1, t0 + 2000000, &out), 0);
    deny_cache_put(c, "api", "u1", 7, 0, 1, t0, t0 + 1000, &a);
    CHECK_INT(deny_cache_get(c, "api", "u2", 7, 0, 1, t0 + 2000000, &out), 0);
    CHECK_INT(deny_cache_get(c, "api", "u1", 7, 0, 1, t0 + 4995000, &out), 0);   /* 4.994 s: 1 ms and 0.1% short */
    deny_cache_free(c);
}

/* Waits too short to be sure of, and waits past what a microsecond clock
 * can hold (centuries: bucket.lua caps them at 3170 years), are left to
 * Redis: the cache would have to answer them cut short, and
 * retry_after_ms is never rounded down. */
static void test_deny_cache_keeps_no_wait_it_cannot_answer_whole(void)
{
    struct permitd_error err = {0, ""};
    struct deny_cache *c = NULL;
    struct deny_cache_answer out, shortw = denial(1), huge = denial(99999999999999LL);

    CHECK_INT(deny_cache_new(8, &c, &err), PERMITD_OK);
    deny_cache_put(c, "api", "", 7, 0, 1, 0, 10, &shortw);
    CHECK_INT(deny_cache_get(c, "api", "", 7, 0, 1, 20, &out), 0);
    deny_cache_put(c, "api", "big", 7, 0, 1, 0, 10, &huge);
    CHECK_INT(deny_cache_get(c, "api", "big", 7, 0, 1, 20, &out), 0);
    deny_cache_free(c);
    c = NULL;
    CHECK_INT(deny_cache_new(0, &c, &err), PERMITD_EINVAL);
    CHECK_CONTAINS(err.message, "0");
    CHECK(c == NULL);
}

/* A full cache takes the oldest entry's place. */
static void test_deny_cache_evicts_the_oldest(void)
{
    struct permitd_error err = {0, ""};
    struct deny_cache *c = NULL;
    struct deny_cache_answer a = denial(60000), out;
    char key[16];

    CHECK_INT(deny_cache_new(4, &c, &err), PERMITD_OK);
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        CHECK_INT(deny_cache_put(c, "api", key, 1, 0, 1, 0, 10, &a), i == 4);
    }
    CHECK_INT(deny_cache_get(c, "api", "k0", 1, 0, 1, 100, &out), 0);
    for (int i = 1; i < 5; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        CHECK_INT(deny_cache_get(c, "api", key, 1, 0, 1, 100, &out), 1);
    }
    deny_cache_free(c);
}

int main(void)
{
    TEST_RUN(test_deny_cache_answers_the_remaining_wait);
    TEST_RUN(test_deny_cache_keeps_no_wait_it_cannot_answer_whole);
    TEST_RUN(test_deny_cache_evicts_the_oldest);
    return TEST_REPORT();
}
