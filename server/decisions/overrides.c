/*
 * overrides.c - the in-memory override table (see overrides.h).
 *
 * A policy's overrides are one struct pol: its rows (struct ov) with their
 * values in one block of text, an open-addressed index of them by the hash
 * of (kind, value), and its prefixes' distinct lengths, shortest first. The
 * table is one struct snap: an open-addressed index of the pols by the hash
 * of their names. Both are built once and never changed; a pol is shared by
 * every snap that lists it (refs counts the snaps, not the readers), so a
 * one-policy reload copies the index of pointers (10,000 policies: 256 KB)
 * and builds one pol, not 100,000 rows.
 *
 * Hashes are 64-bit FNV-1a over the bytes, then the kind mixed in: the
 * hash of every prefix of a key comes out of one pass over the key.
 * Slots hold index + 1 (0: empty); the index is at most half full.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/readers.h"
#include "decisions/overrides.h"

#define FNV_OFFSET 1469598103934665603ULL
#define FNV_PRIME 1099511628211ULL
#define LENS_FAST 64                /* prefix lengths hashed in one pass; more are rehashed */

struct ov {
    uint64_t hash;
    int64_t id, version;
    int64_t max_permits;
    double rate;
    int64_t window_ms, expires_us, since_us;
    size_t off;                     /* the value in the pol's text */
    uint16_t len;
    uint8_t kind, action;
};

/* An index slot: the row's index + 1 (0: empty) and the high half of its
 * hash, so a probe passing over another row's slot reads no row. */
struct slot {
    uint32_t idx, tag;
};

/* What a lookup reads comes first, the name inline after it: a lookup
 * touches the pol's first cache lines, not a name elsewhere. */
struct pol {
    uint64_t hash;
    struct slot *slots;
    size_t mask;                    /* slots: mask + 1 of them (0 when no row) */
    struct ov *v;
    char *text;
    uint16_t *lens;                 /* the prefixes' lengths, distinct, shortest first */
    size_t nlens;
    int has_key, has_app;
    uint64_t changes;
    _Atomic unsigned refs;          /* the snaps that list it */
    size_t n, cap;
    size_t textlen, textcap;
    size_t bytes;
    char name[];
};

struct snap {
    size_t npol, nrows, bytes;
    size_t mask;
    struct pol **slots;             /* mask + 1 */
};

struct overrides {
    _Atomic(struct snap *) cur;
    pthread_mutex_t lock;           /* writers; and readers without a slot */
    struct readers readers;         /* inside a lookup */
};

struct overrides_build {
    struct pol **v;
    size_t n, cap;
    uint32_t *idx;                  /* by name hash, index + 1 */
    size_t mask;
    int failed;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * FNV_PRIME;
    return h;
}

/* The kind mixed into a value's FNV state (a finalizer: the low bits
 * index the table). */
static uint64_t mix(uint64_t h, unsigned kind)
{
    h ^= (uint64_t)(kind + 1) * 0x9e3779b97f4a7c15ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static uint64_t name_hash(const char *name)
{
    return mix(fnv(FNV_OFFSET, name, strlen(name)), 7);
}

static void pol_free(struct pol *p)
{
    if (p == NULL)
        return;
    free(p->v);
    free(p->text);
    free(p->slots);
    free(p->lens);
    free(p);
}

static void pol_release(struct pol *p)
{
    if (p != NULL && atomic_fetch_sub(&p->refs, 1) == 1)
        pol_free(p);
}

static void snap_free(struct snap *s)
{
    if (s == NULL)
        return;
    for (size_t i = 0; i <= s->mask; i++)
        pol_release(s->slots[i]);
    free(s->slots);
    free(s);
}

/* ---- the lookup ---- */

static const struct pol *find_pol(const struct snap *s, const char *name)
{
    uint64_t h = name_hash(name);

    for (size_t i = h & s->mask;; i = (i + 1) & s->mask) {
        const struct pol *p = s->slots[i];
        if (p == NULL)
            return NULL;
        if (p->hash == h && strcmp(p->name, name) == 0)
            return p;
    }
}

/* The row of (kind, value) in p whose hash is h, or NULL. */
static const struct ov *find_ov(const struct pol *p, uint64_t h, unsigned kind, const char *value,
                                size_t len)
{
    uint32_t tag = (uint32_t)(h >> 32);

    if (p->mask == 0)
        return NULL;
    for (size_t i = h & p->mask;; i = (i + 1) & p->mask) {
        struct slot x = p->slots[i];
        const struct ov *o;
        if (x.idx == 0)
            return NULL;
        if (x.tag != tag)
            continue;
        o = &p->v[x.idx - 1];
        if (o->hash == h && o->kind == kind && o->len == len &&
            memcmp(p->text + o->off, value, len) == 0)
            return o;
    }
}

static int in_force(const struct ov *o, int64_t now_us)
{
    return o != NULL && (o->expires_us == 0 || now_us < o->expires_us);
}

static void hit_fill(const struct pol *p, const struct ov *o, struct overrides_hit *hit)
{
    size_t shown = o->len < OVERRIDES_MATCH_SHOWN ? o->len : OVERRIDES_MATCH_SHOWN;

    hit->action = (enum overrides_action)o->action;
    hit->kind = (enum overrides_kind)o->kind;
    hit->id = o->id;
    hit->version = o->version;
    hit->max_permits = o->max_permits;
    hit->rate = o->rate;
    hit->window_ms = o->window_ms;
    hit->expires_us = o->expires_us;
    hit->since_us = o->since_us;
    memcpy(hit->match, p->text + o->off, shown);
    hit->match[shown] = '\0';
}

/* The longest prefix of key (len bytes) in force in p, or NULL. */
static const struct ov *longest_prefix(const struct pol *p, const char *key, size_t len,
                                       int64_t now_us)
{
    uint64_t hs[LENS_FAST], h = FNV_OFFSET;
    size_t upto = 0, at = 0;

    /* one pass: the FNV state at each prefix length (shortest first) */
    for (size_t i = 0; i < p->nlens && i < LENS_FAST && p->lens[i] <= len; i++) {
        h = fnv(h, key + at, p->lens[i] - at);
        at = p->lens[i];
        hs[i] = h;
        upto = i + 1;
    }
    /* lengths past LENS_FAST (a policy with that many distinct ones),
     * longest first, each hashed on its own */
    for (size_t i = p->nlens; i > LENS_FAST; i--) {
        const struct ov *o;
        if (p->lens[i - 1] > len)
            continue;
        o = find_ov(p, mix(fnv(FNV_OFFSET, key, p->lens[i - 1]), OVERRIDES_PREFIX),
                    OVERRIDES_PREFIX, key, p->lens[i - 1]);
        if (in_force(o, now_us))
            return o;
    }
    for (size_t i = upto; i > 0; i--) {
        const struct ov *o = find_ov(p, mix(hs[i - 1], OVERRIDES_PREFIX), OVERRIDES_PREFIX, key,
                                     p->lens[i - 1]);
        if (in_force(o, now_us))
            return o;
    }
    return NULL;
}

static int lookup(const struct snap *s, const char *policy, const char *key, const char *app,
                  int64_t now_us, struct overrides_hit *hit)
{
    const struct pol *p = s->npol > 0 ? find_pol(s, policy) : NULL;
    const struct ov *o = NULL;
    size_t klen = key != NULL ? strlen(key) : 0;

    hit->action = OVERRIDES_NONE;
    hit->changes = 0;
    if (p == NULL)
        return 0;
    hit->changes = p->changes;
    if (p->has_key && klen > 0) {
        o = find_ov(p, mix(fnv(FNV_OFFSET, key, klen), OVERRIDES_KEY), OVERRIDES_KEY, key, klen);
        if (!in_force(o, now_us))
            o = NULL;
    }
    if (o == NULL && p->nlens > 0 && klen > 0)
        o = longest_prefix(p, key, klen, now_us);
    if (o == NULL && p->has_app && app != NULL && app[0] != '\0') {
        size_t alen = strlen(app);
        o = find_ov(p, mix(fnv(FNV_OFFSET, app, alen), OVERRIDES_APP), OVERRIDES_APP, app, alen);
        if (!in_force(o, now_us))
            o = NULL;
    }
    if (o != NULL)
        hit_fill(p, o, hit);
    return 1;
}

int overrides_lookup(struct overrides *t, const char *policy, const char *key, const char *app,
                     int64_t now_us, struct overrides_hit *hit)
{
    int me = readers_slot(), r;

    if (me < 0) {
        pthread_mutex_lock(&t->lock);
        r = lookup(atomic_load(&t->cur), policy, key, app, now_us, hit);
        pthread_mutex_unlock(&t->lock);
        return r;
    }
    readers_enter(&t->readers, me);
    r = lookup(atomic_load(&t->cur), policy, key, app, now_us, hit);
    readers_leave(&t->readers, me);
    return r;
}

/* ---- the table ---- */

static struct snap *snap_new(size_t npol)
{
    struct snap *s = calloc(1, sizeof(*s));
    size_t size = 16;

    while (size < 2 * npol)
        size *= 2;
    if (s == NULL || (s->slots = calloc(size, sizeof(*s->slots))) == NULL) {
        free(s);
        return NULL;
    }
    s->mask = size - 1;
    s->bytes = sizeof(*s) + size * sizeof(*s->slots);
    return s;
}

/* Lists p in s (takes a reference); p's name is not in s yet. */
static void snap_put(struct snap *s, struct pol *p)
{
    size_t i = p->hash & s->mask;

    while (s->slots[i] != NULL)
        i = (i + 1) & s->mask;
    atomic_fetch_add(&p->refs, 1);
    s->slots[i] = p;
    s->npol++;
    s->nrows += p->n;
    s->bytes += p->bytes;
}

int overrides_new(struct overrides **out, struct permitd_error *err)
{
    struct overrides *t = calloc(1, sizeof(*t));
    struct snap *s = snap_new(0);

    *out = NULL;
    if (t == NULL || s == NULL) {
        free(t);
        snap_free(s);
        return permitd_error_set(err, PERMITD_EINTERNAL, "override table: out of memory");
    }
    atomic_init(&t->cur, s);
    pthread_mutex_init(&t->lock, NULL);
    *out = t;
    return PERMITD_OK;
}

void overrides_free(struct overrides *t)
{
    if (t == NULL)
        return;
    snap_free(atomic_load(&t->cur));
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* Swaps next in (t->lock held) and returns once no reader can still see
 * the table it replaced, which the caller may then free. */
static struct snap *swap(struct overrides *t, struct snap *next)
{
    struct snap *old = atomic_exchange(&t->cur, next);

    readers_wait(&t->readers);
    return old;
}

void overrides_stats(struct overrides *t, size_t *policies, size_t *rows, size_t *bytes)
{
    struct snap *s;

    pthread_mutex_lock(&t->lock);
    s = atomic_load(&t->cur);
    *policies = s->npol;
    *rows = s->nrows;
    *bytes = s->bytes;
    pthread_mutex_unlock(&t->lock);
}

/* ---- building ---- */

int overrides_build_new(struct overrides_build **out, struct permitd_error *err)
{
    *out = calloc(1, sizeof(**out));
    if (*out == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    return PERMITD_OK;
}

void overrides_build_free(struct overrides_build *b)
{
    if (b == NULL)
        return;
    for (size_t i = 0; i < b->n; i++)
        pol_free(b->v[i]);
    free(b->v);
    free(b->idx);
    free(b);
}

/* The build's pol of `name`, made when it has none; NULL: out of memory. */
static struct pol *build_pol(struct overrides_build *b, const char *name)
{
    uint64_t h = name_hash(name);
    struct pol *p;

    if (b->idx != NULL)
        for (size_t i = h & b->mask; b->idx[i] != 0; i = (i + 1) & b->mask)
            if (b->v[b->idx[i] - 1]->hash == h && strcmp(b->v[b->idx[i] - 1]->name, name) == 0)
                return b->v[b->idx[i] - 1];
    if (b->idx == NULL || 2 * (b->n + 1) > b->mask + 1) {
        size_t size = b->idx == NULL ? 64 : 2 * (b->mask + 1);
        uint32_t *idx = calloc(size, sizeof(*idx));
        if (idx == NULL)
            return NULL;
        for (size_t k = 0; k < b->n; k++) {
            size_t i = b->v[k]->hash & (size - 1);
            while (idx[i] != 0)
                i = (i + 1) & (size - 1);
            idx[i] = (uint32_t)(k + 1);
        }
        free(b->idx);
        b->idx = idx;
        b->mask = size - 1;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        struct pol **v = realloc(b->v, cap * sizeof(*v));
        if (v == NULL)
            return NULL;
        b->v = v;
        b->cap = cap;
    }
    if ((p = calloc(1, sizeof(*p) + strlen(name) + 1)) == NULL)
        return NULL;
    memcpy(p->name, name, strlen(name) + 1);
    p->hash = h;
    b->v[b->n++] = p;
    {
        size_t i = h & b->mask;
        while (b->idx[i] != 0)
            i = (i + 1) & b->mask;
        b->idx[i] = (uint32_t)b->n;
    }
    return p;
}

int overrides_build_changes(void *ud, const char *policy, uint64_t changes)
{
    struct overrides_build *b = ud;
    struct pol *p = build_pol(b, policy);

    if (p == NULL) {
        b->failed = 1;
        return PERMITD_EINTERNAL;
    }
    p->changes = changes;
    return PERMITD_OK;
}

int overrides_build_row(void *ud, const struct overrides_row *r)
{
    struct overrides_build *b = ud;
    struct pol *p = build_pol(b, r->policy);
    struct ov *o;

    if (p == NULL || r->value_len > UINT16_MAX)
        goto oom;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 4;
        struct ov *v = realloc(p->v, cap * sizeof(*v));
        if (v == NULL)
            goto oom;
        p->v = v;
        p->cap = cap;
    }
    if (p->textlen + r->value_len > p->textcap) {
        size_t cap = p->textcap ? 2 * p->textcap : 256;
        char *text;
        while (cap < p->textlen + r->value_len)
            cap *= 2;
        if ((text = realloc(p->text, cap)) == NULL)
            goto oom;
        p->text = text;
        p->textcap = cap;
    }
    o = &p->v[p->n++];
    memset(o, 0, sizeof(*o));
    o->hash = mix(fnv(FNV_OFFSET, r->value, r->value_len), r->kind);
    o->id = r->id;
    o->version = r->version;
    o->max_permits = r->max_permits;
    o->rate = r->rate;
    o->window_ms = r->window_ms;
    o->expires_us = r->expires_us;
    o->since_us = r->since_us;
    o->off = p->textlen;
    o->len = (uint16_t)r->value_len;
    o->kind = (uint8_t)r->kind;
    o->action = (uint8_t)r->action;
    memcpy(p->text + p->textlen, r->value, r->value_len);
    p->textlen += r->value_len;
    return PERMITD_OK;
oom:
    b->failed = 1;
    return PERMITD_EINTERNAL;
}

static int by_len(const void *a, const void *b)
{
    uint16_t x = *(const uint16_t *)a, y = *(const uint16_t *)b;

    return (x > y) - (x < y);
}

/* Lays out p's index and prefix lengths once its rows are in; -1: out of
 * memory. A second row of one (kind, value) is left out of the index. */
static int pol_finish(struct pol *p)
{
    size_t size = 4, nl = 0;

    p->bytes = sizeof(*p) + strlen(p->name) + 1 + p->textcap + p->cap * sizeof(*p->v);
    if (p->n == 0)
        return 0;
    while (size < 2 * p->n)
        size *= 2;
    if ((p->slots = calloc(size, sizeof(*p->slots))) == NULL)
        return -1;
    p->mask = size - 1;
    p->bytes += size * sizeof(*p->slots);
    for (size_t k = 0; k < p->n; k++) {
        struct ov *o = &p->v[k];
        size_t i = o->hash & p->mask;
        if (find_ov(p, o->hash, o->kind, p->text + o->off, o->len) != NULL)
            continue;
        while (p->slots[i].idx != 0)
            i = (i + 1) & p->mask;
        p->slots[i] = (struct slot){(uint32_t)(k + 1), (uint32_t)(o->hash >> 32)};
        p->has_key |= o->kind == OVERRIDES_KEY;
        p->has_app |= o->kind == OVERRIDES_APP;
        nl += o->kind == OVERRIDES_PREFIX;
    }
    if (nl > 0) {
        if ((p->lens = malloc(nl * sizeof(*p->lens))) == NULL)
            return -1;
        for (size_t k = 0; k < p->n; k++)
            if (p->v[k].kind == OVERRIDES_PREFIX)
                p->lens[p->nlens++] = p->v[k].len;
        qsort(p->lens, p->nlens, sizeof(*p->lens), by_len);
        nl = 0;
        for (size_t k = 0; k < p->nlens; k++)
            if (k == 0 || p->lens[k] != p->lens[nl - 1])
                p->lens[nl++] = p->lens[k];
        p->nlens = nl;
        p->bytes += nl * sizeof(*p->lens);
    }
    return 0;
}

static int build_finish(struct overrides_build *b, struct permitd_error *err)
{
    if (b->failed)
        return permitd_error_set(err, PERMITD_EINTERNAL, "override table: out of memory");
    for (size_t i = 0; i < b->n; i++)
        if (pol_finish(b->v[i]) != 0)
            return permitd_error_set(err, PERMITD_EINTERNAL, "override table: out of memory");
    return PERMITD_OK;
}

int overrides_replace_all(struct overrides *t, struct overrides_build *b,
                          struct permitd_error *err)
{
    struct snap *s = NULL;
    int rc = build_finish(b, err);

    if (rc == PERMITD_OK && (s = snap_new(b->n)) == NULL)
        rc = permitd_error_set(err, PERMITD_EINTERNAL, "override table: out of memory");
    if (rc == PERMITD_OK) {
        for (size_t i = 0; i < b->n; i++)
            snap_put(s, b->v[i]);       /* the build's names are distinct; now the snap's */
        b->n = 0;
        pthread_mutex_lock(&t->lock);
        s = swap(t, s);
        pthread_mutex_unlock(&t->lock);
        snap_free(s);
    }
    overrides_build_free(b);
    return rc;
}

int overrides_replace_policy(struct overrides *t, const char *policy, struct overrides_build *b,
                             struct permitd_error *err)
{
    struct pol *fresh = NULL;
    struct snap *s = NULL, *old;
    int rc = build_finish(b, err);

    for (size_t i = 0; rc == PERMITD_OK && i < b->n; i++)
        if (strcmp(b->v[i]->name, policy) == 0)
            fresh = b->v[i];
    if (rc != PERMITD_OK) {
        overrides_build_free(b);
        return rc;
    }
    pthread_mutex_lock(&t->lock);
    old = atomic_load(&t->cur);
    {
        const struct pol *held = old->npol > 0 ? find_pol(old, policy) : NULL;
        if (held != NULL && (fresh == NULL ? 0 : fresh->changes) < held->changes) {
            /* an older read than the one installed: keep what is held */
            pthread_mutex_unlock(&t->lock);
            overrides_build_free(b);
            return PERMITD_OK;
        }
    }
    if ((s = snap_new(old->npol + 1)) == NULL) {
        pthread_mutex_unlock(&t->lock);
        overrides_build_free(b);
        return permitd_error_set(err, PERMITD_EINTERNAL, "override table: out of memory");
    }
    for (size_t i = 0; i <= old->mask; i++)
        if (old->slots[i] != NULL && strcmp(old->slots[i]->name, policy) != 0)
            snap_put(s, old->slots[i]);
    if (fresh != NULL && (fresh->n > 0 || fresh->changes > 0))
        snap_put(s, fresh);
    old = swap(t, s);
    pthread_mutex_unlock(&t->lock);
    snap_free(old);
    /* the build's pols: the one listed lives on in the snap */
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i] == fresh && atomic_load(&fresh->refs) > 0)
            b->v[i] = NULL;
    for (size_t i = 0; i < b->n; i++)
        if (b->v[i] != NULL)
            pol_free(b->v[i]);
    b->n = 0;
    overrides_build_free(b);
    return PERMITD_OK;
}
