/*
 * stats.c - what counting one decision in the stats table costs
 * (server/decisions/stats.c: stats_record(), once per Acquire, on every
 * API worker).
 *
 * The chart's table used to take a pthread_rwlock read lock per decision:
 * the lock word is one cache line that every worker writes (a read lock is
 * an atomic add on it, and so is its release), so two workers counting at
 * once bounce it between their cores whatever policies they count. This
 * program times stats_record() on the real table:
 *
 *   1 thread  one policy, nobody else on any line
 *   2 same    2 threads, the one same policy (its counters' line shared:
 *             the lower bound of any scheme that counts in one place)
 *   2 apart   2 threads, a policy each (only the table's own shared
 *             lines, if any: the lock word was one)
 *
 * Each case runs ROUNDS times; the best round counts (other work on a
 * shared machine only ever slows a round down). ns/op is each thread's own
 * CPU time (CLOCK_THREAD_CPUTIME_ID) over its iterations, averaged over
 * the threads, as in refs.c.
 *
 * Build (Release, no sanitizers) and run:
 *   cmake -S . -B build/bench-stats -DCMAKE_BUILD_TYPE=Release
 *   cmake --build build/bench-stats --target bench_stats
 *   build/bench-stats/tests/bench_stats [iterations per thread]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "decisions/stats.h"

#define NPOLICIES 64
#define ROUNDS 5

static struct stats *table;
static char names[NPOLICIES][32];
static long iterations = 10000000;

struct worker {
    pthread_t t;
    const char *name;
    double cpu_ns;              /* the thread's CPU time over the loop */
};

static double cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    double t0 = cpu_ns();

    /* A fixed second: the cost of counting, not of time(NULL). */
    for (long i = 0; i < iterations; i++)
        stats_record_at(table, w->name, (int)(i & 1), 1700000000);
    w->cpu_ns = cpu_ns() - t0;
    return NULL;
}

/* Best ns per operation of nthreads workers over ROUNDS rounds. */
static double measure(int nthreads, const char *a, const char *b)
{
    double best = 1e30;

    for (int r = 0; r < ROUNDS; r++) {
        struct worker w[2] = {{.name = a}, {.name = b}};
        double ns = 0;
        for (int i = 0; i < nthreads; i++)
            pthread_create(&w[i].t, NULL, run, &w[i]);
        for (int i = 0; i < nthreads; i++) {
            pthread_join(w[i].t, NULL);
            ns += w[i].cpu_ns / (double)iterations / nthreads;
        }
        if (ns < best)
            best = ns;
    }
    return best;
}

int main(int argc, char **argv)
{
    struct permitd_error err = {0, ""};
    double one, same, apart;

    if (argc > 1)
        iterations = atol(argv[1]);
    if (stats_new(1000, &table, &err) != PERMITD_OK) {
        fprintf(stderr, "bench_stats: %s\n", err.message);
        return 1;
    }
    for (int i = 0; i < NPOLICIES; i++) {
        snprintf(names[i], sizeof(names[i]), "policy-%03d", i);
        stats_record_at(table, names[i], 1, 1700000000);
    }
    one = measure(1, names[31], NULL);
    same = measure(2, names[31], names[31]);
    apart = measure(2, names[31], names[32]);
    printf("iterations per thread: %ld, %d policies, best of %d rounds\n", iterations,
           NPOLICIES, ROUNDS);
    printf("1 thread  %6.1f ns/op\n", one);
    printf("2 same    %6.1f ns/op  (one policy: its counters' line shared)\n", same);
    printf("2 apart   %6.1f ns/op  (a policy each)\n", apart);
    stats_free(table);
    return 0;
}
