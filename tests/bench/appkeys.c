/*
 * appkeys.c - what the API key check costs each API call (issue 21;
 * target: at most 1 us of permitd CPU).
 *
 * Times appkeys_check() (server/decisions/appkeys.c) as api.c calls it:
 * parse the Authorization header, SHA-256 of the secret (nettle), binary
 * search of the prefix in a table of NKEYS keys under the read lock,
 * constant-time compare, copy of the app's name. Cases:
 *
 *   good       a valid key, app left empty (the common call)
 *   unknown    a well-formed key that is not in the table (same work:
 *              hashed and compared against a dummy digest)
 *   malformed  a header that is not a key (parse only)
 *   good x2    two threads checking valid keys at once (the read lock's
 *              shared line bounced between cores)
 *
 * Each case runs ROUNDS times; the best round counts. ns/op is each
 * thread's own CPU time (CLOCK_THREAD_CPUTIME_ID) over its iterations.
 *
 * Build (Release, no sanitizers) and run:
 *   cmake -S . -B build/bench-appkeys -DCMAKE_BUILD_TYPE=Release
 *   cmake --build build/bench-appkeys --target bench_appkeys
 *   build/bench-appkeys/tests/bench_appkeys [iterations per thread]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decisions/appkeys.h"

#define NKEYS 10000
#define ROUNDS 5

static struct appkeys *table;
static char good[NKEYS][96], unknown[96];
static long iterations = 200000;

static double thread_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

struct run {
    const char *header;         /* NULL: the good keys in turn */
    double ns_per_op;
};

static void *loop(void *arg)
{
    struct run *r = arg;
    struct permitd_error err;
    char app[APPS_NAME_MAX + 1], prefix[APPKEYS_PREFIX_LEN + 1];
    double t0 = thread_ns();
    long sink = 0;

    for (long i = 0; i < iterations; i++) {
        const char *h = r->header ? r->header : good[i % NKEYS];
        sink += appkeys_check(table, h, "", 1700000000, app, prefix, NULL, &err);
    }
    r->ns_per_op = (thread_ns() - t0) / (double)iterations;
    if (sink == 12345)
        puts("");
    return NULL;
}

static double best(const char *header, int threads)
{
    double out = 1e18;

    for (int round = 0; round < ROUNDS; round++) {
        pthread_t t[2];
        struct run r[2] = {{header, 0}, {header, 0}};
        double sum = 0;
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, loop, &r[i]);
        for (int i = 0; i < threads; i++) {
            pthread_join(t[i], NULL);
            sum += r[i].ns_per_op;
        }
        if (sum / threads < out)
            out = sum / threads;
    }
    return out;
}

int main(int argc, char **argv)
{
    struct permitd_error err = {0, ""};
    struct apps_key_row *rows = calloc(NKEYS, sizeof(*rows));
    struct appkeys_minted m;

    if (argc > 1)
        iterations = atol(argv[1]);
    if (rows == NULL || appkeys_new(0, &table, &err) != PERMITD_OK)
        return 1;
    for (int i = 0; i < NKEYS; i++) {
        appkeys_mint(&m, &err);
        snprintf(good[i], sizeof(good[i]), "Bearer %s", m.key);
        snprintf(rows[i].prefix, sizeof(rows[i].prefix), "%s", m.prefix);
        snprintf(rows[i].app, sizeof(rows[i].app), "app-%d", i % 100);
        snprintf(rows[i].hash, sizeof(rows[i].hash), "%s", m.hash_hex);
        rows[i].app_enabled = 1;
    }
    appkeys_mint(&m, &err);
    snprintf(unknown, sizeof(unknown), "Bearer %s", m.key);
    if (appkeys_replace(table, rows, NKEYS, appkeys_generation(table), &err) != PERMITD_OK)
        return 1;
    printf("%d keys in the table, %ld checks per thread, best of %d rounds\n", NKEYS, iterations,
           ROUNDS);
    printf("  good       %7.1f ns/op\n", best(NULL, 1));
    printf("  unknown    %7.1f ns/op\n", best(unknown, 1));
    printf("  malformed  %7.1f ns/op\n", best("Bearer nope", 1));
    printf("  good x2    %7.1f ns/op (each of 2 threads)\n", best(NULL, 2));
    appkeys_free(table);
    free(rows);
    return 0;
}
