/*
 * policies.c - the in-memory policy table (see policies.h).
 *
 * Readers never lock. The table is one array of entry pointers, sorted by
 * name, behind an atomic pointer. A writer (under a mutex: writers are
 * rare) builds a new array, swaps it in, and waits until no reader can
 * still be looking at the old one before freeing it (core/readers.h):
 * each reading thread owns a slot whose counter is odd while it is inside
 * a lookup, so the writer waits only for readers that were inside when it
 * swapped (a lookup is a binary search and an atomic increment:
 * nanoseconds), never for new ones. The entries themselves are
 * reference-counted: the table holds one reference on each entry it lists,
 * every holder (a decision in flight) one more, and the last to let go
 * frees it. So a request costs a lookup and two atomic additions, and no
 * allocation.
 *
 * What the two additions cost, measured (tests/bench/refs.c: Release build,
 * 2 cores shared with other work, 4 runs of best-of-5): the lookup alone
 * 25-33 ns; get + release add 0-15 ns on a thread alone and 12-43 ns with
 * two threads taking the one same entry (its counter's cache line bounced
 * between the cores). A decision costs permitd 10.2 us of CPU as a binary
 * Acquire, 0.9 us as an AcquireBatch item (tests/bench/RESULTS.md): at most
 * 0.4% of an Acquire, and 1-5% of a batch item only while two workers
 * decide batches of one policy at once. Measured again on 2026-11-29 (6
 * runs, load average 0.9-1.8): the lookup 25-31 ns, +9-17 ns alone, but
 * +125-160 ns for two threads on one entry (and +25-72 with an entry
 * each): where the virtual machine's two CPUs sit moves a bounced line's
 * cost several times over, and on such a day the pair is up to 1.5% of an
 * Acquire (10.6 us) and 9% of a batch item (1.8 us), the latter only while
 * two workers decide batches of one policy at once. Left as it is: the
 * ways around it are not simple (an epoch scheme would hold writers for a
 * whole Redis round trip, since a decision holds its entry until Redis
 * answers; a per-worker copy needs invalidating on every install).
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/config.h"
#include "core/readers.h"
#include "decisions/policies.h"

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
    struct readers readers;         /* inside a lookup */
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
    int me = readers_slot();

    if (me < 0) {
        pthread_mutex_lock(&t->lock);
        e = lookup(atomic_load(&t->cur), name);
        pthread_mutex_unlock(&t->lock);
        return e;
    }
    readers_enter(&t->readers, me);
    e = lookup(atomic_load(&t->cur), name);
    readers_leave(&t->readers, me);
    return e;
}

/* Swaps next in (t->lock held) and returns once no reader can still see
 * the array it replaced, which the caller may then free. */
static struct snap *swap(struct policies *t, struct snap *next)
{
    struct snap *old = atomic_exchange(&t->cur, next);

    readers_wait(&t->readers);
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

/* With t->lock held: remembers that this instance dropped policy `name`,
 * which had version stamp `stamp` (see struct policies). */
static void tomb_add(struct policies *t, const char *name, uint64_t stamp)
{
    struct tombstone *tb = &t->tombs[t->ntomb++ % TOMBSTONES];

    snprintf(tb->name, sizeof(tb->name), "%s", name);
    tb->stamp = stamp;
    tb->until_us = clock_now_us() + TOMBSTONE_US;
}

/* One change to the table: e (NULL: drop `name`) under name, e's
 * reference taken over. lost: e is NULL because a reload found the hash
 * gone, which keeps a MySQL row's entry when there is a store, as it is
 * (LOST_KEEP: policies_reload()) or as a copy marked missing (LOST_MARK:
 * policies_reload_gone()). order: its place in the caller's list (of two
 * changes of one name, the later is applied last). */
enum { LOST_NO = 0, LOST_KEEP, LOST_MARK };

struct change {
    const char *name;
    struct policies_entry *e;
    int lost;
    size_t order;
};

static int by_change(const void *a, const void *b)
{
    const struct change *x = a, *y = b;
    int c = strcmp(x->name, y->name);

    return c != 0 ? c : (x->order > y->order) - (x->order < y->order);
}

/* What the table holds under a name after change ch, given what it held
 * (slot, may be NULL); t->lock held. What no longer has a place (ch's
 * entry refused, or the entry it replaced) goes to drop[(*ndrop)++], to be
 * released once no reader can see it; *changed is set when the result
 * differs from slot. *oom is set when the copy a lost hash needs could not
 * be made (slot is then kept). */
static struct policies_entry *decide(struct policies *t, struct policies_entry *slot,
                                     const struct change *ch, struct policies_entry **drop,
                                     size_t *ndrop, int *changed, int *oom)
{
    struct policies_entry *e = ch->e;

    /* A policy dropped here lately is not brought back by a reload that
     * read it before the drop (its stamp is no newer). */
    if (slot == NULL && e != NULL && !ch->lost && e->id > 0 &&
        e->stamp <= tomb_stamp(t, ch->name)) {
        drop[(*ndrop)++] = e;
        return NULL;
    }
    if (e == NULL && !ch->lost && slot != NULL && slot->id > 0)
        tomb_add(t, ch->name, slot->stamp);
    /* Decided under the lock: a reload that found the hash in between
     * (the sync putting it back) is never overwritten by this copy. */
    if (ch->lost && slot != NULL && slot->id > 0 && t->cfg->mysql_url[0] != '\0') {
        if (slot->missing || ch->lost == LOST_KEEP)
            return slot;
        if ((e = lost_copy(slot)) == NULL) {
            *oom = 1;
            return slot;
        }
    }
    /* Two reloads of one policy may finish out of order (a notice and a
     * decision's "stale", on two threads): the copy never goes back to an
     * older version stamp. A policy deleted (e NULL) is dropped whatever
     * its stamp. */
    if (e == NULL && slot == NULL)
        return NULL;
    if (e != NULL && slot != NULL && e->stamp < slot->stamp) {
        drop[(*ndrop)++] = e;
        return slot;
    }
    if (slot != NULL)
        drop[(*ndrop)++] = slot;
    *changed = 1;
    return e;
}

/* Applies ch[0..n) (sorted here) to the table with one copy of it and one
 * swap, however many they are: installing a batch of n policies into a
 * table of m costs O(m + n log n), not n copies of the table (issue 22:
 * 10,000 policies loaded one copy each were 10^8 pointer copies). Takes
 * over every ch[i].e. Returns PERMITD_OK, or PERMITD_EINTERNAL (out of
 * memory: the changes not made are released). */
static int apply(struct policies *t, struct change *ch, size_t n)
{
    struct snap *cur, *next;
    struct policies_entry **drop = malloc((n + 1) * sizeof(*drop));
    size_t ndrop = 0, i = 0, j = 0;
    int changed = 0, oom = 0;

    qsort(ch, n, sizeof(*ch), by_change);
    pthread_mutex_lock(&t->lock);
    cur = atomic_load(&t->cur);
    next = drop != NULL ? malloc(sizeof(*next) + (cur->n + n) * sizeof(next->v[0])) : NULL;
    if (next == NULL) {
        pthread_mutex_unlock(&t->lock);
        for (size_t k = 0; k < n; k++)
            policies_release(ch[k].e);
        free(drop);
        return PERMITD_EINTERNAL;
    }
    next->n = 0;
    while (i < cur->n || j < n) {
        struct policies_entry *slot = NULL;
        const char *name;

        if (j == n || (i < cur->n && strcmp(cur->v[i]->name, ch[j].name) < 0)) {
            next->v[next->n++] = cur->v[i++];
            continue;
        }
        name = ch[j].name;
        if (i < cur->n && strcmp(cur->v[i]->name, name) == 0)
            slot = cur->v[i++];
        for (; j < n && strcmp(ch[j].name, name) == 0; j++)
            slot = decide(t, slot, &ch[j], drop, &ndrop, &changed, &oom);
        if (slot != NULL)
            next->v[next->n++] = slot;
    }
    if (changed) {
        struct snap *old = swap(t, next);
        pthread_mutex_unlock(&t->lock);
        free(old);
    } else {
        pthread_mutex_unlock(&t->lock);
        free(next);
    }
    for (size_t k = 0; k < ndrop; k++)
        policies_release(drop[k]);  /* the table's reference, or a refused entry's */
    free(drop);
    return oom ? PERMITD_EINTERNAL : PERMITD_OK;
}

/* Installs e under name (NULL: drops it), as apply() does for one. */
static int install(struct policies *t, const char *name, struct policies_entry *e, int lost)
{
    struct change ch = {name, e, lost, 0};

    return apply(t, &ch, 1);
}

int policies_install(struct policies *t, struct policies_entry *e)
{
    return install(t, e->name, e, 0);
}

int policies_install_many(struct policies *t, struct policies_entry *const *e, size_t n)
{
    struct change *ch = calloc(n + 1, sizeof(*ch));
    size_t m = 0;

    if (ch == NULL) {
        for (size_t i = 0; i < n; i++)
            policies_release(e[i]);
        return PERMITD_EINTERNAL;
    }
    for (size_t i = 0; i < n; i++)
        if (e[i] != NULL)
            ch[m++] = (struct change){e[i]->name, e[i], 0, i};
    int rc = apply(t, ch, m);
    free(ch);
    return rc;
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
    const char *rates = NULL, *version = NULL, *id = NULL, *colocate = NULL, *shadow = NULL;
    const char *algorithm = NULL, *window = NULL, *calendar = NULL, *lease = NULL;
    const char *local_lease = NULL, *local_lease_permits = NULL;
    const char *rsv_ttl = NULL, *debt = NULL, *expiry = NULL;
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
        else if (strcmp(f, "shadow") == 0) shadow = val;
        else if (strcmp(f, "algorithm") == 0) algorithm = val;
        else if (strcmp(f, "window_ms") == 0) window = val;
        else if (strcmp(f, "calendar") == 0) calendar = val;
        else if (strcmp(f, "lease_ms") == 0) lease = val;
        else if (strcmp(f, "local_lease") == 0) local_lease = val;
        else if (strcmp(f, "local_lease_permits") == 0) local_lease_permits = val;
        else if (strcmp(f, "reserve_ttl_ms") == 0) rsv_ttl = val;
        else if (strcmp(f, "debt_floor") == 0) debt = val;
        else if (strcmp(f, "reserve_expiry") == 0) expiry = val;
    }
    e->enabled = enabled == NULL || strcmp(enabled, "0") != 0;
    e->open = mode != NULL && strcmp(mode, "open") == 0;
    e->colocate = colocate != NULL && strcmp(colocate, "1") == 0;
    e->shadow = shadow != NULL && strcmp(shadow, "1") == 0;
    /* A value sync.lua would not write reads as absent: the flag's. */
    e->local_lease = local_lease == NULL ? 0
                     : strcmp(local_lease, "off") == 0 ? CONFIG_LOCAL_LEASES_OFF
                     : strcmp(local_lease, "on") == 0 ? CONFIG_LOCAL_LEASES_ON
                     : strcmp(local_lease, "auto") == 0 ? CONFIG_LOCAL_LEASES_AUTO : 0;
    e->local_lease_permits = (v = whole(local_lease_permits)) > 0 && v <= 1000000 ? v : 0;
    e->reserve_ttl_ms = (v = whole(rsv_ttl)) > 0 ? v : POLICIES_RESERVE_TTL_MS;
    e->debt_floor = (v = whole(debt)) > 0 ? v : 0;
    e->expiry_refund = expiry != NULL && strcmp(expiry, "refund") == 0;
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

/* One policy's HGETALL in a pipelined reload. */
struct read_one {
    char key[POLICY_REDIS_KEY_MAX];
    struct redis_str args[2];
    struct flat f;
};

/* Reads and installs names[0..n) (n <= POLICIES_RELOAD_BATCH): one
 * pipelined round trip (per master), one table copy. As
 * policies_reload_many(). */
static int reload_batch(struct policies *t, const char *const *names, size_t n, int lost,
                        int64_t deadline_us, int *found, int *rcs, struct permitd_error *err)
{
    struct read_one *r = calloc(n + 1, sizeof(*r));
    struct redis_command_call *calls = calloc(n + 1, sizeof(*calls));
    struct change *ch = calloc(n + 1, sizeof(*ch));
    size_t m = 0;
    int rc;

    if (r == NULL || calls == NULL || ch == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory reloading %zu policies", n);
        for (size_t i = 0; i < n; i++)
            rcs[i] = rc;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        r[i].args[0] = (struct redis_str){"HGETALL", 7};
        r[i].args[1] = (struct redis_str){r[i].key, policy_redis_key(r[i].key, t->cfg->redis_prefix,
                                                                     names[i], POLICY_KEY_HASH,
                                                                     NULL)};
        calls[i] = (struct redis_command_call){.args = r[i].args, .nargs = 2, .each = collect,
                                                .ud = &r[i].f};
    }
    rc = redis_command_pipeline(t->redis, calls, n, deadline_us, err);
    for (size_t i = 0; i < n; i++) {
        struct policies_entry *e = NULL;
        struct permitd_error e_err = {0, ""};

        rcs[i] = calls[i].rc;
        if (rcs[i] == PERMITD_OK && r[i].f.oom)
            rcs[i] = PERMITD_EINTERNAL;
        if (rcs[i] == PERMITD_OK && r[i].f.n > 0)
            rcs[i] = policies_parse(names[i], r[i].f.v, r[i].f.n, &e, &e_err);
        if (rcs[i] != PERMITD_OK)
            continue;
        found[i] = e != NULL;
        ch[m++] = (struct change){names[i], e, e == NULL ? lost : LOST_NO, i};
    }
    if (m > 0 && apply(t, ch, m) != PERMITD_OK) {
        for (size_t k = 0; k < m; k++)
            rcs[ch[k].order] = PERMITD_EINTERNAL;
        if (rc == PERMITD_OK)
            rc = permitd_error_set(err, PERMITD_EINTERNAL, "out of memory installing %zu policies",
                                   m);
    }
done:
    for (size_t i = 0; r != NULL && i < n; i++) {
        for (size_t k = 0; k < r[i].f.n; k++)
            free(r[i].f.v[k]);
        free(r[i].f.v);
    }
    free(ch);
    free(calls);
    free(r);
    return rc;
}

/* policies_reload_many() and policies_reload_gone(): lost says what a
 * MySQL row's hash found gone does to its entry (LOST_KEEP, LOST_MARK). */
static int reload_many(struct policies *t, const char *const *names, size_t n, int lost,
                       int64_t deadline_us, int *found, int *rcs, struct permitd_error *err)
{
    int rc = PERMITD_OK, *own = NULL;

    if (rcs == NULL && (rcs = own = calloc(n + 1, sizeof(*rcs))) == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory reloading %zu policies",
                                 n);
    for (size_t i = 0; i < n; i++) {
        rcs[i] = PERMITD_OK;
        if (found != NULL)
            found[i] = 0;
    }
    for (size_t i = 0; i < n; i += POLICIES_RELOAD_BATCH) {
        size_t m = n - i < POLICIES_RELOAD_BATCH ? n - i : POLICIES_RELOAD_BATCH;
        int fbuf[POLICIES_RELOAD_BATCH] = {0};

        if (rc != PERMITD_OK) {         /* Redis failed a whole batch: not tried */
            for (size_t k = i; k < i + m; k++)
                rcs[k] = rc;
            continue;
        }
        rc = reload_batch(t, names + i, m, lost, deadline_us, fbuf, rcs + i, err);
        for (size_t k = 0; found != NULL && k < m; k++)
            found[i + k] = rcs[i + k] == PERMITD_OK && fbuf[k];
    }
    /* One failed name and no whole failure: say which. */
    for (size_t i = 0; i < n && rc == PERMITD_OK; i++)
        if (rcs[i] != PERMITD_OK)
            rc = permitd_error_set(err, rcs[i], "policy %s not reloaded from redis: %s%s",
                                   names[i], permitd_status_name(rcs[i]),
                                   n > 1 ? " (and perhaps others: see the log)" : "");
    free(own);
    return rc;
}

int policies_reload_many(struct policies *t, const char *const *names, size_t n,
                         int64_t deadline_us, int *found, int *rcs, struct permitd_error *err)
{
    return reload_many(t, names, n, LOST_KEEP, deadline_us, found, rcs, err);
}

int policies_reload_gone(struct policies *t, const char *const *names, size_t n,
                         int64_t deadline_us, int *found, int *rcs, struct permitd_error *err)
{
    return reload_many(t, names, n, LOST_MARK, deadline_us, found, rcs, err);
}

int policies_reload(struct policies *t, const char *name, int64_t deadline_us, int *found,
                    struct permitd_error *err)
{
    return policies_reload_many(t, &name, 1, deadline_us, found, NULL, err);
}
