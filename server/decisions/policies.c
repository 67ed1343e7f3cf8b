/*
 * policies.c - the in-memory policy table (see policies.h).
 *
 * Readers never lock. The table is one array of entry pointers, sorted by
 * name, behind an atomic pointer. A writer (under a mutex: writers are
 * rare) builds a new array, swaps it in, and waits until no reader can
 * still be looking at the old one before freeing it: each reading thread
 * owns a slot whose counter is odd while it is inside a lookup, so the
 * writer waits only for readers that were inside when it swapped (a
 * lookup is a binary search and an atomic increment: nanoseconds), never
 * for new ones. The entries themselves are reference-counted: the table
 * holds one reference on each entry it lists, every holder (a decision in
 * flight) one more, and the last to let go frees it. So a request costs a
 * lookup and two atomic additions, and no allocation.
 *
 * What the two additions cost, measured (tests/bench/refs.c: Release build,
 * 2 cores shared with other work, 4 runs of best-of-5): the lookup alone
 * 25-33 ns; get + release add 0-15 ns on a thread alone and 12-43 ns with
 * two threads taking the one same entry (its counter's cache line bounced
 * between the cores). A decision costs permitd 10.2 us of CPU as a binary
 * Acquire, 0.9 us as an AcquireBatch item (tests/bench/RESULTS.md): at most
 * 0.4% of an Acquire, and 1-5% of a batch item only while two workers
 * decide batches of one policy at once. Left as it is: the ways around it
 * are not simple (an epoch scheme would hold writers for a whole Redis
 * round trip, since a decision holds its entry until Redis answers; a
 * per-worker copy needs invalidating on every install).
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "decisions/policies.h"

#define READERS_MAX 1024            /* threads with a slot of their own */
#define TOMBSTONES 64               /* policies dropped lately, remembered */
#define TOMBSTONE_US 30000000       /* for 30 s: longer than any reload takes */

struct snap {
    size_t n;
    struct policies_entry *v[];     /* sorted by name */
};

struct policies {
    const struct config *cfg;
    struct redis *redis;
    _Atomic(struct snap *) cur;
    pthread_mutex_t lock;           /* writers; and readers without a slot */
    struct {
        _Atomic unsigned long n;    /* odd while its thread is inside a lookup */
        char pad[64 - sizeof(unsigned long)];  /* a cache line each: the workers'
                                                  counters do not share one */
    } readers[READERS_MAX];
    /* Policies this instance dropped lately (policies_forget(): deleted
     * here, or gone from MySQL), each with the version stamp it had: a
     * reload that read the hash before the delete and installs after it
     * must not bring the policy back, nor one that finds the hash gone
     * mark it missing (answering unavailable instead of not_found). A new
     * policy of the same name has a new MySQL id, so a larger stamp, and
     * passes. Kept TOMBSTONE_US; under `lock`. */
    struct tombstone {
        char name[POLICY_NAME_MAX + 1];
        uint64_t stamp;
        int64_t until_us;
    } tombs[TOMBSTONES];
    size_t ntomb;                   /* the next slot of the ring */
};

/* A reading thread's slot, the same in every table: the thread's identity,
 * not state of a table (each table has its own counters). Slots are handed
 * out once per thread and never reused; a thread past READERS_MAX reads
 * under the writers' mutex instead. */
static _Atomic int next_slot;
static _Thread_local int my_slot = -1;

static int slot(void)
{
    if (my_slot < 0)
        my_slot = atomic_fetch_add(&next_slot, 1);
    return my_slot < READERS_MAX ? my_slot : -1;
}

static void entry_free(struct policies_entry *e)
{
    for (size_t i = 0; i < e->napps; i++)
        free(e->apps[i]);
    free(e->apps);
    free(e->rates);
    free(e);
}

void policies_release(const struct policies_entry *ce)
{
    struct policies_entry *e = (struct policies_entry *)ce;

    if (e != NULL && atomic_fetch_sub(&e->refs, 1) == 1)
        entry_free(e);
}

int policies_new(const struct config *cfg, struct redis *redis, struct policies **out,
                 struct permitd_error *err)
{
    struct policies *t = calloc(1, sizeof(*t));
    struct snap *s = calloc(1, sizeof(*s));

    *out = NULL;
    if (t == NULL || s == NULL) {
        free(t);
        free(s);
        return permitd_error_set(err, PERMITD_EINTERNAL, "policy table: out of memory");
    }
    t->cfg = cfg;
    t->redis = redis;
    atomic_init(&t->cur, s);
    pthread_mutex_init(&t->lock, NULL);
    *out = t;
    return PERMITD_OK;
}

void policies_free(struct policies *t)
{
    struct snap *s;

    if (t == NULL)
        return;
    s = atomic_load(&t->cur);
    for (size_t i = 0; i < s->n; i++)
        policies_release(s->v[i]);
    free(s);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* The index of name in s, or where it would go (*found 0). */
static size_t find(const struct snap *s, const char *name, int *found)
{
    size_t lo = 0, hi = s->n;

    *found = 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->v[mid]->name, name);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct policies_entry *lookup(const struct snap *s, const char *name)
{
    int found;
    size_t i = find(s, name, &found);

    if (!found)
        return NULL;
    atomic_fetch_add(&s->v[i]->refs, 1);
    return s->v[i];
}

const struct policies_entry *policies_get(struct policies *t, const char *name)
{
    struct policies_entry *e;
    int me = slot();

    if (me < 0) {
        pthread_mutex_lock(&t->lock);
        e = lookup(atomic_load(&t->cur), name);
        pthread_mutex_unlock(&t->lock);
        return e;
    }
    atomic_fetch_add(&t->readers[me].n, 1);        /* odd: inside */
    e = lookup(atomic_load(&t->cur), name);
    atomic_fetch_add_explicit(&t->readers[me].n, 1, memory_order_release);
    return e;
}

/* Swaps next in (t->lock held) and returns once no reader can still see
 * the array it replaced, which the caller may then free. */
static struct snap *swap(struct policies *t, struct snap *next)
{
    struct snap *old = atomic_exchange(&t->cur, next);
    int used = atomic_load(&next_slot);

    if (used > READERS_MAX)
        used = READERS_MAX;
    for (int i = 0; i < used; i++) {
        unsigned long v = atomic_load(&t->readers[i].n);
        if (v & 1)
            while (atomic_load(&t->readers[i].n) == v)
                sched_yield();
    }
    return old;
}

/* A copy of e marked missing, with one reference; NULL: out of memory. */
static struct policies_entry *lost_copy(const struct policies_entry *e)
{
    struct policies_entry *c = malloc(sizeof(*c));

    if (c == NULL)
        return NULL;
    memcpy(c, e, sizeof(*c));
    atomic_init(&c->refs, 1);
    c->missing = 1;
    c->napps = 0;
    c->rates = strdup(e->rates);
    c->apps = calloc(e->napps + 1, sizeof(*c->apps));
    for (size_t i = 0; c->apps != NULL && i < e->napps; i++) {
        if ((c->apps[i] = strdup(e->apps[i])) == NULL)
            break;
        c->napps++;
    }
    if (c->rates == NULL || c->apps == NULL || c->napps < e->napps) {
        entry_free(c);
        return NULL;
    }
    return c;
}

/* With t->lock held: the stamp policy `name` had when this instance
 * dropped it lately, or 0. */
static uint64_t tomb_stamp(const struct policies *t, const char *name)
{
    int64_t now = clock_now_us();

    for (size_t i = 0; i < TOMBSTONES; i++)
        if (t->tombs[i].until_us > now && strcmp(t->tombs[i].name, name) == 0)
            return t->tombs[i].stamp;
    return 0;
}

/* Installs e under its name (NULL: drops `name`), taking over e's
 * reference. lost: e is NULL because a reload found the hash gone, which
 * keeps a MySQL row's entry, marked missing, when there is a store (see
 * policies_reload()). Returns PERMITD_OK or PERMITD_EINTERNAL (out of
 * memory; e is released). */
static int install(struct policies *t, const char *name, struct policies_entry *e, int lost)
{
    struct snap *cur, *next, *old;
    struct policies_entry *gone = NULL;
    size_t i;
    int found;

    pthread_mutex_lock(&t->lock);
    cur = atomic_load(&t->cur);
    i = find(cur, name, &found);
    if (!found && (lost || (e != NULL && e->id > 0 && e->stamp <= tomb_stamp(t, name)))) {
        /* dropped lately: what this reload read is older than the drop */
        pthread_mutex_unlock(&t->lock);
        policies_release(e);
        return PERMITD_OK;
    }
    if (e == NULL && !lost && found && cur->v[i]->id > 0) {
        struct tombstone *tb = &t->tombs[t->ntomb++ % TOMBSTONES];
        snprintf(tb->name, sizeof(tb->name), "%s", name);
        tb->stamp = cur->v[i]->stamp;
        tb->until_us = clock_now_us() + TOMBSTONE_US;
    }
    /* Decided under the lock: a reload that found the hash in between
     * (the sync putting it back) is never overwritten by this copy. */
    if (lost && found && cur->v[i]->id > 0 && t->cfg->mysql_url[0] != '\0') {
        if (cur->v[i]->missing) {
            pthread_mutex_unlock(&t->lock);
            return PERMITD_OK;
        }
        if ((e = lost_copy(cur->v[i])) == NULL) {
            pthread_mutex_unlock(&t->lock);
            return PERMITD_EINTERNAL;
        }
    }
    /* Two reloads of one policy may finish out of order (a notice and a
     * decision's "stale", on two threads): the copy never goes back to an
     * older version stamp. A policy deleted (e NULL) is dropped whatever
     * its stamp. */
    if ((!found && e == NULL) || (found && e != NULL && e->stamp < cur->v[i]->stamp)) {
        pthread_mutex_unlock(&t->lock);
        policies_release(e);
        return PERMITD_OK;
    }
    next = malloc(sizeof(*next) + (cur->n + 1) * sizeof(next->v[0]));
    if (next == NULL) {
        pthread_mutex_unlock(&t->lock);
        policies_release(e);
        return PERMITD_EINTERNAL;
    }
    memcpy(next->v, cur->v, i * sizeof(next->v[0]));
    next->n = i;
    if (e != NULL)
        next->v[next->n++] = e;
    if (found)
        gone = cur->v[i++];
    memcpy(next->v + next->n, cur->v + i, (cur->n - i) * sizeof(next->v[0]));
    next->n += cur->n - i;
    old = swap(t, next);
    pthread_mutex_unlock(&t->lock);
    free(old);
    policies_release(gone);         /* the table's reference */
    return PERMITD_OK;
}

int policies_install(struct policies *t, struct policies_entry *e)
{
    return install(t, e->name, e, 0);
}

void policies_forget(struct policies *t, const char *name)
{
    install(t, name, NULL, 0);
}

uint64_t policies_stamp(struct policies *t, const char *name)
{
    const struct policies_entry *e = policies_get(t, name);
    uint64_t stamp = e != NULL && !e->missing ? e->stamp : 0;

    policies_release(e);
    return stamp;
}

int policies_names(struct policies *t, char ***out, size_t *n)
{
    struct snap *s;
    int rc = PERMITD_OK;

    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&t->lock);
    s = atomic_load(&t->cur);
    if ((*out = calloc(s->n + 1, sizeof(**out))) == NULL)
        rc = PERMITD_EINTERNAL;
    for (size_t i = 0; rc == PERMITD_OK && i < s->n; i++) {
        if (((*out)[i] = strdup(s->v[i]->name)) == NULL)
            rc = PERMITD_EINTERNAL;
        else
            (*n)++;
    }
    pthread_mutex_unlock(&t->lock);
    if (rc != PERMITD_OK) {
        policies_names_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

void policies_names_free(char **v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++)
        free(v[i]);
    free(v);
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int policies_allows(const struct policies_entry *e, const char *app)
{
    return e->any_app ||
           bsearch(&app, e->apps, e->napps, sizeof(*e->apps), by_str) != NULL;
}

/* A whole number in 0..2^53 from text, or -1. */
static int64_t whole(const char *s)
{
    char *end;
    long long v;

    if (s == NULL || *s == '\0' || *s == '-')
        return -1;
    v = strtoll(s, &end, 10);
    return *end != '\0' || v < 0 || v > POLICY_MAX_PERMITS_MAX ? -1 : v;
}

/* Splits the comma-separated apps into e->apps, sorted; "*" sets any_app.
 * -1: out of memory. */
static int split_apps(struct policies_entry *e, const char *apps)
{
    size_t cap = 1;

    for (const char *p = apps; *p; p++)
        cap += *p == ',';
    if ((e->apps = calloc(cap, sizeof(*e->apps))) == NULL)
        return -1;
    for (const char *p = apps;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == 1 && p[0] == '*')
            e->any_app = 1;
        else if (len > 0 && (e->apps[e->napps++] = strndup(p, len)) == NULL)
            return -1;
        if (c == NULL)
            break;
        p = c + 1;
    }
    qsort(e->apps, e->napps, sizeof(*e->apps), by_str);
    return 0;
}

static int empty(const char *s)
{
    return s == NULL || *s == '\0';
}

/* A duration field of the hash (whole ms, 1 .. POLICY_DURATION_MAX_MS), or -1. */
static int64_t duration(const char *s)
{
    int64_t v = whole(s);

    return v >= 1 && v <= POLICY_DURATION_MAX_MS ? v : -1;
}

/* Reads the fields of issue 20 into e (algorithm, window_ms, calendar,
 * lease_ms; rate as far as it must be absent) and checks that they fit
 * the algorithm, as the admin API does (stores/policy.h): NULL, or why
 * they do not (the entry is then broken). */
static const char *algorithm_fields(struct policies_entry *e, const char *algorithm,
                                    const char *rate, const char *window,
                                    const char *calendar, const char *lease)
{
    enum policy_algorithm a = POLICY_TOKEN_BUCKET;

    if (!empty(algorithm) && policy_algorithm_parse("algorithm", algorithm, &a, NULL) != PERMITD_OK)
        return "its algorithm is none permitd knows";
    e->algorithm = a;
    if (!empty(calendar) && policy_calendar_parse(calendar, &e->calendar) != PERMITD_OK)
        return "its calendar is not minute, hour, day or month";
    if (!empty(window) && (e->window_ms = duration(window)) < 0)
        return "its window_ms is not a whole number of ms from 1 to 400 days";
    if (!empty(lease) && (e->lease_ms = duration(lease)) < 0)
        return "its lease_ms is not a whole number of ms from 1 to 400 days";
    if (a != POLICY_TOKEN_BUCKET && !empty(rate))
        return "it has a rate, which only a token_bucket takes";
    if (a != POLICY_CONCURRENCY && e->lease_ms != 0)
        return "it has a lease_ms, which only a concurrency policy takes";
    if (a != POLICY_FIXED_WINDOW && e->calendar != POLICY_CALENDAR_NONE)
        return "it has a calendar, which only a fixed_window takes";
    switch (a) {
    case POLICY_TOKEN_BUCKET:
        if (e->window_ms != 0)
            return "it has a window_ms, which a token_bucket does not take";
        break;
    case POLICY_FIXED_WINDOW:
        if ((e->window_ms != 0) == (e->calendar != POLICY_CALENDAR_NONE))
            return "a fixed_window takes a window_ms or a calendar, exactly one";
        break;
    case POLICY_SLIDING_LOG:
        if (e->max_permits > POLICY_LOG_MAX_PERMITS)
            return "a sliding_log's max_permits is at most 10000";
        /* fall through */
    case POLICY_SLIDING_WINDOW:
        if (e->window_ms == 0)
            return "it has no window_ms, which its algorithm needs";
        break;
    case POLICY_CONCURRENCY:
        if (e->window_ms != 0)
            return "it has a window_ms, which a concurrency policy does not take";
        if (e->lease_ms == 0)
            return "it has no lease_ms, which a concurrency policy needs";
        break;
    default:
        return "its algorithm is none permitd knows";
    }
    snprintf(e->p1_s, sizeof(e->p1_s), "%" PRId64,
             a == POLICY_CONCURRENCY ? e->lease_ms : e->window_ms);
    return NULL;
}

const char *policies_p1(const struct policies_entry *e)
{
    return e->algorithm == POLICY_TOKEN_BUCKET ? e->rate_s : e->p1_s;
}

const char *policies_p2(const struct policies_entry *e)
{
    if (e->algorithm == POLICY_TOKEN_BUCKET)
        return e->rates;
    return e->algorithm == POLICY_FIXED_WINDOW ? policy_calendar_name(e->calendar) : "";
}

int policies_parse(const char *name, char *const *fields, size_t n,
                   struct policies_entry **out, struct permitd_error *err)
{
    struct policies_entry *e = calloc(1, sizeof(*e));
    const char *max = NULL, *rate = NULL, *apps = NULL, *enabled = NULL, *mode = NULL;
    const char *rates = NULL, *version = NULL, *id = NULL, *colocate = NULL;
    const char *algorithm = NULL, *window = NULL, *calendar = NULL, *lease = NULL;
    int64_t v;
    char *end;

    *out = NULL;
    if (e == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    atomic_init(&e->refs, 1);
    snprintf(e->name, sizeof(e->name), "%s", name);
    for (size_t i = 0; i + 1 < n; i += 2) {
        const char *f = fields[i], *val = fields[i + 1];
        if (strcmp(f, "max_permits") == 0) max = val;
        else if (strcmp(f, "rate") == 0) rate = val;
        else if (strcmp(f, "apps") == 0) apps = val;
        else if (strcmp(f, "enabled") == 0) enabled = val;
        else if (strcmp(f, "failure_mode") == 0) mode = val;
        else if (strcmp(f, "rates") == 0) rates = val;
        else if (strcmp(f, "version") == 0) version = val;
        else if (strcmp(f, "id") == 0) id = val;
        else if (strcmp(f, "colocate") == 0) colocate = val;
        else if (strcmp(f, "algorithm") == 0) algorithm = val;
        else if (strcmp(f, "window_ms") == 0) window = val;
        else if (strcmp(f, "calendar") == 0) calendar = val;
        else if (strcmp(f, "lease_ms") == 0) lease = val;
    }
    e->enabled = enabled == NULL || strcmp(enabled, "0") != 0;
    e->open = mode != NULL && strcmp(mode, "open") == 0;
    e->colocate = colocate != NULL && strcmp(colocate, "1") == 0;
    e->version = (v = whole(version)) > 0 ? (uint64_t)v : 0;
    e->id = (v = whole(id)) > 0 ? (uint64_t)v : 0;
    if ((e->rates = strdup(rates ? rates : "")) == NULL ||
        split_apps(e, apps ? apps : "") != 0) {
        entry_free(e);
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    }
    e->max_permits = whole(max);
    e->rate = rate && *rate ? strtod(rate, &end) : 0;
    if (max == NULL)
        e->broken = "it has no max_permits";
    else if (e->max_permits < 1)
        e->broken = "its max_permits is not a whole number from 1 to 2^53";
    else if ((e->broken = algorithm_fields(e, algorithm, rate, window, calendar, lease)) != NULL)
        ;
    else if (e->algorithm == POLICY_TOKEN_BUCKET &&
             (rate == NULL || *rate == '\0' || *end != '\0' || !(e->rate > 0) || !isfinite(e->rate)))
        e->broken = "its rate is not a number above 0";
    else if (apps == NULL)
        e->broken = "it has no apps";
    else if (e->version >= (1ull << 24) || e->id >= (1ull << 29))
        e->broken = "its version (or id) is too large for a version stamp (2^24, 2^29)";
    e->stamp = (e->id << 24) + e->version;
    snprintf(e->stamp_s, sizeof(e->stamp_s), "%" PRIu64, e->stamp);
    snprintf(e->max_s, sizeof(e->max_s), "%" PRId64, e->max_permits);
    /* The rate as the hash holds it: the script parses the same text. */
    snprintf(e->rate_s, sizeof(e->rate_s), "%s", rate ? rate : "0");
    *out = e;
    return PERMITD_OK;
}

/* Collects HGETALL's strings. */
struct flat {
    char **v;
    size_t n, cap;
    int oom;
};

static void collect(void *ud, const char *s, size_t len)
{
    struct flat *f = ud;

    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 32;
        char **v = realloc(f->v, cap * sizeof(*v));
        if (v == NULL) {
            f->oom = 1;
            return;
        }
        f->v = v;
        f->cap = cap;
    }
    if ((f->v[f->n] = strndup(s, len)) == NULL)
        f->oom = 1;
    else
        f->n++;
}

int policies_reload(struct policies *t, const char *name, int64_t deadline_us, int *found,
                    struct permitd_error *err)
{
    char key[POLICY_REDIS_KEY_MAX];
    struct redis_str args[2] = {{"HGETALL", 7}, {key, 0}};
    struct flat f = {0};
    struct policies_entry *e = NULL;
    int rc;

    if (found != NULL)
        *found = 0;
    args[1].len = policy_redis_key(key, t->cfg->redis_prefix, name, POLICY_KEY_HASH, NULL);
    rc = redis_command(t->redis, args, 2, deadline_us, NULL, collect, &f, err);
    if (rc == PERMITD_OK && f.oom)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK && f.n > 0)
        rc = policies_parse(name, f.v, f.n, &e, err);
    if (rc == PERMITD_OK && install(t, name, e, e == NULL) != PERMITD_OK)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    if (rc == PERMITD_OK && found != NULL)
        *found = e != NULL;
    for (size_t i = 0; i < f.n; i++)
        free(f.v[i]);
    free(f.v);
    return rc;
}
