/*
 * deny_cache.c - one worker's memory of the buckets Redis just denied (see
 * deny_cache.h for why it is exact).
 *
 * The entries live in a ring, in the order they came: a new bucket takes
 * the place of the oldest (its index slot removed first). The index is
 * open addressing with linear probing over twice as many slots as entries
 * (so a probe always meets an empty slot), each slot an entry's number + 1;
 * removal shifts the probe chain back (no tombstones), so lookups stay
 * short however long the cache runs. The hash is seeded per cache from
 * getrandom(): a client choosing keys cannot aim them at one chain.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/clock.h"
#include "decisions/deny_cache.h"
#include "stores/policy.h"

/* The longest wait kept, in ms (2^53 ms would overflow int64_t once
 * multiplied into microseconds); longer ones are left to Redis. */
#define MAX_MS ((int64_t)9000000000000LL)

struct entry {
    uint64_t hash;
    uint64_t stamp, epoch;
    int64_t permits;
    int64_t until_us;           /* deny before this (monotonic) */
    int64_t retry_end_us;       /* the answer's retry_after_ms ends here */
    int64_t reset_end_us;       /* ... and its reset_after_ms */
    int64_t remaining, limit, window_s, tokens_micro;
    int used;
    size_t name_len;            /* bucket "\0" key */
    char name[POLICY_NAME_MAX + 1 + POLICY_KEY_MAX + 1];
};

struct deny_cache {
    size_t size, next;          /* entries; the ring's oldest (the next to go) */
    size_t count;
    size_t mask;                /* index slots - 1 */
    uint64_t seed;
    uint32_t *index;            /* 0: empty; else entry number + 1 */
    struct entry *ents;
};

int deny_cache_new(size_t size, struct deny_cache **out, struct permitd_error *err)
{
    struct deny_cache *c = NULL;
    size_t slots = 2;

    *out = NULL;
    if (size == 0 || size > UINT32_MAX / 4)
        return permitd_error_set(err, PERMITD_EINVAL, "deny cache: %zu entries is not "
                                 "1..%u", size, (unsigned)(UINT32_MAX / 4));
    while (slots < 2 * size)
        slots *= 2;
    if ((c = calloc(1, sizeof(*c))) == NULL ||
        (c->index = calloc(slots, sizeof(*c->index))) == NULL ||
        (c->ents = calloc(size, sizeof(*c->ents))) == NULL) {
        deny_cache_free(c);
        return permitd_error_set(err, PERMITD_EINTERNAL, "deny cache: out of memory for %zu "
                                 "entries", size);
    }
    c->size = size;
    c->mask = slots - 1;
    if (getrandom(&c->seed, sizeof(c->seed), GRND_NONBLOCK) != (ssize_t)sizeof(c->seed))
        c->seed = (uint64_t)clock_now_us() * 0x9e3779b97f4a7c15ULL;
    *out = c;
    return PERMITD_OK;
}

void deny_cache_free(struct deny_cache *c)
{
    if (c == NULL)
        return;
    free(c->index);
    free(c->ents);
    free(c);
}

size_t deny_cache_count(const struct deny_cache *c)
{
    return c->count;
}

/* FNV-1a over name, seeded, then mixed (splitmix64's finaliser) so the
 * low bits the index uses depend on every byte. */
static uint64_t hash_of(const struct deny_cache *c, const char *name, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL ^ c->seed;

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)name[i];
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

/* bucket "\0" key into buf (room for an entry's name); its length, or 0
 * when a part is longer than a policy name or key can be (never cached). */
static size_t name_of(char *buf, const char *bucket, const char *key)
{
    size_t b = strlen(bucket), k = strlen(key);

    if (b > POLICY_NAME_MAX || k > POLICY_KEY_MAX)
        return 0;
    memcpy(buf, bucket, b + 1);
    memcpy(buf + b + 1, key, k + 1);
    return b + 1 + k + 1;
}

/* The index slot holding the entry named name (*found = 1), or the empty
 * slot where it would go (*found = 0). */
static size_t find(const struct deny_cache *c, uint64_t h, const char *name, size_t len,
                   int *found)
{
    size_t i = h & c->mask;

    for (; c->index[i] != 0; i = (i + 1) & c->mask) {
        const struct entry *e = &c->ents[c->index[i] - 1];
        if (e->hash == h && e->name_len == len && memcmp(e->name, name, len) == 0) {
            *found = 1;
            return i;
        }
    }
    *found = 0;
    return i;
}

/* Empties index slot i, moving back the entries of the chain after it that
 * may not stay behind the hole (backward-shift deletion). */
static void unindex(struct deny_cache *c, size_t i)
{
    size_t j = i;

    for (;;) {
        size_t home;
        j = (j + 1) & c->mask;
        if (c->index[j] == 0)
            break;
        home = c->ents[c->index[j] - 1].hash & c->mask;
        /* it stays where it is when its home lies cyclically in (i, j] */
        if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
            continue;
        c->index[i] = c->index[j];
        i = j;
    }
    c->index[i] = 0;
}

/* Drops entry e (in use), whose index slot is at. */
static void drop(struct deny_cache *c, struct entry *e, size_t at)
{
    unindex(c, at);
    e->used = 0;
    c->count--;
}

static int64_t ms_up(int64_t us)
{
    return us <= 0 ? 0 : (us + 999) / 1000;
}

int deny_cache_get(struct deny_cache *c, const char *bucket, const char *key, uint64_t stamp,
                   uint64_t epoch, int64_t permits, int64_t now_us, struct deny_cache_answer *out)
{
    char name[POLICY_NAME_MAX + 1 + POLICY_KEY_MAX + 1];
    size_t len = name_of(name, bucket, key), at;
    struct entry *e;
    int found;

    if (len == 0 || c->count == 0)
        return 0;
    at = find(c, hash_of(c, name, len), name, len, &found);
    if (!found)
        return 0;
    e = &c->ents[c->index[at] - 1];
    if (e->stamp != stamp || e->epoch != epoch || now_us >= e->until_us) {
        drop(c, e, at);         /* outdated for every size */
        return 0;
    }
    if (e->permits != permits)  /* another size: its wait is not known here */
        return 0;
    out->remaining = e->remaining;
    out->limit = e->limit;
    out->retry_after_ms = ms_up(e->retry_end_us - now_us);
    out->reset_after_ms = ms_up(e->reset_end_us - now_us);
    out->window_s = e->window_s;
    out->tokens_micro = e->tokens_micro;
    return 1;
}

int deny_cache_put(struct deny_cache *c, const char *bucket, const char *key, uint64_t stamp,
                   uint64_t epoch, int64_t permits, int64_t sent_us, int64_t answered_us,
                   const struct deny_cache_answer *a)
{
    char name[POLICY_NAME_MAX + 1 + POLICY_KEY_MAX + 1];
    size_t len = name_of(name, bucket, key), at;
    int64_t retry = a->retry_after_ms, reset = a->reset_after_ms;
    int64_t wait;
    uint64_t h;
    struct entry *e;
    int found, evicted = 0;

    /* A wait past MAX_MS (centuries) is not kept: the cache would have to
     * answer it cut short, and retry_after_ms is never rounded down. */
    if (len == 0 || retry < 2 || reset < 0 || retry > MAX_MS || reset > MAX_MS)
        return 0;
    /* Sure to be denied: the smallest wait in microseconds is more than
     * (retry - 1) ms (rounded up to retry); less 0.1% and 1 us for the
     * rates of Redis's clock and this one. */
    wait = (retry - 1) * 1000;
    wait -= wait / 1000 + 1;
    h = hash_of(c, name, len);
    at = find(c, h, name, len, &found);
    if (found) {
        e = &c->ents[c->index[at] - 1];
    } else {
        e = &c->ents[c->next];
        if (e->used) {
            int f;
            evicted = answered_us < e->until_us;
            drop(c, e, find(c, e->hash, e->name, e->name_len, &f));
            at = find(c, h, name, len, &found);     /* the chain may have moved */
        }
        c->next = (c->next + 1) % c->size;
        c->index[at] = (uint32_t)(e - c->ents) + 1;
        e->used = 1;
        e->hash = h;
        e->name_len = len;
        memcpy(e->name, name, len);
        c->count++;
    }
    e->stamp = stamp;
    e->epoch = epoch;
    e->permits = permits;
    e->until_us = sent_us + wait;
    /* the answer's waits run from its arrival (Redis decided before):
     * never early, and late by no more than the round trip */
    e->retry_end_us = answered_us + retry * 1000;
    e->reset_end_us = answered_us + reset * 1000;
    e->remaining = a->remaining;
    e->limit = a->limit;
    e->window_s = a->window_s;
    e->tokens_micro = a->tokens_micro;
    return evicted;
}
