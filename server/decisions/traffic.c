/*
 * traffic.c - running totals per (policy, app) for the traffic history
 * (see traffic.h).
 *
 * The table is insert-only: a place, once taken, keeps its pair for the
 * life of the process. That is what makes counting lock-free without
 * stats.c's grace periods: a lookup probes an open-addressed index of
 * place numbers (linear probing, power-of-two size at least twice the
 * places); an entry is written whole before the index names it (release
 * store, acquire load), and no entry ever moves or leaves, so whatever a
 * lookup finds stays true, and a miss is confirmed under the mutex before
 * a place is taken (two threads meeting a new pair at once take one place).
 *
 * The price of never evicting is that pairs of policies deleted long ago
 * keep their places until a restart; --traffic-pairs bounds them, and a
 * full table still counts each policy's total under its app "" pair when
 * that one has a place (the writer takes it first for every policy it
 * meets, traffic_record() below), so what is lost past the bound is the
 * split by app before the policy's total.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "decisions/traffic.h"

/* One pair's place. */
struct pair {
    char policy[TRAFFIC_NAME_MAX + 1];
    char app[TRAFFIC_NAME_MAX + 1];
    _Atomic uint64_t total[TRAFFIC_COUNTERS];
};

struct traffic {
    pthread_mutex_t lock;           /* taking a place */
    size_t cap;                     /* places */
    _Atomic size_t used;            /* places taken (written under the lock) */
    size_t mask;                    /* index slots - 1 */
    _Atomic uint32_t *index;        /* place + 1; 0 = empty */
    struct pair *pairs;
    _Atomic uint64_t dropped;
};

int traffic_new(size_t pairs, struct traffic **out, struct permitd_error *err)
{
    struct traffic *t;
    size_t slots = 2;

    *out = NULL;
    if (pairs < 1 || pairs > TRAFFIC_PAIRS_MAX)
        return permitd_error_set(err, PERMITD_EINVAL, "traffic: %zu pairs: must be 1 .. %d",
                                 pairs, TRAFFIC_PAIRS_MAX);
    while (slots < 2 * pairs)
        slots *= 2;
    if ((t = calloc(1, sizeof(*t))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "traffic: out of memory");
    /* calloc: the pages no pair reaches cost no memory. */
    t->index = calloc(slots, sizeof(*t->index));
    t->pairs = calloc(pairs, sizeof(*t->pairs));
    if (t->index == NULL || t->pairs == NULL) {
        free((void *)t->index);
        free(t->pairs);
        free(t);
        return permitd_error_set(err, PERMITD_EINTERNAL, "traffic: out of memory for %zu "
                                 "pairs (%zu bytes)", pairs, pairs * sizeof(struct pair));
    }
    t->cap = pairs;
    t->mask = slots - 1;
    pthread_mutex_init(&t->lock, NULL);
    *out = t;
    return PERMITD_OK;
}

void traffic_free(struct traffic *t)
{
    if (t == NULL)
        return;
    pthread_mutex_destroy(&t->lock);
    free((void *)t->index);
    free(t->pairs);
    free(t);
}

int traffic_name_ok(const char *name)
{
    size_t n = 0;

    if (name == NULL || !((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z') ||
                          (name[0] >= '0' && name[0] <= '9')))
        return 0;
    for (; name[n] != '\0'; n++) {
        char c = name[n];
        if (n >= TRAFFIC_NAME_MAX ||
            !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static uint64_t hash(const char *policy, const char *app)
{
    uint64_t h = 1469598103934665603ULL;

    for (; *policy; policy++)
        h = (h ^ (unsigned char)*policy) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;      /* no byte of a name: "a"+"bc" is not "ab"+"c" */
    for (; *app; app++)
        h = (h ^ (unsigned char)*app) * 1099511628211ULL;
    return h;
}

/* The index slot naming the pair, or the empty slot where it would go. */
static size_t probe(struct traffic *t, const char *policy, const char *app, uint64_t h)
{
    size_t i = (size_t)h & t->mask;
    uint32_t e;

    while ((e = atomic_load_explicit(&t->index[i], memory_order_acquire)) != 0 &&
           (strcmp(t->pairs[e - 1].policy, policy) != 0 || strcmp(t->pairs[e - 1].app, app) != 0))
        i = (i + 1) & t->mask;
    return i;
}

/* The pair's place; when it has none, one is taken if create is set and
 * one is free. NULL: no place. */
static struct pair *find(struct traffic *t, const char *policy, const char *app, int create)
{
    uint64_t h = hash(policy, app);
    size_t i = probe(t, policy, app, h);
    uint32_t e = atomic_load_explicit(&t->index[i], memory_order_acquire);
    struct pair *p = NULL;
    size_t used;

    if (e != 0)
        return &t->pairs[e - 1];
    if (!create)
        return NULL;
    pthread_mutex_lock(&t->lock);
    i = probe(t, policy, app, h);
    e = atomic_load_explicit(&t->index[i], memory_order_acquire);
    if (e != 0) {
        p = &t->pairs[e - 1];
    } else if ((used = atomic_load_explicit(&t->used, memory_order_relaxed)) < t->cap) {
        p = &t->pairs[used];
        memcpy(p->policy, policy, strlen(policy) + 1);
        memcpy(p->app, app, strlen(app) + 1);
        atomic_store_explicit(&t->used, used + 1, memory_order_release);
        atomic_store_explicit(&t->index[i], (uint32_t)used + 1, memory_order_release);
    }
    pthread_mutex_unlock(&t->lock);
    return p;
}

void traffic_record_take(struct traffic *t, const char *policy, const char *app,
                         enum traffic_counter c, int keyed)
{
    struct pair *p;

    if (t == NULL || (unsigned)c >= TRAFFIC_COUNTERS)
        return;
    if (!traffic_name_ok(policy)) {
        atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
        return;
    }
    if (app == NULL || !traffic_name_ok(app))
        app = "";
    if ((p = find(t, policy, app, 0)) == NULL) {
        /* A new pair: its policy's app "" pair is taken first, so a table
         * that fills up still counts every policy it has met. */
        if (app[0] != '\0')
            (void)find(t, policy, "", 1);
        if ((p = find(t, policy, app, 1)) == NULL && app[0] != '\0')
            p = find(t, policy, "", 0);
    }
    if (p == NULL) {
        atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
        return;
    }
    atomic_fetch_add_explicit(&p->total[c], 1, memory_order_relaxed);
    if (keyed)
        atomic_fetch_add_explicit(&p->total[TRAFFIC_KEYED], 1, memory_order_relaxed);
}

void traffic_record(struct traffic *t, const char *policy, const char *app,
                    enum traffic_counter c)
{
    traffic_record_take(t, policy, app, c, 0);
}

void traffic_totals(struct traffic *t,
                    void (*each)(void *ud, size_t place, const char *policy, const char *app,
                                 const uint64_t total[TRAFFIC_COUNTERS]),
                    void *ud)
{
    size_t used = atomic_load_explicit(&t->used, memory_order_acquire);

    for (size_t i = 0; i < used; i++) {
        uint64_t v[TRAFFIC_COUNTERS];
        for (int k = 0; k < TRAFFIC_COUNTERS; k++)
            v[k] = atomic_load_explicit(&t->pairs[i].total[k], memory_order_relaxed);
        each(ud, i, t->pairs[i].policy, t->pairs[i].app, v);
    }
}

size_t traffic_capacity(const struct traffic *t)
{
    return t->cap;
}

uint64_t traffic_dropped(const struct traffic *t)
{
    return atomic_load_explicit(&((struct traffic *)t)->dropped, memory_order_relaxed);
}
