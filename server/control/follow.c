/*
 * follow.c - change notices and the periodic pass that keep the limiter's
 * policy copy current (see follow.h).
 *
 * A notice is "<name> <version>": the policy is reloaded from its hash,
 * which is the truth the notice points at (two notices may arrive out of
 * order; the hash is read after both). A policy this instance does not
 * hold yet is loaded too (created elsewhere: its first request here then
 * finds it), and one deleted is dropped. The version says only whether it
 * was a delete ("<name> 0"): then a MySQL policy whose hash is gone is kept
 * marked missing until the sync's next pass tells a delete from a Redis
 * that lost it (policies_reload_gone()); after any other notice a gone
 * hash is Redis's loss (flushed after the write the notice announced),
 * and the copy held goes on deciding (policies_reload(), issue 33).
 *
 * "<name> reset" (limiter_reset() on any instance) is no edit: the bucket's
 * state was deleted, and the deny caches here must forget their denials
 * (they would deny what Redis now allows). So must they whenever the
 * listener subscribes again (a reset notice sent meanwhile is lost), and
 * at each periodic pass.
 *
 * Notices come in bursts (a sync batch writes 200 policies, each with its
 * notice): the names read in one go are reloaded together, in pipelined
 * round trips and one table copy per batch (policies_reload_many()).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/log.h"
#include "control/follow.h"
#include "decisions/policies.h"
#include "stores/policy.h"
#include "stores/redis_notice.h"

#define FOLLOW_DEADLINE_MS 2000
#define FOLLOW_PENDING_MAX 2000     /* names noticed before they are read at once */

/* Names to reload together. */
struct names {
    char **v;
    size_t n, cap;
};

struct follow {
    struct redis *redis;
    struct policies *table;
    struct limiter *limiter;
    struct redis_notice *notice;
    char index_key[160];            /* <prefix>policies */
    struct names pending;           /* noticed, not reloaded yet (the listener's thread only) */
    struct names gone;              /* the same, noticed deleted ("<name> 0") */
};

static int64_t deadline(void)
{
    return clock_now_us() + (int64_t)FOLLOW_DEADLINE_MS * 1000;
}

static void names_clear(struct names *nm)
{
    for (size_t i = 0; i < nm->n; i++)
        free(nm->v[i]);
    nm->n = 0;
}

/* Appends a copy of name; 0, or -1 (out of memory: nm unchanged). */
static int names_add(struct names *nm, const char *name)
{
    char *copy;

    if (nm->n == nm->cap) {
        size_t cap = nm->cap ? nm->cap * 2 : 64;
        char **v = realloc(nm->v, cap * sizeof(*v));
        if (v == NULL)
            return -1;
        nm->v = v;
        nm->cap = cap;
    }
    if ((copy = strdup(name)) == NULL)
        return -1;
    nm->v[nm->n++] = copy;
    return 0;
}

/* Reloads names[0..n) in pipelined batches (policies_reload_many(): one
 * round trip and one table copy per batch, where a burst of 10,000
 * notices was 10,000 of each; policies_reload_gone() for names noticed
 * deleted); a failure is logged and left to the next pass. */
static void reload(struct follow *f, char *const *names, size_t n, int gone)
{
    struct permitd_error err = {0, ""};
    int rc = PERMITD_OK;

    if (n > 0 && gone)
        rc = policies_reload_gone(f->table, (const char *const *)names, n, deadline(), NULL, NULL,
                                  &err);
    else if (n > 0)
        rc = policies_reload_many(f->table, (const char *const *)names, n, deadline(), NULL, NULL,
                                  &err);
    if (rc != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "policies not reloaded; the next pass will", "policies=%zu "
                "first=%s error=\"%s\"", n, names[0], err.message);
}

/* The notices read so far, reloaded at once: the deleted ones after the
 * others (of a name edited, then deleted, the delete is the last word). */
static void flush(struct follow *f)
{
    reload(f, f->pending.v, f->pending.n, 0);
    names_clear(&f->pending);
    reload(f, f->gone.v, f->gone.n, 1);
    names_clear(&f->gone);
}

static void on_drained(void *ud)
{
    flush(ud);
}

static void on_notice(void *ud, const char *msg, size_t len)
{
    struct follow *f = ud;
    char name[POLICY_NAME_MAX + 1];
    size_t n = 0;
    int gone;

    while (n < len && n < POLICY_NAME_MAX && msg[n] != ' ')
        n++;
    memcpy(name, msg, n);
    name[n] = '\0';
    if (policy_check_name("name", name, NULL) != PERMITD_OK)
        return;
    if (len - n == 6 && memcmp(msg + n, " reset", 6) == 0) {
        limiter_deny_cache_clear(f->limiter);
        return;
    }
    if (f->pending.n + f->gone.n >= FOLLOW_PENDING_MAX)
        flush(f);
    gone = len - n == 2 && memcmp(msg + n, " 0", 2) == 0;
    if (names_add(gone ? &f->gone : &f->pending, name) != 0)
        reload(f, (char *const[]){name}, 1, gone);
}

/* SMEMBERS's names this instance does not hold yet. */
static void collect(void *ud, const char *s, size_t len)
{
    struct follow *f = ud;
    char name[POLICY_NAME_MAX + 1];

    if (len > POLICY_NAME_MAX)
        return;
    memcpy(name, s, len);
    name[len] = '\0';
    if (policy_check_name("name", name, NULL) == PERMITD_OK && policies_stamp(f->table, name) == 0)
        names_add(&f->pending, name);   /* out of memory: the next pass */
}

/* Reloads every policy held (a notice may have been lost), and loads those
 * in <prefix>policies not held yet, all pipelined. */
static void on_tick(void *ud)
{
    struct follow *f = ud;
    struct permitd_error err = {0, ""};
    struct redis_str smembers[2] = {{"SMEMBERS", 8}, {f->index_key, strlen(f->index_key)}};
    char **names;
    size_t n;

    /* A new subscription may have missed a reset notice; without MySQL
     * this is also the periodic pass, which heals lost notices for the
     * policies, and so here for the deny caches. */
    limiter_deny_cache_clear(f->limiter);
    flush(f);
    if (policies_names(f->table, &names, &n) == PERMITD_OK) {
        reload(f, names, n, 0);
        policies_names_free(names, n);
    }
    if (redis_command(f->redis, smembers, 2, deadline(), NULL, collect, f, &err) != PERMITD_OK)
        log_msg(LOG_LEVEL_WARN, "policy index not read; the next pass will", "key=%s error=\"%s\"",
                f->index_key, err.message);
    flush(f);
}

int follow_start(const struct config *cfg, struct redis *redis, struct limiter *limiter,
                 int passes, struct follow **out, struct permitd_error *err)
{
    struct follow *f = calloc(1, sizeof(*f));
    char channel[160];
    int rc;

    *out = NULL;
    if (f == NULL)
        return permitd_error_set(err, PERMITD_EINTERNAL, "out of memory");
    f->redis = redis;
    f->table = limiter_policies(limiter);
    f->limiter = limiter;
    snprintf(f->index_key, sizeof(f->index_key), "%spolicies", cfg->redis_prefix);
    snprintf(channel, sizeof(channel), "%schanges", cfg->redis_prefix);
    rc = redis_notice_start(redis, channel, on_notice, on_drained, on_tick,
                            passes ? cfg->sync_interval_ms : 0, f, &f->notice, err);
    if (rc != PERMITD_OK) {
        free(f);
        return rc;
    }
    *out = f;
    return PERMITD_OK;
}

void follow_counters(struct follow *f, unsigned long long *notices,
                     unsigned long long *subscribed)
{
    *notices = *subscribed = 0;
    if (f != NULL)
        redis_notice_counters(f->notice, notices, subscribed);
}

void follow_stop(struct follow *f)
{
    if (f == NULL)
        return;
    redis_notice_stop(f->notice);
    names_clear(&f->pending);
    free(f->pending.v);
    names_clear(&f->gone);
    free(f->gone.v);
    free(f);
}
