/*
 * hotkeys.c - per-policy heavy hitters (see hotkeys.h): the Space-Saving
 * sketch, the workers' sketches, the instance's windows, the publisher
 * thread and the merge of every instance's top keys read back from Redis.
 *
 * Why Space-Saving: it answers "which keys are heaviest" in fixed memory
 * (HOTKEYS_K counters, whatever the number of keys), every key heavier
 * than N / K is surely among its counters, and each count is an upper
 * bound whose excess is known (error). Weighted adds keep the same
 * guarantee, which is how a worker's sketch is folded into the instance's
 * and the last two windows into one published list.
 *
 * Threads: a worker counts under its own mutex, which the publisher takes
 * once per publish to move what it counted into the instance's windows
 * (then clears it, keeping its key buffers: no allocation once warm). The
 * instance's windows are the publisher's alone, and its caller's (tests).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "decisions/hotkeys.h"
#include "core/clock.h"
#include "core/log.h"

#define HOTKEYS_DEADLINE_MS 1000        /* a publish's or a read's Redis work */
#define HOTKEYS_INSTANCE_LEN 16         /* hex characters of an instance's id */
#define HOTKEYS_READ_MAX 32             /* instances merged by a read */

/* ---- the sketch ---- */

static uint32_t fnv1a(const char *s, size_t len)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

void hotkeys_sketch_init(struct hotkeys_sketch *s)
{
    memset(s, 0, sizeof(*s));
}

void hotkeys_sketch_release(struct hotkeys_sketch *s)
{
    for (size_t i = 0; i < HOTKEYS_K; i++)
        free(s->e[i].key);
    memset(s, 0, sizeof(*s));
}

/* Gives each of s's counters a buffer for a key of up to
 * HOTKEYS_KEY_ROOM - 1 bytes now, so that taking a counter over for a new
 * key allocates nothing on the decision path (a key that does not fit, or
 * a buffer not made here, is left to room()). */
#define HOTKEYS_KEY_ROOM 32

static void reserve(struct hotkeys_sketch *s)
{
    for (size_t i = 0; i < HOTKEYS_K; i++) {
        struct hotkeys_entry *e = &s->e[i];
        if (e->cap == 0 && (e->key = malloc(HOTKEYS_KEY_ROOM)) != NULL) {
            e->key[0] = '\0';
            e->cap = HOTKEYS_KEY_ROOM;
        }
    }
}

void hotkeys_sketch_clear(struct hotkeys_sketch *s)
{
    s->n = 0;
    s->total = 0;
    memset(s->index, 0, sizeof(s->index));
}

/* The index slot of key, or the empty slot where it would go. */
static size_t probe(const struct hotkeys_sketch *s, const char *key, size_t len, uint32_t h)
{
    size_t i = h & (HOTKEYS_SLOTS - 1);

    for (;;) {
        int x = s->index[i];
        if (x == 0)
            return i;
        const struct hotkeys_entry *e = &s->e[x - 1];
        if (e->hash == h && strncmp(e->key, key, len) == 0 && e->key[len] == '\0')
            return i;
        i = (i + 1) & (HOTKEYS_SLOTS - 1);
    }
}

/* Removes index slot i (backward-shift deletion, as in stats.c: the
 * entries after it that probed past it move up). */
static void unindex(struct hotkeys_sketch *s, size_t i)
{
    size_t j = i;

    s->index[i] = 0;
    for (;;) {
        size_t home;
        j = (j + 1) & (HOTKEYS_SLOTS - 1);
        if (s->index[j] == 0)
            return;
        home = s->e[s->index[j] - 1].hash & (HOTKEYS_SLOTS - 1);
        if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
            s->index[i] = s->index[j];
            s->index[j] = 0;
            i = j;
        }
    }
}

/* Makes room in e's buffer for a key of len bytes (its text kept). */
static int room(struct hotkeys_entry *e, size_t len)
{
    if (e->cap < len + 1) {
        size_t cap = len + 1 < HOTKEYS_KEY_ROOM ? HOTKEYS_KEY_ROOM : len + 1;
        char *k = realloc(e->key, cap);
        if (k == NULL)
            return -1;
        if (e->cap == 0)
            k[0] = '\0';
        e->key = k;
        e->cap = cap;
    }
    return 0;
}

/* The heap's order: by count (the smallest at heap[0]). */
static void swap(struct hotkeys_sketch *s, size_t a, size_t b)
{
    uint8_t t = s->heap[a];

    s->heap[a] = s->heap[b];
    s->heap[b] = t;
    s->pos[s->heap[a]] = (uint8_t)a;
    s->pos[s->heap[b]] = (uint8_t)b;
}

/* Entry x's count grew: it moves down the heap. */
static void down(struct hotkeys_sketch *s, size_t x)
{
    size_t i = s->pos[x];

    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < s->n && s->e[s->heap[l]].count < s->e[s->heap[m]].count)
            m = l;
        if (r < s->n && s->e[s->heap[r]].count < s->e[s->heap[m]].count)
            m = r;
        if (m == i)
            return;
        swap(s, i, m);
        i = m;
    }
}

/* Entry x was added at the heap's end: it moves up. */
static void up(struct hotkeys_sketch *s, size_t x)
{
    size_t i = s->pos[x];

    while (i > 0 && s->e[s->heap[(i - 1) / 2]].count > s->e[s->heap[i]].count) {
        swap(s, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
}

int hotkeys_sketch_add(struct hotkeys_sketch *s, const char *key, size_t len, uint64_t w)
{
    uint32_t h;
    size_t i, m;
    struct hotkeys_entry *e;

    if (len > POLICY_KEY_MAX)
        len = POLICY_KEY_MAX;
    h = fnv1a(key, len);
    i = probe(s, key, len, h);
    if (s->index[i] != 0) {
        s->e[s->index[i] - 1].count += w;
        down(s, (size_t)s->index[i] - 1);
        s->total += w;
        return PERMITD_OK;
    }
    if (s->n < HOTKEYS_K) {
        e = &s->e[s->n];
        if (room(e, len) != 0)
            return PERMITD_EINTERNAL;
        memcpy(e->key, key, len);
        e->key[len] = '\0';
        e->count = w;
        e->error = 0;
        e->hash = h;
        s->heap[s->n] = (uint8_t)s->n;
        s->pos[s->n] = (uint8_t)s->n;
        s->index[i] = (int16_t)(++s->n);
        up(s, s->n - 1);
        s->total += w;
        return PERMITD_OK;
    }
    /* Full: the smallest counter takes the key over, and its count, which
     * may all have been the new key's, becomes the new key's error. */
    m = s->heap[0];
    e = &s->e[m];
    if (room(e, len) != 0)
        return PERMITD_EINTERNAL;
    unindex(s, probe(s, e->key, strlen(e->key), e->hash));
    memcpy(e->key, key, len);
    e->key[len] = '\0';
    e->error = e->count;
    e->count += w;
    e->hash = h;
    s->index[probe(s, key, len, h)] = (int16_t)(m + 1);
    down(s, m);
    s->total += w;
    return PERMITD_OK;
}

static int by_count(const void *a_, const void *b_)
{
    const struct hotkeys_count *a = a_, *b = b_;

    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return strcmp(a->key, b->key);
}

size_t hotkeys_sketch_top(const struct hotkeys_sketch *s, struct hotkeys_count *out, size_t n)
{
    struct hotkeys_count *all = malloc(HOTKEYS_K * sizeof(*all));
    size_t m = 0;

    if (all == NULL)
        return 0;
    for (size_t i = 0; i < s->n; i++) {
        snprintf(all[m].key, sizeof(all[m].key), "%s", s->e[i].key);
        all[m].count = s->e[i].count;
        all[m].error = s->e[i].error;
        m++;
    }
    qsort(all, m, sizeof(*all), by_count);
    if (m > n)
        m = n;
    memcpy(out, all, m * sizeof(*out));
    free(all);
    return m;
}

/* Adds every counter of from into to, with its weight (its error goes
 * with it: a weighted add of Space-Saving). */
static int fold(struct hotkeys_sketch *to, const struct hotkeys_sketch *from)
{
    for (size_t i = 0; i < from->n; i++) {
        const struct hotkeys_entry *e = &from->e[i];
        if (hotkeys_sketch_add(to, e->key, strlen(e->key), e->count) != PERMITD_OK)
            return PERMITD_EINTERNAL;
    }
    return PERMITD_OK;
}

/* ---- the workers' sketches ---- */

struct wpolicy {
    char name[POLICY_NAME_MAX + 1];
    uint32_t hash;
    struct hotkeys_sketch kind[2];
};

struct hotkeys_worker {
    struct hotkeys *hk;
    pthread_mutex_t lock;           /* the worker's; the publisher's at each drain */
    size_t n;                       /* policies in use since the last drain */
    struct wpolicy *p[HOTKEYS_WORKER_POLICIES];     /* allocated on first use, kept */
    struct hotkeys_worker *next;
};

/* ---- the instance's windows ---- */

struct ipolicy {
    char name[POLICY_NAME_MAX + 1];
    int64_t window;                 /* the window `cur` counts (ms / HOTKEYS_WINDOW_MS) */
    int64_t active;                 /* the last window it counted anything in */
    struct hotkeys_sketch cur[2], prev[2];
};

struct hotkeys {
    const struct config *cfg;
    struct redis *redis;
    pthread_mutex_t lock;           /* guards workers (the list) */
    struct hotkeys_worker *workers;
    struct ipolicy **policies;      /* the publisher's */
    size_t npolicies;
    char instance[HOTKEYS_INSTANCE_LEN + 1];
    uint64_t generation;
    _Atomic uint64_t counted, dropped;
    pthread_t thread;
    int started, stopping;
    pthread_mutex_t stop_lock;
    pthread_cond_t stop_cond;
};

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int hotkeys_new(const struct config *cfg, struct redis *redis, struct hotkeys **out,
                struct permitd_error *err)
{
    struct hotkeys *hk = calloc(1, sizeof(*hk));
    unsigned char id[HOTKEYS_INSTANCE_LEN / 2];

    *out = NULL;
    if (hk == NULL || (hk->policies = calloc(HOTKEYS_POLICIES, sizeof(*hk->policies))) == NULL) {
        free(hk);
        return permitd_error_set(err, PERMITD_EINTERNAL, "hot keys: out of memory");
    }
    if (getrandom(id, sizeof(id), 0) != (ssize_t)sizeof(id)) {
        free(hk->policies);
        free(hk);
        return permitd_error_set(err, PERMITD_EINTERNAL, "hot keys: no random instance id");
    }
    for (size_t i = 0; i < sizeof(id); i++)
        snprintf(&hk->instance[2 * i], 3, "%02x", id[i]);
    hk->cfg = cfg;
    hk->redis = redis;
    pthread_mutex_init(&hk->lock, NULL);
    pthread_mutex_init(&hk->stop_lock, NULL);
    pthread_cond_init(&hk->stop_cond, NULL);
    *out = hk;
    return PERMITD_OK;
}

static void ipolicy_free(struct ipolicy *p)
{
    if (p == NULL)
        return;
    for (int k = 0; k < 2; k++) {
        hotkeys_sketch_release(&p->cur[k]);
        hotkeys_sketch_release(&p->prev[k]);
    }
    free(p);
}

void hotkeys_free(struct hotkeys *hk)
{
    if (hk == NULL)
        return;
    if (hk->started) {
        pthread_mutex_lock(&hk->stop_lock);
        hk->stopping = 1;
        pthread_cond_signal(&hk->stop_cond);
        pthread_mutex_unlock(&hk->stop_lock);
        pthread_join(hk->thread, NULL);
    }
    for (size_t i = 0; i < hk->npolicies; i++)
        ipolicy_free(hk->policies[i]);
    free(hk->policies);
    pthread_mutex_destroy(&hk->lock);
    pthread_mutex_destroy(&hk->stop_lock);
    pthread_cond_destroy(&hk->stop_cond);
    free(hk);
}

int hotkeys_worker_new(struct hotkeys *hk, struct hotkeys_worker **out, struct permitd_error *err)
{
    struct hotkeys_worker *w = calloc(1, sizeof(*w));

    *out = NULL;
    if (w == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "hot keys: out of memory");
    w->hk = hk;
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_lock(&hk->lock);
    w->next = hk->workers;
    hk->workers = w;
    pthread_mutex_unlock(&hk->lock);
    *out = w;
    return PERMITD_OK;
}

void hotkeys_worker_free(struct hotkeys_worker *w)
{
    struct hotkeys_worker **pp;

    if (w == NULL)
        return;
    pthread_mutex_lock(&w->hk->lock);
    for (pp = &w->hk->workers; *pp != NULL; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    pthread_mutex_unlock(&w->hk->lock);
    for (size_t i = 0; i < HOTKEYS_WORKER_POLICIES && w->p[i] != NULL; i++) {
        hotkeys_sketch_release(&w->p[i]->kind[0]);
        hotkeys_sketch_release(&w->p[i]->kind[1]);
        free(w->p[i]);
    }
    pthread_mutex_destroy(&w->lock);
    free(w);
}

void hotkeys_record(struct hotkeys_worker *w, const char *policy, const char *key,
                    enum hotkeys_kind kind)
{
    size_t plen, i;
    uint32_t h;
    struct wpolicy *p = NULL;

    if (w == NULL || key == NULL || key[0] == '\0')
        return;
    plen = strnlen(policy, POLICY_NAME_MAX);
    h = fnv1a(policy, plen);
    pthread_mutex_lock(&w->lock);
    for (i = 0; i < w->n; i++)
        if (w->p[i]->hash == h && strcmp(w->p[i]->name, policy) == 0) {
            p = w->p[i];
            break;
        }
    if (p == NULL && w->n < HOTKEYS_WORKER_POLICIES) {
        /* a place kept from an earlier drain, or a new one */
        if (w->p[w->n] == NULL) {
            if ((w->p[w->n] = calloc(1, sizeof(*w->p[w->n]))) == NULL)
                goto dropped;
            reserve(&w->p[w->n]->kind[0]);
            reserve(&w->p[w->n]->kind[1]);
        }
        p = w->p[w->n++];
        memcpy(p->name, policy, plen);
        p->name[plen] = '\0';
        p->hash = h;
        hotkeys_sketch_clear(&p->kind[0]);
        hotkeys_sketch_clear(&p->kind[1]);
    }
    if (p == NULL || hotkeys_sketch_add(&p->kind[kind], key, strlen(key), 1) != PERMITD_OK)
        goto dropped;
    pthread_mutex_unlock(&w->lock);
    atomic_fetch_add_explicit(&w->hk->counted, 1, memory_order_relaxed);
    return;
dropped:
    pthread_mutex_unlock(&w->lock);
    atomic_fetch_add_explicit(&w->hk->dropped, 1, memory_order_relaxed);
}

void hotkeys_counters(struct hotkeys *hk, uint64_t *counted, uint64_t *dropped)
{
    *counted = atomic_load(&hk->counted);
    *dropped = atomic_load(&hk->dropped);
}

/* The instance's place of policy `name`, made (or the least recently
 * active one's taken over) when it has none. Publisher only. */
static struct ipolicy *ipolicy_get(struct hotkeys *hk, const char *name, int64_t window)
{
    size_t victim = 0;
    struct ipolicy *p;

    for (size_t i = 0; i < hk->npolicies; i++) {
        if (strcmp(hk->policies[i]->name, name) == 0)
            return hk->policies[i];
        if (hk->policies[i]->active < hk->policies[victim]->active)
            victim = i;
    }
    if (hk->npolicies < HOTKEYS_POLICIES) {
        if ((p = calloc(1, sizeof(*p))) == NULL)
            return NULL;
        hk->policies[hk->npolicies++] = p;
    } else {
        p = hk->policies[victim];
        for (int k = 0; k < 2; k++) {
            hotkeys_sketch_clear(&p->cur[k]);
            hotkeys_sketch_clear(&p->prev[k]);
        }
    }
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->window = window;
    p->active = window;
    return p;
}

/* Moves cur to prev when a window has passed (both cleared after two). */
static void roll(struct ipolicy *p, int64_t window)
{
    if (p->window == window)
        return;
    for (int k = 0; k < 2; k++) {
        struct hotkeys_sketch t;
        if (p->window == window - 1) {
            t = p->prev[k];                 /* swap: the old prev's buffers are reused */
            p->prev[k] = p->cur[k];
            p->cur[k] = t;
        } else {
            hotkeys_sketch_clear(&p->prev[k]);
        }
        hotkeys_sketch_clear(&p->cur[k]);
    }
    p->window = window;
}

/* Moves every worker's counts into the instance's windows. */
static void drain(struct hotkeys *hk, int64_t window)
{
    pthread_mutex_lock(&hk->lock);
    for (struct hotkeys_worker *w = hk->workers; w != NULL; w = w->next) {
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < w->n; i++) {
            struct wpolicy *wp = w->p[i];
            struct ipolicy *p = ipolicy_get(hk, wp->name, window);
            if (p == NULL)
                continue;
            roll(p, window);
            p->active = window;
            for (int k = 0; k < 2; k++)
                (void)fold(&p->cur[k], &wp->kind[k]);
        }
        w->n = 0;
        pthread_mutex_unlock(&w->lock);
    }
    pthread_mutex_unlock(&hk->lock);
}

/* One policy's sorted set of this publish: its members' texts live in
 * text (a:KEY, d:KEY), the scores in score. */
struct pub {
    char key[POLICY_REDIS_KEY_MAX + 64], idx[POLICY_REDIS_KEY_MAX], member[64], now[24], ttl[24],
         old[24];
    struct redis_str zadd[2 + 4 * HOTKEYS_K], expire[3], iadd[4], iexp[3], itrim[4];
    char score[2 * HOTKEYS_K][24];
    char text[2 * HOTKEYS_K][POLICY_KEY_MAX + 3];
    struct hotkeys_count top[HOTKEYS_K];
};

#define STR(s_) ((struct redis_str){(s_), strlen(s_)})

int hotkeys_publish(struct hotkeys *hk, struct permitd_error *err)
{
    int64_t now = wall_ms(), window = now / HOTKEYS_WINDOW_MS;
    int64_t ttl = 3 * (int64_t)hk->cfg->hotkeys_publish_ms;
    struct hotkeys_sketch *both = malloc(sizeof(*both));
    struct pub *pb = malloc(sizeof(*pb));
    struct redis_command_call calls[5];
    struct permitd_error e = {0, ""};
    size_t failed = 0;
    int rc = PERMITD_OK, first_rc = PERMITD_OK;

    if (both == NULL || pb == NULL) {
        free(both);
        free(pb);
        return permitd_error_set(err, PERMITD_EINTERNAL, "hot keys: out of memory");
    }
    hotkeys_sketch_init(both);
    if (ttl < 2000)
        ttl = 2000;
    drain(hk, window);
    hk->generation++;
    for (size_t i = 0; i < hk->npolicies && rc == PERMITD_OK; i++) {
        struct ipolicy *p = hk->policies[i];
        int nargs = 2;
        size_t m = 0;

        roll(p, window);
        pb->zadd[0] = STR("ZADD");
        for (int k = 0; k < 2; k++) {
            size_t t;
            hotkeys_sketch_clear(both);
            if (fold(both, &p->prev[k]) != PERMITD_OK || fold(both, &p->cur[k]) != PERMITD_OK) {
                rc = permitd_error_set(err, PERMITD_EINTERNAL, "hot keys: out of memory");
                break;
            }
            t = hotkeys_sketch_top(both, pb->top, HOTKEYS_K);
            for (size_t j = 0; j < t; j++, m++) {
                snprintf(pb->score[m], sizeof(pb->score[m]), "%" PRIu64, pb->top[j].count);
                snprintf(pb->text[m], sizeof(pb->text[m]), "%c:%s", k == 0 ? 'a' : 'd',
                         pb->top[j].key);
                pb->zadd[nargs++] = STR(pb->score[m]);
                pb->zadd[nargs++] = STR(pb->text[m]);
            }
        }
        if (rc != PERMITD_OK || m == 0)
            continue;               /* nothing in the last two windows: the last list expires */
        policy_redis_key(pb->idx, hk->cfg->redis_prefix, p->name, POLICY_KEY_HASH, NULL);
        /* P{NAME}:policy -> P{NAME}:hot */
        pb->idx[strlen(pb->idx) - strlen("policy")] = '\0';
        strcat(pb->idx, "hot");
        snprintf(pb->member, sizeof(pb->member), "%s:%" PRIu64, hk->instance, hk->generation);
        snprintf(pb->key, sizeof(pb->key), "%s:%s", pb->idx, pb->member);
        snprintf(pb->now, sizeof(pb->now), "%" PRId64, now);
        snprintf(pb->ttl, sizeof(pb->ttl), "%" PRId64, ttl);
        snprintf(pb->old, sizeof(pb->old), "(%" PRId64, now - ttl);
        pb->zadd[1] = STR(pb->key);
        pb->expire[0] = STR("PEXPIRE"); pb->expire[1] = STR(pb->key); pb->expire[2] = STR(pb->ttl);
        pb->iadd[0] = STR("ZADD"); pb->iadd[1] = STR(pb->idx); pb->iadd[2] = STR(pb->now);
        pb->iadd[3] = STR(pb->member);
        pb->iexp[0] = STR("PEXPIRE"); pb->iexp[1] = STR(pb->idx); pb->iexp[2] = STR(pb->ttl);
        pb->itrim[0] = STR("ZREMRANGEBYSCORE"); pb->itrim[1] = STR(pb->idx);
        pb->itrim[2] = STR("-inf"); pb->itrim[3] = STR(pb->old);
        /* The list first, then its entry in the index: a reader finds a
         * generation only once it is whole; the one before expires. */
        memset(calls, 0, sizeof(calls));
        calls[0].args = pb->zadd; calls[0].nargs = nargs;
        calls[1].args = pb->expire; calls[1].nargs = 3;
        calls[2].args = pb->iadd; calls[2].nargs = 4;
        calls[3].args = pb->itrim; calls[3].nargs = 4;
        calls[4].args = pb->iexp; calls[4].nargs = 3;
        rc = redis_command_pipeline(hk->redis, calls, 5,
                                    clock_now_us() + HOTKEYS_DEADLINE_MS * 1000LL, &e);
        if (rc != PERMITD_OK) {     /* Redis itself failed: the policies after it would too */
            rc = permitd_error_set(err, rc, "hot keys: the lists of policy \"%s\" and of the "
                                   "%zu after it not written: %s", p->name,
                                   hk->npolicies - i - 1, e.message);
            break;
        }
        /* One policy's refused write (its node failed over, say) costs
         * that policy's list only: the others are still written. */
        for (int c = 0; c < 5; c++)
            if (calls[c].rc != PERMITD_OK) {
                log_msg(LOG_LEVEL_WARN, "hot keys: a policy's list not written",
                        "policy=%s command=%.*s error=%s", p->name, (int)calls[c].args[0].len,
                        calls[c].args[0].p, permitd_status_name(calls[c].rc));
                if (failed++ == 0)
                    first_rc = calls[c].rc;
                break;
            }
    }
    if (rc == PERMITD_OK && failed > 0)
        rc = permitd_error_set(err, first_rc, "hot keys: %zu of %zu policies' lists not written "
                               "(each logged above); the rest were", failed, hk->npolicies);
    hotkeys_sketch_release(both);
    free(both);
    free(pb);
    return rc;
}

static void *publisher(void *arg)
{
    struct hotkeys *hk = arg;
    int64_t every = hk->cfg->hotkeys_publish_ms;

    pthread_mutex_lock(&hk->stop_lock);
    while (!hk->stopping) {
        struct timespec until;
        struct permitd_error err = {0, ""};
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += every / 1000;
        until.tv_nsec += (every % 1000) * 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&hk->stop_cond, &hk->stop_lock, &until);
        if (hk->stopping)
            break;
        pthread_mutex_unlock(&hk->stop_lock);
        if (hotkeys_publish(hk, &err) != PERMITD_OK)
            log_msg(LOG_LEVEL_WARN, "hot keys not all published", "error=\"%s\"", err.message);
        pthread_mutex_lock(&hk->stop_lock);
    }
    pthread_mutex_unlock(&hk->stop_lock);
    return NULL;
}

int hotkeys_start(struct hotkeys *hk, struct permitd_error *err)
{
    if (pthread_create(&hk->thread, NULL, publisher, hk) != 0)
        return permitd_error_set(err, PERMITD_EINTERNAL, "hot keys: cannot start the publisher");
    hk->started = 1;
    return PERMITD_OK;
}

/* ---- the merge across instances ---- */

struct gather {
    char **v;
    size_t n, cap;
    int bad;
};

static void collect(void *ud, const char *s, size_t len)
{
    struct gather *g = ud;

    if (g->bad)
        return;
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        char **v = realloc(g->v, cap * sizeof(*v));
        if (v == NULL) {
            g->bad = 1;
            return;
        }
        g->v = v;
        g->cap = cap;
    }
    if ((g->v[g->n] = strndup(s, len)) == NULL) {
        g->bad = 1;
        return;
    }
    g->n++;
}

static void gather_free(struct gather *g)
{
    for (size_t i = 0; i < g->n; i++)
        free(g->v[i]);
    free(g->v);
}

static int by_key(const void *a_, const void *b_)
{
    return strcmp(((const struct hotkeys_count *)a_)->key, ((const struct hotkeys_count *)b_)->key);
}

/* Sums the counts of equal keys in v[0..*n) (sorted by key first). */
static void sum(struct hotkeys_count *v, size_t *n)
{
    size_t out = 0;

    qsort(v, *n, sizeof(*v), by_key);
    for (size_t i = 0; i < *n; i++) {
        if (out > 0 && strcmp(v[out - 1].key, v[i].key) == 0)
            v[out - 1].count += v[i].count;
        else
            v[out++] = v[i];
    }
    *n = out;
}

int hotkeys_read(const struct config *cfg, struct redis *redis, const char *policy,
                 struct hotkeys_count *allowed, size_t *nallowed,
                 struct hotkeys_count *denied, size_t *ndenied, size_t max,
                 size_t *instances, struct permitd_error *err)
{
    char idx[POLICY_REDIS_KEY_MAX], since[24];
    char (*keys)[POLICY_REDIS_KEY_MAX + 64] = NULL;
    struct gather ids = {0}, lists[HOTKEYS_READ_MAX];
    struct redis_str range[5], (*zr)[5] = NULL;
    struct redis_command_call calls[HOTKEYS_READ_MAX];
    struct hotkeys_count *sums[2] = {NULL, NULL};
    size_t nsum[2] = {0, 0}, n;
    int64_t deadline = clock_now_us() + HOTKEYS_DEADLINE_MS * 1000LL;
    int rc;

    *nallowed = *ndenied = *instances = 0;
    memset(lists, 0, sizeof(lists));
    policy_redis_key(idx, cfg->redis_prefix, policy, POLICY_KEY_HASH, NULL);
    idx[strlen(idx) - strlen("policy")] = '\0';
    strcat(idx, "hot");
    snprintf(since, sizeof(since), "%" PRId64,
             wall_ms() - 3 * (int64_t)cfg->hotkeys_publish_ms);
    range[0] = STR("ZRANGEBYSCORE");
    range[1] = STR(idx);
    range[2] = STR(since);
    range[3] = STR("+inf");
    if ((rc = redis_command(redis, range, 4, deadline, NULL, collect, &ids, err)) != PERMITD_OK)
        goto out;
    if (ids.bad) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "hot keys: out of memory");
        goto out;
    }
    /* Each instance's newest generation only (the older ones are still
     * there until they expire). ZRANGEBYSCORE lists them oldest first. */
    n = 0;
    keys = calloc(HOTKEYS_READ_MAX, sizeof(*keys));
    zr = calloc(HOTKEYS_READ_MAX, sizeof(*zr));
    sums[0] = calloc(HOTKEYS_READ_MAX * HOTKEYS_K, sizeof(**sums));
    sums[1] = calloc(HOTKEYS_READ_MAX * HOTKEYS_K, sizeof(**sums));
    if (keys == NULL || zr == NULL || sums[0] == NULL || sums[1] == NULL) {
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "hot keys: out of memory");
        goto out;
    }
    for (size_t i = ids.n; i-- > 0 && n < HOTKEYS_READ_MAX;) {
        int seen = 0;
        for (size_t j = i + 1; j < ids.n && !seen; j++)
            seen = strncmp(ids.v[i], ids.v[j], HOTKEYS_INSTANCE_LEN) == 0;
        if (seen)
            continue;
        snprintf(keys[n], sizeof(keys[n]), "%s:%s", idx, ids.v[i]);
        zr[n][0] = STR("ZRANGE");
        zr[n][1] = STR(keys[n]);
        zr[n][2] = STR("0");
        zr[n][3] = STR("-1");
        zr[n][4] = STR("WITHSCORES");
        memset(&calls[n], 0, sizeof(calls[n]));
        calls[n].args = zr[n];
        calls[n].nargs = 5;
        calls[n].each = collect;
        calls[n].ud = &lists[n];
        n++;
    }
    if (n > 0 && (rc = redis_command_pipeline(redis, calls, n, deadline, err)) != PERMITD_OK)
        goto out;
    for (size_t i = 0; i < n; i++) {
        if (calls[i].rc != PERMITD_OK || lists[i].bad || lists[i].n == 0)
            continue;           /* expired between the two reads, or refused */
        (*instances)++;
        for (size_t j = 0; j + 1 < lists[i].n; j += 2) {
            const char *m = lists[i].v[j];
            int k = m[0] == 'd';
            if ((m[0] == 'a' || m[0] == 'd') && m[1] == ':' && nsum[k] < HOTKEYS_READ_MAX * HOTKEYS_K) {
                struct hotkeys_count *c = &sums[k][nsum[k]++];
                snprintf(c->key, sizeof(c->key), "%s", m + 2);
                c->count = strtoull(lists[i].v[j + 1], NULL, 10);
                c->error = 0;
            }
        }
    }
    for (int k = 0; k < 2; k++) {
        sum(sums[k], &nsum[k]);
        qsort(sums[k], nsum[k], sizeof(**sums), by_count);
        if (nsum[k] > max)
            nsum[k] = max;
        memcpy(k == 0 ? allowed : denied, sums[k], nsum[k] * sizeof(**sums));
    }
    *nallowed = nsum[0];
    *ndenied = nsum[1];
    rc = PERMITD_OK;
out:
    gather_free(&ids);
    for (size_t i = 0; i < HOTKEYS_READ_MAX; i++)
        gather_free(&lists[i]);
    free(keys);
    free(zr);
    free(sums[0]);
    free(sums[1]);
    return rc;
}
