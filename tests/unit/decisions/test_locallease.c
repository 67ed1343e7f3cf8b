/*
 * test_locallease.c - one worker's local leases, their pure parts: when a
 * bucket is hot, what a lease asks (N and the refill's part P), what it
 * grants and until when, what ends it and what goes back
 * (test_local_leases.py proves the bound against Redis).
 */
#include <string.h>

#include "core/config.h"
#include "decisions/limiter.h"
#include "decisions/locallease.h"
#include "test.h"

#define KEY "p:{api}:b"

static struct locallease *table(int mode, int64_t permits)
{
    struct locallease_conf conf = {mode, 100, permits, 1000};
    struct permitd_error err = {0, ""};
    struct locallease *t = NULL;

    CHECK_INT(locallease_new(&conf, &t, &err), PERMITD_OK);
    return t;
}

/* A token bucket's lease asks want + N + P, P = ceil(rate x (lease + 50
 * ms)); it then grants N, one Acquire at a time, and its end gives back
 * what is left with P. */
static void test_locallease_asks_n_and_p_and_grants_n(void)
{
    struct locallease *t = table(CONFIG_LOCAL_LEASES_ON, 100);
    struct locallease_slot *s = locallease_find(t, "api", "", 1000000);
    struct limiter_result res;
    struct locallease_return ret;
    int64_t extra = 0;

    CHECK(s != NULL);
    CHECK_INT(locallease_begin(t, s, CONFIG_LOCAL_LEASES_ON, 0, 100000, 1000.0, 0, 1, 7, 0,
                               1000000, &extra), 1);
    CHECK_INT(extra, 100 + 150);                /* N, and 1000/s x 150 ms */
    CHECK_INT(s->state, LOCALLEASE_TAKING);
    locallease_set_key(s, KEY, strlen(KEY));
    memset(&res, 0, sizeof(res));
    res.allowed = 1;
    res.remaining = 5000;
    res.reset_after_ms = 10;
    locallease_taken(t, s, 1, 1000000, &res);
    CHECK_INT(res.remaining, 5100);             /* Redis's, and what the lease holds */
    CHECK_INT(locallease_held(t), 1);
    for (int i = 0; i < 40; i++)
        CHECK_INT(locallease_grant(t, s, 7, 0, 1, 1000000 + i, &res, &ret), 1);
    CHECK_INT(res.remaining, 5060);
    CHECK_INT(s->left, 60);
    /* 61 do not fit: it ends, and gives back 60 and P */
    CHECK_INT(locallease_grant(t, s, 7, 0, 61, 1000100, &res, &ret), 0);
    CHECK_INT(ret.permits, 60);
    CHECK_INT(ret.p, 150);
    CHECK_STR(ret.key, KEY);
    CHECK_INT(locallease_held(t), 0);
    locallease_free(t);
}

/* Nothing is granted past the lease's time, under another version stamp
 * (an edit: given back) or another epoch (a reset: nothing given back). */
static void test_locallease_ends_on_time_edit_and_reset(void)
{
    struct locallease *t = table(CONFIG_LOCAL_LEASES_ON, 10);
    struct locallease_slot *s = locallease_find(t, "api", "", 0);
    struct limiter_result res;
    struct locallease_return ret;
    int64_t extra;
    size_t cursor = 0;

    for (int c = 0; c < 3; c++) {
        memset(&res, 0, sizeof(res));
        CHECK_INT(locallease_begin(t, s, CONFIG_LOCAL_LEASES_ON, 0, 1000, 0.001, 0, 1, 7, 0,
                                   0, &extra), 1);
        locallease_taken(t, s, 1, 0, &res);
        switch (c) {
        case 0:     /* 100 ms after it was sent: over */
            CHECK_INT(locallease_grant(t, s, 7, 0, 1, 100000, &res, &ret), 0);
            CHECK_INT(ret.permits, 10);
            break;
        case 1:     /* edited */
            CHECK_INT(locallease_grant(t, s, 8, 0, 1, 10, &res, &ret), 0);
            CHECK_INT(ret.permits, 10);
            break;
        case 2:     /* reset: the sweep finds it, nothing goes back */
            CHECK(locallease_due(t, &cursor, 10, 1, NULL, NULL) == s);
            CHECK_INT(locallease_grant(t, s, 7, 1, 1, 10, &res, &ret), 0);
            CHECK_INT(ret.permits, 0);
            CHECK_INT(ret.p, 0);
            break;
        }
        CHECK_INT(s->state, LOCALLEASE_COUNTING);
    }
    locallease_free(t);
}

/* auto leases a bucket only once it is hot; a refused lease leaves the
 * bucket to Redis for a lease's time; N stays within a quarter of max and
 * within max - want - P; a bucket that refills within a lease is not
 * leased; a fixed window pays no P and ends with its window. */
static void test_locallease_when_and_how_much(void)
{
    struct locallease *t = table(CONFIG_LOCAL_LEASES_AUTO, 0);
    struct locallease_slot *s = NULL;
    struct limiter_result res;
    int64_t extra, now = 5000000;

    for (int i = 0; i < 50; i++)
        s = locallease_find(t, "api", "", now);
    /* 50 in 100 ms is 500/s: under 1000/s */
    CHECK_INT(locallease_begin(t, s, CONFIG_LOCAL_LEASES_AUTO, 0, 100000, 1.0, 0, 1, 1, 0, now,
                               &extra), 0);
    for (int i = 0; i < 60; i++)
        s = locallease_find(t, "api", "", now);
    CHECK_INT(locallease_begin(t, s, CONFIG_LOCAL_LEASES_AUTO, 0, 100000, 1.0, 0, 1, 1, 0, now,
                               &extra), 1);
    CHECK_INT(extra, 2 * 110 + 1);              /* twice what was seen, P = 1 */
    locallease_taken(t, s, 0, now, NULL);       /* refused */
    CHECK_INT(locallease_begin(t, s, CONFIG_LOCAL_LEASES_ON, 0, 100000, 1.0, 0, 1, 1, 0,
                               now + 99000, &extra), 0);
    CHECK_INT(locallease_begin(t, s, CONFIG_LOCAL_LEASES_ON, 0, 40, 1.0, 0, 1, 1, 0,
                               now + 100000, &extra), 1);
    CHECK_INT(extra, 10 + 1);                   /* a quarter of 40 */
    locallease_taken(t, s, 0, now, NULL);
    CHECK_INT(locallease_begin(t, s, CONFIG_LOCAL_LEASES_ON, 0, 100, 700.0, 0, 1, 1, 0,
                               now + 200000, &extra), 0);      /* P 105 >= max */
    CHECK_INT(locallease_begin(t, s, CONFIG_LOCAL_LEASES_OFF, 1, 100, 0, 0, 1, 1, 0,
                               now + 200000, &extra), 0);
    CHECK_INT(locallease_begin(t, s, CONFIG_LOCAL_LEASES_ON, 1, 100, 0, 0, 1, 1, 0,
                               now + 200000, &extra), 1);
    CHECK_INT(extra, 25);                       /* a fixed window: no P */
    memset(&res, 0, sizeof(res));
    res.reset_after_ms = 30;                    /* its window ends in 30 ms (rounded up) */
    locallease_taken(t, s, 1, now + 200000, &res);
    CHECK_INT(s->until_us, now + 229000);
    CHECK_INT(locallease_next_end(t), now + 229000);
    locallease_free(t);
}

int main(void)
{
    TEST_RUN(test_locallease_asks_n_and_p_and_grants_n);
    TEST_RUN(test_locallease_ends_on_time_edit_and_reset);
    TEST_RUN(test_locallease_when_and_how_much);
    return TEST_REPORT();
}
