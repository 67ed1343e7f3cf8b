/*
 * test_stats.c - the decision counters behind the admin UI's live chart and
 * /metrics (server/decisions/stats.c), read back the way those two read
 * them: stats_series_at() as the UI's series, stats_prometheus() as the
 * text /metrics serves. Time is driven through the _at functions, so the
 * per-second ring is rolled over without waiting for the clock.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/status.h"
#include "decisions/stats.h"
#include "test.h"

/* An arbitrary start second, not a multiple of STATS_SECONDS, so a ring
 * index that ignored the time would show. */
#define T0 ((int64_t)1700000123)

/* The Prometheus text of s; free() it. */
/* A new table, or the test stops: new_stats() says why it failed. */
static struct stats *new_stats(void)
{
    struct permitd_error err = {0, ""};
    struct stats *s = NULL;

    if (stats_new(&s, &err) != PERMITD_OK) {
        fprintf(stderr, "stats_new: %s\n", err.message);
        exit(1);
    }
    return s;
}

static char *prom(struct stats *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    if (f == NULL)
        return NULL;
    stats_prometheus(s, f);
    fclose(f);
    return text;
}

/* The value of the sample whose name and labels are exactly series (e.g.
 * `permitd_acquires_total{policy="a",result="allowed"}`) in text; -1 when
 * text has no such line. */
static long long sample(const char *text, const char *series)
{
    size_t n = strlen(series);

    for (const char *p = text; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtoll(p + n + 1, NULL, 10);
    }
    return -1;
}

/* How many lines of text start with prefix. */
static int lines_starting(const char *text, const char *prefix)
{
    int count = 0;
    size_t n = strlen(prefix);

    for (const char *p = text; p != NULL && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, prefix, n) == 0)
            count++;
    return count;
}

static void test_stats_counts_one_second(void)
{
    struct stats *s = new_stats();
    int64_t allowed[3], denied[3];
    char *text;

    for (int i = 0; i < 3; i++)
        stats_record_at(s, "api", 1, T0);
    for (int i = 0; i < 2; i++)
        stats_record_at(s, "api", 0, T0);
    stats_record_at(s, "other", 1, T0);

    CHECK_INT(stats_series_at(s, "api", 3, T0, allowed, denied), 3);
    /* Oldest first: the two seconds before T0 had nothing. */
    CHECK_INT(allowed[0], 0);
    CHECK_INT(allowed[1], 0);
    CHECK_INT(allowed[2], 3);
    CHECK_INT(denied[2], 2);
    CHECK_INT(stats_series_at(s, "other", 1, T0, allowed, denied), 1);
    CHECK_INT(allowed[0], 1);
    CHECK_INT(denied[0], 0);
    /* A policy never counted reads as zeros, not as someone else's slot. */
    CHECK_INT(stats_series_at(s, "never", 1, T0, allowed, denied), 1);
    CHECK_INT(allowed[0], 0);
    CHECK_INT(denied[0], 0);

    text = prom(s);
    CHECK(text != NULL);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"api\",result=\"allowed\"}"), 3);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"api\",result=\"denied\"}"), 2);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"other\",result=\"allowed\"}"), 1);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"other\",result=\"denied\"}"), 0);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"never\",result=\"allowed\"}"), -1);
    CHECK_INT(sample(text, "permitd_acquires_untracked_total"), 0);
    free(text);
    stats_free(s);
}

/* Each second lands in its own place of the series; seconds with nothing
 * read 0; a series longer than the ring is cut to STATS_SECONDS. */
static void test_stats_series_by_second(void)
{
    struct stats *s = new_stats();
    int64_t allowed[STATS_SECONDS + 10], denied[STATS_SECONDS + 10];

    stats_record_at(s, "api", 1, T0);
    stats_record_at(s, "api", 0, T0 + 1);
    stats_record_at(s, "api", 0, T0 + 1);
    for (int i = 0; i < 4; i++)
        stats_record_at(s, "api", 1, T0 + 5);

    CHECK_INT(stats_series_at(s, "api", 6, T0 + 5, allowed, denied), 6);
    CHECK_INT(allowed[0], 1);
    CHECK_INT(denied[0], 0);
    CHECK_INT(allowed[1], 0);
    CHECK_INT(denied[1], 2);
    for (int i = 2; i < 5; i++) {
        CHECK_INT(allowed[i], 0);
        CHECK_INT(denied[i], 0);
    }
    CHECK_INT(allowed[5], 4);

    /* The same window read a second later has moved by one place. */
    CHECK_INT(stats_series_at(s, "api", 6, T0 + 6, allowed, denied), 6);
    CHECK_INT(denied[0], 2);
    CHECK_INT(allowed[4], 4);
    CHECK_INT(allowed[5], 0);

    CHECK_INT(stats_series_at(s, "api", STATS_SECONDS + 10, T0 + 5, allowed, denied),
              STATS_SECONDS);
    CHECK_INT(allowed[STATS_SECONDS - 6], 1);
    CHECK_INT(denied[STATS_SECONDS - 5], 2);
    CHECK_INT(allowed[STATS_SECONDS - 1], 4);
    stats_free(s);
}

/* The ring holds STATS_SECONDS seconds: a second that old is gone from the
 * series (its cell is stamped with another second), a cell reused by a
 * later second starts from 0, and the running totals keep everything. */
static void test_stats_ring_rolls_over(void)
{
    struct stats *s = new_stats();
    int64_t allowed[STATS_SECONDS], denied[STATS_SECONDS];
    char *text;

    for (int i = 0; i < 5; i++)
        stats_record_at(s, "api", 1, T0);
    stats_record_at(s, "api", 0, T0);

    /* The last second of the ring to include T0, then the first past it. */
    CHECK_INT(stats_series_at(s, "api", STATS_SECONDS, T0 + STATS_SECONDS - 1, allowed, denied),
              STATS_SECONDS);
    CHECK_INT(allowed[0], 5);
    CHECK_INT(denied[0], 1);
    CHECK_INT(stats_series_at(s, "api", STATS_SECONDS, T0 + STATS_SECONDS, allowed, denied),
              STATS_SECONDS);
    /* T0's cell is now T0 + STATS_SECONDS's: stale, so read as nothing. */
    CHECK_INT(allowed[STATS_SECONDS - 1], 0);
    CHECK_INT(denied[STATS_SECONDS - 1], 0);

    /* A decision in the reused cell restarts it rather than adding to T0's. */
    stats_record_at(s, "api", 1, T0 + STATS_SECONDS);
    CHECK_INT(stats_series_at(s, "api", 1, T0 + STATS_SECONDS, allowed, denied), 1);
    CHECK_INT(allowed[0], 1);
    CHECK_INT(denied[0], 0);
    /* And T0 itself, asked for again, is no longer there. */
    CHECK_INT(stats_series_at(s, "api", 1, T0, allowed, denied), 1);
    CHECK_INT(allowed[0], 0);

    /* Many rounds later the same cell still counts only its own second. */
    stats_record_at(s, "api", 0, T0 + 7 * STATS_SECONDS);
    CHECK_INT(stats_series_at(s, "api", 1, T0 + 7 * STATS_SECONDS, allowed, denied), 1);
    CHECK_INT(allowed[0], 0);
    CHECK_INT(denied[0], 1);

    text = prom(s);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"api\",result=\"allowed\"}"), 6);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"api\",result=\"denied\"}"), 2);
    free(text);
    stats_free(s);
}

/* At most 256 policies get labels of their own, whatever the names: the
 * rest are counted in permitd_acquires_untracked_total, and policies
 * tracked before the table filled keep being counted. */
static void test_stats_policy_cap(void)
{
    struct stats *s = new_stats();
    const int names = 1000;
    int tracked = 0;
    long long untracked, counted = 0;
    char name[32], *text;
    int64_t allowed[1], denied[1];

    stats_record_at(s, "first", 1, T0);
    for (int i = 0; i < names; i++) {
        snprintf(name, sizeof(name), "made-up-%d", i);
        stats_record_at(s, name, 1, T0);
    }
    stats_record_at(s, "first", 1, T0);

    text = prom(s);
    CHECK(text != NULL);
    tracked = lines_starting(text, "permitd_acquires_total{policy=\"") -
              lines_starting(text, "permitd_acquires_total{policy=\"\"");
    tracked /= 2;                       /* allowed and denied, one line each */
    untracked = sample(text, "permitd_acquires_untracked_total");
    /* A thousand names fill every slot (each tries a few), and no more. */
    CHECK_INT(tracked, 256);
    CHECK_INT(untracked, names + 1 - 256);
    /* Every decision is counted once: under its policy or as untracked. */
    for (int i = 0; i < names; i++) {
        long long v;
        char series[96];
        snprintf(series, sizeof(series),
                 "permitd_acquires_total{policy=\"made-up-%d\",result=\"allowed\"}", i);
        v = sample(text, series);
        if (v > 0)
            counted += v;
        /* What /metrics shows for a name is what the UI's series shows. */
        snprintf(name, sizeof(name), "made-up-%d", i);
        stats_series_at(s, name, 1, T0, allowed, denied);
        CHECK_INT(allowed[0], v > 0 ? v : 0);
    }
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"first\",result=\"allowed\"}"), 2);
    CHECK_INT(counted + 2 + untracked, names + 2);
    CHECK_CONTAINS(text, "beyond the 256 tracked");
    free(text);
    stats_free(s);
}

/* Errors: under a real policy (the caller says so, or it has had
 * decisions), else under policy "" so that made-up names cannot grow the
 * label set; an unknown code counts as unknown. */
static void test_stats_errors(void)
{
    struct stats *s = new_stats();
    char *text;

    stats_record_at(s, "seen", 1, T0);
    stats_record_error(s, "seen", PERMITD_EUNAVAILABLE, 0);    /* tracked already */
    stats_record_error(s, "real", PERMITD_EPERM, 1);           /* real: gets a slot */
    stats_record_error(s, "real", PERMITD_EPERM, 1);
    stats_record_error(s, "bogus", PERMITD_ENOTFOUND, 0);      /* made up: "" */
    stats_record_error(s, NULL, PERMITD_EINVAL, 0);
    stats_record_error(s, NULL, PERMITD_EINVAL, 1);            /* no name, even if "real" */
    stats_record_error(s, "seen", 7, 0);                       /* not a PERMITD_E* */
    stats_record_error(s, "seen", -99, 0);

    text = prom(s);
    CHECK(text != NULL);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"seen\",result=\"unavailable\"}"), 1);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"seen\",result=\"unknown\"}"), 2);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"real\",result=\"permission_denied\"}"),
              2);
    /* A real policy with only errors still shows its decision lines, at 0. */
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"real\",result=\"allowed\"}"), 0);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"\",result=\"not_found\"}"), 1);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"\",result=\"invalid_argument\"}"), 2);
    CHECK(strstr(text, "policy=\"bogus\"") == NULL);
    /* Codes never seen are not written. */
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"seen\",result=\"aborted\"}"), -1);
    free(text);
    stats_free(s);
}

/* The latency histogram: a value falls in the first bucket whose bound it
 * does not exceed (bounds inclusive), buckets are cumulative, +Inf is the
 * count, and the sum is in seconds. */
static void test_stats_latency_histogram(void)
{
    struct stats *s = new_stats();
    char *text;

    stats_observe(s, 50);           /* le 0.0001 */
    stats_observe(s, 100);          /* le 0.0001: the bound itself */
    stats_observe(s, 101);          /* le 0.00025 */
    stats_observe(s, 30000);        /* le 0.05 */
    stats_observe(s, 2000000);      /* +Inf only */
    stats_observe(s, -5);           /* a clock step back: first bucket, adds 0 */

    text = prom(s);
    CHECK(text != NULL);
    CHECK_INT(sample(text, "permitd_acquire_duration_seconds_bucket{le=\"0.0001\"}"), 3);
    CHECK_INT(sample(text, "permitd_acquire_duration_seconds_bucket{le=\"0.00025\"}"), 4);
    CHECK_INT(sample(text, "permitd_acquire_duration_seconds_bucket{le=\"0.025\"}"), 4);
    CHECK_INT(sample(text, "permitd_acquire_duration_seconds_bucket{le=\"0.05\"}"), 5);
    CHECK_INT(sample(text, "permitd_acquire_duration_seconds_bucket{le=\"1\"}"), 5);
    CHECK_INT(sample(text, "permitd_acquire_duration_seconds_bucket{le=\"+Inf\"}"), 6);
    CHECK_INT(sample(text, "permitd_acquire_duration_seconds_count"), 6);
    CHECK_CONTAINS(text, "permitd_acquire_duration_seconds_sum 2.030251\n");
    CHECK_CONTAINS(text, "# TYPE permitd_acquire_duration_seconds histogram\n");
    CHECK_CONTAINS(text, "# TYPE permitd_acquires_total counter\n");
    free(text);
    stats_free(s);
}

/* stats_record() and stats_series() are the _at functions on the wall
 * clock: what is recorded now is in the series ending now. */
static void test_stats_wall_clock(void)
{
    struct stats *s = new_stats();
    int64_t allowed[2], denied[2], end = 0, before = (int64_t)time(NULL);

    stats_record(s, "api", 1);
    stats_record(s, "api", 0);
    CHECK_INT(stats_series(s, "api", 2, &end, allowed, denied), 2);
    CHECK(end >= before && end <= (int64_t)time(NULL));
    /* The second may have turned between the record and the read. */
    CHECK_INT(allowed[0] + allowed[1], 1);
    CHECK_INT(denied[0] + denied[1], 1);
    stats_free(s);
}

int main(void)
{
    stats_free(NULL);
    TEST_RUN(test_stats_counts_one_second);
    TEST_RUN(test_stats_series_by_second);
    TEST_RUN(test_stats_ring_rolls_over);
    TEST_RUN(test_stats_policy_cap);
    TEST_RUN(test_stats_errors);
    TEST_RUN(test_stats_latency_histogram);
    TEST_RUN(test_stats_wall_clock);
    return TEST_REPORT();
}
