/*
 * test_stats.c - the decision counters behind the admin UI's live chart and
 * /metrics (server/decisions/stats.c), read back the way those two read
 * them: stats_series_at() as the UI's series, stats_prometheus() as the
 * text /metrics serves. Time is driven through the _at functions, so the
 * per-second ring is rolled over without waiting for the clock.
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/status.h"
#include "decisions/stats.h"
#include "test.h"

/* An arbitrary start second, not a multiple of STATS_SECONDS, so a ring
 * index that ignored the time would show. */
#define T0 ((int64_t)1700000123)

/* A new table with room for the charts of `policies` policies, or the
 * test stops, saying why. */
static struct stats *new_stats_of(size_t policies)
{
    struct permitd_error err = {0, ""};
    struct stats *s = NULL;

    if (stats_new(policies, &s, &err) != PERMITD_OK) {
        fprintf(stderr, "stats_new: %s\n", err.message);
        exit(1);
    }
    return s;
}

/* A table of the default size (--stats-policies). */
static struct stats *new_stats(void)
{
    return new_stats_of(10000);
}

/* The Prometheus text of s; free() it. */
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

    CHECK_INT(stats_series_at(s, "api", 3, T0, allowed, denied, NULL), 3);
    /* Oldest first: the two seconds before T0 had nothing. */
    CHECK_INT(allowed[0], 0);
    CHECK_INT(allowed[1], 0);
    CHECK_INT(allowed[2], 3);
    CHECK_INT(denied[2], 2);
    CHECK_INT(stats_series_at(s, "other", 1, T0, allowed, denied, NULL), 1);
    CHECK_INT(allowed[0], 1);
    CHECK_INT(denied[0], 0);
    /* A policy never counted reads as zeros, not as someone else's slot. */
    CHECK_INT(stats_series_at(s, "never", 1, T0, allowed, denied, NULL), 1);
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

/* A shadow policy's would-be denials (issue 23) are counted apart from
 * both allowed and denied: in the series and on /metrics. */
static void test_stats_shadow_denied_apart(void)
{
    struct stats *s = new_stats();
    int64_t allowed[2], denied[2], shadow[2];
    char *text;

    stats_record_at(s, "new-limit", STATS_RESULT_ALLOWED, T0);
    stats_record_at(s, "new-limit", STATS_RESULT_ALLOWED, T0);
    for (int i = 0; i < 3; i++)
        stats_record_at(s, "new-limit", STATS_RESULT_SHADOW_DENIED, T0);
    stats_record_at(s, "new-limit", STATS_RESULT_SHADOW_DENIED, T0 - 1);
    stats_record_at(s, "new-limit", STATS_RESULT_DENIED, T0);
    stats_series_at(s, "new-limit", 2, T0, allowed, denied, NULL);
    CHECK_INT(allowed[1], 2);
    CHECK_INT(denied[1], 1);
    CHECK_INT(stats_shadow_series_at(s, "new-limit", 2, T0, shadow), 2);
    CHECK_INT(shadow[0], 1);
    CHECK_INT(shadow[1], 3);
    CHECK_INT(stats_shadow_series_at(s, "never", 1, T0, shadow), 1);
    CHECK_INT(shadow[0], 0);
    text = prom(s);
    CHECK(text != NULL);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"new-limit\",result=\"shadow_denied\"}"), 4);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"new-limit\",result=\"denied\"}"), 1);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"new-limit\",result=\"allowed\"}"), 2);
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

    CHECK_INT(stats_series_at(s, "api", 6, T0 + 5, allowed, denied, NULL), 6);
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
    CHECK_INT(stats_series_at(s, "api", 6, T0 + 6, allowed, denied, NULL), 6);
    CHECK_INT(denied[0], 2);
    CHECK_INT(allowed[4], 4);
    CHECK_INT(allowed[5], 0);

    CHECK_INT(stats_series_at(s, "api", STATS_SECONDS + 10, T0 + 5, allowed, denied, NULL),
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
    CHECK_INT(stats_series_at(s, "api", STATS_SECONDS, T0 + STATS_SECONDS - 1, allowed, denied,
                              NULL), STATS_SECONDS);
    CHECK_INT(allowed[0], 5);
    CHECK_INT(denied[0], 1);
    CHECK_INT(stats_series_at(s, "api", STATS_SECONDS, T0 + STATS_SECONDS, allowed, denied, NULL),
              STATS_SECONDS);
    /* T0's cell is now T0 + STATS_SECONDS's: stale, so read as nothing. */
    CHECK_INT(allowed[STATS_SECONDS - 1], 0);
    CHECK_INT(denied[STATS_SECONDS - 1], 0);

    /* A decision in the reused cell restarts it rather than adding to T0's. */
    stats_record_at(s, "api", 1, T0 + STATS_SECONDS);
    CHECK_INT(stats_series_at(s, "api", 1, T0 + STATS_SECONDS, allowed, denied, NULL), 1);
    CHECK_INT(allowed[0], 1);
    CHECK_INT(denied[0], 0);
    /* And T0 itself, asked for again, is no longer there. */
    CHECK_INT(stats_series_at(s, "api", 1, T0, allowed, denied, NULL), 1);
    CHECK_INT(allowed[0], 0);

    /* Many rounds later the same cell still counts only its own second. */
    stats_record_at(s, "api", 0, T0 + 7 * STATS_SECONDS);
    CHECK_INT(stats_series_at(s, "api", 1, T0 + 7 * STATS_SECONDS, allowed, denied, NULL), 1);
    CHECK_INT(allowed[0], 0);
    CHECK_INT(denied[0], 1);

    text = prom(s);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"api\",result=\"allowed\"}"), 6);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"api\",result=\"denied\"}"), 2);
    free(text);
    stats_free(s);
}

/* At most 256 policies get labels of their own on /metrics, whatever the
 * names: the rest are counted in permitd_acquires_untracked_total, and
 * policies tracked before the table filled keep being counted. The UI's
 * series has every one of them (issue 22: it had the same 256 only). */
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
        /* The UI's series counts every policy, labelled or not. */
        snprintf(name, sizeof(name), "made-up-%d", i);
        stats_series_at(s, name, 1, T0, allowed, denied, NULL);
        CHECK_INT(allowed[0], 1);
    }
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"first\",result=\"allowed\"}"), 2);
    CHECK_INT(counted + 2 + untracked, names + 2);
    CHECK_CONTAINS(text, "beyond the 256 tracked");
    free(text);
    stats_free(s);
}

/* Issue 22: every policy with traffic has its chart, not the first 256: 300
 * and more policies each read back exactly their own figures, known. A
 * policy with none is not known (the UI says "no figures yet", not 0). */
static void test_stats_every_policy_has_a_series(void)
{
    struct stats *s = new_stats();
    const int names = 1000;
    int64_t allowed[2], denied[2];
    int known = -1, wrong = 0;
    char name[32], *text;

    for (int i = 0; i < names; i++) {
        snprintf(name, sizeof(name), "policy-%d", i);
        for (int k = 0; k <= i % 5; k++)
            stats_record_at(s, name, 1, T0);
        stats_record_at(s, name, 0, T0 + 1);
    }
    for (int i = 0; i < names; i++) {
        snprintf(name, sizeof(name), "policy-%d", i);
        known = -1;
        CHECK_INT(stats_series_at(s, name, 2, T0 + 1, allowed, denied, &known), 2);
        if (known != 1 || allowed[0] != i % 5 + 1 || denied[0] != 0 || allowed[1] != 0 ||
            denied[1] != 1) {
            if (wrong++ == 0)
                fprintf(stderr, "  %s: known %d allowed %lld,%lld denied %lld,%lld\n", name, known,
                        (long long)allowed[0], (long long)allowed[1], (long long)denied[0],
                        (long long)denied[1]);
        }
    }
    CHECK_INT(wrong, 0);
    known = -1;
    stats_series_at(s, "no-traffic", 2, T0 + 1, allowed, denied, &known);
    CHECK_INT(known, 0);
    CHECK_INT(allowed[0] + allowed[1] + denied[0] + denied[1], 0);
    text = prom(s);
    CHECK_INT(sample(text, "permitd_stats_policies"), names);
    CHECK_INT(sample(text, "permitd_stats_evictions_total"), 0);
    free(text);
    stats_free(s);
}

/* Memory stays bounded by evicting the least recently active policy, not
 * by refusing new ones: with room for 4, a fifth policy takes the place of
 * the one idle longest; the others keep their figures; the evicted one is
 * no longer known (and comes back, from nothing, with its next decision).
 * Many names through a small table keep every lookup right (the index's
 * deletions). */
static void test_stats_evicts_the_least_recently_active(void)
{
    struct stats *s = new_stats_of(4);
    int64_t allowed[1], denied[1];
    int known = -1;
    char name[32], *text;

    stats_record_at(s, "a", 1, T0);
    stats_record_at(s, "b", 1, T0 + 1);
    stats_record_at(s, "c", 1, T0 + 2);
    stats_record_at(s, "d", 1, T0 + 3);
    stats_record_at(s, "a", 1, T0 + 4);        /* a is active again: b is idle longest */
    stats_record_at(s, "e", 1, T0 + 5);
    stats_series_at(s, "b", 1, T0 + 1, allowed, denied, &known);
    CHECK_INT(known, 0);
    CHECK_INT(allowed[0], 0);
    const char *kept[] = {"a", "c", "d", "e"};
    const int64_t at[] = {T0 + 4, T0 + 2, T0 + 3, T0 + 5};
    for (int i = 0; i < 4; i++) {
        known = -1;
        stats_series_at(s, kept[i], 1, at[i], allowed, denied, &known);
        CHECK_INT(known, 1);
        CHECK_INT(allowed[0], 1);
    }
    stats_record_at(s, "b", 0, T0 + 6);        /* back: c goes now */
    stats_series_at(s, "b", 1, T0 + 6, allowed, denied, &known);
    CHECK_INT(known, 1);
    CHECK_INT(denied[0], 1);
    stats_series_at(s, "c", 1, T0 + 2, allowed, denied, &known);
    CHECK_INT(known, 0);

    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "churn-%d", i);
        stats_record_at(s, name, 1, T0 + 10 + i);
        stats_record_at(s, name, 1, T0 + 10 + i);
        if (i >= 3) {           /* the last four are in, each with its own two */
            for (int k = i - 3; k <= i; k++) {
                snprintf(name, sizeof(name), "churn-%d", k);
                known = -1;
                stats_series_at(s, name, 1, T0 + 10 + k, allowed, denied, &known);
                if (known != 1 || allowed[0] != 2) {
                    fprintf(stderr, "  %s after churn-%d: known %d allowed %lld\n", name, i,
                            known, (long long)allowed[0]);
                    CHECK(0);
                    i = 5000;
                    break;
                }
            }
        }
    }
    text = prom(s);
    CHECK_INT(sample(text, "permitd_stats_policies"), 4);
    CHECK_INT(sample(text, "permitd_stats_evictions_total"), 2 + 5000);
    free(text);
    stats_free(s);
}

/* A thread counting policy `name` (and reading its series) `n` times,
 * then saying it is done. */
struct counter {
    struct stats *s;
    const char *name;
    int64_t at;
    int n;
    _Atomic int done;
};

static void *count_some(void *arg)
{
    struct counter *c = arg;
    int64_t allowed[1], denied[1];

    for (int i = 0; i < c->n; i++) {
        stats_record_at(c->s, c->name, 1, c->at);
        stats_series_at(c->s, c->name, 1, c->at, allowed, denied, NULL);
    }
    atomic_store(&c->done, 1);
    return NULL;
}

/* Issue 22: counting took a read lock per decision, one cache line that
 * every API worker wrote, and a decision waited whenever a place was
 * being taken. A policy with a place is now counted, and its series read,
 * while the table's lock is held elsewhere (within 5 s: with a lock on the
 * way it never finishes). */
static void test_stats_counting_takes_no_lock(void)
{
    struct stats *s = new_stats();
    struct counter c = {s, "hot", T0, 1000, 0};
    int64_t allowed[1], denied[1];
    pthread_t t;

    stats_record_at(s, "hot", 1, T0);           /* its place is taken here */
    stats_hold(s, 1);
    pthread_create(&t, NULL, count_some, &c);
    for (int i = 0; i < 500 && !atomic_load(&c.done); i++)
        usleep(10000);
    CHECK_INT(atomic_load(&c.done), 1);
    stats_hold(s, 0);
    pthread_join(t, NULL);
    stats_series_at(s, "hot", 1, T0, allowed, denied, NULL);
    CHECK_INT(allowed[0], 1 + 1000);
    stats_free(s);
}

/* Threads churning through more policies than places, while others count
 * one hot policy: the churn evicts (its policies are older than the hot
 * one), the hot policy's place moves in the index under the counters'
 * feet, and yet every one of its decisions is counted, exactly, in its own
 * place (ASan in scripts/test.sh: no place read after it was reused). */
struct churner {
    struct stats *s;
    int id, n;
};

static void *churn(void *arg)
{
    struct churner *c = arg;
    int64_t allowed[1], denied[1];
    char name[32];

    for (int i = 0; i < c->n; i++) {
        snprintf(name, sizeof(name), "churn-%d-%d", c->id, i % 64);
        stats_record_at(c->s, name, 1, T0);
        stats_series_at(c->s, name, 1, T0, allowed, denied, NULL);
    }
    return NULL;
}

static void test_stats_counts_exactly_while_others_evict(void)
{
    enum { HOT = 2, CHURN = 2, N = 100000 };
    struct stats *s = new_stats_of(8);
    struct counter hot[HOT];
    struct churner ch[CHURN];
    pthread_t th[HOT], tc[CHURN];
    int64_t allowed[1], denied[1];
    int known = 0;
    char *text;

    stats_record_at(s, "hot", 1, T0 + 1);       /* the cell's second stamped once */
    for (int i = 0; i < HOT; i++) {
        hot[i] = (struct counter){s, "hot", T0 + 1, N, 0};
        pthread_create(&th[i], NULL, count_some, &hot[i]);
    }
    for (int i = 0; i < CHURN; i++) {
        ch[i] = (struct churner){s, i, N};
        pthread_create(&tc[i], NULL, churn, &ch[i]);
    }
    for (int i = 0; i < HOT; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < CHURN; i++)
        pthread_join(tc[i], NULL);
    stats_series_at(s, "hot", 1, T0 + 1, allowed, denied, &known);
    CHECK_INT(known, 1);
    CHECK_INT(allowed[0], 1 + HOT * N);
    CHECK_INT(denied[0], 0);
    text = prom(s);
    CHECK_INT(sample(text, "permitd_stats_policies"), 8);
    CHECK(sample(text, "permitd_stats_evictions_total") > 0);
    free(text);
    stats_free(s);
}

/* A table size out of range is refused, naming it. */
static void test_stats_size_is_checked(void)
{
    struct permitd_error err = {0, ""};
    struct stats *s = NULL;

    CHECK_INT(stats_new(0, &s, &err), PERMITD_EINVAL);
    CHECK(s == NULL);
    CHECK_CONTAINS(err.message, "0 policies");
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

/* The running totals the fleet publisher reads (stats_totals()): every
 * kind counted under its policy's place, passes counted apart from Redis's
 * decisions (and as allowed on /metrics and the chart), errors of a real
 * policy too, made-up names not at all; a place taken for another policy
 * has a new generation and starts from 0. */
struct seen {
    char name[64];
    uint64_t gen;
    uint64_t t[STATS_COUNTERS];
    int n;
};

static void seen_each(void *ud, size_t place, uint64_t gen, const char *policy,
                      const uint64_t total[STATS_COUNTERS])
{
    struct seen *v = ud;

    CHECK(place < 2);
    snprintf(v[place].name, sizeof(v[place].name), "%s", policy);
    v[place].gen = gen;
    for (int k = 0; k < STATS_COUNTERS; k++)
        v[place].t[k] = total[k];
    v[place].n++;
}

static void test_stats_running_totals(void)
{
    struct stats *s = new_stats_of(2);
    struct seen v[2];
    int64_t a[5], d[5];
    int known = 0;
    char *text;
    uint64_t gen_b;

    CHECK_INT(stats_capacity(s), 2);
    for (int i = 0; i < 3; i++)
        stats_record_at(s, "a", 1, T0);
    stats_record_at(s, "a", 0, T0 + 1);
    stats_record_pass(s, "a");
    stats_record_pass(s, "a");
    stats_record_error(s, "a", PERMITD_EUNAVAILABLE, 1);
    stats_record_error(s, "b", PERMITD_ERANGE, 1);              /* real: takes a place */
    stats_record_error(s, "made-up", PERMITD_ENOTFOUND, 0);      /* not counted anywhere */
    memset(v, 0, sizeof(v));
    stats_totals(s, seen_each, v);
    CHECK_STR(v[0].name, "a");
    CHECK_INT(v[0].t[STATS_ALLOWED], 3);
    CHECK_INT(v[0].t[STATS_DENIED], 1);
    CHECK_INT(v[0].t[STATS_PASSES], 2);
    CHECK_INT(v[0].t[STATS_ERRORS], 1);
    CHECK_STR(v[1].name, "b");
    CHECK_INT(v[1].t[STATS_ERRORS], 1);
    CHECK_INT(v[1].t[STATS_ALLOWED] + v[1].t[STATS_DENIED] + v[1].t[STATS_PASSES], 0);
    CHECK(v[0].gen != v[1].gen);
    /* A pass is an allowed answer on /metrics. */
    text = prom(s);
    CHECK(text != NULL);
    CHECK_INT(sample(text, "permitd_acquires_total{policy=\"a\",result=\"allowed\"}"), 5);
    free(text);
    /* An error adds nothing to the chart: "b" has a place but no traffic. */
    stats_series_at(s, "b", 5, T0 + 1, a, d, &known);
    CHECK_INT(a[4] + d[4], 0);
    /* "c" evicts the least recently active: "b", whose error is no
     * decision (a's passes came at time(NULL), the latest). */
    gen_b = v[1].gen;
    stats_record_at(s, "c", 1, T0 + 2);
    memset(v, 0, sizeof(v));
    stats_totals(s, seen_each, v);
    CHECK_INT(v[0].n + v[1].n, 2);
    for (int i = 0; i < 2; i++) {
        if (strcmp(v[i].name, "c") != 0)
            continue;
        CHECK(v[i].gen != gen_b);
        CHECK_INT(v[i].t[STATS_ALLOWED], 1);
        CHECK_INT(v[i].t[STATS_ERRORS] + v[i].t[STATS_DENIED] + v[i].t[STATS_PASSES], 0);
    }
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
    CHECK_INT(stats_series(s, "api", 2, &end, allowed, denied, NULL), 2);
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
    TEST_RUN(test_stats_shadow_denied_apart);
    TEST_RUN(test_stats_ring_rolls_over);
    TEST_RUN(test_stats_policy_cap);
    TEST_RUN(test_stats_every_policy_has_a_series);
    TEST_RUN(test_stats_evicts_the_least_recently_active);
    TEST_RUN(test_stats_counting_takes_no_lock);
    TEST_RUN(test_stats_counts_exactly_while_others_evict);
    TEST_RUN(test_stats_size_is_checked);
    TEST_RUN(test_stats_errors);
    TEST_RUN(test_stats_running_totals);
    TEST_RUN(test_stats_latency_histogram);
    TEST_RUN(test_stats_wall_clock);
    return TEST_REPORT();
}
