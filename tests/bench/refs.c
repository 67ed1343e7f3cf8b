/*
 * refs.c - what the policy table's reference counting costs a decision.
 *
 * Every Acquire takes a reference on its policy's entry (policies_get())
 * and drops it when answered (policies_release()): two atomic additions on
 * the entry, plus two on the reading thread's own slot counter. With every
 * worker deciding the same hot policy, the entry's counter is one cache
 * line written by all of them. This program times exactly that pair on the
 * real table (server/decisions/policies.c), against the same lookup with
 * no atomics at all (a copy of the table's binary search over the same
 * names), so the difference is what the atomics cost:
 *
 *   none      the lookup alone, no atomics (1 thread, then 2)
 *   1 thread  policies_get + policies_release, nobody else on the line
 *   2 same    2 threads, get + release of the one same entry (the hot policy)
 *   2 apart   2 threads, each its own entry (no shared line)
 *
 * Each case runs ROUNDS times; the best round counts (other work on a
 * shared machine only ever slows a round down). ns/op is each thread's own
 * CPU time (CLOCK_THREAD_CPUTIME_ID: time spent waiting for a core on a
 * busy machine is not counted) over its iterations, averaged over the
 * threads; a cache line bounced between two cores shows up there, as the
 * stalls of the instructions that wait for it.
 *
 * Build (Release, no sanitizers) and run:
 *   cmake -S . -B build/bench-refs -DCMAKE_BUILD_TYPE=Release
 *   cmake --build build/bench-refs --target bench_refs
 *   build/bench-refs/tests/bench_refs [iterations per thread]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "decisions/policies.h"

#define NPOLICIES 64
#define ROUNDS 5

static struct policies *table;
static char names[NPOLICIES][32];
static const char *sorted[NPOLICIES];
static long iterations = 20000000;
static volatile unsigned long sink;

struct worker {
    pthread_t t;
    const char *name;
    int mode;                   /* 0: no atomics; 1: get + release */
    double cpu_ns;              /* the thread's CPU time over the loop */
};

static double cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The table's own lookup (policies.c find()), without the reference. */
static const char *plain_find(const char *name)
{
    size_t lo = 0, hi = NPOLICIES;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(sorted[mid], name);
        if (c == 0)
            return sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    unsigned long acc = 0;
    double t0 = cpu_ns();

    for (long i = 0; i < iterations; i++) {
        if (w->mode == 0) {
            const char *p = plain_find(w->name);
            __asm__ volatile("" : : "r"(p) : "memory");
            acc += p != NULL;
        } else {
            const struct policies_entry *e = policies_get(table, w->name);
            acc += (unsigned long)e->max_permits;
            policies_release(e);
        }
    }
    w->cpu_ns = cpu_ns() - t0;
    sink += acc;
    return NULL;
}

/* Best ns per operation of nthreads workers over ROUNDS rounds. */
static double measure(int nthreads, int mode, const char *a, const char *b)
{
    double best = 1e30;

    for (int r = 0; r < ROUNDS; r++) {
        struct worker w[2] = {{.name = a, .mode = mode}, {.name = b, .mode = mode}};
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

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    static struct config cfg;
    struct permitd_error err = {0, ""};
    double none1, none, one, same, apart;

    if (argc > 1)
        iterations = atol(argv[1]);
    if (policies_new(&cfg, NULL, &table, &err) != PERMITD_OK) {
        fprintf(stderr, "refs: %s\n", err.message);
        return 1;
    }
    for (int i = 0; i < NPOLICIES; i++) {
        char *fields[] = {"max_permits", "100", "rate", "1", "apps", "app", "version", "1"};
        struct policies_entry *e;
        snprintf(names[i], sizeof(names[i]), "policy-%03d", i);
        sorted[i] = names[i];
        if (policies_parse(names[i], fields, 8, &e, &err) != PERMITD_OK ||
            policies_install(table, e) != PERMITD_OK) {
            fprintf(stderr, "refs: cannot build policy %s\n", names[i]);
            return 1;
        }
    }
    qsort(sorted, NPOLICIES, sizeof(*sorted), by_str);
    none1 = measure(1, 0, names[31], NULL);
    none = measure(2, 0, names[31], names[31]);
    one = measure(1, 1, names[31], NULL);
    same = measure(2, 1, names[31], names[31]);
    apart = measure(2, 1, names[31], names[32]);
    printf("iterations per thread: %ld, %d policies, best of %d rounds\n", iterations,
           NPOLICIES, ROUNDS);
    printf("none, 1   %6.1f ns/op  (lookup alone, 1 thread)\n", none1);
    printf("none      %6.1f ns/op  (lookup alone, 2 threads)\n", none);
    printf("1 thread  %6.1f ns/op  (+%.1f for the atomics)\n", one, one - none1);
    printf("2 same    %6.1f ns/op  (+%.1f: one entry, its line shared)\n", same, same - none);
    printf("2 apart   %6.1f ns/op  (+%.1f: an entry each)\n", apart, apart - none);
    policies_free(table);
    return 0;
}
