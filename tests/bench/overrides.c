/*
 * overrides.c - what the override lookup costs an Acquire (issue 37: at
 * most 200 ns at 100,000 overrides over 10,000 policies), and what
 * building the table of that many costs (the in-memory half of a sync:
 * time and bytes; the MySQL read is measured by test_overrides.py's scale
 * test, tests/integration).
 *
 * The table (server/decisions/overrides.c) is filled with OVERRIDES rows
 * over POLICIES policies, as a sync fills it: per policy 6 exact keys
 * ("user-<p>-<i>"), 3 prefixes ("tenant-<p>-<i>-", lengths 10 to 14) and
 * one app. The lookups cycle over a mix of requests: a third exact hits, a
 * third keys under a prefix (the exact probe misses, the prefix pass
 * finds), a third keys nothing matches (every probe misses, the app's
 * too): the costlier paths, not only the hits. Each round times LOOKUPS
 * lookups on this thread's CPU clock; the best of ROUNDS counts.
 *
 * Build (Release, no sanitizers) and run:
 *   cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release
 *   cmake --build build/bench --target bench_overrides
 *   build/bench/tests/bench_overrides [overrides] [policies]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decisions/overrides.h"

#define ROUNDS 5
#define LOOKUPS 2000000
#define REQUESTS 4096

static double now_s(clockid_t c)
{
    struct timespec ts;

    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct req {
    char policy[32], key[64], app[32];
};

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    size_t np = argc > 2 ? strtoul(argv[2], NULL, 10) : 10000;
    size_t per = n / np, policies, rows, bytes;
    struct permitd_error err = {0, ""};
    struct overrides *t = NULL;
    struct overrides_build *b = NULL;
    static struct req reqs[REQUESTS];
    double t0, build_s, best = 1e9;
    volatile int64_t sink = 0;
    char name[32], value[64];

    if (per == 0 || overrides_new(&t, &err) != PERMITD_OK ||
        overrides_build_new(&b, &err) != PERMITD_OK) {
        fprintf(stderr, "bench_overrides: %s\n", err.message);
        return 1;
    }
    t0 = now_s(CLOCK_MONOTONIC);
    for (size_t p = 0; p < np; p++) {
        snprintf(name, sizeof(name), "policy-%zu", p);
        overrides_build_changes(b, name, per);
        for (size_t i = 0; i < per; i++) {
            struct overrides_row r = {0};
            r.id = (int64_t)(p * per + i + 1);
            r.version = 1;
            r.policy = name;
            r.action = OVERRIDES_LIMIT;
            r.max_permits = 100 + (int64_t)i;
            if (i % 10 < 6) {
                r.kind = OVERRIDES_KEY;
                snprintf(value, sizeof(value), "user-%zu-%zu", p, i);
            } else if (i % 10 < 9) {
                r.kind = OVERRIDES_PREFIX;
                snprintf(value, sizeof(value), "tenant-%zu-%zu-", p, i);
            } else {
                r.kind = OVERRIDES_APP;
                snprintf(value, sizeof(value), "app-%zu", i);
            }
            r.value = value;
            r.value_len = strlen(value);
            if (overrides_build_row(b, &r) != PERMITD_OK) {
                fprintf(stderr, "bench_overrides: out of memory\n");
                return 1;
            }
        }
    }
    if (overrides_replace_all(t, b, &err) != PERMITD_OK) {
        fprintf(stderr, "bench_overrides: %s\n", err.message);
        return 1;
    }
    build_s = now_s(CLOCK_MONOTONIC) - t0;
    overrides_stats(t, &policies, &rows, &bytes);

    srand(37);
    for (size_t k = 0; k < REQUESTS; k++) {
        size_t p = (size_t)rand() % np, i = (size_t)rand() % per;
        snprintf(reqs[k].policy, sizeof(reqs[k].policy), "policy-%zu", p);
        snprintf(reqs[k].app, sizeof(reqs[k].app), "checkout");
        switch (k % 3) {
        case 0:
            snprintf(reqs[k].key, sizeof(reqs[k].key), "user-%zu-%zu", p, i - i % 10);
            break;
        case 1:
            snprintf(reqs[k].key, sizeof(reqs[k].key), "tenant-%zu-%zu-order-%zu", p,
                     i - i % 10 + 6, k);
            break;
        default:
            snprintf(reqs[k].key, sizeof(reqs[k].key), "someone-%zu-%zu", p, k);
        }
    }
    for (int round = 0; round < ROUNDS; round++) {
        double c0 = now_s(CLOCK_THREAD_CPUTIME_ID), ns;
        for (size_t k = 0; k < LOOKUPS; k++) {
            const struct req *q = &reqs[k & (REQUESTS - 1)];
            struct overrides_hit h;
            overrides_lookup(t, q->policy, q->key, q->app, 1, &h);
            sink += h.action + (int64_t)h.changes;
        }
        ns = (now_s(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e9 / LOOKUPS;
        if (ns < best)
            best = ns;
    }
    printf("overrides %zu over %zu policies: build %.1f ms, %.1f MB (%zu bytes); "
           "lookup %.1f ns (best of %d rounds of %d)\n", rows, policies, build_s * 1e3,
           (double)bytes / 1e6, bytes, best, ROUNDS, LOOKUPS);
    overrides_free(t);
    return sink == 42 ? 2 : 0;
}
