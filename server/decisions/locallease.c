/*
 * locallease.c - one worker's local leases of hot buckets: which buckets
 * are hot, what each lease holds, granting from it, and what goes back
 * when it ends. The idea and its bound are in locallease.h; the Redis
 * calls (the lease's take, its give-back) are limiter_queue.c's.
 *
 * The table is open-addressed by the bucket key's FNV-1a hash, probed
 * LOCALLEASE_PROBE slots; a slot that only counts traffic gives way to a
 * new bucket once its count has gone quiet, one holding a lease never.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/config.h"
#include "decisions/limiter.h"
#include "decisions/locallease.h"

struct locallease {
    struct locallease_conf conf;
    int64_t life_ms;                /* a lease's key life in Redis: R */
    uint64_t seed, serial;          /* lease ids: seed, then a count */
    size_t held;
    struct locallease_slot slots[LOCALLEASE_SLOTS];
};

int locallease_new(const struct locallease_conf *conf, struct locallease **out,
                   struct permitd_error *err)
{
    struct locallease *t = calloc(1, sizeof(*t));

    *out = NULL;
    if (t == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "local leases: out of memory");
    t->conf = *conf;
    t->life_ms = conf->lease_ms + LOCALLEASE_SLACK_MS;
    /* An id needs only be unique among the bucket's live leases: a seed
     * per worker and a count. No seed from getrandom(): the address and
     * the clock still make one worker's ids differ from another's. */
    if (getrandom(&t->seed, sizeof(t->seed), GRND_NONBLOCK) != sizeof(t->seed))
        t->seed = (uint64_t)(uintptr_t)t ^ ((uint64_t)conf->lease_ms << 40);
    *out = t;
    return PERMITD_OK;
}

void locallease_free(struct locallease *t)
{
    free(t);
}

static uint64_t fnv(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h;
}

/* Rolls the slot's counting window on to now. */
static void roll(const struct locallease *t, struct locallease_slot *s, int64_t now_us)
{
    int64_t w = t->conf.lease_ms * 1000;

    if (now_us - s->window_us < w)
        return;
    s->last = now_us - s->window_us < 2 * w ? s->count : 0;
    s->count = 0;
    s->window_us = now_us;
}

struct locallease_slot *locallease_find(struct locallease *t, const char *policy,
                                        const char *key, int64_t now_us)
{
    size_t np = strlen(policy), nk = strlen(key);
    uint64_t h = fnv(policy, np) ^ (fnv(key, nk) * 31);
    struct locallease_slot *spare = NULL;

    if (np >= sizeof(t->slots[0].policy) || nk >= sizeof(t->slots[0].bkey))
        return NULL;
    for (size_t i = 0; i < LOCALLEASE_PROBE; i++) {
        struct locallease_slot *s = &t->slots[(h + i) & (LOCALLEASE_SLOTS - 1)];
        if (s->state != LOCALLEASE_EMPTY && s->hash == h && strcmp(s->policy, policy) == 0 &&
            strcmp(s->bkey, key) == 0) {
            roll(t, s, now_us);
            s->count++;
            return s;
        }
        if (spare == NULL && (s->state == LOCALLEASE_EMPTY ||
                              (s->state == LOCALLEASE_COUNTING &&
                               now_us - s->window_us >= 2 * t->conf.lease_ms * 1000)))
            spare = s;
    }
    if (spare == NULL)
        return NULL;
    memset(spare, 0, offsetof(struct locallease_slot, policy));
    spare->state = LOCALLEASE_COUNTING;
    spare->hash = h;
    memcpy(spare->policy, policy, np + 1);
    memcpy(spare->bkey, key, nk + 1);
    spare->key[0] = '\0';
    spare->key_len = 0;
    spare->window_us = now_us;
    spare->count = 1;
    spare->last = 0;
    spare->scarce_until_us = 0;
    return spare;
}

void locallease_set_key(struct locallease_slot *s, const char *key, size_t len)
{
    if (len >= sizeof(s->key))
        len = sizeof(s->key) - 1;   /* never: the buffer is the key's bound */
    memcpy(s->key, key, len);
    s->key[len] = '\0';
    s->key_len = len;
}

void locallease_end(struct locallease *t, struct locallease_slot *s, int give,
                    struct locallease_return *ret)
{
    ret->permits = 0;
    ret->p = 0;
    if (s->state != LOCALLEASE_HELD)
        return;
    if (give && (s->left > 0 || s->p > 0)) {
        memcpy(ret->key, s->key, s->key_len + 1);
        ret->key_len = s->key_len;
        memcpy(ret->id, s->id, sizeof(ret->id));
        ret->fixed_window = s->fixed_window;
        ret->max = s->max;
        ret->permits = s->left;
        ret->p = s->p;
    }
    s->state = LOCALLEASE_COUNTING;
    s->left = 0;
    t->held--;
}

int locallease_grant(struct locallease *t, struct locallease_slot *s, uint64_t stamp,
                     uint64_t epoch, int64_t want, int64_t now_us, struct limiter_result *res,
                     struct locallease_return *ret)
{
    int64_t remaining;

    ret->permits = ret->p = 0;
    if (s->state != LOCALLEASE_HELD)
        return 0;
    if (s->epoch != epoch) {
        locallease_end(t, s, 0, ret);           /* a reset gave everything back */
        return 0;
    }
    if (s->stamp != stamp || now_us >= s->until_us || s->left < want) {
        locallease_end(t, s, 1, ret);
        return 0;
    }
    s->left -= want;
    remaining = s->remaining + s->left;
    if (remaining > s->max)
        remaining = s->max;
    memset(res, 0, sizeof(*res));
    res->allowed = 1;
    res->remaining = remaining;
    res->limit = s->max;
    res->reset_after_ms = s->reset_after_ms;
    res->window_s = s->window_s;
    res->tokens_micro = remaining * 1000000;
    if (s->left == 0)
        locallease_end(t, s, 1, ret);   /* spent: the unused P goes back now */
    return 1;
}

int locallease_begin(struct locallease *t, struct locallease_slot *s, int mode, int fixed_window,
                     int64_t max, double rate, int64_t permits, int64_t want, uint64_t stamp,
                     uint64_t epoch, int64_t now_us, int64_t *extra)
{
    int64_t n, p = 0, seen;

    *extra = 0;
    if (mode != CONFIG_LOCAL_LEASES_ON && mode != CONFIG_LOCAL_LEASES_AUTO)
        return 0;
    if (s->state != LOCALLEASE_COUNTING || now_us < s->scarce_until_us)
        return 0;
    seen = s->last > s->count ? s->last : s->count;
    if (mode == CONFIG_LOCAL_LEASES_AUTO &&
        (double)seen * 1000.0 / (double)t->conf.lease_ms < (double)t->conf.auto_rate)
        return 0;
    if (!fixed_window) {
        double pr = ceil(rate * (double)t->life_ms / 1000.0);
        if (!(pr >= 0) || pr >= (double)max)
            return 0;               /* refills within a lease: nothing to gain */
        p = (int64_t)pr;
    }
    if (permits <= 0)
        permits = t->conf.permits;
    n = permits > 0 ? permits : 2 * seen * want;
    if (n < LOCALLEASE_PERMITS_MIN)
        n = LOCALLEASE_PERMITS_MIN;
    if (n > max / 4)
        n = max / 4;
    if (want > max || n > max - want - p)
        n = max - want - p;
    if (n < 1)
        return 0;
    s->state = LOCALLEASE_TAKING;
    s->fixed_window = fixed_window;
    s->max = max;
    s->n = n;
    s->p = p;
    s->stamp = stamp;
    s->epoch = epoch;
    t->serial++;
    s->id[0] = '\x01';
    snprintf(s->id + 1, sizeof(s->id) - 1, "%016" PRIx64 "%016" PRIx64, t->seed, t->serial);
    *extra = n + p;
    return 1;
}

void locallease_taken(struct locallease *t, struct locallease_slot *s, int granted,
                      int64_t sent_us, struct limiter_result *res)
{
    int64_t until;

    if (s->state != LOCALLEASE_TAKING)
        return;
    if (!granted) {
        s->state = LOCALLEASE_COUNTING;
        s->scarce_until_us = sent_us + t->conf.lease_ms * 1000;
        return;
    }
    until = sent_us + t->conf.lease_ms * 1000;
    /* A fixed window's lease ends with the window it was taken in
     * (reset_after_ms: until it ends, counted from the take, which Redis
     * decided after sent_us; rounded up, so a millisecond less: a grant
     * after the window's end would count against the next one). */
    if (s->fixed_window && sent_us + (res->reset_after_ms - 1) * 1000 < until)
        until = sent_us + (res->reset_after_ms - 1) * 1000;
    s->state = LOCALLEASE_HELD;
    s->left = s->n;
    s->until_us = until;
    s->remaining = res->remaining;
    s->reset_after_ms = res->reset_after_ms;
    s->window_s = res->window_s;
    t->held++;
    /* The Acquire's own answer: what is left counts the lease's permits. */
    res->remaining += s->n;
    if (res->remaining > s->max)
        res->remaining = s->max;
    res->tokens_micro = res->remaining * 1000000;
}

struct locallease_slot *locallease_due(struct locallease *t, size_t *cursor, int64_t now_us,
                                       uint64_t epoch, uint64_t (*stamp_of)(void *ud,
                                                                            const char *policy),
                                       void *ud)
{
    while (*cursor < LOCALLEASE_SLOTS && t->held > 0) {
        struct locallease_slot *s = &t->slots[(*cursor)++];
        if (s->state != LOCALLEASE_HELD)
            continue;
        if (now_us >= s->until_us || s->epoch != epoch ||
            (stamp_of != NULL && stamp_of(ud, s->policy) != s->stamp))
            return s;
    }
    return NULL;
}

size_t locallease_held(const struct locallease *t)
{
    return t->held;
}

int64_t locallease_next_end(const struct locallease *t)
{
    int64_t at = INT64_MAX;

    for (size_t i = 0; i < LOCALLEASE_SLOTS && t->held > 0; i++)
        if (t->slots[i].state == LOCALLEASE_HELD && t->slots[i].until_us < at)
            at = t->slots[i].until_us;
    return at;
}

int64_t locallease_life_ms(const struct locallease *t)
{
    return t->life_ms;
}
