/*
 * test_hotkeys.c - the Space-Saving sketch of server/decisions/hotkeys.c
 * against an exact count, and what a worker's count costs.
 *
 * Space-Saving's guarantee, for a sketch of K counters over a stream of
 * total weight N: every count is at least the key's true count and at
 * most N / K above it (and at most `error` above it), and every key whose
 * true count exceeds N / K is among the counters. Checked on skewed
 * (Zipf-like) streams with far more distinct keys than counters, in
 * single steps and in weighted folds (how worker sketches are merged).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decisions/hotkeys.h"
#include "test.h"

#define NKEYS 5000

/* A small deterministic generator (xorshift64*). */
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void)
{
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
}

/* A key index with P(i) ~ 1 / (i + 1): a few keys take most of the stream. */
static size_t zipf(const double *cdf)
{
    double u = (double)(next() >> 11) / 9007199254740992.0;
    size_t lo = 0, hi = NKEYS - 1;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void key_of(size_t i, char *buf, size_t size)
{
    snprintf(buf, size, "user-%zu", i);
}

/* Checks the guarantee of s against the exact counts truth[] (of total n). */
static void check_guarantee(const struct hotkeys_sketch *s, const uint64_t *truth, uint64_t n)
{
    struct hotkeys_count *top = malloc(HOTKEYS_K * sizeof(*top));
    size_t m = hotkeys_sketch_top(s, top, HOTKEYS_K);
    uint64_t bound = n / HOTKEYS_K;
    int present[NKEYS] = {0};

    CHECK_INT(s->total, n);
    CHECK_INT(m, HOTKEYS_K);
    for (size_t j = 0; j < m; j++) {
        size_t i = (size_t)strtoul(top[j].key + strlen("user-"), NULL, 10);
        CHECK(i < NKEYS);
        if (i >= NKEYS)
            continue;
        present[i] = 1;
        CHECK(top[j].count >= truth[i]);                     /* never under */
        CHECK(top[j].count - truth[i] <= bound);             /* over by at most N/K */
        CHECK(top[j].count - top[j].error <= truth[i]);      /* error bounds the excess */
        if (j > 0)
            CHECK(top[j - 1].count >= top[j].count);         /* largest first */
    }
    for (size_t i = 0; i < NKEYS; i++)
        if (truth[i] > bound && !present[i]) {
            fprintf(stderr, "key user-%zu (true count %" PRIu64 " > N/K %" PRIu64 ") missing\n",
                    i, truth[i], bound);
            CHECK(0);
        }
    free(top);
}

static double *make_cdf(void)
{
    double *cdf = malloc(NKEYS * sizeof(*cdf)), total = 0;

    for (size_t i = 0; i < NKEYS; i++)
        total += 1.0 / (double)(i + 1);
    for (size_t i = 0; i < NKEYS; i++)
        cdf[i] = (i ? cdf[i - 1] : 0) + 1.0 / (double)(i + 1) / total;
    cdf[NKEYS - 1] = 1.0;
    return cdf;
}

static void test_hotkeys_sketch_against_exact_count(void)
{
    double *cdf = make_cdf();
    uint64_t *truth = calloc(NKEYS, sizeof(*truth));
    struct hotkeys_sketch *s = malloc(sizeof(*s));
    const uint64_t n = 200000;
    char key[32];

    hotkeys_sketch_init(s);
    for (uint64_t t = 0; t < n; t++) {
        size_t i = zipf(cdf);
        truth[i]++;
        key_of(i, key, sizeof(key));
        CHECK_INT(hotkeys_sketch_add(s, key, strlen(key), 1), PERMITD_OK);
    }
    check_guarantee(s, truth, n);
    /* The true top 10 are the sketch's top 10 here (far above N/K). */
    {
        struct hotkeys_count top[10];
        CHECK_INT(hotkeys_sketch_top(s, top, 10), 10);
        for (size_t j = 0; j < 10; j++) {
            key_of(j, key, sizeof(key));
            CHECK_STR(top[j].key, key);
        }
    }
    /* Cleared, it counts afresh and keeps its buffers. */
    hotkeys_sketch_clear(s);
    CHECK_INT(s->n, 0);
    CHECK_INT(s->total, 0);
    CHECK_INT(hotkeys_sketch_add(s, "x", 1, 3), PERMITD_OK);
    {
        struct hotkeys_count top[2];
        CHECK_INT(hotkeys_sketch_top(s, top, 2), 1);
        CHECK_STR(top[0].key, "x");
        CHECK_INT(top[0].count, 3);
        CHECK_INT(top[0].error, 0);
    }
    hotkeys_sketch_release(s);
    free(s);
    free(truth);
    free(cdf);
}

/* Four "workers" count a quarter of the stream each; their sketches are
 * folded (weighted adds) into one, as the publisher does: the guarantee
 * still holds against the exact count of the whole stream. */
static void test_hotkeys_folded_sketches_keep_the_guarantee(void)
{
    double *cdf = make_cdf();
    uint64_t *truth = calloc(NKEYS, sizeof(*truth));
    struct hotkeys_sketch *w = malloc(4 * sizeof(*w)), *all = malloc(sizeof(*all));
    const uint64_t n = 200000;
    char key[32];

    for (int k = 0; k < 4; k++)
        hotkeys_sketch_init(&w[k]);
    hotkeys_sketch_init(all);
    for (uint64_t t = 0; t < n; t++) {
        size_t i = zipf(cdf);
        truth[i]++;
        key_of(i, key, sizeof(key));
        hotkeys_sketch_add(&w[t % 4], key, strlen(key), 1);
    }
    for (int k = 0; k < 4; k++)
        for (size_t j = 0; j < w[k].n; j++)
            hotkeys_sketch_add(all, w[k].e[j].key, strlen(w[k].e[j].key), w[k].e[j].count);
    /* Each fold adds at most its part's N/K: the whole stays within 2 N/K
     * of the truth; every count is still an upper bound, and the keys
     * above 2 N/K are all there. */
    {
        struct hotkeys_count top[HOTKEYS_K];
        size_t m = hotkeys_sketch_top(all, top, HOTKEYS_K);
        int present[NKEYS] = {0};
        for (size_t j = 0; j < m; j++) {
            size_t i = (size_t)strtoul(top[j].key + 5, NULL, 10);
            present[i] = 1;
            CHECK(top[j].count >= truth[i]);
            CHECK(top[j].count - truth[i] <= 2 * n / HOTKEYS_K);
        }
        for (size_t i = 0; i < NKEYS; i++)
            if (truth[i] > 2 * n / HOTKEYS_K)
                CHECK(present[i]);
    }
    for (int k = 0; k < 4; k++)
        hotkeys_sketch_release(&w[k]);
    hotkeys_sketch_release(all);
    free(w);
    free(all);
    free(truth);
    free(cdf);
}

/* Few keys (fewer than K): the counts are exact, with no error. */
static void test_hotkeys_few_keys_are_exact(void)
{
    struct hotkeys_sketch *s = malloc(sizeof(*s));
    struct hotkeys_count top[5];
    char key[POLICY_KEY_MAX + 10];

    hotkeys_sketch_init(s);
    for (int i = 0; i < 7; i++)
        hotkeys_sketch_add(s, "alice", 5, 1);
    hotkeys_sketch_add(s, "bob", 3, 2);
    memset(key, 'k', sizeof(key) - 1);      /* a key longer than any: cut to POLICY_KEY_MAX */
    key[sizeof(key) - 1] = '\0';
    hotkeys_sketch_add(s, key, strlen(key), 1);
    CHECK_INT(hotkeys_sketch_top(s, top, 5), 3);
    CHECK_STR(top[0].key, "alice");
    CHECK_INT(top[0].count, 7);
    CHECK_INT(top[0].error, 0);
    CHECK_STR(top[1].key, "bob");
    CHECK_INT(top[1].count, 2);
    CHECK_INT(strlen(top[2].key), POLICY_KEY_MAX);
    hotkeys_sketch_release(s);
    free(s);
}

/* What hotkeys_record() costs a decision: its worker's mutex (taken by
 * no one else between two publishes) and one sketch step, over `keys`
 * distinct keys taken in turn (10: every step a hit; 1,000 against 100
 * counters: most steps take a counter over, Space-Saving's worst case).
 * Printed, not checked against a number: the machine is shared. */
static void record_cost(int keys)
{
    struct config cfg;
    struct hotkeys *hk = NULL;
    struct hotkeys_worker *w = NULL;
    struct permitd_error err;
    struct timespec a, b;
    char (*names)[16] = malloc(1000 * sizeof(*names));
    const int n = 1000000;
    uint64_t counted, dropped;

    memset(&cfg, 0, sizeof(cfg));
    cfg.hotkeys_publish_ms = 5000;
    for (int i = 0; i < 1000; i++)
        snprintf(names[i], sizeof(names[i]), "user-%d", i);
    CHECK_INT(hotkeys_new(&cfg, NULL, &hk, &err), PERMITD_OK);
    CHECK_INT(hotkeys_worker_new(hk, &w, &err), PERMITD_OK);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++)
        hotkeys_record(w, "api", names[((size_t)i * 7919u) % (size_t)keys],
                       (i & 7) == 0 ? HOTKEYS_DENIED : HOTKEYS_ALLOWED);
    clock_gettime(CLOCK_MONOTONIC, &b);
    hotkeys_record(w, "api", "", HOTKEYS_ALLOWED);      /* the shared bucket: not counted */
    hotkeys_counters(hk, &counted, &dropped);
    CHECK_INT(counted, n);
    CHECK_INT(dropped, 0);
    fprintf(stderr, "hotkeys_record: %.0f ns a take over %d keys (1 in 8 denied)\n",
            ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / n, keys);
    hotkeys_worker_free(w);
    hotkeys_free(hk);
    free(names);
}

static void test_hotkeys_record_cost(void)
{
    record_cost(10);
    record_cost(1000);
}

int main(void)
{
    TEST_RUN(test_hotkeys_sketch_against_exact_count);
    TEST_RUN(test_hotkeys_folded_sketches_keep_the_guarantee);
    TEST_RUN(test_hotkeys_few_keys_are_exact);
    TEST_RUN(test_hotkeys_record_cost);
    return TEST_REPORT();
}
